import { ConfigError } from '@flowgrpo/core';
import { completionText, type RewardFunction, type RewardInput } from './reward-function.js';

// Format rewards check the tag structure of a completion: which <tag>…</tag> blocks it has and in
// what order. A pattern is a sequence of steps; each step names a tag and how often its block may
// repeat there. `<think>…</think>` then `<answer>…</answer>` is
// [{ tag: 'think' }, { tag: 'answer' }]; a tool-calling turn is
// [{ tag: 'think' }, { tag: 'tool_call', min: 1, max: Infinity }].

export interface FormatStep {
  tag: string;
  /** Fewest blocks of this tag at this position (default 1; 0 makes it optional). */
  min?: number;
  /** Most blocks (default 1; `Infinity` for any number). */
  max?: number;
}

export type FormatPattern = readonly FormatStep[];

export const THINK_ANSWER: FormatPattern = [{ tag: 'think' }, { tag: 'answer' }];
export const THINK_TOOL_CALL: FormatPattern = [
  { tag: 'think' },
  { tag: 'tool_call', min: 1, max: Number.POSITIVE_INFINITY },
];
/** The AReaL search agent's protocol: reasoning, any searches, then one answer. */
export const SEARCH_AGENT: FormatPattern = [
  { tag: 'think', min: 0, max: Number.POSITIVE_INFINITY },
  { tag: 'search', min: 0, max: Number.POSITIVE_INFINITY },
  { tag: 'answer' },
];

export interface TagBlock {
  tag: string;
  content: string;
  start: number;
  end: number;
}

export interface FormatScan {
  blocks: TagBlock[];
  /** Problems that make the text ill-formed: unclosed, stray closing or nested tags. */
  errors: string[];
  /** Non-whitespace text outside every block. */
  outsideText: string;
}

/**
 * Reads the top-level `<tag>…</tag>` blocks of the given tags, in order. A tag opened inside an
 * open block, a closing tag without its opening, and an unclosed tag are errors.
 */
export function scanTags(text: string, tags: readonly string[]): FormatScan {
  const names = [...new Set(tags)].map((t) => t.replace(/[.*+?^${}()|[\]\\]/g, '\\$&'));
  const re = new RegExp(`<(/?)(${names.join('|')})>`, 'g');
  const blocks: TagBlock[] = [];
  const errors: string[] = [];
  let outside = '';
  let open: { tag: string; start: number; contentStart: number } | undefined;
  let cursor = 0;
  for (let m = re.exec(text); m; m = re.exec(text)) {
    const closing = m[1] === '/';
    const tag = m[2]!;
    if (!open) {
      if (closing) {
        errors.push(`stray </${tag}> at ${m.index}`);
        continue;
      }
      outside += text.slice(cursor, m.index);
      open = { tag, start: m.index, contentStart: m.index + m[0].length };
    } else if (closing && tag === open.tag) {
      const end = m.index + m[0].length;
      blocks.push({ tag, content: text.slice(open.contentStart, m.index), start: open.start, end });
      cursor = end;
      open = undefined;
    } else {
      errors.push(`<${closing ? '/' : ''}${tag}> inside <${open.tag}> at ${m.index}`);
    }
  }
  if (open) errors.push(`<${open.tag}> is never closed`);
  else outside += text.slice(cursor);
  return { blocks, errors, outsideText: outside.trim() };
}

export interface FormatCheck {
  ok: boolean;
  /** The tags of the blocks found, in order. */
  sequence: string[];
  missing: string[];
  errors: string[];
}

/** Whether the blocks follow the pattern exactly (and, when `strict`, nothing lies outside). */
export function checkFormat(
  text: string,
  pattern: FormatPattern,
  options: { strict?: boolean; nonEmpty?: boolean } = {},
): FormatCheck {
  const tags = pattern.map((s) => s.tag);
  const scan = scanTags(text, tags);
  const sequence = scan.blocks.map((b) => b.tag);
  const errors = [...scan.errors];
  if (options.strict && scan.outsideText !== '') errors.push('text outside the tagged blocks');
  if (options.nonEmpty ?? true) {
    for (const b of scan.blocks) if (b.content.trim() === '') errors.push(`empty <${b.tag}>`);
  }
  const missing = pattern
    .filter((s) => (s.min ?? 1) > 0 && !sequence.includes(s.tag))
    .map((s) => s.tag);
  // Match the block sequence against the pattern as a regular expression over tag names.
  const code = new Map(tags.map((t, i) => [t, String.fromCharCode(0x41 + i)]));
  const re = new RegExp(
    `^${pattern
      .map((s) => {
        const max = s.max ?? 1;
        return `${code.get(s.tag)}{${s.min ?? 1},${Number.isFinite(max) ? max : ''}}`;
      })
      .join('')}$`,
  );
  const ordered = re.test(sequence.map((t) => code.get(t)).join(''));
  if (!ordered && missing.length === 0) errors.push(`blocks out of order: ${sequence.join(', ')}`);
  return { ok: ordered && errors.length === 0, sequence, missing, errors };
}

export interface FormatRewardOptions {
  name?: string;
  /** Default THINK_ANSWER. */
  pattern?: FormatPattern;
  /** Also require that no text lies outside the blocks (default false). */
  strict?: boolean;
  /** Blocks must have non-blank content (default true). */
  nonEmpty?: boolean;
  /** Score for a completion that fails the check (default 0; some setups use a penalty). */
  failScore?: number;
  /** Score for one that passes (default 1). */
  passScore?: number;
}

/** 1 when the completion's tags follow the pattern, else `failScore`. */
export function formatReward(options: FormatRewardOptions = {}): RewardFunction<FormatCheck> {
  const pattern = options.pattern ?? THINK_ANSWER;
  if (pattern.length === 0) throw new ConfigError('format pattern is empty', { key: 'pattern' });
  if (pattern.length > 26)
    throw new ConfigError('format pattern has > 26 steps', { key: 'pattern' });
  for (const s of pattern) {
    if (!/^[A-Za-z_][\w:-]*$/.test(s.tag))
      throw new ConfigError(`bad tag name ${JSON.stringify(s.tag)}`, { key: 'pattern' });
    if ((s.min ?? 1) > (s.max ?? 1))
      throw new ConfigError(`min > max for <${s.tag}>`, { key: 'pattern' });
  }
  if (new Set(pattern.map((s) => s.tag)).size !== pattern.length)
    throw new ConfigError('a tag appears twice in the pattern', { key: 'pattern' });
  const pass = options.passScore ?? 1;
  const fail = options.failScore ?? 0;
  return {
    name: options.name ?? 'format',
    score(input: RewardInput) {
      const check = checkFormat(completionText(input), pattern, options);
      return { score: check.ok ? pass : fail, details: check };
    },
  };
}
