import { gsm8kFinal, lastBoxed, lastTagContent } from '@flowgrpo/reward';

// The answer itself, out of the generator's text. The generator is asked to reason first and end
// with a line "Answer: …" (prompts.ts); models also write "**Answer:** 144", "The answer is 144.",
// "Final answer: $\boxed{144}$", an <answer> block or GSM8K's "#### 144". What a user compares
// with a gold answer (exact match, F1) is the "144", so the solver reports it as `finalAnswer`
// and keeps the whole text as `answerText`.
//
// Rules, first match wins (reasoning in <think>…</think> is dropped before any of them):
//  1. 'answer-line': the LAST line that starts with "Answer:" / "Final answer:" / "The answer:"
//     (any case; markdown around the label allowed: "**Answer:**", "## Final Answer:", "- Answer:";
//     a full-width colon too). The rest of that line is the answer; if it is empty, the text
//     after that line is.
//  2. 'answer-tag': the last <answer>…</answer> block.
//  3. 'answer-is': the last line saying "the / my / final / correct answer is X" → X.
//  4. 'boxed': the last \boxed{…}.
//  5. 'gsm8k': the text after the last "####".
//  6. 'whole': the whole text (a reply that is only the answer).
// Then the answer is cleaned, repeatedly until nothing changes: a leading "the answer is" goes;
// a \boxed{…} inside it is taken; wrappers around the whole answer go (**…**, __…__, *…*,
// `…`, $…$, $$…$$, \(…\), \[…\], \text{…}, "…", “…”); one trailing ".", "!" or "。" goes,
// except after a one-letter abbreviation ("D.C." stays). Numbers are not reformatted: "1,234"
// stays (the rewards normalise), "3.50" stays.

export type FinalAnswerSource =
  | 'answer-line'
  | 'answer-tag'
  | 'answer-is'
  | 'boxed'
  | 'gsm8k'
  | 'whole';

export interface ParsedFinalAnswer {
  /** The answer, cleaned; '' when the text holds nothing. */
  answer: string;
  /** Which rule found it. */
  source: FinalAnswerSource;
}

const ANSWER_LINE =
  /^[\s>#*_\-+]*(?:the\s+)?(?:final\s+)?answer\s*(?:\*\*|__|\*|_)?\s*[:：]\s*(?:\*\*|__)?\s*(.*)$/i;
const ANSWER_IS = /\b(?:the|my|final|correct)\s+answer\s+is\b\s*[:：]?\s*(.+)$/i;
const LEADING_ANSWER_IS =
  /^(?:so,?\s+|therefore,?\s+|thus,?\s+)?(?:the\s+)?(?:final\s+)?answer\s+is\s*[:：]?\s*/i;

/** Splits the generator's text into the answer and how it was found (rules above). */
export function parseFinalAnswer(text: string): ParsedFinalAnswer {
  const body = withoutThinking(text);
  const lines = body.split(/\r?\n/);
  for (let i = lines.length - 1; i >= 0; i--) {
    const m = ANSWER_LINE.exec(lines[i]!);
    if (!m) continue;
    const rest = m[1]!.trim() || lines.slice(i + 1).join('\n');
    return { answer: cleanAnswer(rest), source: 'answer-line' };
  }
  const tagged = lastTagContent(body, 'answer');
  if (tagged !== undefined) return { answer: cleanAnswer(tagged), source: 'answer-tag' };
  for (let i = lines.length - 1; i >= 0; i--) {
    const m = ANSWER_IS.exec(lines[i]!);
    if (m) return { answer: cleanAnswer(m[1]!), source: 'answer-is' };
  }
  const boxed = lastBoxed(body);
  if (boxed !== undefined) return { answer: cleanAnswer(boxed), source: 'boxed' };
  const hashes = gsm8kFinal(body);
  if (hashes !== undefined) return { answer: cleanAnswer(hashes), source: 'gsm8k' };
  return { answer: cleanAnswer(body), source: 'whole' };
}

/** The text without reasoning blocks: <think>…</think> removed, or all before a lone </think>. */
function withoutThinking(text: string): string {
  const closed = text.replace(/<think>[\s\S]*?<\/think>/gi, '');
  // Some servers strip the opening tag from the reply; then everything up to </think> is thought.
  const end = closed.toLowerCase().lastIndexOf('</think>');
  return end >= 0 ? closed.slice(end + '</think>'.length) : closed;
}

const WRAPPERS: [open: string, close: string][] = [
  ['**', '**'],
  ['__', '__'],
  ['$$', '$$'],
  ['\\(', '\\)'],
  ['\\[', '\\]'],
  ['*', '*'],
  ['`', '`'],
  ['$', '$'],
  ['"', '"'],
  ['\u201c', '\u201d'],
];

/** One cleaning pass (see the rules above); applied until the answer stops changing. */
function cleanOnce(answer: string): string {
  let s = answer.trim();
  s = s.replace(LEADING_ANSWER_IS, '');
  if (/\\(?:boxed|fbox)(?![a-zA-Z])/.test(s)) s = lastBoxed(s) ?? s;
  for (const [open, close] of WRAPPERS) {
    if (s.length > open.length + close.length && s.startsWith(open) && s.endsWith(close)) {
      s = s.slice(open.length, s.length - close.length);
      break;
    }
  }
  const text = /^\\text(?:bf|rm|it)?\{([\s\S]*)\}$/.exec(s);
  if (text) s = text[1]!;
  if (/[.!。]$/.test(s) && !/(?:^|[\s.])[A-Za-z]\.$/.test(s)) s = s.slice(0, -1);
  return s.trim();
}

/** The answer with wrappers, a leading "the answer is" and a sentence's final stop removed. */
export function cleanAnswer(answer: string): string {
  let s = answer;
  for (let i = 0; i < 20; i++) {
    const next = cleanOnce(s);
    if (next === s) break;
    s = next;
  }
  return s;
}
