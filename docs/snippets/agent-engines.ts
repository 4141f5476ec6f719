// Snippets of packages/agent-solver/docs/engines.md (compiled by the test command).
import { OpenAIEngine, OpenAIPolicyEngine, TransformersEngine } from '@flowgrpo/agent';
import type { ChatMessage } from '@flowgrpo/core';
import { z } from 'zod';

export async function judgeEngine(): Promise<boolean> {
  // #region openai-engine
  const judge = new OpenAIEngine({
    model: 'Qwen/Qwen2.5-7B-Instruct',
    baseURL: 'http://localhost:8000/v1', // vLLM; Ollama: http://localhost:11434/v1; llama-server: http://localhost:8080/v1
    apiKey: process.env.VLLM_API_KEY, // default "EMPTY" ($OPENAI_API_KEY only without baseURL)
    timeoutMs: 60_000, // per attempt; GenerateOptions.timeoutMs overrides per call
    retry: { maxRetries: 3, initialDelayMs: 500, maxDelayMs: 30_000, jitter: 0.5 },
    maxConcurrency: 8,
    structuredOutput: 'json_schema', // or 'json_object' | 'prompt' | 'auto'
  });
  const Verdict = z.object({ analysis: z.string(), true_false: z.boolean() });
  const messages: ChatMessage[] = [{ role: 'user', content: 'Is 17 * 23 = 391? Answer as JSON.' }];
  const { object, usage } = await judge.generateObject(messages, Verdict, {
    schemaName: 'verdict',
  });
  console.log(object.true_false, usage.totalTokens); // this call's tokens
  console.log(judge.usage.totalTokens); // cumulative tokens of every successful call
  // #endregion openai-engine
  return object.true_false;
}

export async function vllmPolicy(step: number): Promise<void> {
  // #region openai-policy-engine
  const policy = new OpenAIPolicyEngine({
    model: 'Qwen/Qwen2.5-1.5B-Instruct',
    baseURLs: ['http://gpu1:8000/v1', 'http://gpu2:8000/v1'],
    balance: 'least-in-flight', // or 'round-robin'
    serverCooldownMs: 10_000,
  });
  const messages: ChatMessage[] = [{ role: 'user', content: 'What is 12 squared?' }];
  const s = await policy.generate({ messages, maxTokens: 512, temperature: 1 });
  s.promptTokens; // Int32Array
  s.actionTokens; // Int32Array
  s.actionLogprobs; // Float32Array, one logprob per action token
  // After optimizer step `step`, serve the adapter saved to /ckpt/step-<step>:
  await policy.updateAdapter({ name: `planner-step-${step}`, path: `/ckpt/step-${step}` });
  // #endregion openai-policy-engine
}

export async function localExecutor(): Promise<TransformersEngine> {
  // #region transformers-engine
  const executor = new TransformersEngine({
    modelPath: '/models/Qwen2.5-0.5B-Instruct-onnx',
    dtype: 'q8',
  });
  await executor.load(); // resolves once the model is ready
  // #endregion transformers-engine
  return executor;
}
