import { execFile } from 'node:child_process';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { promisify } from 'node:util';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { schemaResponder } from '../../agent-solver/test/solver-responder.js';
import { OpenAITestServer, reply } from '../../agent-solver/test/support/openai-server.js';
import { runCli } from '../src/main.js';
import { captureIO } from './support.js';

// `flowgrpo solve` against the scripted OpenAI-compatible server (agent-solver's test support) on
// 127.0.0.1, answering every structured request from its json_schema. The calculator really
// runs: 12^2 = 144 by hand.

const ROOT = join(dirname(fileURLToPath(import.meta.url)), '../../..');
const run = promisify(execFile);

let server: OpenAITestServer;
beforeEach(async () => {
  server = await OpenAITestServer.start({ model: 'qwen' });
});
afterEach(async () => {
  await server.close();
});

const script = () =>
  schemaResponder({
    tools: ['calculator'],
    values: { expression: '12^2', sub_goal: 'square 12' },
    stopAtVerification: 1,
    answer: 'Process: squared 12.\nAnswer: 144',
  });

/** `flowgrpo solve` in process on the 12² question, the server answering from `script`. */
async function solveSquare(...extra: string[]) {
  server.setFallback('chat', reply.text(script()));
  const io = captureIO(tmpdir());
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
}

describe('flowgrpo solve (in process)', () => {
  it('prints the trace and the final answer', async () => {
    const { io, code } = await solveSquare();
    expect(io.err).toBe('');
    expect(code).toBe(0);
    expect(io.out).toContain('Question: What is 12 squared?\nTools: calculator\n');
    expect(io.out).toContain('summary: concise_summary (scripted)');
    expect(io.out).toContain(
      'Step 1\n  sub-goal: square 12\n  tool: calculator\n  arguments: {"expression":"12^2"}\n  result: 144\n  verifier: STOP',
    );
    expect(io.out).toMatch(
      /Final answer \(stop: verifier_stop, 1 step\(s\), [\d.]+ s, \d+ tokens\)\nProcess: squared 12.\nAnswer: 144\n$/,
    );
    expect(server.requests[0]!.body).toMatchObject({ model: 'qwen', temperature: 0 });
  });

  it('--json prints the SolveResult', async () => {
    const { io, code } = await solveSquare('--json', '--max-steps', '3');
    expect(code).toBe(0);
    const result = JSON.parse(io.out);
    expect(result.answer).toBe('Process: squared 12.\nAnswer: 144');
    expect(result.stopReason).toBe('verifier_stop');
    expect(result.steps[0].result.output).toBe('144');
    expect(result.memory['Action Step 1'].command).toEqual({ expression: '12^2' });
  });

  it('an unreachable server is a one-line error and exit 1', async () => {
    const port = server.port;
    await server.close();
    const io = captureIO(tmpdir());
    const code = await runCli(
      ['solve', 'q', '--base-url', `http://127.0.0.1:${port}/v1`, '--model', 'm', '--retries', '0'],
      io,
    );
    server = await OpenAITestServer.start();
    expect(code).toBe(1);
    expect(io.err).toMatch(/^flowgrpo solve: no answer: .+ \[LLM_REQUEST_ERROR\]\n/);
    expect(io.err).toContain(`is http://127.0.0.1:${port}/v1 serving 'm'?`);
    expect(io.err).not.toMatch(/\n\s+at /);
  });

  it('usage mistakes exit 2', async () => {
    const io = captureIO(tmpdir());
    expect(await runCli(['solve', 'q', '--model', 'm'], io)).toBe(2);
    expect(io.err).toContain('--base-url is required');
    const io2 = captureIO(tmpdir());
    expect(
      await runCli(
        ['solve', 'q', '--base-url', server.baseURL, '--model', 'm', '--tools', 'abacus'],
        io2,
      ),
    ).toBe(2);
    expect(io2.err).toContain("unknown tool 'abacus'");
  });
});

describe('flowgrpo solve (subprocess)', () => {
  const cli = (args: string[]) =>
    run(
      process.execPath,
      [
        '--conditions=@flowgrpo/source',
        '--import',
        'tsx',
        'packages/cli/src/bin.ts',
        'solve',
        ...args,
      ],
      { cwd: ROOT, timeout: 60_000, env: { ...process.env, NO_COLOR: '1' } },
    );

  it('answers through the real bin', async () => {
    server.setFallback('chat', reply.text(script()));
    const { stdout } = await cli([
      'What is 12 squared?',
      '--base-url',
      server.baseURL,
      '--model',
      'qwen',
      '--tools',
      'calculator,python',
    ]);
    expect(stdout).toContain('Tools: calculator, Python_Code_Generator_Tool');
    expect(stdout).toContain('  result: 144\n');
    expect(stdout).toMatch(/\nProcess: squared 12.\nAnswer: 144\n$/);
  });

  it('bad replies: exit code 1 and a message, no stack trace', async () => {
    server.setFallback('chat', reply.raw('<html>502 Bad Gateway</html>', 'text/html', 502));
    const failure = await cli([
      'q',
      '--base-url',
      server.baseURL,
      '--model',
      'qwen',
      '--retries',
      '0',
    ]).then(
      () => undefined,
      (e: { code: number; stderr: string }) => e,
    );
    expect(failure?.code).toBe(1);
    expect(failure?.stderr).toMatch(/^flowgrpo solve: no answer: .*502/);
    expect(failure?.stderr).not.toMatch(/\n\s+at /);
  });
});
