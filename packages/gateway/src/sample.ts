import { createHash } from 'node:crypto';
import type { PolicyGenerateResult } from '@flowgrpo/agent';
import type { StreamingPolicyRequest } from '@flowgrpo/models';
import {
  ContextLengthExceededError,
  imposeSampling,
  samplingWarner,
  TokenOutOfVocabularyError,
} from '@flowgrpo/models';
import type { GatewayContext, RolloutRef } from './context.js';
import { badRequest, GatewayError } from './errors.js';

// One call's sampling, shared by every generating route: the model's engine (a rollout's bound
// engine first), the token limit within the context, the trainer's imposed sampling for named
// rollouts, a seed derived from the rollout's, a generation slot, and the engine's errors turned
// into OpenAI's.

export interface SampleArgs extends RolloutRef {
  model: string;
  promptIds: number[];
  maxTokens: number | null | undefined;
  temperature: number | null | undefined;
  topP: number | null | undefined;
  stop: string | string[] | null | undefined;
  seed: number | null | undefined;
  /** The call's index in its rollout. */
  index: number;
  signal: AbortSignal;
  /** Each token as it is sampled, for engines that stream (the local one); others never call it. */
  onToken?: ((token: number, logprob: number) => void) | undefined;
}

export interface Sampled {
  result: PolicyGenerateResult;
  queueMs: number;
  generateMs: number;
}

/** A 32-bit seed from any seed and a call index. */
function callSeed(seed: number | string, index: number): number {
  return createHash('sha256').update(`${seed}:call:${index}`).digest().readUInt32LE(0);
}

export async function sample(ctx: GatewayContext, a: SampleArgs): Promise<Sampled> {
  const { host, options: o } = ctx;
  const engine = ctx.engineFor(a.model, a.rolloutId);
  const room = host.maxContext === undefined ? undefined : host.maxContext - a.promptIds.length;
  if (room !== undefined && room <= 0)
    throw new GatewayError(
      400,
      `This model's maximum context length is ${host.maxContext} tokens. However, your messages resulted in ${a.promptIds.length} tokens.`,
      { param: 'messages', code: 'context_length_exceeded' },
    );
  const wanted = a.maxTokens ?? o.defaultMaxTokens ?? 1024;
  let maxTokens = room === undefined ? wanted : Math.min(wanted, room);
  let temperature = a.temperature ?? 1;
  let topP = a.topP;
  const imposed = a.named ? o.rolloutSampling?.(a.model) : undefined;
  if (imposed) {
    const warn = ctx.warners.get(a.model) ?? samplingWarner(`the trained role '${a.model}'`);
    ctx.warners.set(a.model, warn);
    const asked = { temperature: a.temperature, topP: a.topP, maxTokens };
    ({ temperature, topP, maxTokens } = imposeSampling(asked, imposed, warn));
  }
  const bound = ctx.bindings.get(a.rolloutId)?.seed;
  const seed = a.seed ?? (bound !== undefined ? callSeed(bound, a.index) : undefined);
  const t0 = performance.now();
  const release = await ctx.slots.acquire(a.signal);
  const t1 = performance.now();
  try {
    const request: StreamingPolicyRequest = {
      promptTokens: a.promptIds,
      maxTokens,
      temperature,
      ...(topP != null && { topP }),
      ...(a.stop != null && { stop: typeof a.stop === 'string' ? [a.stop] : a.stop }),
      ...(seed !== undefined && { seed }),
      signal: a.signal,
      ...(a.onToken && { onToken: a.onToken }),
    };
    const result = await engine.generate(request);
    return { result, queueMs: t1 - t0, generateMs: performance.now() - t1 };
  } catch (e) {
    if (GatewayError.isInstance(e)) throw e;
    if (e instanceof RangeError || TokenOutOfVocabularyError.isInstance(e))
      throw badRequest(e.message, null, 'invalid_request');
    // OpenAI's own code for a prompt that does not fit the model's context.
    if (ContextLengthExceededError.isInstance(e))
      throw badRequest(e.message, 'max_tokens', 'context_length_exceeded');
    throw e;
  } finally {
    release();
  }
}
