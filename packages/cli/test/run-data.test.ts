import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { DataFormatError, writeParquet } from '@flowgrpo/core';
import { afterAll, describe, expect, it } from 'vitest';
import { readQueryRows, readSftExamples, rowNames } from '../src/run-data.js';
import { questionRows, writeJsonl } from './train-fixtures.js';

// The data files of `flowgrpo train` (GRPO) and `flowgrpo eval` with no data_format: SampleRows
// are read as they are, plain rows are detected from the first row and said so in one line.

const tmp = mkdtempSync(join(tmpdir(), 'flowgrpo-cli-run-data-'));
afterAll(() => rmSync(tmp, { recursive: true, force: true }));

/** readQueryRows with no format, and the lines it logged. */
async function detect(path: string) {
  const lines: string[] = [];
  const rows = await readQueryRows(path, undefined, 'train_file', (l) => lines.push(l));
  return { rows, lines };
}

describe('readQueryRows without a data_format', () => {
  it('reads SampleRows as they are, and logs nothing', async () => {
    const file = writeJsonl(join(tmp, 'sample.jsonl'), questionRows(3));
    const { rows, lines } = await detect(file);
    expect(rows).toEqual(questionRows(3));
    expect(lines).toEqual([]);
  });

  it('detects {question, answer} rows, GSM8K "#### N" answers included, and says so', async () => {
    const file = writeJsonl(join(tmp, 'plain.jsonl'), [
      { question: 'What is 2 + 3?', answer: '5' },
      {
        question: 'Natalia sold 48 clips, then half as many. Total?',
        answer: '48/2 = 24\n#### 72',
      },
    ]);
    const { rows, lines } = await detect(file);
    expect(rows.map((r) => [r.question, r.extra_info.ground_truth, r.extra_info.idx])).toEqual([
      ['What is 2 + 3?', '5', 0],
      ['Natalia sold 48 clips, then half as many. Total?', '72', 1],
    ]);
    expect(lines).toEqual([
      `data: ${file}: plain rows (question + answer), read as data_format "plain": the reference ` +
        `answer is 'answer' (else the completion), "#### N" → N`,
    ]);
  });

  it("detects TRL's messages rows in Parquet: the last user turn asks, the assistant answers", async () => {
    const file = join(tmp, 'messages.parquet');
    await writeParquet(file, [
      {
        messages: [
          { role: 'system', content: 'Answer with a number.' },
          { role: 'user', content: 'What is 7 * 6?' },
          { role: 'assistant', content: '7 * 6 = 42\n#### 42' },
        ],
      },
    ]);
    const { rows, lines } = await detect(file);
    expect(rows).toEqual([
      {
        id: 0,
        question: 'What is 7 * 6?',
        chain: '7 * 6 = 42',
        result: '42',
        source: 'plain',
        extra_info: { ground_truth: '42', idx: 0, answer_raw: '7 * 6 = 42\n#### 42' },
      },
    ]);
    expect(lines[0]).toContain("plain rows (TRL's messages)");
  });

  it('a row that is neither names its fields and how to fix it', async () => {
    const file = writeJsonl(join(tmp, 'other.jsonl'), [{ text: 'hello' }]);
    const error = await readQueryRows(file, undefined).catch((e: unknown) => e);
    expect(DataFormatError.isInstance(error)).toBe(true);
    expect((error as DataFormatError).message).toBe(
      `${file}:line 1: the first row is neither a SampleRow (extra_info.ground_truth, …) nor a plain row ` +
        '(question + answer, prompt + completion, or messages); fields present: text',
    );
    expect((error as DataFormatError).hint).toMatch(/question.*answer.*data_format/);
  });

  it('a named format is used as named: plain rows as sample_rows are not SampleRows', async () => {
    const file = writeJsonl(join(tmp, 'named.jsonl'), [{ question: 'q', answer: '1' }]);
    await expect(readQueryRows(file, 'sample_rows')).rejects.toThrow(
      `${file}:line 1: not a SampleRow: `,
    );
    expect((await readQueryRows(file, 'plain'))[0]?.result).toBe('1');
  });
});

describe('one numbering for the rows of a data file', () => {
  // Hand-written files: a JSONL row is named by its line as an editor numbers it (blank lines
  // count), a Parquet row by its 0-based index (datasets' ds[i]); never both in one message.
  it('a JSONL row is its line: blank lines count, and no row index is given beside it', async () => {
    const file = join(tmp, 'sft-blank-lines.jsonl');
    writeFileSync(file, '{"text": "ok"}\n\n{"text": "ok too"}\n{"prompt": "p"}\n');
    const error = await readSftExamples(file).catch((e: unknown) => e);
    expect(DataFormatError.isInstance(error)).toBe(true);
    expect((error as DataFormatError).message).toBe(
      `${file}:line 4: 'prompt' and 'completion' must both be strings (SFT rows need 'messages', 'prompt' + 'completion', or 'text')`,
    );
    expect(await rowNames(file, 16)).toEqual(['line 1', 'line 3', 'line 4']);
    const plain = join(tmp, 'first-row-after-blank.jsonl');
    writeFileSync(plain, '\n{"text": "hello"}\n');
    await expect(readQueryRows(plain, undefined)).rejects.toThrow(
      `${plain}:line 2: the first row is neither a SampleRow`,
    );
  });

  it('a Parquet row is its 0-based index', async () => {
    const file = join(tmp, 'sft.parquet');
    await writeParquet(file, [{ text: 'ok' }, { text: 'ok too' }, { text: null }]);
    await expect(readSftExamples(file)).rejects.toThrow(`${file}:row 2: columns text `);
    expect(await rowNames(file, 2)).toEqual(['row 0', 'row 1']);
  });
});
