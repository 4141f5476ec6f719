import {
  cpSync,
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
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { snapshot } from '../../../test-utils/folder-snapshot.js';
import { runCli } from '../src/main.js';
import { captureIO } from './support.js';
import { questionRows, sftConfig, tinyModel, writeConfig, writeJsonl } from './train-fixtures.js';

// Where `flowgrpo train`, `eval --out` and `serve` write, on real folders, links and a real tiny
// model: never into what the run reads (the model, its tokenizer, the data), never through a
// symbolic link, never over a folder that is not a run. Each refusal comes before anything is
// written: the model folder and the user's files are compared byte for byte with what they were.

// Real paths: the messages name them so (a link-free temp folder compares equal).
const tmp = realpathSync(mkdtempSync(join(tmpdir(), 'flowgrpo-cli-run-folders-')));
afterAll(() => rmSync(tmp, { recursive: true, force: true }));
let model: string;
beforeAll(async () => {
  model = await tinyModel(join(tmp, 'tiny'));
});

/** A folder of its own with a copy of the tiny model in `model/`. */
function project(name: string): { dir: string; model: string } {
  const dir = join(tmp, name);
  cpSync(model, join(dir, 'model'), { recursive: true });
  return { dir, model: join(dir, 'model') };
}

async function cli(argv: string[], cwd: string) {
  const io = captureIO(cwd);
  const code = await runCli(argv, io);
  return { code, err: io.err, out: io.out };
}

describe('flowgrpo train: output_dir never overlaps what the run reads', () => {
  it('output_dir = the model folder (relative, full fine-tuning) is refused naming both, the model as it was', async () => {
    // The fault: this config used to train, exit 0, and write the run's config.json over the
    // model's. Relative paths resolve against the working directory, as TRL's command line does.
    const p = project('same');
    const before = snapshot(p.model);
    const config = writeConfig(
      join(p.dir, 'run.json'),
      sftConfig(p.dir, 'model', { output_dir: 'model', use_peft: false }),
    );
    const r = await cli(['train', '--config', config], p.dir);
    expect(r.code).toBe(1);
    expect(r.err).toMatch(
      new RegExp(
        `^\\[OUTPUT_OVERLAPS_INPUT\\] output_dir ${p.model} is the model itself: what a run reads is never written to\\n`,
        'm',
      ),
    );
    expect(r.err).toContain('fix: set output_dir to a path of its own');
    expect(snapshot(p.model)).toEqual(before); // no run config, no lock, no artifacts in it
  });

  it('through a symbolic link, inside the model, or around the model and the data: each named, nothing made', async () => {
    const p = project('around');
    const data = writeJsonl(join(p.dir, 'rows.jsonl'), [{ text: 'one row' }]);
    symlinkSync(p.model, join(p.dir, 'runs-link'));
    const configFor = (name: string, outputDir: string) => {
      const { eval_file: _none, ...config } = sftConfig(tmp, 'model', { output_dir: outputDir });
      return writeConfig(join(tmp, `${name}.json`), { ...config, train_file: data });
    };
    const configs = {
      link: configFor('link', 'runs-link'),
      inside: configFor('inside', 'model/run'),
      dot: configFor('dot', '.'),
    };
    const before = snapshot(p.dir);
    // Expected relation per output_dir, from the folders' layout above.
    const cases: [string, string][] = [
      [configs.link, `output_dir ${p.model} is the model itself`],
      [configs.inside, `output_dir ${join(p.model, 'run')} is inside the model (${p.model})`],
    ];
    for (const [config, message] of cases) {
      const r = await cli(['train', '--config', config, '--dry-run'], p.dir);
      expect(r.code, config).toBe(1);
      expect(r.err).toContain(`[OUTPUT_OVERLAPS_INPUT] ${message}`);
    }
    // output_dir '.': it holds the model and the data file; both listed, with the fix.
    const r = await cli(['train', '--config', configs.dot], p.dir);
    expect(r.code).toBe(1);
    expect(r.err).toContain('[PREFLIGHT_FAILED]');
    expect(r.err).toContain(
      `[OUTPUT_OVERLAPS_INPUT] output_dir ${p.dir} holds the model (${p.model})`,
    );
    expect(r.err).toContain(`output_dir ${p.dir} holds the train_file (${data})`);
    expect(snapshot(p.dir)).toEqual(before);
  });
});

describe('flowgrpo train: output_dir is a run, or empty', () => {
  it('a folder of files that is no run: refused; --overwrite writes the run beside them, never over', async () => {
    const dir = join(tmp, 'notes');
    mkdirSync(join(dir, 'out'), { recursive: true });
    writeFileSync(join(dir, 'out', 'notes.txt'), 'mine\n');
    const config = writeConfig(
      join(dir, 'run.json'),
      sftConfig(dir, model, { output_dir: join(dir, 'out'), max_steps: 1 }),
    );
    const r = await cli(['train', '--config', config], dir);
    expect(r.code).toBe(1);
    expect(r.err).toMatch(
      /^\[OUTPUT_DIR_NOT_EMPTY\] output_dir .*out already exists and is not empty \(notes\.txt\)/m,
    );
    expect(r.err).toContain('overwrite_output_dir (flowgrpo train --overwrite)');
    expect(readdirSync(join(dir, 'out'))).toEqual(['notes.txt']);

    const again = await cli(['train', '--config', config, '--overwrite'], dir);
    expect(again.code, again.err).toBe(0);
    expect(readFileSync(join(dir, 'out', 'notes.txt'), 'utf8')).toBe('mine\n');
    expect(existsSync(join(dir, 'out', 'checkpoint-1', 'adapter_model.safetensors'))).toBe(true);
  });

  it("another model's folder is refused even with --overwrite: its config.json would be replaced", async () => {
    const other = join(tmp, 'other-model');
    cpSync(model, other, { recursive: true });
    const before = snapshot(other);
    const dir = join(tmp, 'other');
    mkdirSync(dir);
    const config = writeConfig(join(dir, 'run.json'), sftConfig(dir, model, { output_dir: other }));
    const r = await cli(['train', '--config', config, '--overwrite'], dir);
    expect(r.code).toBe(1);
    expect(r.err).toContain(
      `[OUTPUT_DIR_NOT_EMPTY] output_dir ${other} holds config.json, where a run writes, and its config.json is not a run config`,
    );
    expect(snapshot(other)).toEqual(before);
  });

  it('a symbolic link where the run writes is refused naming it; what it points to is untouched', async () => {
    const dir = join(tmp, 'linked');
    const elsewhere = join(tmp, 'linked-elsewhere');
    mkdirSync(join(dir, 'out'), { recursive: true });
    mkdirSync(elsewhere);
    writeFileSync(join(elsewhere, 'keep.txt'), 'keep\n');
    // A finished run's config.json makes `out` a run; its rollouts/ points elsewhere.
    writeFileSync(
      join(dir, 'out', 'config.json'),
      JSON.stringify({ trainer: 'sft', output_dir: join(dir, 'out') }),
    );
    symlinkSync(elsewhere, join(dir, 'out', 'eval'));
    const config = writeConfig(
      join(dir, 'run.json'),
      sftConfig(dir, model, { output_dir: join(dir, 'out') }),
    );
    const r = await cli(['train', '--config', config], dir);
    expect(r.code).toBe(1);
    expect(r.err).toContain(
      `[SYMLINK_REFUSED] ${join(dir, 'out', 'eval')} is a symbolic link (→ ${elsewhere}); the run writes inside ${join(dir, 'out')} and never through a link`,
    );
    expect(readdirSync(elsewhere)).toEqual(['keep.txt']);
    expect(readdirSync(join(dir, 'out')).sort()).toEqual(['config.json', 'eval']);
  });
});

describe('eval --out and serve: outputs apart from inputs', () => {
  it('eval --out naming the data file, or a file in the model folder, is refused before anything', async () => {
    const dir = join(tmp, 'eval-out');
    mkdirSync(dir);
    const data = writeJsonl(join(dir, 'rows.jsonl'), questionRows(2));
    const before = { data: snapshot(dir), model: snapshot(model) };
    const base = ['eval', '--model', model, '--data', data, '--agent', 'tag', '--max-turns', '1'];
    const onData = await cli([...base, '--out', data], dir);
    expect(onData.code).toBe(1);
    expect(onData.err).toContain(`[OUTPUT_OVERLAPS_INPUT] --out ${data} is the --data itself`);
    const inModel = await cli([...base, '--out', join(model, 'results.json')], dir);
    expect(inModel.code).toBe(1);
    expect(inModel.err).toContain(
      `[OUTPUT_OVERLAPS_INPUT] --out ${join(model, 'results.json')} is inside the model (${model})`,
    );
    expect({ data: snapshot(dir), model: snapshot(model) }).toEqual(before);
  });

  it('serve --train into the model folder, and --artifacts-dir over a folder of files: refused, kept', async () => {
    const p = project('serve');
    writeFileSync(
      join(p.dir, 'train.json'),
      JSON.stringify({ output_dir: 'model', max_steps: 1, learning_rate: 0.01 }),
    );
    const before = snapshot(p.dir);
    const train = await cli(['serve', '--model', 'model', '--train', 'train.json'], p.dir);
    expect(train.code).toBe(1);
    expect(train.err).toContain(
      `[OUTPUT_OVERLAPS_INPUT] output_dir ${p.model} is the --model itself`,
    );

    const inside = await cli(
      ['serve', '--model', 'model', '--artifacts-dir', 'model/artifacts', '--port', '0'],
      p.dir,
    );
    expect(inside.code).toBe(1);
    expect(inside.err).toContain(
      `[OUTPUT_OVERLAPS_INPUT] --artifacts-dir ${join(p.model, 'artifacts')} is inside the --model`,
    );
    // A folder of the user's named as the artifacts folder: a build would replace it whole.
    mkdirSync(join(p.dir, 'mine'));
    writeFileSync(join(p.dir, 'mine', 'notes.txt'), 'mine\n');
    const mine = snapshot(p.dir);
    const over = await cli(
      ['serve', '--model', 'model', '--artifacts-dir', 'mine', '--port', '0'],
      p.dir,
    );
    expect(over.code).toBe(1);
    expect(over.err).toContain(`[ARTIFACTS_DIR_NOT_EMPTY] ${join(p.dir, 'mine')} holds notes.txt`);
    expect(snapshot(p.dir)).toEqual(mine);
    delete mine.mine;
    delete mine['mine/notes.txt'];
    expect(mine).toEqual(before);
  });
});
