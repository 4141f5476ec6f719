// Snippets of docs/guides/agent.md and docs/scaling.md (compiled by the test command).
import {
  FlowRollout,
  FlowSolver,
  OpenAIEngine,
  OpenAIPolicyEngine,
  type PolicyEngine,
  rolloutGroup,
  type SolverEvent,
  TagAgent,
} from '@flowgrpo/agent';
import { createCalculatorTool, createPythonTool } from '@flowgrpo/tools';

export async function solveOne(): Promise<string> {
  // #region solve
  const engine = new OpenAIEngine({
    baseURL: 'http://127.0.0.1:8000/v1', // vLLM, SGLang, Ollama (/v1), llama.cpp, OpenAI
    model: 'Qwen/Qwen2.5-7B-Instruct',
    apiKey: process.env.FLOWGRPO_API_KEY,
  });
  const solver = new FlowSolver({
    engine, // every role; or engines: { planner, executor, verifier, generator }
    tools: [createCalculatorTool(), createPythonTool()],
    maxSteps: 5,
    workspace: true, // one scratch directory per solve, shared by its tool calls
    onEvent: (e: SolverEvent) => {
      if (e.type === 'plan') console.log(`step ${e.step}: ${e.nextStep.tool_name}`);
      if (e.type === 'tool_result') console.log(`  → ${JSON.stringify(e.result.output)}`);
      if (e.type === 'verification') console.log(`  stop? ${e.verification.stop_signal}`);
    },
  });
  const result = await solver.solve('What is 17*23+4?');
  console.log(result.finalAnswer, result.stopReason, result.usage.total.totalTokens);
  // #endregion solve
  return result.finalAnswer;
}

export async function recordGroup(policy: PolicyEngine, fixed: OpenAIEngine): Promise<void> {
  // #region rollouts
  // Training rollouts: the planner is a PolicyEngine (token ids + logprobs are recorded); the
  // executor, verifier and generator are fixed LLMEngines.
  const agent = new FlowRollout({ policy, engine: fixed, tools: [createCalculatorTool()] });
  const group = await rolloutGroup('What is 12 squared?', 8, { agent, seed: 1, concurrency: 8 });
  for (const t of group.trajectories)
    console.log(t.turns?.length, t.turns?.[0]?.actionTokens.length, t.finalAnswer, t.stopReason);
  // #endregion rollouts
}

export function tagAgent(policy: PolicyEngine): TagAgent {
  // #region tag-agent
  // One policy writes <think>, <tool_call>{"name", "arguments"}</tool_call> and <answer>; tool
  // outputs come back as non-trainable <tool_response> segments.
  return new TagAgent({
    policy,
    tools: [createCalculatorTool()],
    maxTurns: 6,
    maxNewTokens: 256,
    maxObservationTokens: 500, // longer tool outputs are cut (context overflow)
    toolTimeoutMs: 10_000,
    workspace: true, // a scratch directory per rollout, removed afterwards
  });
  // #endregion tag-agent
}

export function vllmPolicy(): PolicyEngine {
  // #region vllm-policy
  // Rollouts on vLLM / SGLang servers: token ids and logprobs come back with each sample, LoRA
  // adapters are hot-loaded after every update, requests are balanced over the servers.
  return new OpenAIPolicyEngine({
    model: 'Qwen/Qwen2.5-1.5B-Instruct',
    baseURLs: ['http://gpu-a:8000/v1', 'http://gpu-b:8000/v1'],
    loraRoutes: 'vllm', // POST /v1/load_lora_adapter (vLLM); 'sglang' for SGLang
    maxConcurrency: 64,
  });
  // #endregion vllm-policy
}
