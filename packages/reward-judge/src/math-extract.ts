// Pulling the answer out of a model's text: the last \boxed{...} (braces balanced, so
// \boxed{\frac{1}{2}} is whole), the GSM8K `#### 72` line, an <answer>...</answer> block, or an
// "answer is X" sentence — in that order of precedence.

/** Content of the brace group opening at `open` (which must be `{`), or undefined if unbalanced. */
export function braceGroup(
  text: string,
  open: number,
): { content: string; end: number } | undefined {
  if (text[open] !== '{') return undefined;
  let depth = 0;
  for (let i = open; i < text.length; i++) {
    const ch = text[i];
    if (ch === '\\') {
      i++; // an escaped brace (\{ \}) does not open or close the group
      continue;
    }
    if (ch === '{') depth++;
    else if (ch === '}') {
      depth--;
      if (depth === 0) return { content: text.slice(open + 1, i), end: i + 1 };
    }
  }
  return undefined;
}

/** The last `\boxed{...}` or `\fbox{...}` content (also the brace-less `\boxed 5`). */
export function lastBoxed(text: string): string | undefined {
  const re = /\\(?:boxed|fbox)(?![a-zA-Z])/g;
  let last = -1;
  let lastLen = 0;
  for (let m = re.exec(text); m; m = re.exec(text)) {
    last = m.index;
    lastLen = m[0].length;
  }
  if (last < 0) return undefined;
  let i = last + lastLen;
  while (text[i] === ' ') i++;
  if (text[i] === '{') return braceGroup(text, i)?.content;
  const bare = /^[^\s$]+/.exec(text.slice(i));
  return i > last + lastLen && bare ? bare[0] : undefined;
}

/** The text after the last `####` marker, to the end of its line (GSM8K's answer form). */
export function gsm8kFinal(text: string): string | undefined {
  const idx = text.lastIndexOf('####');
  if (idx < 0) return undefined;
  const rest = text
    .slice(idx + 4)
    .split('\n')[0]!
    .trim();
  return rest === '' ? undefined : rest;
}

/** Content of the last `<tag>...</tag>` block. */
export function lastTagContent(text: string, tag: string): string | undefined {
  const close = `</${tag}>`;
  const end = text.lastIndexOf(close);
  if (end < 0) return undefined;
  const start = text.lastIndexOf(`<${tag}>`, end);
  if (start < 0) return undefined;
  return text.slice(start + tag.length + 2, end).trim();
}

export type AnswerSource = 'boxed' | 'gsm8k' | 'answer-tag' | 'answer-is' | 'whole';

export function extractMathAnswer(text: string): { answer: string; source: AnswerSource } {
  const boxed = lastBoxed(text);
  if (boxed !== undefined) return { answer: boxed, source: 'boxed' };
  const hashes = gsm8kFinal(text);
  if (hashes !== undefined) return { answer: hashes, source: 'gsm8k' };
  const tagged = lastTagContent(text, 'answer');
  if (tagged !== undefined) {
    const inner = lastBoxed(tagged);
    return { answer: inner ?? tagged, source: 'answer-tag' };
  }
  const said = /answer is[:\s]*(.+?)\s*\.?\s*$/i.exec(
    text
      .split('\n')
      .reverse()
      .find((l) => /answer is/i.test(l)) ?? '',
  );
  if (said) return { answer: said[1]!, source: 'answer-is' };
  return { answer: text.trim(), source: 'whole' };
}

/** The last number-looking run in the text (`-1,234.5`), commas removed, or undefined. */
export function lastNumber(text: string): string | undefined {
  const all = text.match(/-?\d[\d,]*(?:\.\d+)?(?:[eE][+-]?\d+)?/g);
  if (!all) return undefined;
  return all[all.length - 1]!.replace(/,/g, '');
}
