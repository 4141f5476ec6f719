import { execFile } from 'node:child_process';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { promisify } from 'node:util';
import { OpenAITestServer, reply, schemaResponder } from '@flowgrpo/agent/testing';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { runCli } from '../src/main.js';
import { captureIO } from './support.js';

// `flowgrpo solve` against the scripted OpenAI-compatible server (@flowgrpo/agent/testing) on
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
  it('an answer made after the planning calls failed is printed, but exits 1 with the cause', async () => {
    // Every structured call (analyzer, planner, verifier) is refused; the plain final-answer
    // call works: the run stops with 'error' and still answers — no success.
    server.setFallback(
      'chat',
      reply.dynamic((r) =>
        r.body.response_format?.json_schema
          ? reply.error(400, 'schema not supported')
          : reply.text('Answer: 144'),
      ),
    );
    const io = captureIO(tmpdir());
    const argv = ['solve', 'What is 12 squared?', '--base-url', server.baseURL, '--model', 'qwen'];
    const code = await runCli([...argv, '--tools', 'calculator'], io);
    expect(io.out).toContain('144');
    expect(io.err).toMatch(/^\[LLM_REQUEST_ERROR\] the run stopped early \(\w+\): /m);
    expect(io.err).toContain('fix: ');
    expect(code).toBe(1);
  });

  it('prints the trace and the final answer', async () => {
    const { io, code } = await solveSquare();
    expect(io.err).toBe('');
    expect(code).toBe(0);
    expect(io.out).toContain('Question: What is 12 squared?\nTools: calculator\n');
    expect(io.out).toContain('summary: concise_summary (scripted)');
    expect(io.out).toContain(
      'Step 1\n  sub-goal: square 12\n  tool: calculator\n  arguments: {"expression":"12^2"}\n  result: 144\n  verifier: STOP',
    );
    // The generator's reply, then the parsed answer alone on the last line.
    expect(io.out).toMatch(
      /\nAnswer \(stop: verifier_stop, 1 step\(s\), [\d.]+ s, \d+ tokens\)\nProcess: squared 12.\nAnswer: 144\n\nFinal answer: 144\n$/,
    );
    expect(server.requests[0]!.body).toMatchObject({ model: 'qwen', temperature: 0 });
  });

  it('--json prints the SolveResult', async () => {
    const { io, code } = await solveSquare('--json', '--max-steps', '3');
    expect(code).toBe(0);
    const result = JSON.parse(io.out);
    expect(result.answerText).toBe('Process: squared 12.\nAnswer: 144');
    expect(result.finalAnswer).toBe('144');
    expect(result.stopReason).toBe('verifier_stop');
    expect(result.steps[0].result.output).toBe('144');
    expect(result.memory['Action Step 1'].command).toEqual({ expression: '12^2' });
  });

  it('an unreachable server is one error line and exit 1 (default retries: refused is not retried)', async () => {
    const port = server.port;
    await server.close(); // nothing listens on the port now
    const io = captureIO(tmpdir());
    const code = await runCli(
      ['solve', 'q', '--base-url', `http://127.0.0.1:${port}/v1`, '--model', 'm'],
      io,
    );
    server = await OpenAITestServer.start();
    expect(code).toBe(1);
    expect(io.err).toBe(
      '[LLM_REQUEST_ERROR] every model call failed: ' +
        `chat completion (m) failed (http://127.0.0.1:${port}/v1) after 1 attempt(s): ` +
        'connection refused (ECONNREFUSED): nothing is listening at that address\n' +
        `fix: check that http://127.0.0.1:${port}/v1 is running and serves 'm' (--base-url, --model)\n`,
    );
    expect(io.out).not.toContain('Final answer');
  });

  it('when only the answer fails, says "no answer" and exits 1', async () => {
    const responder = script();
    server.enqueue(
      'chat',
      reply.text(responder), // analysis
      reply.text(responder), // plan
      reply.text(responder), // command
      reply.text(responder), // verification: stop
      reply.error(500, 'engine crashed'), // the answer
    );
    const io = captureIO(tmpdir());
    const code = await runCli(
      [
        'solve',
        'q',
        '--base-url',
        server.baseURL,
        '--model',
        'qwen',
        '--tools',
        'calculator',
        '--retries',
        '0',
      ],
      io,
    );
    expect(code).toBe(1);
    expect(io.err).toMatch(/^\[LLM_REQUEST_ERROR\] no answer: .*HTTP 500.*\nfix: .+\n$/);
  });

  it('--tools takes the short or the full names; traces show the full (canonical) one', async () => {
    server.setFallback(
      'chat',
      reply.text(
        schemaResponder({
          tools: ['Python_Code_Generator_Tool'],
          values: { code: 'print(12 * 12)' },
          stopAtVerification: 1,
          answer: 'Answer: 144',
        }),
      ),
    );
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
        'Python,python_code_generator_tool,CALCULATOR',
        '--json',
      ],
      io,
    );
    expect(io.err).toBe('');
    expect(code).toBe(0);
    const result = JSON.parse(io.out);
    // One python tool (the alias and the full name are the same tool), shown by its full name.
    const planSchema = server.requests[1]!.body.response_format!.json_schema!.schema as {
      properties: { tool_name: { enum: string[] } };
    };
    expect(planSchema.properties.tool_name.enum).toEqual([
      'Python_Code_Generator_Tool',
      'calculator',
      'None',
    ]);
    expect(result.steps[0].toolName).toBe('Python_Code_Generator_Tool');
    expect(result.memory['Action Step 1'].tool_name).toBe('Python_Code_Generator_Tool');
    expect(result.steps[0].result.output.stdout).toBe('144\n');
    expect(result.finalAnswer).toBe('144');
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
    expect(io2.err).toContain(
      "unknown tool 'abacus' (known: python = Python_Code_Generator_Tool, calculator,",
    );
    const help = captureIO(tmpdir());
    expect(await runCli(['solve', '--help'], help)).toBe(0);
    expect(help.out).toMatch(/python\s+Python_Code_Generator_Tool\n/);
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
    expect(stdout).toMatch(/\nProcess: squared 12.\nAnswer: 144\n\nFinal answer: 144\n$/);
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
    // Every call got the 502: one line, no stack trace.
    expect(failure?.stderr).toMatch(
      /^\[LLM_REQUEST_ERROR\] every model call failed: .*HTTP 502.*\nfix: check that http:\/\/127\.0\.0\.1:\d+\/v1 is running and serves 'qwen' .*\n$/,
    );
  });
});
