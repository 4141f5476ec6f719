// Which tokenizer.json shows a run's tokens, on real run folders in a temp folder: a full
// checkpoint's own copy, a LoRA run's config (tokenizer, then model), the base model its
// adapter_config.json names (as `flowgrpo train` writes it for the math-tags template's GRPO run,
// whose checkpoints and artifacts hold no tokenizer), a multi-role checkpoint's roles, relative
// paths, a run folder moved elsewhere, symbolic links (the HF cache's layout), and the places
// listed when none is found. Expected paths are the files each test writes; nothing is written
// by the lookup (the folder is compared before and after).
import {
  mkdirSync,
  mkdtempSync,
  readdirSync,
  readFileSync,
  rmSync,
  statSync,
  symlinkSync,
  writeFileSync,
} from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { findRunTokenizer, recordedPath } from '../src/run-tokenizer.js';

const tmp = mkdtempSync(join(tmpdir(), 'flowgrpo-run-tokenizer-'));
afterAll(() => rmSync(tmp, { recursive: true, force: true }));

const TOKENIZER = JSON.stringify({ model: { type: 'BPE', vocab: { a: 0 } }, added_tokens: [] });

function write(path: string, text: string): string {
  mkdirSync(dirname(path), { recursive: true });
  writeFileSync(path, text);
  return path;
}
const tokenizerIn = (folder: string) => write(join(folder, 'tokenizer.json'), TOKENIZER);
const adapterIn = (folder: string, base: string) =>
  write(
    join(folder, 'adapter_config.json'),
    JSON.stringify({ peft_type: 'LORA', base_model_name_or_path: base, r: 4 }),
  );

/** Every file under `dir` with its bytes and mtime: what a read-only lookup must leave as it was. */
function snapshot(dir: string): string[] {
  return (readdirSync(dir, { recursive: true }) as string[]).sort().map((p) => {
    const s = statSync(join(dir, p));
    return `${p} ${s.mtimeMs} ${s.isFile() ? readFileSync(join(dir, p), 'utf8') : ''}`;
  });
}

describe('the tokenizer of a run', () => {
  it("takes a full checkpoint's own copy first, the newest checkpoint's", () => {
    const run = join(tmp, 'full');
    tokenizerIn(join(run, 'checkpoint-1'));
    const newest = tokenizerIn(join(run, 'checkpoint-2'));
    const model = join(tmp, 'full-model');
    tokenizerIn(model);
    const found = findRunTokenizer(run, { model }, ['checkpoint-1', 'checkpoint-2']);
    expect(found.found).toMatchObject({ path: newest, from: 'checkpoint-2', json: TOKENIZER });
    expect(found.tried).toEqual([]);
  });

  it("a LoRA run: config.json's tokenizer, then its model folder", () => {
    const run = join(tmp, 'lora');
    adapterIn(join(run, 'checkpoint-3'), join(tmp, 'nowhere'));
    const tokenizer = join(tmp, 'lora-tokenizer');
    const model = join(tmp, 'lora-model');
    const tokFile = tokenizerIn(tokenizer);
    const modelFile = tokenizerIn(model);
    const config = { tokenizer, model, output_dir: run };
    const before = snapshot(tmp);
    const found = findRunTokenizer(run, config, ['checkpoint-3']);
    expect(found.found).toMatchObject({ path: tokFile, from: 'config.json tokenizer' });
    expect(found.tried).toEqual([
      {
        from: 'checkpoint-3',
        path: join(run, 'checkpoint-3', 'tokenizer.json'),
        reason: 'no such file',
      },
    ]);
    expect(snapshot(tmp)).toEqual(before);
    rmSync(tokFile);
    expect(findRunTokenizer(run, config, ['checkpoint-3']).found).toMatchObject({
      path: modelFile,
      from: 'config.json model',
    });
    // `tokenizer` may name the file itself.
    const file = write(join(tmp, 'lora-file', 'my-tokenizer.json'), TOKENIZER);
    expect(
      findRunTokenizer(run, { ...config, tokenizer: file }, ['checkpoint-3']).found?.path,
    ).toBe(file);
  });

  it('a GRPO run of `flowgrpo train`: the base model its adapter_config.json names', () => {
    // config.json records only the artifacts folder, which holds no tokenizer; the adapter's base
    // is the SFT checkpoint the run started from, a full model folder with its tokenizer.
    const run = join(tmp, 'grpo');
    const sft = join(tmp, 'sft', 'checkpoint-80');
    const file = tokenizerIn(sft);
    adapterIn(join(run, 'checkpoint-10'), sft);
    mkdirSync(join(run, 'artifacts'), { recursive: true });
    const config = { trainer: 'grpo', output_dir: run, artifacts: join(run, 'artifacts') };
    const found = findRunTokenizer(run, config, ['checkpoint-10']);
    expect(found.found).toMatchObject({
      path: file,
      from: 'checkpoint-10/adapter_config.json base_model_name_or_path',
    });
  });

  it("a multi-role run: the base model its roles' adapters name, looked at once", () => {
    const run = join(tmp, 'roles');
    const model = join(tmp, 'roles-model');
    const file = tokenizerIn(model);
    adapterIn(join(run, 'checkpoint-2', 'planner'), join(tmp, 'gone'));
    adapterIn(join(run, 'checkpoint-2', 'solver'), join(tmp, 'gone'));
    adapterIn(join(run, 'checkpoint-2', 'writer'), model);
    const found = findRunTokenizer(run, { output_dir: run }, ['checkpoint-2']);
    expect(found.found?.path).toBe(file);
    // checkpoint-2 itself, then the one missing base both roles name.
    expect(found.tried.map((t) => t.path)).toEqual([
      join(run, 'checkpoint-2', 'tokenizer.json'),
      join(tmp, 'gone', 'tokenizer.json'),
    ]);
  });

  it("resolves a relative path against the run's working directory, when output_dir says it", () => {
    // output_dir 'out/run' and the run at <proj>/out/run: the run was started in <proj>.
    const proj = join(tmp, 'proj');
    const run = join(proj, 'out', 'run');
    const file = tokenizerIn(join(proj, 'model'));
    tokenizerIn(join(run, 'model')); // the same name beside the run: not what 'model' meant
    const found = findRunTokenizer(run, { output_dir: 'out/run', model: 'model' }, []);
    expect(found.found?.path).toBe(file);
    expect(
      findRunTokenizer(run, { output_dir: './out/run/', model: 'model' }, []).found?.path,
    ).toBe(file);
    expect(recordedPath(run, '.', 'x')).toEqual({ path: join(run, 'x') });
    // An absolute output_dir does not say where the run was started: not guessed.
    const unknown = findRunTokenizer(run, { output_dir: run, model: 'model' }, []);
    expect(unknown.found).toBeUndefined();
    expect(unknown.tried).toEqual([
      {
        from: 'config.json model',
        path: 'model',
        reason:
          'a relative path, and config.json does not record the working directory the run was started in',
      },
    ]);
  });

  it('finds what lay inside a run folder that was moved since', () => {
    // Recorded at <tmp>/old/run (gone); the folder is now <tmp>/new/run.
    const old = join(tmp, 'old', 'run');
    const run = join(tmp, 'new', 'run');
    const file = tokenizerIn(join(run, 'artifacts'));
    const config = { output_dir: old, artifacts: join(old, 'artifacts') };
    expect(findRunTokenizer(run, config, []).found).toMatchObject({
      path: file,
      from: 'config.json artifacts',
    });
    // A path outside the recorded output_dir stays as recorded.
    expect(recordedPath(run, old, join(tmp, 'old', 'model'))).toEqual({
      path: join(tmp, 'old', 'model'),
    });
  });

  it('follows symbolic links, as in the HF cache (snapshot files link to blobs)', () => {
    const cache = join(tmp, 'hub', 'models--org--tiny');
    const blob = write(join(cache, 'blobs', 'abc123'), TOKENIZER);
    mkdirSync(join(cache, 'snapshots', 'c0ffee'), { recursive: true });
    symlinkSync(blob, join(cache, 'snapshots', 'c0ffee', 'tokenizer.json'));
    const link = join(tmp, 'model-link');
    symlinkSync(join(cache, 'snapshots', 'c0ffee'), link);
    const run = join(tmp, 'linked');
    mkdirSync(run);
    const found = findRunTokenizer(run, { model: link, output_dir: run }, []);
    expect(found.found).toMatchObject({ path: join(link, 'tokenizer.json'), json: TOKENIZER });
  });

  it('lists every place it looked when none is found, and passes over a file that is no tokenizer', () => {
    const run = join(tmp, 'none');
    adapterIn(join(run, 'checkpoint-5'), join(tmp, 'none-base'));
    write(join(tmp, 'none-model', 'tokenizer.json'), '{"truncated": ');
    write(join(tmp, 'none-tok', 'tokenizer.json'), '{"version": "1.0"}');
    mkdirSync(join(run, 'artifacts'));
    const config = {
      output_dir: run,
      tokenizer: join(tmp, 'none-tok'),
      model: join(tmp, 'none-model'),
      artifacts: join(run, 'artifacts'),
    };
    const before = snapshot(tmp);
    const { found, tried } = findRunTokenizer(run, config, ['checkpoint-5']);
    expect(found).toBeUndefined();
    expect(tried.map((t) => [t.from, t.path])).toEqual([
      ['checkpoint-5', join(run, 'checkpoint-5', 'tokenizer.json')],
      ['config.json tokenizer', join(tmp, 'none-tok', 'tokenizer.json')],
      ['config.json model', join(tmp, 'none-model', 'tokenizer.json')],
      [
        'checkpoint-5/adapter_config.json base_model_name_or_path',
        join(tmp, 'none-base', 'tokenizer.json'),
      ],
      ['config.json artifacts', join(run, 'artifacts', 'tokenizer.json')],
    ]);
    expect(tried[1]!.reason).toBe('not a tokenizer.json (it has no model.vocab)');
    expect(tried[2]!.reason).toMatch(/^not JSON \(/);
    expect(tried[3]!.reason).toBe('no such file');
    expect(snapshot(tmp)).toEqual(before);
    // Before the trainer wrote config.json and any checkpoint: nothing to look at.
    expect(findRunTokenizer(join(tmp, 'empty'), undefined, [])).toEqual({ tried: [] });
  });
});
