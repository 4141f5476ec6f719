import { tmpdir } from 'node:os';
import { OpenAITestServer, reply, schemaResponder } from '@flowgrpo/agent/testing';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { runCli } from '../src/main.js';
import { terminalSafe, terminalSafeJson } from '../src/terminal-text.js';
import { captureIO } from './support.js';

// Text a model writes reaches the user's terminal through `flowgrpo solve`: its analysis, plan,
// tool arguments, tool results, verifier notes, the answer and the final-answer line. A model (or
// a page a tool fetched) that writes escape sequences must not get the terminal to obey them:
// OSC 52 would set the user's clipboard, OSC 0 the window title, CSI sequences move the cursor and
// erase lines, CR and backspaces overwrite what was printed, C1 CSI (U+009B) does all that on
// terminals that honour 8-bit controls, and bidi overrides reorder what is shown.

const HOSTILE = [
  '\x1b]52;c;cm0gLXJmIH4=\x07', // OSC 52: clipboard := "rm -rf ~"
  '\x1b]0;pwned\x1b\\', // OSC 0: window title, ST-terminated
  '\x1b[2J\x1b[H', // erase the screen, cursor home
  '\x1b[1A\x1b[2K', // cursor up, erase the line
  '\u009b31m', // C1 CSI: red
  'abc\b\b\bxyz', // backspaces
  'ok\rFAKE', // carriage return
  '\x07', // BEL
  '\u202egnp.exe', // right-to-left override
].join(' | ');

/** Control characters other than \n and \t, as a terminal would act on them. */
// biome-ignore lint/suspicious/noControlCharactersInRegex: finding control characters is the point
const RAW_CONTROL = /[\u0000-\u0008\u000b-\u001f\u007f-\u009f\u202a-\u202e\u2066-\u2069]/;

describe('terminalSafe', () => {
  it('shows every control and escape character escaped, keeps \\n and \\t', () => {
    expect(terminalSafe('a\x1b[31mb\x07\r\b\u009b\u202e\n\tz')).toBe(
      'a\\x1b[31mb\\x07\\r\\b\\x9b\\u202e\n\tz',
    );
    expect(terminalSafe('line\nnext\tcol', { oneLine: true })).toBe('line\\x0anext\\x09col');
    expect(terminalSafe('plain text, ünïcödé, 数学 \\frac{1}{2}')).toBe(
      'plain text, ünïcödé, 数学 \\frac{1}{2}',
    );
  });

  it('terminalSafeJson stays valid JSON that reads back to the same value', () => {
    const value = { text: HOSTILE, n: [1, 2] };
    const json = terminalSafeJson(value, 2);
    expect(json).not.toMatch(RAW_CONTROL);
    expect(JSON.parse(json)).toEqual(value);
  });
});

describe('flowgrpo solve: model text is printed with its escape sequences neutralised', () => {
  let server: OpenAITestServer;
  beforeEach(async () => {
    server = await OpenAITestServer.start({ model: 'qwen' });
  });
  afterEach(async () => {
    await server.close();
  });

  const solve = async (...extra: string[]) => {
    server.setFallback(
      'chat',
      reply.text(
        schemaResponder({
          tools: ['calculator'],
          // Every role's text carries the sequences: analysis, sub-goal, the calculator's
          // expression (the tool's error result quotes it), the verifier, the answer.
          values: {
            concise_summary: `summary ${HOSTILE}`,
            sub_goal: `goal ${HOSTILE}`,
            expression: `12^2 ${HOSTILE}`,
            analysis: `verified ${HOSTILE}`,
          },
          stopAtVerification: 1,
          answer: `Process: ${HOSTILE}\nAnswer: 144 ${HOSTILE}`,
        }),
      ),
    );
    const io = captureIO(tmpdir(), {});
    const code = await runCli(
      [
        'solve',
        'What is 12 squared?',
        '--base-url',
        server.baseURL,
        '--model',
        'qwen',
        '--tools',
        'calculator',
        ...extra,
      ],
      io,
    );
    return { io, code };
  };

  it('the trace, the answer and the final-answer line', async () => {
    const { io, code } = await solve();
    expect(code, io.err).toBe(0);
    // The hostile text was printed (escaped) where each role's output goes.
    for (const where of ['summary: summary ', 'sub-goal: goal ', 'Process: ', 'Final answer: '])
      expect(io.out).toContain(where);
    expect(io.out).toContain('\\x1b]52;c;cm0gLXJmIH4=\\x07');
    expect(io.out).toContain('\\x9b31m');
    expect(io.out).not.toMatch(RAW_CONTROL);
    expect(io.err).not.toMatch(RAW_CONTROL);
  });

  it('--json', async () => {
    const { io, code } = await solve('--json');
    expect(code, io.err).toBe(0);
    expect(io.out).not.toMatch(RAW_CONTROL);
    expect(JSON.parse(io.out).answerText).toContain('\x1b]52;c;');
  });
});
