import { extname } from 'node:path';
import {
  type ChatMessage,
  DataFormatError,
  type DatasetFormat,
  loadDataset,
  readJsonlAll,
  readParquetRows,
  readSampleRows,
  type SampleRow,
} from '@flowgrpo/core';
import type { SFTExample } from '@flowgrpo/trainer';
import { requireFile } from './user-paths.js';

// The data files of a run, read with @flowgrpo/core's loaders: GRPO takes SampleRows (the seeds'
// schema, .jsonl or .parquet) or a raw layout core normalises (gsm8k, nq, …); SFT takes TRL's
// dataset formats — conversational `messages`, `prompt` + `completion`, or plain `text`.

/** Dataset rows for GRPO and evaluation. */
export async function readQueryRows(
  path: string,
  format: 'sample_rows' | string = 'sample_rows',
  what = 'the data file',
): Promise<SampleRow[]> {
  requireFile(path, what);
  const rows =
    format === 'sample_rows'
      ? await readSampleRows(path)
      : await loadDataset(path, format as DatasetFormat);
  if (rows.length === 0) throw new DataFormatError('the file holds no rows', { file: path });
  return rows;
}

async function readRecords(path: string): Promise<Record<string, unknown>[]> {
  const ext = extname(path).toLowerCase();
  if (ext === '.jsonl') return readJsonlAll<Record<string, unknown>>(path);
  if (ext === '.parquet') return (await readParquetRows(path)) as Record<string, unknown>[];
  throw new DataFormatError(`unknown extension '${ext}' (expected .jsonl or .parquet)`, {
    file: path,
  });
}

const ROLES = new Set(['system', 'user', 'assistant', 'tool']);

/** One record in a TRL dataset format as an SFTExample; anything else names the row. */
export function sftExample(
  record: Record<string, unknown>,
  index: number,
  file: string,
): SFTExample {
  const bad = (why: string) =>
    new DataFormatError(
      `row ${index}: ${why} (SFT rows need 'messages', 'prompt' + 'completion', or 'text')`,
      { file },
    );
  // Parquet gives every row every column (null where a row has none): null counts as absent.
  if (Array.isArray(record.messages)) {
    const messages = record.messages.map((m, i) => {
      const msg = m as { role?: unknown; content?: unknown };
      if (typeof msg?.role !== 'string' || !ROLES.has(msg.role) || typeof msg.content !== 'string')
        throw bad(`messages[${i}] is not {role, content}`);
      return { role: msg.role, content: msg.content } as ChatMessage;
    });
    if (!messages.some((m) => m.role === 'assistant')) throw bad('no assistant message');
    return { messages };
  }
  if (record.prompt != null || record.completion != null) {
    if (typeof record.prompt !== 'string' || typeof record.completion !== 'string')
      throw bad("'prompt' and 'completion' must both be strings");
    return { prompt: record.prompt, completion: record.completion };
  }
  if (typeof record.text === 'string') return { text: record.text };
  throw bad(`columns ${Object.keys(record).join(', ') || '(none)'}`);
}

/** SFT examples from a .jsonl or .parquet file in TRL's dataset formats. */
export async function readSftExamples(path: string, what = 'the data file'): Promise<SFTExample[]> {
  requireFile(path, what);
  const records = await readRecords(path);
  if (records.length === 0) throw new DataFormatError('the file holds no rows', { file: path });
  return records.map((r, i) => sftExample(r, i, path));
}
