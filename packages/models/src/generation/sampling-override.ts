import type { PolicyEngine, PolicyGenerateRequest, PolicyGenerateResult } from '@flowgrpo/agent';

// A policy engine seen through different sampling settings: evaluation runs the same agent as
// training, with the policy decoding greedily, without a second engine or model in memory; and
// the GRPO trainer's rollouts sample at the settings its loss assumes, whatever the agent asks.

/** `engine` with every request's temperature forced to 0 (greedy, deterministic). */
export function greedy(engine: PolicyEngine): PolicyEngine {
  return withSampling(engine, { temperature: 0 });
}

/** `engine` with these request fields overriding the caller's. */
export function withSampling(
  engine: PolicyEngine,
  overrides: Partial<Pick<PolicyGenerateRequest, 'temperature' | 'topP' | 'maxTokens'>>,
): PolicyEngine {
  return viewOf(engine, (request) => ({ ...request, ...overrides }));
}

/** `engine` (its model, tokenizer and adapter updates) with each request rewritten by `map`. */
function viewOf(
  engine: PolicyEngine,
  map: (request: PolicyGenerateRequest) => PolicyGenerateRequest,
): PolicyEngine {
  return {
    get model() {
      return engine.model;
    },
    ...(engine.tokenizer && { tokenizer: engine.tokenizer }),
    generate: (request: PolicyGenerateRequest): Promise<PolicyGenerateResult> =>
      engine.generate(map(request)),
    ...(engine.updateAdapter && { updateAdapter: engine.updateAdapter.bind(engine) }),
  };
}

/** The sampling settings of a GRPO run (its config's temperature, top_p, max_completion_length). */
export interface TrainingSampling {
  temperature: number;
  topP: number;
  maxTokens: number;
}

/**
 * A request's sampling settings as a trainer imposes them (`s`): temperature and top_p replaced,
 * the token limit capped (a smaller one kept). `warn` is told each setting the request asked
 * otherwise (an omitted temperature or top_p asks nothing).
 */
export function imposeSampling(
  asked: { temperature?: number | null; topP?: number | null; maxTokens: number },
  s: TrainingSampling,
  warn: SamplingWarner,
): { temperature: number; topP: number; maxTokens: number } {
  if (asked.temperature != null && asked.temperature !== s.temperature)
    warn('temperature', asked.temperature, s.temperature);
  if (asked.topP != null && asked.topP !== s.topP) warn('top_p', asked.topP, s.topP);
  if (asked.maxTokens > s.maxTokens) warn('max_completion_length', asked.maxTokens, s.maxTokens);
  return {
    temperature: s.temperature,
    topP: s.topP,
    maxTokens: Math.min(asked.maxTokens, s.maxTokens),
  };
}

export type SamplingWarner = (key: string, asked: number, used: number) => void;

/** One FLOWGRPO_SAMPLING_OVERRIDE warning per setting (per `who`, e.g. a role). */
export function samplingWarner(who = 'the trained policy'): SamplingWarner {
  const warned = new Set<string>();
  return (key, asked, used) => {
    if (warned.has(key)) return;
    warned.add(key);
    process.emitWarning(
      key === 'max_completion_length'
        ? `the agent asked ${who} for up to ${asked} tokens per call; GRPO caps them at the config's max_completion_length = ${used}`
        : `the agent asked ${who} for ${key} = ${asked}; GRPO samples it with the config's ${key} = ${used} (its loss assumes it)`,
      { code: 'FLOWGRPO_SAMPLING_OVERRIDE' },
    );
  };
}

/**
 * `engine` as the GRPO trainer samples the policy it trains: every request at the run's
 * temperature and top_p, and at most `maxTokens` new tokens (an agent's own smaller limit is
 * kept). The loss takes the policy's log-probs at that temperature, so a sample drawn at another
 * one would be off-policy with no importance weight to correct it (TRL's trainer generates with
 * its config's settings for the same reason). A request that asked for something else is
 * overridden, with one warning (code FLOWGRPO_SAMPLING_OVERRIDE) per setting.
 */
export function trainingSampling(engine: PolicyEngine, s: TrainingSampling): PolicyEngine {
  const warn = samplingWarner();
  return viewOf(engine, (request) => ({ ...request, ...imposeSampling(request, s, warn) }));
}
