// Snippets of docs/gateway.md (compiled by the test command).
import { OpenAIPolicyEngine } from '@flowgrpo/agent';
import type { SampleRow } from '@flowgrpo/core';
import {
  type AgentProgram,
  createPolicyGateway,
  EnginePolicyHost,
  gatewayAgent,
  gatewayReward,
  LocalPolicyHost,
  UpstreamPolicyHost,
} from '@flowgrpo/gateway';
import { loadTokenizer } from '@flowgrpo/models';
import { exactMatchReward } from '@flowgrpo/reward';
import { GRPOTrainer, MultiRoleGRPOTrainer, OnlineGRPOTrainer } from '@flowgrpo/trainer';
import OpenAI from 'openai';

export async function client(): Promise<void> {
  // #region client
  // `flowgrpo serve --model ./qwen2.5-0.5b-instruct --lora planner=./planner-adapter` is running.
  const openai = new OpenAI({ baseURL: 'http://127.0.0.1:8000/v1', apiKey: 'EMPTY' });
  const r = await openai.chat.completions.create(
    {
      model: 'planner', // the LoRA adapter served under that name (the base model: its folder name)
      messages: [{ role: 'user', content: 'What is 17 * 23?' }],
      tools: [
        {
          type: 'function',
          function: {
            name: 'calculator',
            parameters: { type: 'object', properties: { expression: { type: 'string' } } },
          },
        },
      ],
    },
    { headers: { 'x-flowgrpo-rollout-id': 'episode-1' } }, // or baseURL …/rollouts/episode-1/v1
  );
  console.log(r.choices[0]!.message.tool_calls); // parsed from the model's <tool_call> block

  // The recorded calls (prompt ids, sampled ids, logprobs, adapter, timings), and a reward.
  const rollout = (await fetch('http://127.0.0.1:8000/v1/rollouts/episode-1').then((x) =>
    x.json(),
  )) as { calls: { prompt_token_ids: number[]; token_ids: number[]; logprobs: number[] }[] };
  const [first] = rollout.calls;
  console.log(first?.token_ids, first?.logprobs);
  await fetch('http://127.0.0.1:8000/v1/rollouts/episode-1/reward', {
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body: JSON.stringify({ reward: 1, final_answer: '391' }),
  });
  // #endregion client
}

export async function stream(): Promise<void> {
  // #region stream
  const openai = new OpenAI({ baseURL: 'http://127.0.0.1:8000/v1', apiKey: 'EMPTY' });
  const chunks = await openai.chat.completions.create({
    model: 'planner',
    messages: [{ role: 'user', content: 'Tell me a story.' }],
    stream: true,
    stream_options: { include_usage: true },
  });
  // Each token's text arrives as it is sampled; the recorded call is the same as unstreamed.
  for await (const chunk of chunks) process.stdout.write(chunk.choices[0]?.delta?.content ?? '');
  // #endregion stream
}

export async function trainProgram(
  artifacts: string,
  tokenizerDir: string,
  train: SampleRow[],
  heldOut: SampleRow[],
): Promise<void> {
  // #region train
  // Your agent, unchanged but for its base URL: it gets a base URL and a rollout id, and
  // returns its answer. Any SDK works (openai, openai-agents-js, the Vercel AI SDK, fetch).
  const program: AgentProgram = async ({ baseURL, apiKey, model, question }) => {
    const openai = new OpenAI({ baseURL, apiKey });
    const r = await openai.chat.completions.create({
      model,
      messages: [{ role: 'user', content: question }],
      max_tokens: 256,
    });
    return r.choices[0]!.message.content ?? '';
  };

  const tokenizer = await loadTokenizer(tokenizerDir);
  // The gateway serves, per rollout, the engine the trainer hands over (its local policy, whose
  // adapter it refreshes after every update): no engines of its own are needed.
  const gateway = await createPolicyGateway({
    host: new EnginePolicyHost({ tokenizer, engines: {}, maxContext: 4096 }),
  });
  try {
    await new GRPOTrainer({
      config: {
        output_dir: 'out/runs/my-agent',
        max_steps: 50,
        num_generations: 8,
        queries_per_step: 8,
        temperature: 1,
        lora: { r: 16, lora_alpha: 32, target_modules: ['q_proj', 'v_proj'] },
      },
      artifacts, // built with that LoRA config (flowgrpo export)
      tokenizer,
      agent: gatewayAgent({ gateway, program, model: 'policy', temperature: 1 }),
      // A reward the program posted to /v1/rollouts/{id}/reward, else exact match.
      reward: gatewayReward(exactMatchReward()),
      trainDataset: train,
      evalDataset: heldOut, // greedy, through the same program
    }).train(); // metrics.jsonl: logprob_mismatch/max ≤ 1e-4 means token-exact
  } finally {
    await gateway.close();
  }
  // #endregion train
}

export async function multiRole(
  artifacts: string,
  tokenizerDir: string,
  train: SampleRow[],
): Promise<void> {
  // #region multi-role
  const program: AgentProgram = async ({ baseURL, question }) => {
    const openai = new OpenAI({ baseURL, apiKey: 'EMPTY' });
    const ask = async (model: string, content: string) =>
      (
        await openai.chat.completions.create({
          model,
          messages: [{ role: 'user', content }],
          max_tokens: 128,
        })
      ).choices[0]!.message.content ?? '';
    const plan = await ask('planner', question);
    const answer = await ask('solver', `${question}\nPlan: ${plan}`);
    await ask('critic', `Question: ${question}\nAnswer: ${answer}\nIs it right?`);
    return answer;
  };
  const result = await new MultiRoleGRPOTrainer({
    config: {
      output_dir: 'out/runs/roles',
      max_steps: 20,
      num_generations: 8,
      queries_per_step: 4,
      lora: { r: 16, lora_alpha: 32, target_modules: ['q_proj', 'v_proj'] },
    },
    artifacts,
    tokenizer: await loadTokenizer(tokenizerDir),
    roles: {
      planner: { trainable: true },
      solver: { trainable: true },
      critic: { trainable: false, adapter: './critic-adapter' }, // served, never updated
    },
    program, // may POST {reward, role_rewards: {planner: …}} to /v1/rollouts/{id}/reward
    reward: exactMatchReward(),
    trainDataset: train,
  }).train();
  console.log(result.adapters); // { planner: 'out/runs/roles/adapters/planner', solver: … }
  // #endregion multi-role
}

export async function fleet(tokenizerDir: string, train: SampleRow[], artifacts: string) {
  // #region fleet
  const tokenizer = await loadTokenizer(tokenizerDir); // the served model's tokenizer
  // Serving only: every request rendered here, sent upstream as token ids, recorded.
  const gateway = await createPolicyGateway({
    host: new UpstreamPolicyHost({
      baseURLs: ['http://10.0.0.5:8000/v1', 'http://10.0.0.6:8000/v1'],
      model: 'Qwen/Qwen2.5-1.5B-Instruct',
      tokenizer,
      maxContext: 32768,
    }),
  });
  // Training: the trainer's rollout engine is the fleet; it hot-loads the adapter after every
  // update and the gateway sends the program's calls to it.
  const fleetEngine = new OpenAIPolicyEngine({
    model: 'Qwen/Qwen2.5-1.5B-Instruct',
    baseURLs: ['http://10.0.0.5:8000/v1', 'http://10.0.0.6:8000/v1'],
  });
  const program: AgentProgram = async ({ baseURL, model, question }) => {
    const r = await new OpenAI({ baseURL, apiKey: 'EMPTY' }).chat.completions.create({
      model,
      messages: [{ role: 'user', content: question }],
    });
    return r.choices[0]!.message.content ?? '';
  };
  await new GRPOTrainer({
    config: {
      output_dir: 'out/runs/fleet',
      max_steps: 100,
      vllm_importance_sampling_correction: true,
      lora: { r: 16, lora_alpha: 32, target_modules: ['q_proj', 'v_proj'] },
    },
    artifacts,
    tokenizer,
    rolloutEngine: fleetEngine,
    agent: gatewayAgent({ gateway, program, temperature: 1 }),
    reward: exactMatchReward(),
    trainDataset: train,
  }).train();
  await gateway.close();
  // #endregion fleet
}

export async function local(artifacts: string, tokenizerDir: string): Promise<void> {
  // #region local
  const host = await LocalPolicyHost.open({
    artifacts, // built with a LoRA config when adapters are served
    tokenizer: await loadTokenizer(tokenizerDir),
    baseModel: 'qwen',
    adapters: { planner: './planner-adapter', coder: './coder-adapter' },
  });
  const gateway = await createPolicyGateway({ host, port: 8000, apiKey: process.env.MY_KEY });
  console.log(`OpenAI-compatible at ${gateway.baseURL}`); // http://127.0.0.1:8000/v1
  // #endregion local
  await gateway.close();
  await host.close();
}

export async function online(artifacts: string, tokenizerDir: string): Promise<void> {
  // #region online
  const trainer = await OnlineGRPOTrainer.start({
    config: {
      output_dir: 'out/runs/online', // metrics.jsonl, checkpoint-<step>/<role>/, adapters/<role>/
      num_generations: 8, // rewarded rollouts per group (task)
      queries_per_step: 4, // complete groups per update
      max_steps: 100,
      learning_rate: 1e-5,
      lora: { r: 16, lora_alpha: 32, target_modules: ['q_proj', 'v_proj'] },
    },
    artifacts, // with LoRA decode, logprobs and train_step graphs
    tokenizer: await loadTokenizer(tokenizerDir),
    roles: { policy: { trainable: true } },
    gateway: { port: 8000 },
  });
  console.log(`agents: ${trainer.gateway.baseURL}, model "policy"`);
  await trainer.finished; // max_steps updates done; the gateway keeps serving
  await trainer.close(); // checkpoints the last update, saves the adapters and report.html
  // #endregion online
}
