// Text that came from a model, a tool, a server or a data file, made safe to write to a terminal.
// Such text can hold escape sequences that a terminal obeys rather than shows: OSC 52 writes the
// user's clipboard, OSC 0 sets the window title, CSI sequences move the cursor and erase what was
// printed, a carriage return or backspaces overwrite a line, BEL rings. Every control character is
// shown escaped instead (ESC as `\x1b`, so the rest of the sequence is inert text), and so are the
// bidirectional overrides that reorder what is displayed. Newlines and tabs are kept where the
// layout needs them.

/** C0 controls, DEL, C1 controls, line/paragraph separators, bidi embeddings/overrides/isolates. */
// biome-ignore lint/suspicious/noControlCharactersInRegex: finding control characters is the point
const UNSAFE = /[\u0000-\u001f\u007f-\u009f\u2028\u2029\u202a-\u202e\u2066-\u2069]/g;

/** What JSON.stringify leaves unescaped of UNSAFE: everything but the C0 controls. */
const UNSAFE_AFTER_JSON = /[\u007f-\u009f\u2028\u2029\u202a-\u202e\u2066-\u2069]/g;

function escaped(ch: string): string {
  const cp = ch.codePointAt(0)!;
  if (ch === '\r') return '\\r';
  if (ch === '\b') return '\\b';
  return cp <= 0xff
    ? `\\x${cp.toString(16).padStart(2, '0')}`
    : `\\u${cp.toString(16).padStart(4, '0')}`;
}

/**
 * `text` with control and escape sequences shown escaped. `\n` and `\t` are kept unless
 * `oneLine` is set (then they are escaped too, for text printed inside a single line).
 */
export function terminalSafe(text: string, o: { oneLine?: boolean } = {}): string {
  return text.replace(UNSAFE, (ch) =>
    !o.oneLine && (ch === '\n' || ch === '\t') ? ch : escaped(ch),
  );
}

/**
 * `JSON.stringify(value, null, space)` safe for a terminal and still valid JSON: stringify escapes
 * C0 controls itself; DEL, C1 controls, the line separators and bidi overrides become `\uXXXX`.
 */
export function terminalSafeJson(value: unknown, space?: number): string {
  // Any C0 character left after stringify is its own layout (the newlines of `space`).
  return JSON.stringify(value, null, space).replace(
    UNSAFE_AFTER_JSON,
    (ch) => `\\u${ch.codePointAt(0)!.toString(16).padStart(4, '0')}`,
  );
}
