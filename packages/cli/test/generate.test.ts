import { execFile } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { promisify } from 'node:util';
import { createTinyQwen2 } from '@flowgrpo/trainer';
import { afterAll, describe, expect, it } from 'vitest';
import { sharedPath, skipWithoutShared } from '../../../test-utils/shared.js';
import { runCli } from '../src/main.js';
import { captureIO } from './support.js';

// `flowgrpo generate` on stories260K (llama2.c .bin + tok512.bin from ../shared): greedy output is
// run.c's own text (greedy.json); on a generated tiny Qwen2 HF folder: --json ids/logprobs and
// seeded sampling; usage errors.

const ROOT = join(dirname(fileURLToPath(import.meta.url)), '../../..');
const run = promisify(execFile);
const tmp = mkdtempSync(join(tmpdir(), 'flowgrpo-cli-generate-'));
afterAll(() => rmSync(tmp, { recursive: true, force: true }));

describe.skipIf(skipWithoutShared('flowgrpo generate on stories260K'))(
  'flowgrpo generate (stories260K)',
  () => {
    const greedy = () =>
      JSON.parse(readFileSync(sharedPath('models', 'stories260K', 'greedy.json'), 'utf8')) as {
        prompt: string;
        steps: number;
        text: string;
        ids: number[];
      }[];

    it("prints run.c's greedy text through the real bin", async () => {
      const e = greedy().find((g) => g.prompt !== '')!;
      const promptTokens = 5; // BOS + "Once upon a time" (4 tokens), as in greedy.json's ids
      const { stdout } = await run(
        process.execPath,
        [
          '--conditions=@flowgrpo/source',
          '--import',
          'tsx',
          'packages/cli/src/bin.ts',
          'generate',
          '--model',
          sharedPath('models', 'stories260K', 'stories260K.bin'),
          '--tokenizer',
          sharedPath('models', 'stories260K', 'tok512.bin'),
          '--prompt',
          e.prompt,
          '--max-new-tokens',
          String(e.steps - (promptTokens - 1)),
          '--temperature',
          '0',
        ],
        { cwd: ROOT, timeout: 60_000 },
      );
      expect(stdout).toBe(`${e.text}\n`);
    });

    it('--json gives the ids of run.c and logprobs of each new token', async () => {
      const e = greedy().find((g) => g.prompt === '')!;
      const io = captureIO(ROOT);
      const code = await runCli(
        [
          'generate',
          '--model',
          sharedPath('models', 'stories260K', 'stories260K.bin'),
          '--tokenizer',
          sharedPath('models', 'stories260K', 'tok512.bin'),
          '--prompt',
          '',
          '--max-new-tokens',
          String(e.steps),
          '--temperature',
          '0',
          '--json',
        ],
        io,
      );
      expect(io.err).toBe('');
      expect(code).toBe(0);
      const out = JSON.parse(io.out);
      expect([...out.prompt_ids, ...out.ids]).toEqual(e.ids);
      expect(out.text).toBe(e.text);
      expect(out.logprobs).toHaveLength(out.ids.length);
      expect(out.logprobs.every((x: number) => x <= 0 && Number.isFinite(x))).toBe(true);
      expect(out.finish_reason).toBe('length');
    });
  },
);

describe('flowgrpo generate (tiny Qwen2 HF folder)', () => {
  it('samples reproducibly with a seed, --json ids and logprobs', async () => {
    const dir = join(tmp, 'tiny');
    await createTinyQwen2(dir, { seed: 1, hiddenSize: 32, layers: 2, heads: 4, kvHeads: 2 });
    const gen = async (seed: string) => {
      const io = captureIO(ROOT);
      const code = await runCli(
        [
          'generate',
          '--model',
          dir,
          '--prompt',
          'hello',
          '--max-new-tokens',
          '8',
          '--seed',
          seed,
          '--top-k',
          '20',
          '--json',
        ],
        io,
      );
      expect(io.err).toBe('');
      expect(code).toBe(0);
      return JSON.parse(io.out) as { ids: number[]; logprobs: number[]; completion: string };
    };
    const a = await gen('3');
    const b = await gen('3');
    expect(a.ids.length).toBeGreaterThan(0);
    expect(a).toEqual(b);
    expect(a.logprobs).toHaveLength(a.ids.length);
  });

  it('usage errors exit 2 with the usage', async () => {
    const io = captureIO(ROOT);
    expect(await runCli(['generate', '--prompt', 'x'], io)).toBe(2);
    expect(io.err).toContain('--model is required');
    const io2 = captureIO(ROOT);
    expect(await runCli(['generate', '--model', join(tmp, 'nope'), '--prompt', 'x'], io2)).toBe(2);
    expect(io2.err).toContain('does not exist');
    const io3 = captureIO(ROOT);
    expect(
      await runCli(
        ['generate', '--model', join(tmp, 'tiny'), '--prompt', 'x', '--device', 'tpu'],
        io3,
      ),
    ).toBe(2);
  });
});
