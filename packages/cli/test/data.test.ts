import {
  lstatSync,
  mkdirSync,
  mkdtempSync,
  readFileSync,
  symlinkSync,
  writeFileSync,
} from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { readSampleRows, type SampleRow, writeSampleRows } from '@flowgrpo/core';
import { describe, expect, it } from 'vitest';
import { SHARED_DIR, skipWithoutShared } from '../../../test-utils/shared.js';
import { runCli } from '../src/main.js';
import { captureIO } from './support.js';

describe('flowgrpo data: usage', () => {
  it('rejects a missing or unknown action with the usage and exit code 2', async () => {
    const io = captureIO(tmpdir());
    expect(await runCli(['data'], io)).toBe(2);
    expect(io.err).toContain('data needs an action: prepare, fetch, inspect or sft-from-rollouts');
    expect(io.err).toContain('flowgrpo data prepare');
    const io2 = captureIO(tmpdir());
    expect(await runCli(['data', 'frobnicate'], io2)).toBe(2);
    expect(io2.err).toContain(
      "unknown data action 'frobnicate' (actions: prepare, fetch, inspect, sft-from-rollouts)",
    );
  });

  it("<action> --help prints that action's help; show is inspect's other name", async () => {
    const inspect = captureIO(tmpdir());
    expect(await runCli(['data', 'inspect', '--help'], inspect)).toBe(0);
    expect(inspect.out).toMatch(/^Usage:\n {2}flowgrpo data inspect FILE \[--rows N\]/);
    expect(inspect.out).not.toContain('flowgrpo data prepare');
    const show = captureIO(tmpdir());
    expect(await runCli(['data', 'show', '--help'], show)).toBe(0);
    expect(show.out).toBe(inspect.out);
    const prepare = captureIO(tmpdir());
    expect(await runCli(['data', 'prepare', '-h'], prepare)).toBe(0);
    expect(prepare.out).toMatch(/^Usage:\n {2}flowgrpo data prepare /);
    expect(prepare.out).not.toContain('flowgrpo data inspect');
    const all = captureIO(tmpdir());
    expect(await runCli(['data', '--help'], all)).toBe(0);
    expect(all.out).toContain('flowgrpo data prepare');
    expect(all.out).toContain('flowgrpo data inspect');
    const unknown = captureIO(tmpdir());
    expect(await runCli(['data', 'frob', '--help'], unknown)).toBe(2);
    expect(unknown.err).toMatch(/^\[USAGE_ERROR\] unknown data action 'frob'\n/);
  });

  it('inspect (and show) print the rows per source and the first rows of a file', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'fg-inspect-'));
    const rows: SampleRow[] = [0, 1, 2].map((id) => ({
      id,
      question: `q${id}`,
      chain: '',
      result: String(id),
      source: id < 2 ? 'gsm8k' : 'nq',
      extra_info: { ground_truth: String(id), idx: id },
    }));
    const file = join(dir, 'rows.jsonl');
    await writeSampleRows(file, rows);
    for (const action of ['inspect', 'show']) {
      const io = captureIO(dir);
      expect(await runCli(['data', action, 'rows.jsonl', '--rows', '1'], io)).toBe(0);
      // 3 rows written above: 2 gsm8k, 1 nq; --rows 1 prints the first.
      expect(io.out).toMatch(
        /^SampleRows \(GRPO \/ eval data\)\n3 rows\nfields: .*\nrows per source:\n\s+gsm8k\s+2\n\s+nq\s+1\n\{"id":0,"question":"q0",/,
      );
    }
  });

  it('prepare never writes through a link the user left in --out', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'fg-prepare-'));
    mkdirSync(join(dir, 'raw'));
    mkdirSync(join(dir, 'out'));
    writeFileSync(join(dir, 'mine.parquet'), 'the user’s own file');
    symlinkSync(join(dir, 'mine.parquet'), join(dir, 'out', 'val.parquet'));
    const io = captureIO(dir);
    expect(await runCli(['data', 'prepare', '--data-dir', 'raw', '--out', 'out'], io)).toBe(1);
    expect(io.err).toContain(
      `[SYMLINK_REFUSED] ${join(dir, 'out', 'val.parquet')} is a symbolic link (→ ${join(dir, 'mine.parquet')})`,
    );
    expect(readFileSync(join(dir, 'mine.parquet'), 'utf8')).toBe('the user’s own file');
    expect(lstatSync(join(dir, 'out', 'val.parquet')).isSymbolicLink()).toBe(true);
  });

  it('a missing file is "file not found" naming the path, exit 1', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'fg-inspect-'));
    for (const name of ['absent.parquet', 'absent.jsonl']) {
      const io = captureIO(dir);
      expect(await runCli(['data', 'inspect', name], io)).toBe(1);
      expect(io.err).toMatch(
        new RegExp(`^\\[FILE_NOT_FOUND\\] file not found: ${join(dir, name)}\\nfix: check .+\\n$`),
      );
    }
  });

  it('FLOWGRPO_SHARED pointing at a missing folder is an error, not a fall-back', async () => {
    const cwd = mkdtempSync(join(tmpdir(), 'fg-cli-'));
    // A ../shared/data beside the working directory exists, so a fall-back would have found it.
    mkdirSync(join(cwd, 'work'));
    mkdirSync(join(cwd, 'shared', 'data'), { recursive: true });
    const missing = join(cwd, 'no-such-shared');
    const io = captureIO(join(cwd, 'work'), { FLOWGRPO_SHARED: missing });
    expect(await runCli(['data', 'prepare'], io)).toBe(1);
    expect(io.err).toBe(
      `[CONFIG_ERROR] FLOWGRPO_SHARED points to ${missing}, which is not a folder; set it to the shared folder (the one holding data/) or unset it\n` +
        'fix: export FLOWGRPO_SHARED=<the shared folder>, or unset it\n',
    );
    // A shared folder without data/ is named too.
    mkdirSync(join(cwd, 'empty-shared'));
    const io2 = captureIO(join(cwd, 'work'), { FLOWGRPO_SHARED: join(cwd, 'empty-shared') });
    expect(await runCli(['data', 'prepare'], io2)).toBe(1);
    expect(io2.err).toContain(
      `has no data/ folder (looked for ${join(cwd, 'empty-shared', 'data')})`,
    );
    // So is a --data-dir that does not exist.
    const io3 = captureIO(join(cwd, 'work'), {});
    expect(await runCli(['data', 'prepare', '--data-dir', 'nope'], io3)).toBe(1);
    expect(io3.err).toContain(`--data-dir ${join(cwd, 'work', 'nope')} is not a folder`);
  });

  it('names where it looked when no data folder exists', async () => {
    // The fall-back is ../shared/data beside the working directory: the working directory is a
    // folder inside this test's own temp dir, so what sits beside the OS temp dir cannot matter.
    const root = mkdtempSync(join(tmpdir(), 'fg-cli-'));
    const cwd = join(root, 'work');
    mkdirSync(cwd);
    const io = captureIO(cwd, {});
    expect(await runCli(['data', 'prepare'], io)).toBe(1);
    expect(io.err).toContain(`no data folder found (looked in ${join(root, 'shared', 'data')})`);
    expect(io.err).toContain('[CONFIG_ERROR]');
  });

  it('prints help for an unknown command', async () => {
    const io = captureIO(tmpdir());
    expect(await runCli(['nope'], io)).toBe(2);
    expect(io.err).toContain("unknown command 'nope'");
  });
});

describe.skipIf(skipWithoutShared('flowgrpo data prepare on the real data sets'))(
  'flowgrpo data prepare',
  () => {
    it('writes the combined training set and the validation set', async () => {
      const out = mkdtempSync(join(tmpdir(), 'fg-data-'));
      const io = captureIO(tmpdir(), { FLOWGRPO_SHARED: SHARED_DIR });
      expect(await runCli(['data', 'prepare', '--out', out, '--seed', '7'], io)).toBe(0);
      // Counts from the raw files: GSM8K train has 7,473 lines, Search-R1 train 5,000 rows,
      // AIME 2024 30 problems (../shared/README.md).
      expect(io.out).toContain('train: 12473 rows');
      expect(io.out).toMatch(/gsm8k\s+7473/);
      expect(io.out).toMatch(/nq\s+5000/);
      expect(io.out).toContain('validation: 30 rows');
      const train = await readSampleRows(join(out, 'combined_train.parquet'));
      expect(train).toHaveLength(12473);
      expect(train.map((r) => r.id)).toEqual(train.map((_, i) => i));
      // Shuffled: the first rows are not simply GSM8K's first rows in file order.
      expect(train.slice(0, 50).some((r) => r.source === 'nq')).toBe(true);

      const show = captureIO(tmpdir());
      expect(await runCli(['data', 'show', join(out, 'val.parquet'), '--rows', '1'], show)).toBe(0);
      expect(show.out).toMatch(
        /^SampleRows \(GRPO \/ eval data\)\n30 rows\nfields: .*\nrows per source:\n\s+aime\s+30\n\{"id":0,/,
      );
    });
  },
);
