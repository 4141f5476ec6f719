import { randomUUID } from 'node:crypto';
import type { PolicyEngine, RolloutAgent, RolloutContext } from '@flowgrpo/agent';
import { ConfigError, type Trajectory } from '@flowgrpo/core';
import { withSampling } from '@flowgrpo/models';
import type { RewardFunction, RewardResult } from '@flowgrpo/reward';
import { type PolicyGateway, ROLLOUT_HEADER, type RolloutBinding } from './gateway.js';
import { type RecordedRollout, rolloutTrajectory } from './recorder.js';

// GRPOTrainer × the gateway: the trainer's `agent` option built from an arbitrary agent program
// — a function that gets a base URL and a rollout id and returns an answer. Each rollout:
//
//   1. a fresh rollout id; the gateway routes that rollout's calls for `model` to the engine the
//      trainer handed over (its engine seen through the config's sampling settings, refreshed
//      in place after every update — or the greedy view of it during evaluation), with seeds
//      derived from the rollout's seed
//   2. the program runs against `<gateway>/rollouts/<id>/v1` — its only change is that base URL
//   3. the recorded calls of `model` become the Trajectory (segments or turns, recorder.ts), the
//      program's answer its finalAnswer; a reward the program posted to /v1/rollouts/<id>/reward
//      is the trajectory's `reward` (see gatewayReward)

export interface AgentProgramContext {
  /** `<gateway>/rollouts/<id>/v1`: give it to the OpenAI-compatible client as its base URL. */
  baseURL: string;
  rolloutId: string;
  question: string;
  /** The model name the trained policy is served under. */
  model: string;
  /** The gateway's API key ('EMPTY' when it has none): SDKs insist on one. */
  apiKey: string;
  /** The rollout header, for clients that keep the plain base URL instead. */
  headers: Record<string, string>;
  signal?: AbortSignal;
  seed?: number;
  groundTruth?: string;
}

/** An agent program: the answer, or the answer with a reward the program computed itself. */
export type AgentProgram = (
  context: AgentProgramContext,
) => Promise<string | { answer: string; reward?: number }>;

export interface GatewayAgentOptions {
  gateway: PolicyGateway;
  program: AgentProgram;
  /** The served name of the trained policy: the `model` the program sends (default 'policy'). */
  model?: string;
  /** Other roles' engines by served name for these rollouts (frozen roles). */
  engines?: Record<string, PolicyEngine>;
  /** The gateway's API key, passed on to the program. */
  apiKey?: string;
  /**
   * Forces this temperature on every call of the trained model, whatever the agent asks: set it
   * to the trainer's `temperature`, so the recorded logprobs are those of the distribution the
   * trainer recomputes (an agent that sends its own temperature would otherwise show up as
   * `logprob_mismatch`). Evaluation's greedy decoding still wins.
   */
  temperature?: number;
}

/** GRPOTrainer's `agent` option: `(policy) => RolloutAgent` over an agent program. */
export function gatewayAgent(o: GatewayAgentOptions): (policy: PolicyEngine) => RolloutAgent {
  const model = o.model ?? 'policy';
  return (policy) => ({
    async run(question: string, context: RolloutContext = {}): Promise<Trajectory> {
      const rolloutId = `${context.queryId ?? 'q'}.${context.index ?? 0}.${randomUUID().slice(0, 8)}`;
      const start = performance.now();
      const { recorded, answer, failure } = await runAgentProgram(
        o.gateway,
        o.program,
        rolloutId,
        {
          engines: {
            ...o.engines,
            [model]:
              o.temperature === undefined
                ? policy
                : withSampling(policy, { temperature: o.temperature }),
          },
          ...(context.seed !== undefined && { seed: context.seed }),
        },
        {
          question,
          model,
          apiKey: o.apiKey ?? 'EMPTY',
          ...(context.signal && { signal: context.signal }),
          ...(context.seed !== undefined && { seed: context.seed }),
          ...(context.groundTruth !== undefined && { groundTruth: context.groundTruth }),
        },
      );
      const t = rolloutTrajectory(recorded, {
        model,
        queryId: context.queryId ?? rolloutId,
        groupId: context.groupId ?? context.queryId ?? rolloutId,
        finalAnswer: failure ? '' : (recorded.finalAnswer ?? answer),
        question,
        ...(context.groundTruth !== undefined && { groundTruth: context.groundTruth }),
        ...(failure && { stopReason: 'error' as const }),
        ...(failure && {
          metadata: {
            rolloutError: { name: failure.name, message: failure.message },
            errors: [
              {
                role: 'rollout',
                code: (failure as { code?: string }).code ?? failure.name,
                message: failure.message,
              },
            ],
          },
        }),
      });
      t.timings.program_ms = performance.now() - start;
      return t;
    },
  });
}

/** What one run of an agent program left: its recorded calls, its answer, and why it failed. */
export interface AgentProgramRun {
  /** The rollout's recorded calls (none when it made none); a reward the program returned. */
  recorded: RecordedRollout;
  answer: string;
  /** The error the program threw (the run was not aborted): a failed rollout, kept. */
  failure?: Error;
}

/**
 * One run of an agent program as rollout `rolloutId`: the binding routes its calls, the program
 * gets the rollout's base URL and header, and the calls it made are taken from the recorder. A
 * program that throws is a failed rollout unless the run was aborted (then the error goes on).
 */
export async function runAgentProgram(
  gateway: PolicyGateway,
  program: AgentProgram,
  rolloutId: string,
  binding: RolloutBinding,
  context: Omit<AgentProgramContext, 'baseURL' | 'rolloutId' | 'headers'>,
): Promise<AgentProgramRun> {
  const unbind = gateway.bindRollout(rolloutId, binding);
  let answer = '';
  let posted: number | undefined;
  let failure: Error | undefined;
  try {
    const out = await program({
      ...context,
      baseURL: gateway.rolloutBaseURL(rolloutId),
      rolloutId,
      headers: { [ROLLOUT_HEADER]: rolloutId },
    });
    if (typeof out === 'string') answer = out;
    else {
      answer = out.answer;
      posted = out.reward;
    }
  } catch (e) {
    if (context.signal?.aborted) throw e;
    failure = e instanceof Error ? e : new Error(String(e));
  } finally {
    unbind();
  }
  const recorded = gateway.recorder.take(rolloutId) ?? {
    id: rolloutId,
    calls: [],
    createdAt: Date.now(),
    inFlight: 0,
  };
  if (posted !== undefined) recorded.reward = posted;
  return { recorded, answer, ...(failure && { failure }) };
}

/**
 * The reward a rollout posted (POST /v1/rollouts/{id}/reward, or returned by the program),
 * else `fallback`'s score of the final answer. Without a fallback a rollout with no posted
 * reward is an error (the trainer scores it 0 and records why).
 */
export function gatewayReward(fallback?: RewardFunction<object>): RewardFunction<object> {
  return {
    name: fallback?.name ?? 'gateway',
    async score(input): Promise<RewardResult<object>> {
      const posted = input.trajectory?.reward;
      if (posted !== undefined) return { score: posted, details: { source: 'posted' } };
      if (!fallback)
        throw new ConfigError(
          `rollout ${String(input.trajectory?.metadata?.rolloutId ?? '?')} posted no reward and there is no fallback reward function`,
          { key: 'reward' },
        );
      return fallback.score(input);
    },
  };
}
