import { gsm8kFinal } from './math-extract.js';
import { pyLen, pySplit, pyStrip } from './python-text.js';
import type { RewardFunction, RewardInput, RewardResult } from './reward-function.js';

// The multi-dimension GSM8K reward of the SFT → GRPO book chapter (seed 003), term for term.
// Four dimensions, summed, then floored at 0:
//   accuracy    0.50  the last number in the completion is within 1% (relative) of the answer:
//                     |pred − gold| / (|gold| + 1e-8) < 0.01. The number is the last match of
//                     /-?[\d,]+\.?\d*/ with commas removed; if that match does not parse (e.g. a
//                     lone "," or "-"), the dimension scores 0 — the chapter's behaviour.
//   format      0.10  both "<think>" and "</think>" occur anywhere in the completion;
//              +0.10  the think text (after the first <think>, before the next </think>),
//                     stripped, is longer than 20 characters.
//   reasoning   0.10  (needs the think tags) the think text has ≥ 2 non-blank lines;
//              +0.10  it contains a digit or one of + - * / =.
//   conciseness +0.10 the completion has ≤ 300 whitespace-separated tokens;
//               −0.05 it has > 800 (between 301 and 800: 0).
// The maximum is 1.0. The chapter's docstring names <tool_call> under "format", but its code
// checks only the think tags; we reproduce the code.

export interface Gsm8kRewardDetails {
  accuracy: number;
  format: number;
  reasoning: number;
  conciseness: number;
  /** The number read from the completion (NaN when none parsed). */
  predicted: number;
  gold: number;
  tokenCount: number;
}

const DECIMAL_DIGIT = /\p{Nd}/u;

/**
 * ASCII form of a Unicode decimal digit. Unicode assigns every digit set as a run of ten
 * consecutive code points from 0 to 9, and adjacent sets start again at 0, so the value is the
 * offset from the start of the run of digits, modulo 10.
 */
function asciiDigit(ch: string): string {
  let start = ch.codePointAt(0)!;
  while (start > 0 && DECIMAL_DIGIT.test(String.fromCodePoint(start - 1))) start--;
  return String((ch.codePointAt(0)! - start) % 10);
}

/**
 * Python's float() on the strings this reward produces: optional sign, digits (of any script,
 * as Python's \d and float() accept them), one dot.
 */
function pyFloat(s: string): number {
  const t = pyStrip(s)
    .replace(/_/g, '')
    .replace(/\p{Nd}/gu, (d) => (d >= '0' && d <= '9' ? d : asciiDigit(d)));
  if (!/^[+-]?(?:\d+\.?\d*|\.\d+)(?:[eE][+-]?\d+)?$/.test(t)) return Number.NaN;
  return Number(t);
}

/** The gold as the chapter prepares it: the `#### N` value with commas removed. */
function goldValue(groundTruth: string | readonly string[]): number {
  const raw = typeof groundTruth === 'string' ? groundTruth : (groundTruth[0] ?? '');
  const final = raw.includes('####') ? (gsm8kFinal(raw) ?? '') : raw;
  return pyFloat(final.replace(/,/g, ''));
}

export function gsm8kMultiDimensionScore(
  completion: string,
  groundTruth: string | readonly string[],
): RewardResult<Gsm8kRewardDetails> {
  const gold = goldValue(groundTruth);
  let accuracy = 0;
  const numbers = completion.match(/-?[\p{Nd},]+\.?\p{Nd}*/gu);
  let predicted = Number.NaN;
  if (numbers) {
    predicted = pyFloat(numbers[numbers.length - 1]!.replace(/,/g, ''));
    if (
      !Number.isNaN(predicted) &&
      !Number.isNaN(gold) &&
      Math.abs(predicted - gold) / (Math.abs(gold) + 1e-8) < 0.01
    ) {
      accuracy = 0.5;
    }
  }

  // Terms added one by one in the chapter's order, so the floating-point total is identical.
  let total = accuracy;
  let format = 0;
  let reasoning = 0;
  const hasThink = completion.includes('<think>') && completion.includes('</think>');
  if (hasThink) {
    const think = completion.split('<think>')[1]!.split('</think>')[0]!;
    total += 0.1;
    format += 0.1;
    if (pyLen(pyStrip(think)) > 20) {
      total += 0.1;
      format += 0.1;
    }
    if (think.split('\n').filter((l) => pyStrip(l) !== '').length >= 2) {
      total += 0.1;
      reasoning += 0.1;
    }
    if (/[\p{Nd}+\-*/=]/u.test(think)) {
      total += 0.1;
      reasoning += 0.1;
    }
  }

  const tokenCount = pySplit(completion).length;
  const conciseness = tokenCount <= 300 ? 0.1 : tokenCount > 800 ? -0.05 : 0;
  total += conciseness;
  return {
    score: Math.max(0, total),
    details: { accuracy, format, reasoning, conciseness, predicted, gold, tokenCount },
  };
}

export interface Gsm8kRewardOptions {
  name?: string;
}

/** The seed-003 reward over `input.completion ?? input.finalAnswer`. */
export function gsm8kMultiDimensionReward(
  options: Gsm8kRewardOptions = {},
): RewardFunction<Gsm8kRewardDetails> {
  return {
    name: options.name ?? 'gsm8k_multi',
    score(input: RewardInput) {
      return gsm8kMultiDimensionScore(input.completion ?? input.finalAnswer, input.groundTruth);
    },
  };
}
