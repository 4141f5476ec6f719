import { execFile } from 'node:child_process';
import { mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { promisify } from 'node:util';
import { createTinyQwen2 } from '@flowgrpo/models';
import { afterAll, describe, expect, it } from 'vitest';
import { sharedPath, skipWithoutShared } from '../../../test-utils/shared.js';
import { deviceLine } from '../src/commands/generate.js';
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
      // The device line: cpu by default, and one thread when no --threads is given (the measured
      // fastest for one stream: docs/performance.md).
      expect(io.err).toBe('device: cpu (1 thread)\n');
      expect(code).toBe(0);
      const out = JSON.parse(io.out);
      expect(out.device).toBe('cpu');
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
    const gen = async (seed: string, extra: string[] = []) => {
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
          '--threads',
          '1',
          '--json',
          ...extra,
        ],
        io,
      );
      expect(io.err).toBe('device: cpu (1 thread)\n');
      expect(code).toBe(0);
      return JSON.parse(io.out) as { ids: number[]; logprobs: number[]; completion: string };
    };
    const a = await gen('3');
    const b = await gen('3');
    expect(a.ids.length).toBeGreaterThan(0);
    expect(a).toEqual(b);
    expect(a.logprobs).toHaveLength(a.ids.length);
    // The memory preflight passes a tiny model silently; skipped, the output is the same.
    expect(await gen('3', ['--skip-memory-check'])).toEqual(a);
  });

  it('usage errors exit 2 with the usage; a missing model is "file not found", exit 1', async () => {
    const io = captureIO(ROOT);
    expect(await runCli(['generate', '--prompt', 'x'], io)).toBe(2);
    expect(io.err).toContain('--model is required');
    const io2 = captureIO(ROOT);
    expect(await runCli(['generate', '--model', join(tmp, 'nope'), '--prompt', 'x'], io2)).toBe(1);
    expect(io2.err).toMatch(
      new RegExp(`^\\[FILE_NOT_FOUND\\] file not found: ${join(tmp, 'nope')}\\nfix: .+\\n$`),
    );
    const io3 = captureIO(ROOT);
    expect(
      await runCli(
        ['generate', '--model', join(tmp, 'tiny'), '--prompt', 'x', '--device', 'tpu'],
        io3,
      ),
    ).toBe(2);
  });

  it('a folder holding a llama2.c .bin says to pass the file (and its tokenizer)', async () => {
    // The layout of stories260K: the checkpoint and tok512.bin side by side, no config.json.
    const dir = join(tmp, 'llama2c-folder');
    mkdirSync(dir);
    writeFileSync(join(dir, 'stories260K.bin'), new Uint8Array(28));
    writeFileSync(join(dir, 'tok512.bin'), new Uint8Array(4));
    const io = captureIO(ROOT);
    expect(await runCli(['generate', '--model', dir, '--prompt', 'x'], io)).toBe(2);
    expect(io.err).toContain(
      `pass the checkpoint file itself: --model ${join(dir, 'stories260K.bin')} --tokenizer ${join(dir, 'tok512.bin')}`,
    );
  });

  it('--threads 0 is a usage error', async () => {
    const io = captureIO(ROOT);
    expect(
      await runCli(
        ['generate', '--model', join(tmp, 'tiny'), '--prompt', 'x', '--threads', '0'],
        io,
      ),
    ).toBe(2);
    expect(io.err).toContain('--threads must be at least 1');
  });
});

describe('deviceLine', () => {
  it('names the device, what was asked for when it differs, and the CPU threads', () => {
    expect(deviceLine('cpu', 'cpu', undefined)).toBe(
      "device: cpu (threads: onnxruntime's default)\n",
    );
    expect(deviceLine('cpu', 'cpu', 1)).toBe('device: cpu (1 thread)\n');
    expect(deviceLine('cpu', 'auto', 4)).toBe('device: cpu (--device auto; 4 threads)\n');
    expect(deviceLine('cuda', 'auto', undefined)).toBe('device: cuda (--device auto)\n');
    expect(deviceLine('webgpu', 'webgpu', 2)).toBe('device: webgpu\n');
    // What auto picked is said with its reason, as train and eval say it.
    expect(deviceLine('cpu', 'auto', 1, 'auto: no CUDA execution provider')).toBe(
      'device: cpu (auto: no CUDA execution provider; 1 thread)\n',
    );
  });
});
