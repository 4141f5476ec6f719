import { mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { readSampleRows } from '@flowgrpo/core';
import { describe, expect, it } from 'vitest';
import { SHARED_DIR, skipWithoutShared } from '../../../test-utils/shared.js';
import { runCli } from '../src/main.js';
import { captureIO } from './support.js';

describe('flowgrpo data: usage', () => {
  it('rejects a missing or unknown action with the usage and exit code 2', async () => {
    const io = captureIO(tmpdir());
    expect(await runCli(['data'], io)).toBe(2);
    expect(io.err).toContain('data needs an action');
    expect(io.err).toContain('flowgrpo data prepare');
    const io2 = captureIO(tmpdir());
    expect(await runCli(['data', 'frobnicate'], io2)).toBe(2);
    expect(io2.err).toContain("unknown data action 'frobnicate'");
  });

  it('names where it looked when no data folder exists', async () => {
    const cwd = mkdtempSync(join(tmpdir(), 'fg-cli-'));
    const io = captureIO(cwd, {});
    expect(await runCli(['data', 'prepare'], io)).toBe(1);
    expect(io.err).toMatch(/no data folder found \(looked in .*shared[/\\]data\)/);
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
      expect(show.out).toMatch(/^30 rows\n\s+aime\s+30\n\{"id":0,/);
    });
  },
);
