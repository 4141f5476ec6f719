import type { SampleRow } from '../../sample-row.js';
import {
  makeRow,
  type NormalizeOptions,
  normalizeAll,
  openRow,
  requireText,
  rowError,
} from './row-fields.js';

const CALCULATOR_NOTE = /<<([^<>]*)>>/g;

/** The parts of a GSM8K `answer`: reasoning, calculator notes, and the final number. */
export interface Gsm8kAnswer {
  /** Reasoning before `####`, calculator notes removed. */
  chain: string;
  /** The `<<expr=value>>` notes in order, without the brackets. */
  calculations: string[];
  /** The text after `####` with its commas removed ("1,080" → "1080"). */
  result: string;
}

/**
 * Splits a GSM8K answer. The calculator notes (`<<48/2=24>>`) were inserted by the dataset's
 * annotators for a calculator tool, not written by the solver, so the chain drops them and they
 * are kept separately (extra_info.calculations) for whoever wants to replay them.
 */
export function parseGsm8kAnswer(answer: string): Gsm8kAnswer | undefined {
  const at = answer.lastIndexOf('####');
  if (at < 0) return undefined;
  const result = answer
    .slice(at + 4)
    .trim()
    .replace(/,/g, '');
  if (result === '') return undefined;
  const reasoning = answer.slice(0, at);
  const calculations = [...reasoning.matchAll(CALCULATOR_NOTE)].map((m) => m[1]);
  const chain = reasoning.replace(CALCULATOR_NOTE, '').trim();
  return { chain, calculations, result };
}

/** One GSM8K row `{question, answer}` as a SampleRow (source 'gsm8k'). */
export function normalizeGsm8kRow(
  raw: unknown,
  idx: number,
  options: NormalizeOptions = {},
): SampleRow {
  const { ctx, row } = openRow('gsm8k', raw, idx, options);
  const question = requireText(row, ['question'], ctx).trim();
  const answer = requireText(row, ['answer'], ctx);
  const parsed = parseGsm8kAnswer(answer);
  if (!parsed) throw rowError(ctx, 'answer has no final "#### <number>" line');
  return makeRow({
    idx,
    question,
    chain: parsed.chain,
    result: parsed.result,
    source: options.source ?? 'gsm8k',
    extra: { calculations: parsed.calculations, answer_raw: answer },
  });
}

export function normalizeGsm8k(
  rows: Iterable<unknown>,
  options: NormalizeOptions = {},
): SampleRow[] {
  return normalizeAll(rows, options, normalizeGsm8kRow);
}
