// GRPOTrainer trains an agent program that only knows an OpenAI-compatible base URL: the
// program is a plain fetch-based tool-using loop (the examples do the same with openai-agents-js
// and the Vercel AI SDK). Checked: the trainer's recomputed logprobs of every recorded call equal
// the gateway's (logprob_mismatch/max ≤ 1e-4: the sampled tokens are trained, not re-tokenized
// text), posted rewards reach the trainer, rollouts are the trainer's Trajectory. Then the real
// Qwen tokenizer and chat template (native tools) on a tiny Qwen2 with Qwen's vocabulary.
import { copyFileSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { readTrajectoriesParquet } from '@flowgrpo/core';
import {
  type AgentProgram,
  chainCalls,
  createPolicyGateway,
  EnginePolicyHost,
  gatewayAgent,
  gatewayReward,
  LocalPolicyHost,
  type PolicyGateway,
} from '@flowgrpo/gateway';
import { createTinyQwen2, HfTokenizer, type TinyModel } from '@flowgrpo/models';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { sharedPath, skipWithoutShared } from '../../../test-utils/shared.js';
import {
  GATEWAY_LORA,
  ScriptedEngine,
  tinyGatewayModel,
} from '../../gateway/test/support/gateway-fixtures.js';
import { createAlmanac, lookupAlmanac, makeQuestions, questionRows } from '../src/demo/index.js';
import { TRAINING_GRAPH_BUILDERS } from '../src/graphs/training-artifacts.js';
import { buildTrainingArtifacts, GRPOTrainer } from '../src/index.js';

const root = mkdtempSync(join(tmpdir(), 'flowgrpo-gateway-train-'));
afterAll(() => rmSync(root, { recursive: true, force: true }));

const almanac = createAlmanac({ seed: 'gw', trainLandmarks: 20, testLandmarks: 10 });
const TOOLS = [
  {
    type: 'function',
    function: {
      name: 'almanac',
      description:
        'Looks up a fact: "year of <landmark>", "town of <landmark>" or "event in <year>".',
      parameters: {
        type: 'object',
        properties: { query: { type: 'string' } },
        required: ['query'],
      },
    },
  },
];

/** A tool-using agent loop over raw HTTP: what any OpenAI-compatible agent does. */
const program: AgentProgram = async ({ baseURL, model, question, rolloutId }) => {
  const messages: object[] = [
    { role: 'system', content: 'Answer with the almanac tool.' },
    { role: 'user', content: question },
  ];
  let answer = '';
  for (let turn = 0; turn < 2; turn++) {
    const res = await fetch(`${baseURL}/chat/completions`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ model, messages, tools: TOOLS, max_tokens: 12 }),
    });
    if (!res.ok) throw new Error(`HTTP ${res.status}: ${await res.text()}`);
    const r = (await res.json()) as {
      choices: {
        message: {
          content: string | null;
          tool_calls?: { id: string; function: { arguments: string } }[];
        };
      }[];
    };
    const msg = r.choices[0]!.message;
    messages.push(msg);
    if (!msg.tool_calls?.length) {
      answer = msg.content ?? '';
      break;
    }
    for (const call of msg.tool_calls) {
      let result: string;
      try {
        result = lookupAlmanac(almanac, JSON.parse(call.function.arguments).query) ?? 'no entry';
      } catch {
        result = 'bad arguments';
      }
      messages.push({ role: 'tool', tool_call_id: call.id, content: result });
    }
  }
  // The program scores itself and posts the reward (the share of letters in its answer: a
  // reward with variance for an untrained model).
  const letters = [...answer].filter((c) => /[a-z]/i.test(c)).length;
  const reward = answer.length === 0 ? 0 : letters / answer.length;
  await fetch(`${baseURL}/rollouts/${rolloutId}/reward`, {
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body: JSON.stringify({ reward }),
  });
  return answer;
};

describe('GRPOTrainer through the gateway (tiny byte-level model, CPU)', () => {
  let gw: PolicyGateway;
  let model: TinyModel;
  let artifacts: string;
  beforeAll(async () => {
    ({ model, artifacts } = await tinyGatewayModel(root, TRAINING_GRAPH_BUILDERS));
    gw = await createPolicyGateway({
      host: new EnginePolicyHost({ tokenizer: model.tokenizer, engines: {}, maxContext: 1024 }),
    });
  }, 120_000);
  afterAll(() => gw?.close());

  it('trains on the recorded calls token-exactly, with the rewards the program posted', async () => {
    const logs: Record<string, unknown>[] = [];
    const out = join(root, 'run');
    const result = await new GRPOTrainer({
      config: {
        output_dir: out,
        max_steps: 2,
        num_generations: 4,
        queries_per_step: 2,
        learning_rate: 5e-3,
        temperature: 1,
        beta: 0.04,
        lora: {
          r: GATEWAY_LORA.r,
          lora_alpha: GATEWAY_LORA.alpha,
          target_modules: [...GATEWAY_LORA.targetModules],
        },
        seed: 3,
      },
      artifacts,
      tokenizer: model.tokenizer,
      agent: gatewayAgent({ gateway: gw, program, model: 'policy', temperature: 1 }),
      reward: gatewayReward(),
      trainDataset: questionRows(makeQuestions(almanac, 'train', 8, 'gw')),
      onLog: (r) => logs.push(r),
    }).train();
    expect(result.globalStep).toBe(2);
    const steps = logs.filter((m) => typeof m.reward === 'number');
    expect(steps).toHaveLength(2);
    for (const m of steps) {
      // Every recorded call's sampled logprobs equal the trainer's recomputation: the policy
      // that generated and the one that trains are the same model, to float rounding.
      expect(m['logprob_mismatch/max'] as number).toBeLessThanOrEqual(1e-4);
      expect(m['train/tokens'] as number).toBeGreaterThan(0);
      expect(Number.isFinite(m.loss as number)).toBe(true);
    }
    const trajectories = await readTrajectoriesParquet(
      join(out, 'rollouts', 'step-000001.parquet'),
    );
    expect(trajectories).toHaveLength(8);
    for (const t of trajectories) {
      const calls = t.metadata?.calls as { model: string; completion_tokens: number }[];
      expect(calls.length).toBeGreaterThanOrEqual(1);
      expect(calls.every((c) => c.model === 'policy')).toBe(true);
      const trained = t.segments
        ? t.segments.filter((s) => s.trainable).reduce((n, s) => n + s.tokens.length, 0)
        : (t.turns ?? []).reduce((n, u) => n + u.actionTokens.length, 0);
      expect(trained).toBe(calls.reduce((n, c) => n + c.completion_tokens, 0));
      // The posted reward is the trajectory's reward (it differs per rollout: advantages ≠ 0).
      expect(t.reward).toBeGreaterThanOrEqual(0);
    }
    expect(new Set(trajectories.map((t) => t.reward)).size).toBeGreaterThan(1);
    // Nothing is left behind in the recorder once the rollouts are trajectories.
    expect(gw.recorder.ids()).toEqual([]);
  });
});

const skip = skipWithoutShared('the gateway with the real Qwen tokenizer and chat template');

describe.skipIf(skip)('the real Qwen chat template (native tools) on a tiny Qwen2', () => {
  let tokenizer: HfTokenizer;
  let host: LocalPolicyHost;
  beforeAll(async () => {
    const dir = join(root, 'qwen-tiny');
    const m = await createTinyQwen2(dir, {
      seed: 'gw-qwen',
      hiddenSize: 16,
      layers: 1,
      heads: 2,
      kvHeads: 1,
      intermediateSize: 32,
      vocabSize: 151_936,
    });
    for (const f of ['tokenizer.json', 'tokenizer_config.json'])
      copyFileSync(sharedPath('models', 'qwen3-tokenizer', f), join(dir, f));
    const config = JSON.parse(readFileSync(join(dir, 'config.json'), 'utf8'));
    writeFileSync(join(dir, 'config.json'), JSON.stringify({ ...config, eos_token_id: 151645 }));
    tokenizer = await HfTokenizer.fromDir(dir);
    buildTrainingArtifacts(m.weights, join(dir, 'artifacts'), {
      graphs: ['decode'],
      maxPositions: 1024,
    });
    host = await LocalPolicyHost.open({
      artifacts: join(dir, 'artifacts'),
      tokenizer,
      baseModel: 'qwen-tiny',
    });
  }, 120_000);
  afterAll(() => host?.close());

  it('with thinking left on, a tool call and its result continue the first call token for token', async () => {
    const engine = new ScriptedEngine(tokenizer, [
      '<think>\nI need the year.\n</think>\n\n<tool_call>\n{"name": "almanac", "arguments": {"query": "year of X"}}\n</tool_call>',
      'It was built in 1850.',
    ]);
    const g = await createPolicyGateway({
      host: new EnginePolicyHost({ tokenizer, engines: { policy: engine } }),
    });
    try {
      const send = (messages: object[]) =>
        fetch(`${g.rolloutBaseURL('think')}/chat/completions`, {
          method: 'POST',
          headers: { 'content-type': 'application/json' },
          body: JSON.stringify({ model: 'policy', messages, tools: TOOLS }),
        }).then(
          (r) =>
            r.json() as Promise<{
              choices: { message: { content: string | null; tool_calls?: { id: string }[] } }[];
            }>,
        );
      const m1 = [{ role: 'user', content: 'When was X built?' }];
      const msg = (await send(m1)).choices[0]!.message;
      // The reasoning stays in the content the agent keeps (as vLLM without a reasoning parser).
      expect(msg.content).toBe('<think>\nI need the year.\n</think>\n');
      await send([
        ...m1,
        msg,
        { role: 'tool', tool_call_id: msg.tool_calls![0]!.id, content: '1850' },
      ]);
      // After the last user query Qwen3's template keeps the reasoning: one chain of two calls.
      expect(chainCalls(g.recorder.get('think')!.calls).map((c) => c.calls.length)).toEqual([2]);
    } finally {
      await g.close();
    }
  });

  it('renders tools with the template and parses <tool_call> back (enable_thinking: false)', async () => {
    const engine = new ScriptedEngine(tokenizer, [
      '<tool_call>\n{"name": "almanac", "arguments": {"query": "year of X"}}\n</tool_call>',
      'It was built in 1850.',
    ]);
    const g = await createPolicyGateway({
      host: new EnginePolicyHost({ tokenizer, engines: { policy: engine } }),
      chatTemplateVariables: { enable_thinking: false },
    });
    try {
      const send = (messages: object[]) =>
        fetch(`${g.rolloutBaseURL('qwen')}/chat/completions`, {
          method: 'POST',
          headers: { 'content-type': 'application/json' },
          body: JSON.stringify({ model: 'policy', messages, tools: TOOLS }),
        }).then(
          (r) =>
            r.json() as Promise<{
              choices: {
                message: { content: string | null; tool_calls?: { id: string }[] };
                finish_reason: string;
              }[];
            }>,
        );
      const m1 = [{ role: 'user', content: 'When was X built?' }];
      const r1 = await send(m1);
      expect(r1.choices[0]!.finish_reason).toBe('tool_calls');
      const msg = r1.choices[0]!.message;
      expect(msg.content).toBeNull();
      const prompt = tokenizer.decode(engine.seen[0]!.promptTokens as Int32Array);
      // Qwen's own tools block, written by its template.
      expect(prompt).toContain('# Tools\n\nYou may call one or more functions');
      expect(prompt).toContain('"name": "almanac"');
      expect(prompt.endsWith('<|im_start|>assistant\n<think>\n\n</think>\n\n')).toBe(true);
      await send([
        ...m1,
        msg,
        { role: 'tool', tool_call_id: msg.tool_calls![0]!.id, content: '1850' },
      ]);
      const calls = g.recorder.get('qwen')!.calls;
      // enable_thinking: false opens the reply with an empty <think></think> block that the
      // template does not write back into the history: continuity breaks (two chains, docs).
      expect(chainCalls(calls).map((c) => c.calls.length)).toEqual([1, 1]);
    } finally {
      await g.close();
    }
  });

  it('samples from the tiny model with tools in the prompt (real generation, 151 936-row head)', async () => {
    const g = await createPolicyGateway({ host });
    try {
      const r = await fetch(`${g.baseURL}/chat/completions`, {
        method: 'POST',
        headers: { 'content-type': 'application/json', 'x-flowgrpo-rollout-id': 'qt' },
        body: JSON.stringify({
          model: 'qwen-tiny',
          messages: [{ role: 'user', content: 'hi' }],
          tools: TOOLS,
          max_tokens: 6,
          seed: 1,
        }),
      });
      expect(r.status).toBe(200);
      const call = g.recorder.get('qt')!.calls[0]!;
      expect(call.completionTokens.length).toBe(call.logprobs.length);
      expect(tokenizer.decode(call.promptTokens)).toContain('<tools>');
    } finally {
      await g.close();
    }
  });
});
