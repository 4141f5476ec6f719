import type { StopReason, TokenSegmentInput, Trajectory, TurnInput } from '@flowgrpo/core';
import { TrajectorySchema } from '@flowgrpo/core';
import type { ParsedToolCall } from './tool-calls.js';

// Every call the gateway serves is recorded token-exactly — the prompt ids the policy saw, the ids
// it sampled and their logprobs, the adapter, timings — under its rollout (the
// `x-flowgrpo-rollout-id` header, the `/rollouts/<id>/v1` base URL, or `metadata.rollout_id`).
// A rollout becomes the trainer's Trajectory:
//
//   chains  calls of one adapter whose prompt starts with an earlier call's prompt + completion,
//           token for token (a multi-turn conversation the template kept continuous), link into
//           one chain; the tokens between (tool results, the next user turn, template markup)
//           are observations — in the row, masked from the loss
//   one chain    → `segments` (prompt, action, observation, action, …): one training row
//   otherwise    → `turns`, one per call: the same trainable tokens with the same logprobs and
//                  the same prefixes, one row each (the collator trains one chain per trajectory)

export interface CallTimings {
  /** Waiting for a generation slot. */
  queue_ms: number;
  /** Sampling (prompt + completion). */
  generate_ms: number;
  /** The whole request, parse to response. */
  total_ms: number;
}

export interface RecordedCall {
  /** Position in the rollout, in the order the calls arrived. */
  index: number;
  /** The served model (adapter) that sampled it. */
  model: string;
  endpoint: 'chat.completions' | 'completions' | 'responses';
  promptTokens: Int32Array<ArrayBuffer>;
  completionTokens: Int32Array<ArrayBuffer>;
  /** log π(token) of every completion token under the sampling policy. */
  logprobs: Float32Array<ArrayBuffer>;
  /** The assistant text the model wrote (after any prefill the gateway gave it). */
  text: string;
  /** Text the gateway put at the start of the assistant turn (tool_choice), in the prompt. */
  prefill?: string;
  toolCalls?: ParsedToolCall[];
  finishReason: string;
  /** Epoch ms when the request arrived. */
  startedAt: number;
  timings: CallTimings;
}

export interface RecordedRollout {
  id: string;
  calls: RecordedCall[];
  reward?: number;
  roleRewards?: Record<string, number>;
  finalAnswer?: string;
  details?: Record<string, unknown>;
  /** The GRPO group (task) given with the reward. */
  groupId?: string;
  createdAt: number;
  /** Calls started and not yet finished. */
  inFlight: number;
}

/** Calls of one model, each extending the previous one's prompt + completion. */
export interface CallChain {
  model: string;
  calls: RecordedCall[];
}

function extendsCall(prev: RecordedCall, next: RecordedCall): boolean {
  const a = prev.promptTokens;
  const b = prev.completionTokens;
  const p = next.promptTokens;
  if (p.length < a.length + b.length) return false;
  for (let i = 0; i < a.length; i++) if (a[i] !== p[i]) return false;
  for (let i = 0; i < b.length; i++) if (b[i] !== p[a.length + i]) return false;
  return true;
}

/**
 * Links calls into chains: each call joins the most recent chain of its model whose last call it
 * extends token for token, else starts a new chain.
 */
export function chainCalls(calls: readonly RecordedCall[]): CallChain[] {
  const chains: CallChain[] = [];
  for (const call of [...calls].sort((x, y) => x.index - y.index)) {
    const into = chains.findLast(
      (c) => c.model === call.model && extendsCall(c.calls.at(-1)!, call),
    );
    if (into) into.calls.push(call);
    else chains.push({ model: call.model, calls: [call] });
  }
  return chains;
}

/** A chain as token segments: prompt, action, observation, action, … */
export function chainSegments(chain: CallChain): TokenSegmentInput[] {
  const out: TokenSegmentInput[] = [];
  let end = 0;
  chain.calls.forEach((c, k) => {
    if (k === 0) out.push({ tokens: c.promptTokens, trainable: false, kind: 'prompt' });
    else if (c.promptTokens.length > end)
      out.push({ tokens: c.promptTokens.slice(end), trainable: false, kind: 'observation' });
    out.push({ tokens: c.completionTokens, logprobs: c.logprobs, trainable: true, kind: 'action' });
    end = c.promptTokens.length + c.completionTokens.length;
  });
  return out;
}

export interface TrajectoryOptions {
  /** Only calls of this model (the trained role); default: every call. */
  model?: string;
  queryId: string;
  groupId: string;
  finalAnswer?: string;
  question?: string;
  groundTruth?: string;
  stopReason?: StopReason;
  metadata?: Record<string, unknown>;
}

/** A recorded rollout as the trainer's Trajectory (see the header for chains vs turns). */
export function rolloutTrajectory(rollout: RecordedRollout, o: TrajectoryOptions): Trajectory {
  const calls = rollout.calls.filter((c) => o.model === undefined || c.model === o.model);
  const chains = chainCalls(calls);
  const multiModel = o.model === undefined && new Set(calls.map((c) => c.model)).size > 1;
  const shape: { segments?: TokenSegmentInput[]; turns?: TurnInput[] } =
    chains.length === 1 && !multiModel
      ? { segments: chainSegments(chains[0]!) }
      : {
          turns: [...calls]
            .sort((x, y) => x.index - y.index)
            .map((c, i) => ({
              index: i,
              promptTokens: c.promptTokens,
              actionTokens: c.completionTokens,
              actionLogprobs: c.logprobs,
              text: c.text,
              ...(c.toolCalls?.[0] && {
                toolName: c.toolCalls[0].function.name,
                toolInput: c.toolCalls[0].function.arguments,
              }),
            })),
        };
  const sum = (k: keyof CallTimings) => calls.reduce((s, c) => s + c.timings[k], 0);
  const lastFinish = calls.at(-1)?.finishReason;
  return TrajectorySchema.parse({
    queryId: o.queryId,
    groupId: o.groupId,
    ...shape,
    ...(o.question !== undefined && { question: o.question }),
    ...(o.groundTruth !== undefined && { groundTruth: o.groundTruth }),
    finalAnswer: o.finalAnswer ?? rollout.finalAnswer ?? '',
    ...(rollout.reward !== undefined && { reward: rollout.reward }),
    stopReason: o.stopReason ?? (lastFinish === 'length' ? 'max_tokens' : 'answer'),
    timings: { policy_ms: sum('generate_ms'), policy_queue_ms: sum('queue_ms') },
    metadata: {
      ...o.metadata,
      rolloutId: rollout.id,
      chains: chains.length,
      calls: rollout.calls.map((c) => ({
        index: c.index,
        model: c.model,
        endpoint: c.endpoint,
        prompt_tokens: c.promptTokens.length,
        completion_tokens: c.completionTokens.length,
        finish_reason: c.finishReason,
        ...(c.toolCalls?.length && { tool_calls: c.toolCalls.map((t) => t.function.name) }),
        timings: c.timings,
      })),
      ...(rollout.roleRewards && { roleRewards: rollout.roleRewards }),
      ...(rollout.details && { rewardDetails: rollout.details }),
    },
  });
}

export interface RolloutRecorderOptions {
  /** Rollouts kept at most; the oldest are dropped first (default 10 000). */
  maxRollouts?: number;
  /** Called when a reward is posted for a rollout. */
  onReward?: (rollout: RecordedRollout) => void;
}

export class RolloutRecorder {
  readonly #rollouts = new Map<string, RecordedRollout & { next: number }>();
  readonly #max: number;
  readonly #onReward: RolloutRecorderOptions['onReward'];

  constructor(o: RolloutRecorderOptions = {}) {
    this.#max = o.maxRollouts ?? 10_000;
    this.#onReward = o.onReward;
  }

  #open(id: string) {
    let r = this.#rollouts.get(id);
    if (!r) {
      r = { id, calls: [], createdAt: Date.now(), inFlight: 0, next: 0 };
      this.#rollouts.set(id, r);
      for (const old of this.#rollouts.keys()) {
        if (this.#rollouts.size <= this.#max) break;
        if (old !== id) this.#rollouts.delete(old);
      }
    }
    return r;
  }

  /** Reserves the next call index of a rollout (calls are ordered by arrival). */
  begin(id: string): number {
    const r = this.#open(id);
    r.inFlight++;
    return r.next++;
  }

  /** Ends a call begun with `begin`, recording it unless it failed. */
  end(id: string, call: RecordedCall | undefined): void {
    const r = this.#open(id);
    r.inFlight = Math.max(0, r.inFlight - 1);
    if (call) r.calls.push(call);
  }

  get(id: string): RecordedRollout | undefined {
    const r = this.#rollouts.get(id);
    if (!r) return undefined;
    const { next: _n, ...rest } = r;
    return { ...rest, calls: [...r.calls].sort((x, y) => x.index - y.index) };
  }

  has(id: string): boolean {
    return this.#rollouts.has(id);
  }

  ids(): string[] {
    return [...this.#rollouts.keys()];
  }

  /** Attaches a reward (and optionally the final answer) to a rollout that has calls. */
  setReward(
    id: string,
    r: {
      reward: number;
      roleRewards?: Record<string, number>;
      finalAnswer?: string;
      details?: Record<string, unknown>;
      groupId?: string;
    },
  ): RecordedRollout | undefined {
    const rollout = this.#rollouts.get(id);
    if (!rollout) return undefined;
    rollout.reward = r.reward;
    if (r.roleRewards) rollout.roleRewards = r.roleRewards;
    if (r.finalAnswer !== undefined) rollout.finalAnswer = r.finalAnswer;
    if (r.details) rollout.details = r.details;
    if (r.groupId !== undefined) rollout.groupId = r.groupId;
    const view = this.get(id)!;
    this.#onReward?.(view);
    return view;
  }

  /** Removes a rollout and returns it. */
  take(id: string): RecordedRollout | undefined {
    const r = this.get(id);
    this.#rollouts.delete(id);
    return r;
  }

  delete(id: string): boolean {
    return this.#rollouts.delete(id);
  }
}
