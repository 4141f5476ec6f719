import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import {
  DataFormatError,
  loadDataset,
  readHotpotQaHubRows,
  rowsToParquetBuffer,
  writeJsonl,
} from '../src/index.js';
import { testDir } from './temp-dir.js';

// hotpotqa/hotpot_qa's Parquet rows (the columns its dataset card lists: id, question, answer,
// type, level, supporting_facts {title, sent_id}, context {title, sentences}) back in HotpotQA's
// own JSON layout, the one ../shared keeps and the examples read.

const dir = testDir('hotpotqa-hub');

/** A row in the hub's layout, as `datasets` writes the distractor config. */
const hubRow = (i: number) => ({
  id: `5a8b57f2554299${i}`,
  question: `Were film ${i} and film ${i + 1} directed by the same person?`,
  answer: i % 2 === 0 ? 'yes' : 'no',
  type: 'comparison',
  level: 'hard',
  supporting_facts: { title: [`Film ${i}`, `Film ${i + 1}`], sent_id: [0, 1] },
  context: {
    title: [`Film ${i}`, `Film ${i + 1}`],
    sentences: [[`Film ${i} is a film.`, ' It was directed by A.'], [`Film ${i + 1} is another.`]],
  },
});

function parquet(name: string, rows: unknown[]): string {
  const path = join(dir, name);
  writeFileSync(path, rowsToParquetBuffer(rows as Record<string, unknown>[]));
  return path;
}

describe('readHotpotQaHubRows', () => {
  it("maps the hub's rows to the original JSON layout, in file order, up to the limit", async () => {
    const a = parquet('validation-00000-of-00002.parquet', [hubRow(0), hubRow(1)]);
    const b = parquet('validation-00001-of-00002.parquet', [hubRow(2), hubRow(3)]);
    const rows = await readHotpotQaHubRows([a, b], { limit: 3 });
    expect(rows.map((r) => r._id)).toEqual([
      '5a8b57f25542990',
      '5a8b57f25542991',
      '5a8b57f25542992',
    ]);
    expect(rows[0]).toEqual({
      _id: '5a8b57f25542990',
      question: 'Were film 0 and film 1 directed by the same person?',
      answer: 'yes',
      supporting_facts: [
        ['Film 0', 0],
        ['Film 1', 1],
      ],
      context: [
        ['Film 0', ['Film 0 is a film.', ' It was directed by A.']],
        ['Film 1', ['Film 1 is another.']],
      ],
      type: 'comparison',
      level: 'hard',
    });
    // Written as JSONL, the rows load as the shared file does.
    const jsonl = join(dir, 'dev.jsonl');
    await writeJsonl(jsonl, rows);
    const samples = await loadDataset(jsonl, 'hotpotqa');
    expect(samples[1]).toMatchObject({ question: rows[1]?.question, result: 'no' });
    expect(samples[1]?.extra_info.supporting_facts).toEqual([
      { title: 'Film 1', sent_id: 0 },
      { title: 'Film 2', sent_id: 1 },
    ]);
  });

  it('a file in another layout is a DataFormatError naming the file, the row and the column', async () => {
    const bad = parquet('other.parquet', [
      hubRow(0),
      { ...hubRow(1), context: { title: ['only one'], sentences: [['a'], ['b']] } },
    ]);
    const error = await readHotpotQaHubRows([bad]).catch((e: unknown) => e);
    expect(DataFormatError.isInstance(error)).toBe(true);
    expect((error as Error).message).toBe(
      `${bad}:row 1: context is not the hub's layout {title: [...], sentences: [...]} with lists of one length`,
    );
    const jsonLayout = parquet('json-layout.parquet', [{ _id: 'x', question: 'q', answer: 'a' }]);
    await expect(readHotpotQaHubRows([jsonLayout])).rejects.toThrow(
      /row 0: 'id' is missing or not text \(hub layout expected\)/,
    );
  });
});
