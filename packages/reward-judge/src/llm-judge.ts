import {
  type ChatMessage,
  ConfigError,
  type GenerateObjectOptions,
  type LLMEngine,
} from '@flowgrpo/core';
import { createLimiter } from './concurrency.js';
import { containsReward } from './contains-fallback.js';
import { buildJudgeMessages, JUDGE_PROMPT_VERSION } from './judge-prompt.js';
import { consoleRewardLogger, type RewardLogger } from './logger.js';
import type { RewardFunction, RewardInput, RewardResult } from './reward-function.js';
import {
  type JudgeVerdict,
  JudgeVerdictSchema,
  VerdictCache,
  verdictKey,
} from './verdict-cache.js';

export type JudgeFallbackReason = 'engine_error' | 'invalid_verdict';

export interface JudgeDetails {
  /** The verdict, absent when the fallback scored the answer. */
  verdict?: JudgeVerdict;
  cached: boolean;
  model: string;
  promptVersion: string;
  key: string;
  fallback?: {
    reason: JudgeFallbackReason;
    message: string;
    rewardName: string;
    details: object;
  };
}

export interface JudgeStats {
  /** score() calls. */
  requests: number;
  /** Calls that reached the engine. */
  engineCalls: number;
  cacheHits: number;
  /** Requests that joined an identical request already in flight. */
  sharedInFlight: number;
  /** Requests scored by the fallback instead of a verdict (errors + invalid verdicts). */
  fallbacks: number;
  engineErrors: number;
  invalidVerdicts: number;
  verdictsTrue: number;
  verdictsFalse: number;
}

export interface LLMJudgeOptions {
  engine: LLMEngine;
  /** Metric name (default 'judge'). */
  name?: string;
  /** Most engine calls in flight at once (default 8). */
  concurrency?: number;
  /** Default: a fresh in-memory cache. `null` turns caching off. */
  cache?: VerdictCache | null;
  logger?: RewardLogger;
  /** Scores an answer when the judge fails. Default: the seeds' containment check. */
  fallback?: RewardFunction<object>;
  /** Must change whenever `buildMessages` changes, since it is part of the cache key. */
  promptVersion?: string;
  buildMessages?: (input: RewardInput) => ChatMessage[];
  /** Passed to generateObject (default temperature 0, schemaName 'answer_verification'). */
  generateOptions?: GenerateObjectOptions;
}

type Outcome =
  | { ok: true; verdict: JudgeVerdict }
  | { ok: false; reason: JudgeFallbackReason; message: string };

/**
 * An LLM judge: asks the engine for a structured verdict `{ analysis, true_false }` and scores
 * 1 or 0. When the call throws or the object does not match the schema, the fallback scores the
 * answer instead; that is logged and counted (`stats.fallbacks`), never silent.
 */
export class LLMJudge implements RewardFunction<JudgeDetails> {
  readonly name: string;
  readonly stats: JudgeStats = {
    requests: 0,
    engineCalls: 0,
    cacheHits: 0,
    sharedInFlight: 0,
    fallbacks: 0,
    engineErrors: 0,
    invalidVerdicts: 0,
    verdictsTrue: 0,
    verdictsFalse: 0,
  };
  readonly cache: VerdictCache | null;
  private readonly engine: LLMEngine;
  private readonly logger: RewardLogger;
  private readonly fallback: RewardFunction<object>;
  private readonly promptVersion: string;
  private readonly buildMessages: (input: RewardInput) => ChatMessage[];
  private readonly generateOptions: GenerateObjectOptions;
  private readonly limit: <T>(task: () => Promise<T>) => Promise<T>;
  private readonly inFlight = new Map<string, Promise<Outcome>>();

  constructor(options: LLMJudgeOptions) {
    const concurrency = options.concurrency ?? 8;
    if (!Number.isInteger(concurrency) || concurrency < 1) {
      throw new ConfigError(`judge concurrency must be a positive integer, got ${concurrency}`, {
        key: 'concurrency',
      });
    }
    if (options.buildMessages && options.promptVersion === undefined) {
      throw new ConfigError('a custom buildMessages needs its own promptVersion (cache key)', {
        key: 'promptVersion',
      });
    }
    this.engine = options.engine;
    this.name = options.name ?? 'judge';
    this.logger = options.logger ?? consoleRewardLogger;
    this.cache = options.cache === undefined ? VerdictCache.memory(this.logger) : options.cache;
    this.fallback = options.fallback ?? containsReward();
    this.promptVersion = options.promptVersion ?? JUDGE_PROMPT_VERSION;
    this.buildMessages = options.buildMessages ?? buildJudgeMessages;
    this.generateOptions = {
      temperature: 0,
      schemaName: 'answer_verification',
      ...options.generateOptions,
    };
    this.limit = createLimiter(concurrency);
  }

  /** The counters as flat metrics (`judge/fallbacks`, ...), for the trainer's logs. */
  metrics(): Record<string, number> {
    const out: Record<string, number> = {};
    for (const [k, v] of Object.entries(this.stats)) out[`${this.name}/${k}`] = v;
    return out;
  }

  async score(input: RewardInput): Promise<RewardResult<JudgeDetails>> {
    this.stats.requests++;
    const model = this.engine.model;
    const key = verdictKey({
      model,
      promptVersion: this.promptVersion,
      question: input.question,
      answer: input.finalAnswer,
      groundTruth: input.groundTruth,
    });
    const base = { model, promptVersion: this.promptVersion, key };

    const cached = this.cache?.get(key);
    if (cached) {
      this.stats.cacheHits++;
      return {
        score: cached.true_false ? 1 : 0,
        details: { ...base, verdict: cached, cached: true },
      };
    }

    let pending = this.inFlight.get(key);
    if (pending) this.stats.sharedInFlight++;
    else {
      pending = this.limit(() => this.ask(input, key)).finally(() => this.inFlight.delete(key));
      this.inFlight.set(key, pending);
    }
    const outcome = await pending;

    if (outcome.ok) {
      return {
        score: outcome.verdict.true_false ? 1 : 0,
        details: { ...base, verdict: outcome.verdict, cached: false },
      };
    }
    this.stats.fallbacks++;
    const fb = await this.fallback.score(input);
    this.logger.warn(`judge fell back to ${this.fallback.name}`, {
      reason: outcome.reason,
      message: outcome.message,
      model,
      key,
      fallbackScore: fb.score,
      fallbacks: this.stats.fallbacks,
    });
    return {
      score: fb.score,
      details: {
        ...base,
        cached: false,
        fallback: {
          reason: outcome.reason,
          message: outcome.message,
          rewardName: this.fallback.name,
          details: fb.details,
        },
      },
    };
  }

  private async ask(input: RewardInput, key: string): Promise<Outcome> {
    this.stats.engineCalls++;
    let object: unknown;
    try {
      const result = await this.engine.generateObject(
        this.buildMessages(input),
        JudgeVerdictSchema,
        this.generateOptions,
      );
      object = result.object;
    } catch (e) {
      this.stats.engineErrors++;
      return {
        ok: false,
        reason: 'engine_error',
        message: e instanceof Error ? e.message : String(e),
      };
    }
    // Engines validate against the schema, but a custom one may not: never trust the object.
    const parsed = JudgeVerdictSchema.safeParse(object);
    if (!parsed.success) {
      this.stats.invalidVerdicts++;
      return {
        ok: false,
        reason: 'invalid_verdict',
        message: `verdict does not match {analysis, true_false}: ${parsed.error.issues
          .map((i) => `${i.path.join('.') || '(root)'}: ${i.message}`)
          .join('; ')}`,
      };
    }
    const verdict = parsed.data;
    if (verdict.true_false) this.stats.verdictsTrue++;
    else this.stats.verdictsFalse++;
    this.cache?.set(key, verdict, {
      model: this.engine.model,
      promptVersion: this.promptVersion,
    });
    return { ok: true, verdict };
  }
}

export function llmJudgeReward(options: LLMJudgeOptions): LLMJudge {
  return new LLMJudge(options);
}
