import { exactMatchReward } from '@flowgrpo/reward';
import { createCalculatorTool, createPythonTool, defineTool, ToolRegistry } from '@flowgrpo/tools';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { z } from 'zod';
import {
  FlowSolver,
  LLMAbortError,
  OpenAIEngine,
  SOLVER_ROLES,
  SolveFailedError,
  type SolverEvent,
} from '../src/index.js';
import { toSerializableTruncated } from '../src/memory/serialize.js';
import { FlowRun, resolveEngines } from '../src/solver/flow-run.js';
import {
  countWords,
  OpenAITestServer,
  promptText,
  type RecordedRequest,
  reply,
  schemaResponder,
} from '../src/testing/index.js';

// The Flow solver against a real OpenAI-compatible HTTP server on 127.0.0.1 whose replies are
// built from the json_schema each request carried (src/testing/solver-responder.ts). Tool results are real:
// the calculator evaluates 12^2 (= 144 by hand) and python3 prints 144*2 (= 288 by hand).

let server: OpenAITestServer;
beforeEach(async () => {
  server = await OpenAITestServer.start();
});
afterEach(async () => {
  await server.close();
});

const engine = (extra: Partial<ConstructorParameters<typeof OpenAIEngine>[0]> = {}) =>
  new OpenAIEngine({
    model: 'test-model',
    baseURL: server.baseURL,
    apiKey: 'k',
    retry: { maxRetries: 1, initialDelayMs: 1, maxDelayMs: 5 },
    timeoutMs: 10_000,
    ...extra,
  });

const PY = 'Python_Code_Generator_Tool';
const tools = () => new ToolRegistry([createCalculatorTool(), createPythonTool()]);

function schemaName(r: RecordedRequest): string {
  return r.body.response_format?.json_schema?.name ?? 'text';
}

describe('FlowSolver.solve', () => {
  it('runs analyze → (plan, execute, verify) × 2 → answer, with real tool results in memory', async () => {
    const responder = schemaResponder({
      tools: ['calculator', PY],
      values: { expression: '12^2', code: 'print(144 * 2)' },
      stopAtVerification: 2,
      answer: 'Process: 12^2 = 144, doubled 288.\nAnswer: 288',
    });
    server.setFallback('chat', reply.text(responder));
    const events: SolverEvent[] = [];
    const solver = new FlowSolver({
      engine: engine(),
      tools: tools(),
      onEvent: (e) => events.push(e),
    });

    const result = await solver.solve('What is 12 squared, doubled?');

    // The request sequence the seed's loop makes (analysis, 2 × (plan, command, verify), answer).
    expect(server.requests.map(schemaName)).toEqual([
      'QueryAnalysis',
      'NextStep',
      'ToolCommand',
      'MemoryVerification',
      'NextStep',
      'ToolCommand',
      'MemoryVerification',
      'text',
    ]);
    const planSchema = server.requests[1]!.body.response_format!.json_schema!.schema as {
      properties: { tool_name: { enum: string[] } };
      required: string[];
    };
    expect(planSchema.properties.tool_name.enum).toEqual(['calculator', PY, 'None']);
    expect(planSchema.required).toEqual(['justification', 'context', 'sub_goal', 'tool_name']);
    const calcSchema = server.requests[2]!.body.response_format!.json_schema!.schema as {
      properties: { arguments: { properties: Record<string, unknown> } };
    };
    expect(Object.keys(calcSchema.properties.arguments.properties)).toEqual(['expression']);

    expect(result.stopReason).toBe('verifier_stop');
    expect(result.answerText).toBe('Process: 12^2 = 144, doubled 288.\nAnswer: 288');
    expect(result.finalAnswer).toBe('288');
    expect(result.analysis?.concise_summary).toBe('concise_summary (scripted)');
    expect(result.steps).toHaveLength(2);
    const [s1, s2] = result.steps;
    expect(s1!.nextStep?.tool_name).toBe('calculator');
    expect(s1!.arguments).toEqual({ expression: '12^2' });
    expect(s1!.result).toMatchObject({ ok: true, output: '144' });
    expect(s1!.verification?.stop_signal).toBe(false);
    expect(s2!.toolName).toBe(PY);
    // The strict schema made the responder send timeout: null; it was dropped before validation.
    expect(s2!.arguments).toEqual({ code: 'print(144 * 2)' });
    expect(s2!.result?.ok).toBe(true);
    expect(s2!.result!.output).toMatchObject({ stdout: '288\n' });
    expect(s2!.verification?.stop_signal).toBe(true);
    expect(result.errors).toEqual([]);

    // Memory has the seed's keys and shape, and later prompts show it.
    expect(result.memory['Action Step 1']).toEqual({
      tool_name: 'calculator',
      sub_goal: 'sub_goal (scripted)',
      command: { expression: '12^2' },
      result: '144',
    });
    expect(result.memory['Action Step 2']?.result).toMatchObject({ stdout: '288\n', exit_code: 0 });
    const secondPlan = promptText(server.requests[4]!.body);
    expect(secondPlan).toContain('"Action Step 1":{"tool_name":"calculator"');
    expect(promptText(server.requests[7]!.body)).toContain('"stdout":"288\\n"');

    // Usage: the server counts whitespace-separated words of prompt and reply per request.
    const promptTotal = server.requests.reduce((s, r) => s + countWords(promptText(r.body)), 0);
    expect(result.usage.total.promptTokens).toBe(promptTotal);
    expect(result.usage.byRole.planner.promptTokens).toBe(
      countWords(promptText(server.requests[1]!.body)) +
        countWords(promptText(server.requests[4]!.body)),
    );
    const byRoleSum = Object.values(result.usage.byRole).reduce((s, u) => s + u.totalTokens, 0);
    expect(byRoleSum).toBe(result.usage.total.totalTokens);
    expect(result.usage.byRole.generator.completionTokens).toBe(
      countWords('Process: 12^2 = 144, doubled 288.\nAnswer: 288'),
    );
    expect(result.timings.total).toBeGreaterThanOrEqual(result.timings.tools);
    expect(result.timings.tools).toBeGreaterThan(0);

    expect(events.map((e) => e.type)).toEqual([
      'start',
      'analysis',
      'plan',
      'command',
      'tool_result',
      'verification',
      'plan',
      'command',
      'tool_result',
      'verification',
      'answer',
      'end',
    ]);
  });

  it('stops planning when the planner chooses None and still writes the answer', async () => {
    server.setFallback(
      'chat',
      reply.text(schemaResponder({ tools: ['None'], answer: 'Answer: 7' })),
    );
    const result = await new FlowSolver({ engine: engine(), tools: tools() }).solve('3 + 4?');
    expect(server.requests.map(schemaName)).toEqual(['QueryAnalysis', 'NextStep', 'text']);
    expect(result.stopReason).toBe('answer');
    expect(result.steps).toEqual([expect.objectContaining({ step: 1, final: true, errors: [] })]);
    expect(result.steps[0]!.result).toBeUndefined();
    expect(result.answerText).toBe('Answer: 7');
    expect(result.finalAnswer).toBe('7');
  });

  it('runs max steps when the verifier never stops', async () => {
    server.setFallback(
      'chat',
      reply.text(
        schemaResponder({ tools: ['calculator', 'calculator'], values: { expression: '1+1' } }),
      ),
    );
    const result = await new FlowSolver({ engine: engine(), tools: tools(), maxSteps: 2 }).solve(
      'q',
    );
    expect(result.stopReason).toBe('max_turns');
    expect(result.steps.map((s) => s.result?.output)).toEqual(['2', '2']);
    expect(Object.keys(result.memory)).toEqual(['Action Step 1', 'Action Step 2']);
  });

  it('records an executor reply that is not JSON as a step error and goes on', async () => {
    const responder = schemaResponder({
      tools: ['calculator', 'calculator'],
      values: { expression: '6*7' },
      stopAtVerification: 2,
    });
    // analysis, plan 1, then the executor's first call and its corrective retry both prose.
    server.enqueue(
      'chat',
      reply.text(responder),
      reply.text(responder),
      reply.text('I would call the calculator with six times seven.'),
      reply.text('Sorry, still no JSON here.'),
    );
    server.setFallback('chat', reply.text(responder));
    const result = await new FlowSolver({ engine: engine(), tools: tools() }).solve('6*7?');
    expect(result.stopReason).toBe('verifier_stop');
    expect(result.steps).toHaveLength(2);
    const [s1, s2] = result.steps;
    expect(s1!.errors).toEqual([
      expect.objectContaining({ role: 'executor', step: 1, code: 'STRUCTURED_OUTPUT_ERROR' }),
    ]);
    expect(s1!.command).toBeUndefined();
    expect(s1!.result?.ok).toBe(false);
    expect(String(result.memory['Action Step 1']?.result)).toMatch(
      /^Error: no valid arguments for calculator: /,
    );
    expect(s2!.result).toMatchObject({ ok: true, output: '42' });
    expect(result.finalAnswer).toBe('42');
  });

  it('survives a 500 mid-run: the planner fails after its retry, the generator still answers', async () => {
    const responder = schemaResponder({ tools: ['calculator'], values: { expression: '2^10' } });
    server.enqueue(
      'chat',
      reply.text(responder), // analysis
      reply.text(responder), // plan 1
      reply.text(responder), // command 1
      reply.text(responder), // verify 1 (continue)
      reply.error(500, 'engine crashed'), // plan 2
      reply.error(500, 'engine crashed'), // plan 2, the one retry
    );
    server.setFallback('chat', reply.text(responder));
    const result = await new FlowSolver({ engine: engine(), tools: tools() }).solve('2^10?');
    expect(result.stopReason).toBe('error');
    expect(result.steps).toHaveLength(2);
    expect(result.steps[0]!.result?.output).toBe('1024');
    expect(result.steps[1]!.errors).toEqual([
      expect.objectContaining({ role: 'planner', step: 2, code: 'LLM_REQUEST_ERROR' }),
    ]);
    expect(result.finalAnswer).toBe('42');
    expect(schemaName(server.requests.at(-1)!)).toBe('text');
  });

  it('retries a malformed HTTP body and carries on as if nothing happened', async () => {
    const responder = schemaResponder({ tools: ['None'] });
    server.enqueue('chat', reply.text(responder), reply.raw('{"choices": [ {"message": '));
    server.setFallback('chat', reply.text(responder));
    const result = await new FlowSolver({ engine: engine(), tools: tools() }).solve('q');
    expect(result.errors).toEqual([]);
    expect(result.stopReason).toBe('answer');
    expect(server.requests.map(schemaName)).toEqual([
      'QueryAnalysis',
      'NextStep',
      'NextStep',
      'text',
    ]);
  });

  it('a tool that runs past its time limit is killed, recorded, and the run goes on', async () => {
    server.setFallback(
      'chat',
      reply.text(
        schemaResponder({
          tools: [PY, 'calculator'],
          values: { code: 'while True:\n    pass', expression: '3*3' },
          stopAtVerification: 2,
        }),
      ),
    );
    const result = await new FlowSolver({
      engine: engine(),
      tools: tools(),
      toolTimeoutMs: 400,
    }).solve('q');
    const [s1, s2] = result.steps;
    expect(s1!.result).toMatchObject({ ok: false, errorCode: 'TOOL_TIMEOUT' });
    expect(s1!.errors).toEqual([expect.objectContaining({ role: 'tools', code: 'TOOL_TIMEOUT' })]);
    // Which of two limits ends it is the machine's timing: the python tool's own (it keeps a
    // reserve of the registry's 400 ms to report the run, and memory gets that report) or the
    // registry's (memory gets its message). Either way memory records a timeout.
    const recorded = result.memory['Action Step 1']?.result;
    if (typeof recorded === 'string') expect(recorded).toMatch(/timed out after 400 ms/);
    else expect(recorded).toMatchObject({ timed_out: true, exit_code: null });
    expect(s2!.result).toMatchObject({ ok: true, output: '9' });
    expect(result.stopReason).toBe('verifier_stop');
  });

  it('with workspace: true, a file the python tool writes in step 1 is there in step 2', async () => {
    // Step 1 writes note.txt; step 2 prints it (python: open(...).read() of "144" → "144").
    const codes = ["open('note.txt', 'w').write(str(12 * 12))", "print(open('note.txt').read())"];
    const responderFor = () => {
      const r = schemaResponder({ tools: [PY, PY], stopAtVerification: 2 });
      let executorCalls = 0;
      return (req: RecordedRequest) => {
        const text = r(req);
        if (schemaName(req) !== 'ToolCommand') return text;
        const value = JSON.parse(text);
        value.arguments.code = codes[executorCalls++];
        return JSON.stringify(value);
      };
    };
    server.setFallback('chat', reply.text(responderFor()));
    const shared = await new FlowSolver({
      engine: engine(),
      tools: tools(),
      workspace: true,
    }).solve('q');
    expect(shared.steps[1]!.result!.output).toMatchObject({ stdout: '144\n', exit_code: 0 });

    // Without it each call has its own directory: the read fails with FileNotFoundError.
    server.setFallback('chat', reply.text(responderFor()));
    const isolated = await new FlowSolver({ engine: engine(), tools: tools() }).solve('q');
    expect(isolated.steps[1]!.result!.output).toMatchObject({
      stderr: expect.stringContaining('FileNotFoundError'),
    });
  });

  it('rejects with SolveFailedError when no LLM call succeeded; throwOnError: false resolves', async () => {
    const port = server.port;
    await server.close(); // nothing listens on the port now: connection refused
    const solver = new FlowSolver({
      engine: new OpenAIEngine({
        model: 'm',
        baseURL: `http://127.0.0.1:${port}/v1`,
        retry: { maxRetries: 0 },
        timeoutMs: 2_000,
      }),
      tools: tools(),
    });
    const failure = await solver.solve('anything').then(
      () => undefined,
      (e: unknown) => e,
    );
    expect(SolveFailedError.isInstance(failure)).toBe(true);
    const e = failure as SolveFailedError;
    expect(e.code).toBe('SOLVE_FAILED');
    // The loop's path with every call failing: analysis, step 1's plan, the final answer.
    expect(e.errors.map((x) => [x.role, x.code])).toEqual([
      ['analyzer', 'LLM_REQUEST_ERROR'],
      ['planner', 'LLM_REQUEST_ERROR'],
      ['generator', 'LLM_REQUEST_ERROR'],
    ]);
    expect(e.byRole('planner')).toEqual([expect.objectContaining({ step: 1 })]);
    expect(e.message).toMatch(
      /^every LLM call of the solve failed \(analyzer, planner, generator\): .*connection refused/,
    );
    expect(e.result.stopReason).toBe('error');

    const partial = await solver.solve('anything', { throwOnError: false });
    expect(partial.finalAnswer).toBe('');
    expect(partial.answerText).toBe('');
    expect(partial.stopReason).toBe('error');
    expect(partial.errors.map((x) => x.role)).toEqual(['analyzer', 'planner', 'generator']);
    server = await OpenAITestServer.start();
  });

  it('resolves when some call succeeded, even though the answer failed', async () => {
    const responder = schemaResponder({ tools: ['None'] });
    server.enqueue(
      'chat',
      reply.text(responder), // analysis
      reply.text(responder), // plan 1: None
      reply.error(500, 'engine crashed'), // the answer
      reply.error(500, 'engine crashed'), // the answer, the one retry
    );
    const result = await new FlowSolver({ engine: engine(), tools: tools() }).solve('q');
    expect(result.stopReason).toBe('error');
    expect(result.finalAnswer).toBe('');
    expect(result.errors.map((x) => [x.role, x.code])).toEqual([
      ['generator', 'LLM_REQUEST_ERROR'],
    ]);
  });

  it('uses each role its own engine, the generator falling back to plannerFixed', async () => {
    const other = await OpenAITestServer.start({ model: 'fixed' });
    try {
      const responder = schemaResponder({ tools: ['None'], answer: 'from fixed' });
      server.setFallback('chat', reply.text(responder));
      other.setFallback('chat', reply.text(responder));
      const fixed = new OpenAIEngine({ model: 'fixed', baseURL: other.baseURL, apiKey: 'k' });
      const result = await new FlowSolver({
        engines: { default: engine(), plannerFixed: fixed },
        tools: tools(),
      }).solve('q');
      expect(other.requests.map(schemaName)).toEqual(['QueryAnalysis', 'text']);
      expect(server.requests.map(schemaName)).toEqual(['NextStep']);
      expect(result.answerText).toBe('from fixed');
    } finally {
      await other.close();
    }
  });
});

describe('FlowSolver.solve with a user-defined tool (defineTool)', () => {
  it('plans, calls and answers from it as from a built-in tool; the parsed answer scores 1 on exact match', async () => {
    const calls: unknown[] = [];
    // An offline table: Oslo's 2020 population is the value it holds (709037), nothing fetched.
    const population = defineTool({
      name: 'population_lookup',
      input: z
        .object({
          city: z.string().min(1).describe('the city name'),
          year: z.number().int().default(2020).describe('census year'),
        })
        .describe('Looks up the population of a city in an offline table.'),
      execute: ({ city, year }) => {
        calls.push({ city, year });
        return { city, year, population: 709037 };
      },
    });
    server.setFallback(
      'chat',
      reply.text(
        schemaResponder({
          tools: ['population_lookup'],
          values: { city: 'Oslo' },
          stopAtVerification: 1,
          answer: 'The table gives 709,037 people for Oslo in 2020.\n**Answer:** 709037',
        }),
      ),
    );
    const result = await new FlowSolver({
      engine: engine(),
      tools: [population, createCalculatorTool()],
    }).solve('How many people lived in Oslo in 2020?');

    // The planner chose among the user's tool and the built-in one, and read the derived metadata.
    const planSchema = server.requests[1]!.body.response_format!.json_schema!.schema as {
      properties: { tool_name: { enum: string[] } };
    };
    expect(planSchema.properties.tool_name.enum).toEqual([
      'population_lookup',
      'calculator',
      'None',
    ]);
    const planPrompt = promptText(server.requests[1]!.body);
    expect(planPrompt).toContain('Looks up the population of a city in an offline table.');
    expect(planPrompt).toContain('"year": "int (default 2020) - census year"');
    // The executor's schema carries the field descriptions from .describe().
    const commandSchema = server.requests[2]!.body.response_format!.json_schema!.schema as {
      properties: { arguments: { properties: Record<string, { description?: string }> } };
    };
    expect(commandSchema.properties.arguments.properties.city?.description).toBe('the city name');

    // The responder sent year: null (optional in strict mode); the default 2020 filled it in.
    expect(calls).toEqual([{ city: 'Oslo', year: 2020 }]);
    const [s1] = result.steps;
    expect(s1!.toolName).toBe('population_lookup');
    expect(s1!.result).toMatchObject({
      ok: true,
      output: { city: 'Oslo', year: 2020, population: 709037 },
    });
    expect(result.memory['Action Step 1']?.tool_name).toBe('population_lookup');
    expect(result.errors).toEqual([]);

    expect(result.answerText).toBe(
      'The table gives 709,037 people for Oslo in 2020.\n**Answer:** 709037',
    );
    expect(result.finalAnswer).toBe('709037');
    const reward = exactMatchReward();
    const input = { question: result.question, groundTruth: '709037' };
    expect((await reward.score({ ...input, finalAnswer: result.finalAnswer })).score).toBe(1);
    // The raw text would not match: that is why finalAnswer is parsed.
    expect((await reward.score({ ...input, finalAnswer: result.answerText })).score).toBe(0);
  });

  it('a built-in alias chosen by the planner runs the tool and is reported by its canonical name', async () => {
    // Through the lenient rollout path a planner may write "python"; the solver's enum does not
    // allow it, so this drives FlowRun.execute the way the rollout does, with a NextStep by hand.
    server.setFallback('chat', reply.text(schemaResponder({ values: { code: 'print(12 * 12)' } })));
    const run = new FlowRun({
      question: 'q',
      engines: resolveEngines({ default: engine() }, SOLVER_ROLES),
      registry: tools(),
      maxSteps: 1,
    });
    const outcome = await run.execute(1, {
      justification: 'j',
      context: 'c',
      sub_goal: 'square 12',
      tool_name: 'python',
    });
    expect(outcome.toolName).toBe(PY);
    expect(outcome.result.output).toMatchObject({ stdout: '144\n' });
    expect(outcome.memoryEntry.tool_name).toBe(PY);
  });
});

describe('FlowSolver.solve: what does reject', () => {
  it("the caller's abort", async () => {
    server.setFallback('chat', reply.text(schemaResponder({ values: { expression: '1+1' } })));
    const ac = new AbortController();
    const solver = new FlowSolver({ engine: engine(), tools: tools() });
    const run = solver.solve('q', {
      signal: ac.signal,
      onEvent: (e) => {
        if (e.type === 'plan') ac.abort(new Error('user pressed ctrl-c'));
      },
    });
    await expect(run).rejects.toSatisfy((e: unknown) => LLMAbortError.isInstance(e));
    // Analysis and plan went out; the executor call was never sent.
    expect(server.requests.map(schemaName)).toEqual(['QueryAnalysis', 'NextStep']);
  });

  it('a listener that throws (not mistaken for a role failure)', async () => {
    server.setFallback('chat', reply.text(schemaResponder({ tools: ['None'] })));
    const solver = new FlowSolver({
      engine: engine(),
      tools: tools(),
      onEvent: (e) => {
        if (e.type === 'analysis') throw new Error('listener bug');
      },
    });
    await expect(solver.solve('q')).rejects.toThrow('listener bug');
    expect(server.requests).toHaveLength(1);
  });
});

describe('toSerializableTruncated (the seed make_json_serializable_truncated rule)', () => {
  it('cuts strings longer than max to max − 3 characters + "..."', () => {
    const long = 'a'.repeat(2500);
    const out = toSerializableTruncated(long) as string;
    expect(out.length).toBe(2000);
    expect(out).toBe(`${'a'.repeat(1997)}...`);
    expect(toSerializableTruncated('a'.repeat(2000))).toBe('a'.repeat(2000));
    expect(toSerializableTruncated('abcdef', 5)).toBe('ab...');
  });

  it('converts containers member by member and other values to text', () => {
    class Point {
      toString() {
        return 'Point(1, 2)';
      }
    }
    expect(
      toSerializableTruncated(
        { a: [1, 'xyzxyz', true, null, undefined], b: new Point(), c: Number.NaN },
        4,
      ),
    ).toEqual({ a: [1, 'x...', true, null, null], b: 'P...', c: 'NaN' });
  });
});
