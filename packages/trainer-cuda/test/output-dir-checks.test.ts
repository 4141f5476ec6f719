// What a run checks about its output_dir before writing there, and what each write checks while
// it runs — on real temp folders, real symbolic links and a real tiny model: output_dir never
// the model, the artifacts or the data (nor inside or around them, links resolved), no write
// through a link, HF's rule for a folder that is not a run, and an artifacts build that never replaces a folder of something else. Every refusal is checked to
// leave the folders it names byte for byte as they were.
import { createHash } from 'node:crypto';
import {
  existsSync,
  mkdirSync,
  mkdtempSync,
  readdirSync,
  readFileSync,
  realpathSync,
  rmSync,
  symlinkSync,
  writeFileSync,
} from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { PathOutsideFolderError, SymlinkRefusedError } from '@flowgrpo/core';
import { ArtifactsDirNotEmptyError, createTinyQwen2, type TinyModel } from '@flowgrpo/models';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { snapshot, thrown, thrownSync } from '../../../test-utils/folder-snapshot.js';
import {
  buildTrainingArtifacts,
  claimOutputDir,
  OutputDirNotEmptyError,
  OutputOverlapsInputError,
  outputDirProblems,
  RunDirectory,
  SFTTrainer,
} from '../src/index.js';
import { LOCK_FILE } from '../src/run/run-lock.js';
import { LORA, tinyConfig, tinySetup, tinyTrainer } from './support/tiny-grpo.js';

// Real paths: the errors name them so; a link-free temp root compares equal to them.
const root = realpathSync(mkdtempSync(join(tmpdir(), 'flowgrpo-output-dir-')));
afterAll(() => rmSync(root, { recursive: true, force: true }));

let model: TinyModel;
beforeAll(async () => {
  model = await createTinyQwen2(join(root, 'hf-model'), {
    seed: 'output-dir',
    hiddenSize: 32,
    layers: 1,
    heads: 4,
    kvHeads: 2,
    intermediateSize: 48,
  });
});

const fresh = { resume_from_checkpoint: false, overwrite_output_dir: false, trainer: 'grpo' };

describe('output_dir never overlaps what the run reads', () => {
  it('SFTTrainer (full fine-tuning) into its own model folder: refused, the model as it was', async () => {
    // The fault behind this rule: a run config written as the model's config.json.
    const before = snapshot(model.dir);
    const error = await thrown(() =>
      new SFTTrainer({
        config: { output_dir: model.dir, max_steps: 1, learning_rate: 1e-3, use_peft: false },
        model: model.dir,
        tokenizer: model.tokenizer,
        trainDataset: [{ text: 'one example' }],
      }).train(),
    );
    expect(OutputOverlapsInputError.isInstance(error)).toBe(true);
    const e = error as OutputOverlapsInputError;
    expect(e.code).toBe('OUTPUT_OVERLAPS_INPUT');
    expect([e.key, e.path, e.input, e.overlap]).toEqual([
      'output_dir',
      model.dir,
      { key: 'model', path: model.dir },
      'same',
    ]);
    expect(e.message).toBe(
      `output_dir ${model.dir} is the model itself: what a run reads is never written to`,
    );
    expect(e.hint).toContain('set output_dir to a path of its own');
    expect(snapshot(model.dir)).toEqual(before);
  });

  it('GRPOTrainer into its artifacts folder, or a folder inside it, reached through a link: refused', async () => {
    const { artifacts } = await tinySetup(root);
    symlinkSync(artifacts, join(root, 'artifacts-link'));
    const before = snapshot(artifacts);
    for (const [outputDir, overlap] of [
      [join(root, 'artifacts-link'), 'same'],
      [join(root, 'artifacts-link', 'run'), 'inside'],
    ] as const) {
      const trainer = await tinyTrainer(root, tinyConfig(outputDir, { max_steps: 1 }));
      const e = (await thrown(() => trainer.train())) as OutputOverlapsInputError;
      expect(OutputOverlapsInputError.isInstance(e), outputDir).toBe(true);
      // Compared on real paths: the link's target is what is named.
      expect(e.overlap).toBe(overlap);
      expect(e.input).toEqual({ key: 'artifacts', path: artifacts });
    }
    expect(snapshot(artifacts)).toEqual(before); // not even run/ or a lock was made
  });

  it("claimOutputDir: around an input is refused; a run's own artifacts/ and checkpoint-<n>/ are not", () => {
    const dir = join(root, 'holder');
    mkdirSync(join(dir, 'data'), { recursive: true });
    writeFileSync(join(dir, 'data', 'train.jsonl'), '{}\n');
    const e = (() => {
      try {
        claimOutputDir({
          ...fresh,
          output_dir: dir,
          inputs: [{ key: 'train_file', path: join(dir, 'data', 'train.jsonl') }],
        });
      } catch (error) {
        return error as OutputOverlapsInputError;
      }
    })();
    expect(e?.overlap).toBe('contains');
    expect(e?.message).toContain(
      `output_dir ${dir} holds the train_file (${dir}/data/train.jsonl)`,
    );
    expect(existsSync(join(dir, LOCK_FILE))).toBe(false);
    // What a run in output_dir made: its artifacts and a checkpoint to resume from.
    const own = outputDirProblems({
      output_dir: dir,
      overwrite_output_dir: true,
      resume_from_checkpoint: join(dir, 'checkpoint-3'),
      inputs: [{ key: 'artifacts', path: join(dir, 'artifacts'), runProduct: true }],
    });
    expect(own).toEqual([]);
    // A run written inside the checkpoint it resumes from would write into it.
    const intoCheckpoint = outputDirProblems({
      output_dir: join(dir, 'checkpoint-3', 'run'),
      overwrite_output_dir: false,
      resume_from_checkpoint: join(dir, 'checkpoint-3'),
    }) as OutputOverlapsInputError[];
    expect(intoCheckpoint.map((p) => [p.input.key, p.overlap])).toEqual([
      ['resume_from_checkpoint', 'inside'],
    ]);
    // … but not a data file there, even one marked as a run's product elsewhere in it.
    const notOwn = outputDirProblems({
      output_dir: dir,
      overwrite_output_dir: true,
      inputs: [{ key: 'adapter', path: join(dir, 'data'), runProduct: true }],
    });
    expect(notOwn.map((p) => p.code)).toEqual(['OUTPUT_OVERLAPS_INPUT']);
  });
});

describe('no symbolic link where a run writes', () => {
  it('a link at or under what a run writes is refused at the claim; other links are not its business', () => {
    const elsewhere = join(root, 'elsewhere');
    mkdirSync(elsewhere);
    writeFileSync(join(elsewhere, 'mine.txt'), 'mine\n');
    const cases = [
      ['metrics.jsonl', join(elsewhere, 'mine.txt')],
      ['rollouts', elsewhere],
      [join('rollouts', 'step-000001.parquet'), join(elsewhere, 'mine.txt')],
      ['checkpoint-2', elsewhere],
    ];
    for (const [name, target] of cases) {
      const dir = join(root, `links-${cases.findIndex((c) => c[0] === name)}`);
      mkdirSync(join(dir, 'rollouts'), { recursive: true });
      rmSync(join(dir, name), { recursive: true, force: true });
      symlinkSync(target!, join(dir, name!));
      const e = (() => {
        try {
          claimOutputDir({ ...fresh, output_dir: dir });
        } catch (error) {
          return error as SymlinkRefusedError;
        }
      })();
      expect(SymlinkRefusedError.isInstance(e), name).toBe(true);
      expect([e?.path, e?.target, e?.folder]).toEqual([join(dir, name!), target, dir]);
      expect(existsSync(join(dir, LOCK_FILE))).toBe(false);
    }
    expect(snapshot(elsewhere)).toEqual({
      'mine.txt': createHash('sha256').update('mine\n').digest('hex'),
    });
    // A link the run never writes through (a `latest` of the user's) is left alone.
    const dir = join(root, 'links-other');
    mkdirSync(dir);
    writeFileSync(join(dir, 'config.json'), JSON.stringify({ trainer: 'grpo', output_dir: dir }));
    symlinkSync(elsewhere, join(dir, 'latest'));
    claimOutputDir({ ...fresh, output_dir: dir }).release();
  });

  it('a write checks its own path: a link made while the run goes on, or a name with "..", is refused', () => {
    const dir = join(root, 'run-dir');
    const outside = join(root, 'outside.txt');
    writeFileSync(outside, 'outside\n');
    const run = new RunDirectory(dir);
    run.writeJson('config.json', { trainer: 'grpo' });
    symlinkSync(outside, join(dir, 'metrics.jsonl'));
    expect(SymlinkRefusedError.isInstance(thrownSync(() => run.logMetrics({ step: 1 })))).toBe(
      true,
    );
    mkdirSync(join(root, 'evals-elsewhere'));
    symlinkSync(join(root, 'evals-elsewhere'), join(dir, 'eval'));
    expect(
      SymlinkRefusedError.isInstance(thrownSync(() => run.writeJson('eval/final.json', {}))),
    ).toBe(true);
    // An eval name from a library user (GRPOTrainer.evaluate(dataset, name)) cannot climb out.
    expect(
      PathOutsideFolderError.isInstance(thrownSync(() => run.writeJson('../escaped.json', {}))),
    ).toBe(true);
    expect(readFileSync(outside, 'utf8')).toBe('outside\n');
    expect(readdirSync(join(root, 'evals-elsewhere'))).toEqual([]);
    expect(existsSync(join(root, 'escaped.json'))).toBe(false);
  });
});

describe("HF's rule: a folder that is not a run", () => {
  it('holding files: refused unless overwrite_output_dir; a foreign config.json: refused even then', () => {
    const dir = join(root, 'project');
    mkdirSync(dir);
    writeFileSync(join(dir, 'notes.txt'), 'mine\n');
    const e = thrownSync(() => claimOutputDir({ ...fresh, output_dir: dir })) as
      | OutputDirNotEmptyError
      | undefined;
    expect(OutputDirNotEmptyError.isInstance(e)).toBe(true);
    expect([e?.entries, e?.overwriteHelps]).toEqual([['notes.txt'], true]);
    claimOutputDir({ ...fresh, output_dir: dir, overwrite_output_dir: true }).release();
    expect(readdirSync(dir)).toEqual(['notes.txt']);

    // A model's config.json where a run writes its own: overwrite would replace it.
    writeFileSync(join(dir, 'config.json'), JSON.stringify({ model_type: 'qwen2' }));
    const before = snapshot(dir);
    const foreign = thrownSync(() =>
      claimOutputDir({ ...fresh, output_dir: dir, overwrite_output_dir: true }),
    ) as OutputDirNotEmptyError;
    expect([foreign.entries, foreign.overwriteHelps]).toEqual([['config.json'], false]);
    expect(foreign.message).toContain('its config.json is not a run config');
    expect(snapshot(dir)).toEqual(before);
  });
});

describe('an artifacts build', () => {
  it('an artifacts build never replaces a folder that holds something else', () => {
    const mine = join(root, 'not-artifacts');
    mkdirSync(mine);
    writeFileSync(join(mine, 'notes.txt'), 'mine\n');
    const e = thrownSync(() =>
      buildTrainingArtifacts(model.weights, mine, {
        lora: { ...LORA, targetModules: [...LORA.targetModules] },
      }),
    ) as ArtifactsDirNotEmptyError;
    expect(ArtifactsDirNotEmptyError.isInstance(e)).toBe(true);
    expect([e.dir, e.entries]).toEqual([mine, ['notes.txt']]);
    expect(readdirSync(mine)).toEqual(['notes.txt']);
    // The model folder itself: config.json and weights, no artifacts.json.
    const before = snapshot(model.dir);
    expect(
      ArtifactsDirNotEmptyError.isInstance(
        thrownSync(() => buildTrainingArtifacts(model.weights, model.dir)),
      ),
    ).toBe(true);
    expect(snapshot(model.dir)).toEqual(before);
  });
});
