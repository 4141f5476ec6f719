import { TOOL_CALL_OPEN } from './tool-calls.js';

// Streamed text, token by token, that never has to be taken back: what the client has been sent
// is always a prefix of the reply's final content. The completion is detokenized incrementally,
// as vLLM does (each new piece is the decode of a short window of tokens minus the decode of its
// start, so a detokenizer that joins pieces — a SentencePiece space, bytes of one character —
// sees them joined, and a token costs a few tokens' decode, not the whole reply's), and holds back
//   - the newest token: it may be the stop token that ends the reply (an engine's stop ids need
//     not be special tokens), which the reply's text leaves out;
//   - a character still being written: a token that ends inside a UTF-8 sequence decodes to
//     U+FFFD, which the next token completes;
//   - a suffix that could be the start of a stop string, and everything from a stop string on
//     (the engine ends the reply there and cuts its text before it);
//   - when the reply may hold tool calls, a suffix that could open one, and everything from an
//     opened one on: the call is parsed when the reply is done and sent then, as one delta.
// When the reply is done, `rest(content)` is the final content past what was sent.

const REPLACEMENT = '\uFFFD';
/** Qwen's template writes content + "\n" before the first call; the parser drops that newline. */
const CALL_MARKS = [`\n${TOOL_CALL_OPEN}`, TOOL_CALL_OPEN];

export interface TextStreamOptions {
  /** Decodes completion ids to text (special tokens skipped, as the reply's text is decoded). */
  decode: (ids: readonly number[]) => string;
  /** Text the reply starts with before its first sampled token (a tool-call prefill). */
  prefill?: string;
  /** The request's stop strings. */
  stop?: readonly string[];
  /** Whether the reply is parsed for tool calls. */
  toolCalls?: boolean;
}

export class TextStream {
  readonly #o: TextStreamOptions;
  readonly #stops: string[];
  readonly #ids: number[] = [];
  /** The prefill and the text of the tokens read so far (ids before #readAt). */
  #text: string;
  /** The detokenization window: it starts at #prefixAt; tokens from #readAt on are unread. */
  #prefixAt = 0;
  #readAt = 0;
  #sent = '';
  /** Nothing more is streamed: a stop string or a tool call has begun. */
  #frozen = false;

  constructor(o: TextStreamOptions) {
    this.#o = o;
    this.#stops = (o.stop ?? []).filter((s) => s.length > 0);
    this.#text = o.prefill ?? '';
  }

  /** Adds a sampled token; returns the text that may now be sent ('' when none). */
  push(id: number): string {
    this.#ids.push(id);
    if (this.#frozen) return '';
    this.#read(this.#ids.length - 1);
    const text = this.#text;
    let end = this.#cut(text, text.length, { marks: this.#stops, held: this.#stops });
    if (this.#o.toolCalls)
      end = this.#cut(text, end, { marks: [TOOL_CALL_OPEN], held: CALL_MARKS, newline: true });
    if (this.#frozen || end <= this.#sent.length) return '';
    const delta = text.slice(this.#sent.length, end);
    this.#sent = text.slice(0, end);
    return delta;
  }

  /** Reads the tokens before `upTo` into #text, unless they end inside a character. */
  #read(upTo: number): void {
    if (upTo <= this.#readAt) return;
    const window = this.#ids.slice(this.#prefixAt, upTo);
    const before = this.#o.decode(window.slice(0, this.#readAt - this.#prefixAt));
    const after = this.#o.decode(window);
    if (after.length <= before.length || after.endsWith(REPLACEMENT)) return;
    this.#text += after.slice(before.length);
    this.#prefixAt = this.#readAt;
    this.#readAt = upTo;
  }

  /** The final content past what was sent ('' when the stream already holds all of it). */
  rest(content: string | null): string {
    const c = content ?? '';
    return c.startsWith(this.#sent) ? c.slice(this.#sent.length) : '';
  }

  /**
   * `end`, moved back before the first of `marks` in text[0, end) (then nothing more streams)
   * or before a suffix that could begin one of `held`. A tool-call opening also takes the one
   * newline before it (`newline`), which the parser drops.
   */
  #cut(
    text: string,
    end: number,
    {
      marks,
      held,
      newline = false,
    }: { marks: readonly string[]; held: readonly string[]; newline?: boolean },
  ): number {
    const head = text.slice(0, end);
    let first = -1;
    for (const m of marks) {
      const i = head.indexOf(m);
      if (i >= 0 && (first < 0 || i < first)) first = i;
    }
    if (first >= 0) {
      this.#frozen = true;
      return newline && head[first - 1] === '\n' ? first - 1 : first;
    }
    let hold = 0;
    for (const m of held)
      for (let n = Math.min(m.length - 1, head.length); n > hold; n--)
        if (head.endsWith(m.slice(0, n))) {
          hold = n;
          break;
        }
    return end - hold;
  }
}
