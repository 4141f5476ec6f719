import { createHash } from 'node:crypto';
import { appendFile, mkdtemp, readFile, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import {
  type ChatMessage,
  ConfigError,
  emptyUsage,
  type GenerateObjectOptions,
  type GenerateObjectResult,
  type GenerateTextResult,
  type LLMEngine,
} from '@flowgrpo/core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { z } from 'zod';
import {
  JUDGE_PROMPT_VERSION,
  LLMJudge,
  mathEquivalenceReward,
  type RewardLogger,
  VerdictCache,
  verdictKey,
} from '../src/index.js';

/**
 * A deterministic LLMEngine: `respond` decides each object from the messages. With `validate`, it
 * parses the object with the schema like a real engine (a mismatch throws); without, it hands back
 * whatever `respond` made, like a careless custom engine.
 */
class ScriptedEngine implements LLMEngine {
  readonly calls: { messages: ChatMessage[]; options?: GenerateObjectOptions }[] = [];
  active = 0;
  maxActive = 0;
  constructor(
    readonly model: string,
    private readonly respond: (messages: ChatMessage[]) => unknown,
    private readonly opts: { validate?: boolean; delayMs?: number } = {},
  ) {}

  async generateText(): Promise<GenerateTextResult> {
    throw new Error('the judge must use generateObject');
  }

  async generateObject<T>(
    messages: ChatMessage[],
    schema: z.ZodType<T>,
    options?: GenerateObjectOptions,
  ): Promise<GenerateObjectResult<T>> {
    this.calls.push({ messages, options });
    this.active++;
    this.maxActive = Math.max(this.maxActive, this.active);
    try {
      if (this.opts.delayMs) await new Promise((r) => setTimeout(r, this.opts.delayMs));
      const raw = this.respond(messages);
      const object = (this.opts.validate ?? true) ? schema.parse(raw) : (raw as T);
      return {
        object,
        rawText: JSON.stringify(raw),
        usage: emptyUsage(),
        finishReason: 'stop',
        model: this.model,
      };
    } finally {
      this.active--;
    }
  }
}

/** Says true exactly when the candidate mentions Paris. */
const parisJudge = (messages: ChatMessage[]) => {
  const candidate = messages[1]!.content.split('Candidate answer:\n')[1]!;
  const ok = /paris/i.test(candidate);
  return { analysis: ok ? 'names Paris' : 'does not name Paris', true_false: ok };
};

class CapturingLogger implements RewardLogger {
  readonly events: { message: string; fields?: Record<string, unknown> }[] = [];
  warn(message: string, fields?: Record<string, unknown>): void {
    this.events.push({ message, fields });
  }
}

const q = { question: 'What is the capital of France?', groundTruth: ['Paris', 'City of Paris'] };

describe('LLM judge with a scripted engine', () => {
  it('turns verdicts into 1/0 and sends our prompt with the structured schema', async () => {
    const engine = new ScriptedEngine('judge-model', parisJudge);
    const judge = new LLMJudge({ engine, logger: new CapturingLogger() });
    const yes = await judge.score({ ...q, finalAnswer: 'It is Paris.' });
    const no = await judge.score({ ...q, finalAnswer: 'Lyon' });
    expect(yes.score).toBe(1);
    expect(yes.details.verdict).toEqual({ analysis: 'names Paris', true_false: true });
    expect(no.score).toBe(0);
    expect(judge.stats).toMatchObject({
      requests: 2,
      engineCalls: 2,
      verdictsTrue: 1,
      verdictsFalse: 1,
      fallbacks: 0,
    });
    const [system, user] = engine.calls[0]!.messages;
    expect(system!.role).toBe('system');
    expect(user!.content).toContain('What is the capital of France?');
    expect(user!.content).toContain('Paris\nCity of Paris'); // alternatives one per line
    expect(user!.content).toContain('Candidate answer:\nIt is Paris.');
    expect(engine.calls[0]!.options).toMatchObject({
      temperature: 0,
      schemaName: 'answer_verification',
    });
  });

  it('a cache hit avoids a second engine call; another model is another key', async () => {
    const engine = new ScriptedEngine('judge-model', parisJudge);
    const cache = VerdictCache.memory();
    const judge = new LLMJudge({ engine, cache });
    await judge.score({ ...q, finalAnswer: 'Paris' });
    const again = await judge.score({ ...q, finalAnswer: 'Paris' });
    expect(engine.calls).toHaveLength(1);
    expect(again.details.cached).toBe(true);
    expect(again.score).toBe(1);
    expect(judge.stats.cacheHits).toBe(1);
    const other = new ScriptedEngine('other-model', parisJudge);
    await new LLMJudge({ engine: other, cache }).score({ ...q, finalAnswer: 'Paris' });
    expect(other.calls).toHaveLength(1);
  });

  it('identical requests in flight share one engine call', async () => {
    const engine = new ScriptedEngine('m', parisJudge, { delayMs: 20 });
    const judge = new LLMJudge({ engine });
    const rs = await Promise.all([1, 2, 3].map(() => judge.score({ ...q, finalAnswer: 'Paris' })));
    expect(rs.map((r) => r.score)).toEqual([1, 1, 1]);
    expect(engine.calls).toHaveLength(1);
    expect(judge.stats.sharedInFlight).toBe(2);
  });

  it('a throwing engine falls back to containment, logged and counted, and is not cached', async () => {
    const engine = new ScriptedEngine('m', () => {
      throw new Error('HTTP 503 from judge');
    });
    const logger = new CapturingLogger();
    const judge = new LLMJudge({ engine, logger });
    // Seed fallback: lower-cased gold inside the lower-cased answer.
    const hit = await judge.score({ ...q, finalAnswer: 'the capital is PARIS' });
    const miss = await judge.score({ ...q, finalAnswer: 'Lyon' });
    expect(hit.score).toBe(1);
    expect(miss.score).toBe(0);
    expect(hit.details.fallback).toMatchObject({
      reason: 'engine_error',
      message: 'HTTP 503 from judge',
      rewardName: 'contains',
    });
    expect(judge.stats).toMatchObject({ fallbacks: 2, engineErrors: 2, invalidVerdicts: 0 });
    expect(judge.metrics()['judge/fallbacks']).toBe(2);
    expect(logger.events).toHaveLength(2);
    expect(logger.events[0]!.fields).toMatchObject({ reason: 'engine_error', fallbackScore: 1 });
    await judge.score({ ...q, finalAnswer: 'the capital is PARIS' });
    expect(engine.calls).toHaveLength(3); // the failure was retried, not served from cache
  });

  it('a verdict that does not match the schema falls back too', async () => {
    const engine = new ScriptedEngine('m', () => ({ analysis: 3, verdict: 'yes' }), {
      validate: false,
    });
    const logger = new CapturingLogger();
    const judge = new LLMJudge({ engine, logger, fallback: mathEquivalenceReward() });
    const r = await judge.score({
      question: '1/2 as a decimal?',
      groundTruth: '\\frac{1}{2}',
      finalAnswer: '0.5',
    });
    expect(r.score).toBe(1); // the math fallback: 0.5 = 1/2
    expect(r.details.fallback?.reason).toBe('invalid_verdict');
    expect(r.details.fallback?.message).toMatch(/analysis/);
    expect(judge.stats).toMatchObject({ fallbacks: 1, invalidVerdicts: 1 });
    expect(logger.events).toHaveLength(1);
  });

  it('never has more engine calls in flight than its concurrency', async () => {
    const engine = new ScriptedEngine('m', parisJudge, { delayMs: 15 });
    const judge = new LLMJudge({ engine, concurrency: 2 });
    const answers = ['Paris', 'Lyon', 'Nice', 'paris!', 'Marseille', 'Lille'];
    const rs = await Promise.all(answers.map((a) => judge.score({ ...q, finalAnswer: a })));
    expect(rs.map((r) => r.score)).toEqual([1, 0, 0, 1, 0, 0]);
    expect(engine.calls).toHaveLength(6);
    expect(engine.maxActive).toBe(2);
  });

  it('rejects bad options', () => {
    const engine = new ScriptedEngine('m', parisJudge);
    expect(() => new LLMJudge({ engine, concurrency: 0 })).toThrow(ConfigError);
    expect(() => new LLMJudge({ engine, buildMessages: () => [] })).toThrow(/promptVersion/);
  });
});

describe('verdict cache persisted to JSONL', () => {
  let dir = '';
  beforeAll(async () => {
    dir = await mkdtemp(join(tmpdir(), 'flowgrpo-reward-'));
  });
  afterAll(async () => {
    await rm(dir, { recursive: true, force: true });
  });

  it('the key is sha256 of the JSON array [model, prompt version, question, answer, gold]', () => {
    const expected = createHash('sha256')
      .update(JSON.stringify(['m', JUDGE_PROMPT_VERSION, 'Q', 'A', ['G1', 'G2']]))
      .digest('hex');
    expect(
      verdictKey({
        model: 'm',
        promptVersion: JUDGE_PROMPT_VERSION,
        question: 'Q',
        answer: 'A',
        groundTruth: ['G1', 'G2'],
      }),
    ).toBe(expected);
    // Field boundaries matter: moving a character between fields changes the key.
    const a = verdictKey({
      model: 'm',
      promptVersion: 'v',
      question: 'ab',
      answer: 'c',
      groundTruth: 'g',
    });
    const b = verdictKey({
      model: 'm',
      promptVersion: 'v',
      question: 'a',
      answer: 'bc',
      groundTruth: 'g',
    });
    expect(a).not.toBe(b);
  });

  it('survives a restart: a new judge reads verdicts instead of calling the engine', async () => {
    const path = join(dir, 'sub', 'verdicts.jsonl');
    const first = new LLMJudge({
      engine: new ScriptedEngine('m', parisJudge),
      cache: await VerdictCache.open(path),
    });
    await first.score({ ...q, finalAnswer: 'Paris' });
    await first.score({ ...q, finalAnswer: 'Lyon' });
    await first.cache!.flush();
    const lines = (await readFile(path, 'utf8'))
      .trim()
      .split('\n')
      .map((l) => JSON.parse(l));
    expect(lines).toHaveLength(2);
    expect(lines[0]).toMatchObject({
      key: verdictKey({ model: 'm', promptVersion: JUDGE_PROMPT_VERSION, ...q, answer: 'Paris' }),
      model: 'm',
      promptVersion: JUDGE_PROMPT_VERSION,
      true_false: true,
    });

    await appendFile(path, '{"key": "torn line\n');
    const logger = new CapturingLogger();
    const reopened = await VerdictCache.open(path, logger);
    expect(reopened.stats).toMatchObject({ loaded: 2, skippedLines: 1 });
    expect(logger.events[0]!.message).toMatch(/unreadable line/);
    const broken = new ScriptedEngine('m', () => {
      throw new Error('offline');
    });
    const second = new LLMJudge({ engine: broken, cache: reopened, logger });
    expect((await second.score({ ...q, finalAnswer: 'Paris' })).score).toBe(1);
    expect((await second.score({ ...q, finalAnswer: 'Lyon' })).score).toBe(0);
    expect(broken.calls).toHaveLength(0);
    expect(second.stats).toMatchObject({ cacheHits: 2, fallbacks: 0 });
  });
});
