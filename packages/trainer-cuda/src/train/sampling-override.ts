import type { PolicyEngine, PolicyGenerateRequest, PolicyGenerateResult } from '@flowgrpo/agent';

// A policy engine seen through different sampling settings: evaluation runs the same agent as
// training, with the policy decoding greedily, without a second engine or model in memory.

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
