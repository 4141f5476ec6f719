import { TrajectorySchema, trajectoriesFromIPC, trajectoriesToIPC } from '@flowgrpo/core';
import { createCalculatorTool, defineTool, ToolRegistry } from '@flowgrpo/tools';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { z } from 'zod';
import {
  FlowRollout,
  OpenAIEngine,
  OpenAIPolicyEngine,
  type RolloutAgent,
  rolloutGroup,
  type SolverEvent,
} from '../src/index.js';
import { compactPlannerPrompt } from '../src/solver/prompts.js';
import {
  gate,
  OpenAITestServer,
  type RecordedRequest,
  reply,
  schemaResponder,
} from '../src/testing/index.js';

// Flow rollouts with a policy server (vLLM-like: token ids + logprobs, test/support) as the
// planner and a second server answering the fixed roles from their json_schemas. Expected ids
// and logprobs are the scripted ones (logprobs rounded to float32); tool results are real
// calculator runs (12^2 = 144 by hand).

let policyServer: OpenAITestServer;
let fixedServer: OpenAITestServer;
beforeEach(async () => {
  policyServer = await OpenAITestServer.start({ model: 'planner' });
  fixedServer = await OpenAITestServer.start({ model: 'fixed' });
});
afterEach(async () => {
  await Promise.all([policyServer.close(), fixedServer.close()]);
});

const policy = () =>
  new OpenAIPolicyEngine({
    model: 'planner',
    baseURLs: policyServer.baseURL,
    retry: { maxRetries: 1, initialDelayMs: 1, maxDelayMs: 5 },
    timeoutMs: 10_000,
  });
const fixed = () =>
  new OpenAIEngine({
    model: 'fixed',
    baseURL: fixedServer.baseURL,
    apiKey: 'k',
    retry: { maxRetries: 0 },
    timeoutMs: 10_000,
  });
const tools = () => new ToolRegistry([createCalculatorTool()]);

const plan = (tool: string, context = 'use 12', subGoal = 'compute 12 squared') =>
  JSON.stringify({ justification: 'j', context, sub_goal: subGoal, tool_name: tool });

function schemaName(r: RecordedRequest): string {
  return r.body.response_format?.json_schema?.name ?? 'text';
}

describe('FlowRollout.run', () => {
  it('records each planner call as a Turn; an unparseable reply is a parsed:false turn that ends with an answer attempt', async () => {
    policyServer.enqueue(
      'chat',
      reply.tokens(plan('calculator'), {
        ids: [101, 102, 103],
        logprobs: [-0.5, -0.25, -0.125],
        promptIds: [1, 2, 3, 4],
      }),
      reply.tokens('I think it is 144, no JSON today', {
        ids: [201, 202],
        logprobs: [-1.1, -2.2],
        promptIds: [1, 2, 3, 4, 5, 6],
      }),
    );
    fixedServer.setFallback(
      'chat',
      reply.text(schemaResponder({ values: { expression: '12^2' }, answer: 'Answer: 144' })),
    );
    const events: SolverEvent[] = [];
    const rollout = new FlowRollout({
      policy: policy(),
      engine: fixed(),
      tools: tools(),
      onEvent: (e) => events.push(e),
    });
    const t = await rollout.run('What is 12 squared?', {
      queryId: 'q1',
      groupId: 'g1',
      groundTruth: '144',
    });

    expect(TrajectorySchema.parse(t)).toBeTruthy();
    expect(t).toMatchObject({
      queryId: 'q1',
      groupId: 'g1',
      question: 'What is 12 squared?',
      groundTruth: '144',
      // The generator wrote "Answer: 144"; the trajectory's answer is the parsed "144".
      finalAnswer: '144',
      stopReason: 'parse_error',
    });
    expect(t.metadata?.answerText).toBe('Answer: 144');
    expect(t.turns).toHaveLength(2);
    const [t0, t1] = t.turns!;
    expect(t0!.promptTokens).toEqual(Int32Array.from([1, 2, 3, 4]));
    expect(t0!.actionTokens).toEqual(Int32Array.from([101, 102, 103]));
    expect(t0!.actionLogprobs).toEqual(Float32Array.from([-0.5, -0.25, -0.125]));
    expect(t0).toMatchObject({
      index: 0,
      parsed: true,
      text: plan('calculator'),
      toolName: 'calculator',
      toolInput: { expression: '12^2' },
      toolResult: '144',
    });
    expect(t1).toMatchObject({ index: 1, parsed: false, text: 'I think it is 144, no JSON today' });
    expect(t1!.toolName).toBeUndefined();
    expect(t1!.actionLogprobs).toEqual(Float32Array.from([-1.1, -2.2]));
    // The second planner prompt shows the first step's real result.
    const secondPrompt = policyServer.requests[1]!.body.messages!.map((m) => m.content).join('\n');
    expect(secondPrompt).toContain('"Action Step 1":{"tool_name":"calculator"');
    expect(secondPrompt).toContain('"result":"144"');
    expect(t1!.promptText).toContain('"result":"144"');
    // Sampling as the seed's rollouts, logprobs requested.
    expect(policyServer.requests[0]!.body).toMatchObject({
      max_tokens: 512,
      temperature: 0.7,
      top_p: 0.9,
      logprobs: true,
    });
    // Fixed roles: command + verify for turn 1, then the final-answer attempt.
    expect(fixedServer.requests.map(schemaName)).toEqual([
      'ToolCommand',
      'MemoryVerification',
      'text',
    ]);
    const errors = (t.metadata as { errors: Array<{ role: string; code: string }> }).errors;
    expect(errors).toEqual([
      expect.objectContaining({ role: 'planner', step: 2, code: 'PLANNER_PARSE_ERROR' }),
    ]);
    expect(events.filter((e) => e.type === 'turn')).toHaveLength(2);
    expect(t.timings.planner).toBeGreaterThan(0);
  });

  it("ends with the policy's own answer when it plans 'Final Answer' with the answer in context", async () => {
    policyServer.enqueue(
      'chat',
      reply.tokens(plan('None', '144', 'Final Answer'), {
        ids: [7],
        logprobs: [-0.5],
        promptIds: [9],
      }),
    );
    const t = await new FlowRollout({ policy: policy(), engine: fixed(), tools: tools() }).run('q');
    expect(t.stopReason).toBe('answer');
    expect(t.finalAnswer).toBe('144');
    expect(t.turns).toHaveLength(1);
    expect(t.turns![0]!.parsed).toBe(true);
    expect(fixedServer.requests).toHaveLength(0);
  });

  it('stops on the verifier and generates the answer; a tool name outside the toolbox is a failed step', async () => {
    policyServer.enqueue(
      'chat',
      reply.tokens(plan('Wikipedia_Search'), { ids: [1], logprobs: [-1], promptIds: [5] }),
      reply.tokens(plan('calculator'), { ids: [2], logprobs: [-1], promptIds: [5] }),
    );
    fixedServer.setFallback(
      'chat',
      reply.text(
        schemaResponder({
          values: { expression: '12^2' },
          stopAtVerification: 2,
          answer: 'A: 144',
        }),
      ),
    );
    const t = await new FlowRollout({ policy: policy(), engine: fixed(), tools: tools() }).run('q');
    expect(t.stopReason).toBe('verifier_stop');
    expect(t.finalAnswer).toBe('A: 144');
    expect(t.turns!.map((x) => [x.toolName, x.toolResult])).toEqual([
      ['Wikipedia_Search', "Error: Tool 'Wikipedia_Search' not found. Available tools: calculator"],
      ['calculator', '144'],
    ]);
    expect(fixedServer.requests.map(schemaName)).toEqual([
      'MemoryVerification',
      'ToolCommand',
      'MemoryVerification',
      'text',
    ]);
  });

  it('with analyzeQuery, the fixed analyzer runs first and the policy prompt shows its analysis', async () => {
    policyServer.enqueue(
      'chat',
      reply.tokens(plan('None', '5', 'Final Answer'), { ids: [1], logprobs: [-1], promptIds: [2] }),
    );
    fixedServer.setFallback(
      'chat',
      reply.text(schemaResponder({ values: { concise_summary: 'add two and three' } })),
    );
    const t = await new FlowRollout({
      policy: policy(),
      engine: fixed(),
      tools: tools(),
      analyzeQuery: true,
    }).run('2+3?');
    expect(fixedServer.requests.map(schemaName)).toEqual(['QueryAnalysis']);
    const prompt = policyServer.requests[0]!.body.messages!.map((m) => m.content).join('\n');
    expect(prompt).toContain('Summary: add two and three');
    expect(t.finalAnswer).toBe('5');
    expect(t.timings.analyzer).toBeGreaterThan(0);
  });

  it('a text planner prompt (compactPlannerPrompt) goes to /v1/completions as a raw prompt', async () => {
    policyServer.enqueue(
      'completions',
      reply.tokens(plan('calculator'), { ids: [5, 6], logprobs: [-0.5, -0.5], promptIds: [1, 2] }),
      reply.tokens(plan('None', '144', 'Final Answer'), {
        ids: [7],
        logprobs: [-0.5],
        promptIds: [1],
      }),
    );
    fixedServer.setFallback(
      'chat',
      reply.text(schemaResponder({ values: { expression: '12^2' } })),
    );
    const t = await new FlowRollout({
      policy: policy(),
      engine: fixed(),
      tools: tools(),
      plannerPrompt: compactPlannerPrompt,
    }).run('What is 12 squared?');
    expect(policyServer.requestsTo('chat')).toHaveLength(0);
    const prompts = policyServer.requestsTo('completions').map((r) => r.body.prompt as string);
    expect(prompts[0]).toBe(
      [
        'Task: choose the next step to answer the query, as one JSON object with the keys',
        'justification, context, sub_goal, tool_name (one of ["calculator","None"]; "None" with sub_goal "Final Answer" and the answer in context to finish).',
        'Query: What is 12 squared?',
        'Previous steps: {}',
        'Step 1 of 5.',
        'Response:',
      ].join('\n'),
    );
    expect(prompts[1]).toContain(
      'Previous steps: {"Action Step 1":{"tool_name":"calculator","sub_goal":"compute 12 squared","command":{"expression":"12^2"},"result":"144"}}',
    );
    expect(t.turns![1]!.promptText).toBe(prompts[1]);
    expect(t.finalAnswer).toBe('144');
  });

  it("runs a user's defineTool tool like a built-in one; the policy's own answer is parsed too", async () => {
    const seen: unknown[] = [];
    const square = defineTool({
      name: 'square',
      input: z.object({ n: z.number().describe('the number to square') }).describe('Squares n.'),
      execute: ({ n }) => {
        seen.push(n);
        return String(n * n);
      },
    });
    policyServer.enqueue(
      'chat',
      reply.tokens(plan('square'), { ids: [1], logprobs: [-1], promptIds: [5] }),
      reply.tokens(plan('None', 'The answer is 144.', 'Final Answer'), {
        ids: [2],
        logprobs: [-1],
        promptIds: [5],
      }),
    );
    fixedServer.setFallback('chat', reply.text(schemaResponder({ values: { n: 12 } })));
    const t = await new FlowRollout({ policy: policy(), engine: fixed(), tools: [square] }).run(
      'What is 12 squared?',
    );
    // 12 squared = 144, computed by the tool's execute.
    expect(seen).toEqual([12]);
    expect(t.turns!.map((x) => [x.toolName, x.toolResult])).toEqual([
      ['square', '144'],
      [undefined, undefined],
    ]);
    const prompt = policyServer.requests[0]!.body.messages!.map((m) => m.content).join('\n');
    expect(prompt).toContain('"n": "float - the number to square"');
    expect(t.stopReason).toBe('answer');
    expect(t.finalAnswer).toBe('144');
    expect(t.metadata?.answerText).toBe('The answer is 144.');
  });

  it('records a policy server failure as stopReason error instead of throwing', async () => {
    policyServer.setFallback('chat', reply.error(500, 'down'));
    const t = await new FlowRollout({ policy: policy(), engine: fixed(), tools: tools() }).run('q');
    expect(t.stopReason).toBe('error');
    expect(t.turns).toEqual([]);
    expect(t.finalAnswer).toBe('');
    expect(policyServer.requests).toHaveLength(2); // first attempt + one retry
  });
});

describe('rolloutGroup', () => {
  it('runs G rollouts with at most `concurrency` at once and returns them in index order', async () => {
    // The policy's replies are held until two rollouts are waiting on it at once, so the
    // overlap is certain rather than hoped for from a delay.
    const two = gate();
    policyServer.setFallback(
      'chat',
      reply.dynamic(() => {
        if (policyServer.inFlight >= 2) two.open();
        return reply.tokens(
          plan('None', 'done', 'Final Answer'),
          { ids: [1, 2], logprobs: [-0.5, -0.5], promptIds: [3] },
          { waitFor: two.promise },
        );
      }),
    );
    // The agent is counted as it starts and ends each rollout: a third rollout started past the
    // limit would be counted at once, before any reply.
    const inner = new FlowRollout({ policy: policy(), engine: fixed(), tools: tools() });
    let running = 0;
    let maxRunning = 0;
    const agent: RolloutAgent = {
      async run(question, context) {
        maxRunning = Math.max(maxRunning, ++running);
        try {
          return await inner.run(question, context);
        } finally {
          running--;
        }
      },
    };
    const group = await rolloutGroup('q', 5, {
      agent,
      concurrency: 2,
      queryId: 'query-7',
      seed: 10,
    });
    expect(group.queryId).toBe('query-7');
    expect(group.trajectories).toHaveLength(5);
    expect(maxRunning).toBe(2);
    expect(policyServer.maxInFlight).toBe(2);
    for (const [i, t] of group.trajectories.entries()) {
      expect(t.groupId).toBe(group.groupId);
      expect(t.queryId).toBe('query-7');
      expect((t.metadata as { index: number }).index).toBe(i);
      expect(t.finalAnswer).toBe('done');
    }
    // Rollout i samples with seed (10 + i) * 1000 + turn.
    const seeds = policyServer.requests
      .map((r) => r.body.seed)
      .sort((a, b) => Number(a) - Number(b));
    expect(seeds).toEqual([10001, 11001, 12001, 13001, 14001]);
    // The group stores as core's one-row-per-turn Arrow layout and reads back the same turns.
    const back = trajectoriesFromIPC(trajectoriesToIPC(group.trajectories));
    expect(
      back.map((t) => [t.finalAnswer, t.stopReason, Array.from(t.turns![0]!.actionTokens)]),
    ).toEqual(group.trajectories.map(() => ['done', 'answer', [1, 2]]));
  });
});
