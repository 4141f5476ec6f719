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
  return {
    get model() {
      return engine.model;
    },
    ...(engine.tokenizer && { tokenizer: engine.tokenizer }),
    generate: (request: PolicyGenerateRequest): Promise<PolicyGenerateResult> =>
      engine.generate({ ...request, ...overrides }),
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
 * `engine` as the GRPO trainer samples the policy it trains: every request at the run's
 * temperature and top_p, and at most `maxTokens` new tokens (an agent's own smaller limit is
 * kept). The loss takes the policy's log-probs at that temperature, so a sample drawn at another
 * one would be off-policy with no importance weight to correct it (TRL's trainer generates with
 * its config's settings for the same reason). A request that asked for another temperature or
 * top_p is overridden, with one warning (code FLOWGRPO_SAMPLING_OVERRIDE) per setting; a larger
 * token limit is capped silently, as max_completion_length caps TRL's generations.
 */
export function trainingSampling(engine: PolicyEngine, s: TrainingSampling): PolicyEngine {
  const warned = new Set<string>();
  const warn = (key: string, asked: number, used: number) => {
    if (warned.has(key)) return;
    warned.add(key);
    process.emitWarning(
      `the agent asked the trained policy for ${key} = ${asked}; GRPO samples it with the config's ${key} = ${used} (its loss assumes it)`,
      { code: 'FLOWGRPO_SAMPLING_OVERRIDE' },
    );
  };
  return {
    get model() {
      return engine.model;
    },
    ...(engine.tokenizer && { tokenizer: engine.tokenizer }),
    generate: (request: PolicyGenerateRequest): Promise<PolicyGenerateResult> => {
      if (request.temperature !== undefined && request.temperature !== s.temperature)
        warn('temperature', request.temperature, s.temperature);
      if (request.topP !== undefined && request.topP !== s.topP)
        warn('top_p', request.topP, s.topP);
      return engine.generate({
        ...request,
        temperature: s.temperature,
        topP: s.topP,
        maxTokens: Math.min(request.maxTokens, s.maxTokens),
      });
    },
    ...(engine.updateAdapter && { updateAdapter: engine.updateAdapter.bind(engine) }),
  };
}
