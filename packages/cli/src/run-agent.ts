import {
  compactPlannerPrompt,
  FlowRollout,
  OpenAIEngine,
  OpenAIPolicyEngine,
  type PolicyEngine,
  type PolicyTokenizer,
  type RolloutAgent,
  TagAgent,
} from '@flowgrpo/agent';
import { type ChatMessage, ConfigError, type LLMEngine } from '@flowgrpo/core';
import type { Tokenizer } from '@flowgrpo/models';
import {
  exactMatchReward,
  LLMJudge,
  mathEquivalenceReward,
  type RewardFunction,
  tokenF1Reward,
} from '@flowgrpo/reward';
import { builtinToolAlias, type Tool } from '@flowgrpo/tools';
import { buildTools } from './commands/solve.js';
import { offlineRoles } from './offline-roles.js';
import {
  type AgentSpec,
  apiKeyOf,
  type Endpoint,
  type RewardName,
  type RolloutSpec,
} from './run-config.js';

// From a run config's `agent`, `reward`, `judge` and `rollout` keys to the objects the trainer
// and evaluate() take: the rollout agent around a policy (Flow solver with fixed roles on an
// OpenAI-compatible endpoint, or the tag agent), the reward function, and a remote rollout
// engine (vLLM / SGLang) when rollouts do not run on the local decode graph.

/** Tools that call an LLM themselves. */
const NEEDS_ENGINE = new Set(['wikipedia', 'generalist', 'web_rag', 'web_search']);

export function openAIEngine(spec: Endpoint, env: NodeJS.ProcessEnv, key: string): OpenAIEngine {
  const apiKey = apiKeyOf(spec, env, key);
  return new OpenAIEngine({
    model: spec.model,
    baseURL: spec.base_url,
    ...(apiKey && { apiKey }),
    timeoutMs: spec.timeout_s * 1000,
    ...(spec.structured_output && { structuredOutput: spec.structured_output }),
    ...(spec.max_concurrency && { maxConcurrency: spec.max_concurrency }),
    defaults: { temperature: spec.temperature },
  });
}

const noEngine: LLMEngine = {
  model: 'none',
  generateText: () => Promise.reject(new ConfigError('no engine configured', { key: 'engine' })),
  generateObject: () => Promise.reject(new ConfigError('no engine configured', { key: 'engine' })),
};

function tools(spec: AgentSpec, engine: LLMEngine | undefined, env: NodeJS.ProcessEnv): Tool[] {
  if (spec.tools.length === 0) return [];
  const needing = spec.tools.filter((t) => NEEDS_ENGINE.has(builtinToolAlias(t) ?? ''));
  if (needing.length > 0 && !engine)
    throw new ConfigError(
      `agent.tools: ${needing.join(', ')} need agent.engine (an LLM endpoint)`,
      { key: 'agent.engine' },
      { hint: 'add "engine": {"base_url": …, "model": …} to agent, or drop those tools' },
    );
  return buildTools(spec.tools.join(','), engine ?? noEngine, env);
}

export interface AgentSampling {
  maxTurns: number;
  maxTokens: number;
  temperature: number;
  topP: number;
}

/** A factory of rollout agents around a policy (the trainer calls it for training and eval). */
export function agentFactory(
  spec: AgentSpec,
  sampling: AgentSampling,
  env: NodeJS.ProcessEnv,
): (policy: PolicyEngine) => RolloutAgent {
  const engine = spec.engine ? openAIEngine(spec.engine, env, 'agent.engine') : undefined;
  const toolList = tools(spec, engine, env);
  const maxTurns = spec.max_turns ?? sampling.maxTurns;
  if (spec.type === 'flow') {
    // No server named: the fixed roles are rule-based stand-ins (offline-roles.ts).
    const roles = engine ? { engine } : { engines: offlineRoles(toolList) };
    return (policy) =>
      new FlowRollout({
        policy,
        ...roles,
        tools: toolList,
        ...(spec.planner_prompt === 'compact' && { plannerPrompt: compactPlannerPrompt }),
        maxTurns,
        analyzeQuery: spec.analyze_query,
        toolTimeoutMs: spec.tool_timeout_s * 1000,
        sampling: {
          maxTokens: sampling.maxTokens,
          temperature: sampling.temperature,
          topP: sampling.topP,
        },
      });
  }
  return (policy) =>
    new TagAgent({
      policy,
      tools: toolList,
      maxTurns,
      maxNewTokens: sampling.maxTokens,
      temperature: sampling.temperature,
      topP: sampling.topP,
      toolTimeoutMs: spec.tool_timeout_s * 1000,
      ...(spec.search_tool && { searchTool: spec.search_tool }),
      ...(spec.system_prompt !== undefined && { prompt: tagPrompt(spec.system_prompt) }),
      ...(spec.max_total_tokens && { maxTotalTokens: spec.max_total_tokens }),
    });
}

/** The tag agent's first prompt with `system` as its system message: the question as the user's. */
export function tagPrompt(system: string): (question: string) => ChatMessage[] {
  return (question) => [
    { role: 'system', content: system },
    { role: 'user', content: `Question: ${question}` },
  ];
}

/** The reward by name; 'judge' asks `judge` (an LLM endpoint) for a structured verdict. */
export function rewardFunction(
  name: RewardName,
  judge: Endpoint | undefined,
  env: NodeJS.ProcessEnv,
): RewardFunction<object> {
  switch (name) {
    case 'exact_match':
      return exactMatchReward() as RewardFunction<object>;
    case 'f1':
      return tokenF1Reward() as RewardFunction<object>;
    case 'math':
      return mathEquivalenceReward() as RewardFunction<object>;
    case 'judge':
      if (!judge)
        throw new ConfigError(
          "reward 'judge' needs an endpoint (judge, or agent.engine)",
          { key: 'judge' },
          { hint: 'add "judge": {"base_url": …, "model": …}, or use another reward' },
        );
      return new LLMJudge({
        engine: openAIEngine(judge, env, 'judge'),
      }) as unknown as RewardFunction<object>;
  }
}

/** The agent-facing view of the trainer's tokenizer. */
export function policyTokenizer(tok: Tokenizer): PolicyTokenizer {
  return {
    encode: (text) => tok.encode(text),
    decode: (ids) => tok.decode(ids, { skipSpecialTokens: true }),
    ...(tok.applyChatTemplate && {
      applyChatTemplate: (messages: ChatMessage[], o: { addGenerationPrompt: boolean }) =>
        tok.applyChatTemplate!(messages, o),
    }),
    ...(tok.eosTokenId !== undefined && { eosTokenId: tok.eosTokenId }),
  };
}

/** A remote rollout engine for `rollout.engine: 'openai'`; undefined for the local decode graph. */
export function rolloutEngine(
  spec: RolloutSpec,
  tokenizer: Tokenizer,
  env: NodeJS.ProcessEnv,
): PolicyEngine | undefined {
  if (spec.engine === 'local') return undefined;
  const apiKey = apiKeyOf(spec, env, 'rollout');
  return new OpenAIPolicyEngine({
    model: spec.model,
    baseURLs: spec.base_urls,
    ...(apiKey && { apiKey }),
    tokenizer: policyTokenizer(tokenizer),
    chatTemplate: spec.chat_template,
    loraRoutes: spec.lora_routes,
    ...(spec.max_concurrency && { maxConcurrency: spec.max_concurrency }),
    ...(spec.timeout_s && { timeoutMs: spec.timeout_s * 1000 }),
  });
}
