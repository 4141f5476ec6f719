import { ByteLevelTokenizer } from '@flowgrpo/models';

// The tokenizer of the model `flowgrpo init` creates: a byte-level BPE in HF's tokenizer.json
// format, laid out as today's LLM tokenizers are: each digit its own token (as Qwen2.5 and Llama 2
// split numbers), the agents' tags (<tool_call>, <answer>, …) added tokens (as Qwen2.5's
// <tool_call> is), words merged by BPE merges learnt from the template's own text. The byte
// tokenizer of the other tiny models spells every word letter by letter, so a prompt is 3–4 times
// as many tokens: a two-layer model then takes more steps to find the numbers of a question and
// copy them than the templates' minutes allow (and every step costs 3–4 times as much). Byte ids,
// then the ChatML special tokens, come first, as in ByteLevelTokenizer, so its chat template and
// special ids carry over. (Whole numbers as tokens, cl100k's way, were tried: a thousand number
// tokens each seen a few times in the template's data were not learnt to copy at all.)

/**
 * Llama 3's pre-tokenizer split with one digit per number token (Qwen2.5's \p{N}), without Llama
 * 3's case-insensitive group (JavaScript has none before ES2025).
 */
export const SPLIT_PATTERN =
  "'(?:[sdmtSDMT]|ll|ve|re|LL|VE|RE)|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+";

/** The agents' tags, single tokens (Qwen2.5 has <tool_call> and <tool_response> the same way). */
export const TAG_TOKENS = [
  '<tool_call>',
  '</tool_call>',
  '<tool_response>',
  '</tool_response>',
  '<answer>',
  '</answer>',
  '<think>',
  '</think>',
] as const;

/** The pre-tokens of `text` (the Split step), the tags and special tokens taken out first. */
function preTokens(text: string, cut: readonly string[]): string[] {
  const split = new RegExp(SPLIT_PATTERN, 'gu');
  const escaped = cut.map((t) => t.replace(/[.*+?^${}()|[\]\\]/g, '\\$&'));
  return text
    .split(new RegExp(`(?:${escaped.join('|')})`, 'g'))
    .flatMap((part) => part.match(split) ?? []);
}

/**
 * `merges` BPE merges learnt from `corpus`: the most frequent adjacent pair first, over its
 * pre-tokens as GPT-2 byte characters (digits are pre-tokens of their own: never merged).
 */
function learnMerges(
  corpus: readonly string[],
  merges: number,
  cut: readonly string[],
  table: readonly string[],
): [string, string][] {
  const encoder = new TextEncoder();
  const counts = new Map<string, number>();
  for (const text of corpus)
    for (const t of preTokens(text, cut)) counts.set(t, (counts.get(t) ?? 0) + 1);
  const words = [...counts]
    .filter(([t]) => !/\p{N}/u.test(t))
    .map(([t, n]) => ({ symbols: Array.from(encoder.encode(t), (b) => table[b]!), n }));
  const learnt: [string, string][] = [];
  while (learnt.length < merges) {
    const pairs = new Map<string, number>();
    for (const { symbols, n } of words)
      for (let i = 0; i + 1 < symbols.length; i++) {
        const key = `${symbols[i]} ${symbols[i + 1]}`;
        pairs.set(key, (pairs.get(key) ?? 0) + n);
      }
    let best: string | undefined;
    let bestCount = 1; // a pair seen once is not worth a token
    for (const [key, n] of pairs)
      if (n > bestCount || (n === bestCount && best !== undefined && key < best)) {
        best = key;
        bestCount = n;
      }
    if (best === undefined) break;
    const [a, b] = best.split(' ') as [string, string];
    learnt.push([a, b]);
    for (const w of words) {
      const next: string[] = [];
      for (let i = 0; i < w.symbols.length; i++) {
        if (i + 1 < w.symbols.length && w.symbols[i] === a && w.symbols[i + 1] === b) {
          next.push(a + b);
          i++;
        } else next.push(w.symbols[i]!);
      }
      w.symbols = next;
    }
  }
  return learnt;
}

/**
 * The tokenizer.json of a byte-level BPE fit to `corpus`: bytes 0–255, the ChatML special tokens
 * (256–258, as ByteLevelTokenizer), `merges` word merges, the tags.
 * The tokenizer_config.json is ByteLevelTokenizer's (ChatML) with the tags added.
 */
export function fitTokenizer(
  corpus: readonly string[],
  o: { merges: number },
): {
  tokenizerJson: Record<string, unknown>;
  tokenizerConfig: Record<string, unknown>;
  vocabSize: number;
} {
  const base = new ByteLevelTokenizer();
  const baseJson = base.toTokenizerJson() as {
    added_tokens: { id: number; content: string }[];
    model: { vocab: Record<string, number> };
  };
  const specials = baseJson.added_tokens.map((t) => t.content);
  const vocab: Record<string, number> = { ...baseJson.model.vocab };
  let next = 256 + specials.length;
  // GPT-2's byte-to-character table, as the byte tokenizer's vocabulary holds it (char → byte).
  const table: string[] = [];
  for (const [ch, id] of Object.entries(baseJson.model.vocab)) table[id] = ch;
  const merges = [...learnMerges(corpus, o.merges, [...specials, ...TAG_TOKENS], table)];
  for (const [a, b] of merges) if (vocab[a + b] === undefined) vocab[a + b] = next++;
  const tagIds = TAG_TOKENS.map((content) => ({ id: next++, content }));
  const addedToken = (id: number, content: string, special: boolean) => ({
    id,
    content,
    single_word: false,
    lstrip: false,
    rstrip: false,
    normalized: false,
    special,
  });
  const byteLevel = {
    type: 'ByteLevel',
    add_prefix_space: false,
    trim_offsets: false,
    use_regex: false,
  };
  const tokenizerJson = {
    ...(base.toTokenizerJson() as Record<string, unknown>),
    added_tokens: [
      ...baseJson.added_tokens,
      ...tagIds.map((t) => addedToken(t.id, t.content, false)),
    ],
    pre_tokenizer: {
      type: 'Sequence',
      pretokenizers: [
        { type: 'Split', pattern: { Regex: SPLIT_PATTERN }, behavior: 'Isolated', invert: false },
        byteLevel,
      ],
    },
    model: {
      ...(baseJson.model as Record<string, unknown>),
      vocab,
      merges: merges.map(([a, b]) => `${a} ${b}`),
    },
  };
  const config = base.toTokenizerConfig() as Record<string, unknown> & {
    added_tokens_decoder: Record<string, unknown>;
  };
  const tokenizerConfig = {
    ...config,
    added_tokens_decoder: {
      ...config.added_tokens_decoder,
      ...Object.fromEntries(
        tagIds.map((t) => {
          const { id: _id, ...entry } = addedToken(t.id, t.content, false);
          return [String(t.id), entry];
        }),
      ),
    },
  };
  return { tokenizerJson, tokenizerConfig, vocabSize: next };
}
