import { extname } from 'node:path';
import {
  type ChatMessage,
  DataFormatError,
  type DatasetFormat,
  loadDataset,
  plainRowShape,
  readJsonlRecords,
  readParquetRows,
  readSampleRows,
  type SampleRow,
} from '@flowgrpo/core';
import type { SFTExample } from '@flowgrpo/trainer';
import { requireFile } from './user-paths.js';

// The data files of a run, read with @flowgrpo/core's loaders: GRPO takes SampleRows (the seeds'
// schema, .jsonl or .parquet), plain rows (`{question, answer}`, TRL's prompt/completion or
// messages: detected when the run names no format) or a raw layout core normalises (gsm8k, nq, …); SFT takes TRL's
// dataset formats — conversational `messages`, `prompt` + `completion`, or plain `text`.

/** Dataset rows for GRPO and evaluation. */
export async function readQueryRows(
  path: string,
  format: 'sample_rows' | string | undefined,
  what = 'the data file',
  log?: (line: string) => void,
): Promise<SampleRow[]> {
  requireFile(path, what);
  const resolved = format ?? (await detectQueryFormat(path, log));
  const rows =
    resolved === 'sample_rows'
      ? await readSampleRows(path)
      : await loadDataset(path, resolved as DatasetFormat);
  if (rows.length === 0) throw new DataFormatError('the file holds no rows', { file: path });
  return rows;
}

/**
 * The format of a data file whose run names none ("data_format" absent, no --data-format), from
 * its first row: a SampleRow carries `extra_info`; a plain row `question`, TRL's `prompt` or
 * TRL's `messages`. The plain case is logged, as the reference answers then come from a
 * normaliser the user did not name.
 */
async function detectQueryFormat(
  path: string,
  log: ((line: string) => void) | undefined,
): Promise<'sample_rows' | 'plain'> {
  const head = (await readRecords(path, 1))[0];
  const first = head?.value;
  if (first === undefined || (typeof first.extra_info === 'object' && first.extra_info !== null))
    return 'sample_rows';
  const shape = plainRowShape(first);
  if (shape === undefined) {
    const present = Object.keys(first).join(', ') || 'none';
    throw new DataFormatError(
      `the first row is neither a SampleRow (extra_info.ground_truth, …) nor a plain row ` +
        `(question + answer, prompt + completion, or messages); fields present: ${present}`,
      { file: path, ...head!.at },
      {
        hint: 'write {"question", "answer"} rows, or set "data_format" (gsm8k, nq, …) for a raw layout',
      },
    );
  }
  log?.(
    `data: ${path}: plain rows (${PLAIN_SHAPES[shape]}), read as data_format "plain": the ` +
      `reference answer is 'answer' (else the completion), "#### N" → N`,
  );
  return 'plain';
}

const PLAIN_SHAPES = {
  question: 'question + answer',
  prompt: "TRL's prompt + completion",
  messages: "TRL's messages",
} as const;

/** Where a record sits in its file, as DataFormatError names it: a JSONL line, a Parquet row. */
type RecordAt = { line: number } | { row: number };

/**
 * How messages name the first `count` rows of a data file, in the order the readers return them
 * — DataFormatError's numbering: `line N` in a JSONL file (1-based, blank lines counted, as
 * editors show), `row N` in a Parquet file (0-based, as datasets' `ds[N]` and pandas take it).
 */
export async function rowNames(path: string, count: number): Promise<string[]> {
  return (await readRecords(path, count)).map(({ at }) =>
    'line' in at ? `line ${at.line}` : `row ${at.row}`,
  );
}

/** The records of a .jsonl or .parquet file (the first `limit` of them when given). */
async function readRecords(
  path: string,
  limit = Number.POSITIVE_INFINITY,
): Promise<{ value: Record<string, unknown>; at: RecordAt }[]> {
  const ext = extname(path).toLowerCase();
  if (ext === '.jsonl') {
    const out: { value: Record<string, unknown>; at: RecordAt }[] = [];
    for await (const { value, line } of readJsonlRecords<Record<string, unknown>>(path)) {
      if (out.length >= limit) break;
      out.push({ value, at: { line } });
    }
    return out;
  }
  if (ext === '.parquet') {
    const rows = await readParquetRows(path, {
      rowEnd: Number.isFinite(limit) ? limit : undefined,
    });
    return rows.map((value, row) => ({ value, at: { row } }));
  }
  throw new DataFormatError(`unknown extension '${ext}' (expected .jsonl or .parquet)`, {
    file: path,
  });
}

const ROLES = new Set(['system', 'user', 'assistant', 'tool']);

/** One record in a TRL dataset format as an SFTExample; anything else names where it is. */
export function sftExample(
  record: Record<string, unknown>,
  at: RecordAt,
  file: string,
): SFTExample {
  const bad = (why: string) =>
    new DataFormatError(`${why} (SFT rows need 'messages', 'prompt' + 'completion', or 'text')`, {
      file,
      ...at,
    });
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
  return records.map((r) => sftExample(r.value, r.at, path));
}
