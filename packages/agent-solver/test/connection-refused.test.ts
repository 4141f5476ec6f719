import { createServer } from 'node:net';
import { createCalculatorTool } from '@flowgrpo/tools';
import { describe, expect, it } from 'vitest';
import {
  classifyFailure,
  resolveRetryOptions,
  runWithRetries,
  systemErrorCode,
} from '../src/engines/retry.js';
import {
  FlowSolver,
  LLMRequestError,
  OpenAIEngine,
  OpenAIPolicyEngine,
  SolveFailedError,
} from '../src/index.js';

// A dead server fails fast: a refused connection is not retried (nothing listens there; a
// backoff will not start it). Each test points at a port where a server was bound and then
// closed, and counts the requests that went out through the client's fetch — attempts, not time.

/** A 127.0.0.1 port with nothing listening: bound by a server that is then closed. */
async function deadPort(): Promise<number> {
  const server = createServer();
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as { port: number };
  await new Promise<void>((resolve) => server.close(() => resolve()));
  return port;
}

/** The global fetch, counting the requests sent through it. */
function countingFetch(): { fetch: typeof fetch; calls: () => number } {
  let calls = 0;
  return {
    fetch: (input, init) => {
      calls++;
      return fetch(input, init);
    },
    calls: () => calls,
  };
}

/** A refused connection as undici reports it (TypeError "fetch failed" over the system error). */
function refusedError(): TypeError {
  const system = Object.assign(new Error('connect ECONNREFUSED 127.0.0.1:9'), {
    code: 'ECONNREFUSED',
  });
  return new TypeError('fetch failed', { cause: system });
}

describe('a refused connection', () => {
  it('fails an OpenAIEngine call after one attempt, with the default retry options (3 retries)', async () => {
    const port = await deadPort();
    const counter = countingFetch();
    const engine = new OpenAIEngine({
      model: 'm',
      baseURL: `http://127.0.0.1:${port}/v1`,
      fetch: counter.fetch,
    });
    const error = await engine.generateText([{ role: 'user', content: 'hi' }]).then(
      () => undefined,
      (e: unknown) => e,
    );
    expect(LLMRequestError.isInstance(error)).toBe(true);
    const e = error as LLMRequestError;
    expect(e.attempts).toBe(1);
    expect(e.retryable).toBe(false);
    expect(e.status).toBeUndefined();
    expect(e.message).toContain(`http://127.0.0.1:${port}/v1`);
    expect(e.message).toContain('connection refused (ECONNREFUSED)');
    // The fix travels with the error (a rollout's failure line prints it): what to check.
    expect(e.hint).toMatch(/is running and reachable \(base_url\)/);
    expect(counter.calls()).toBe(1);
  });

  it('fails a solve after one request per role: SolveFailedError, 3 requests in all', async () => {
    const port = await deadPort();
    const counter = countingFetch();
    const solver = new FlowSolver({
      engine: new OpenAIEngine({
        model: 'm',
        baseURL: `http://127.0.0.1:${port}/v1`,
        fetch: counter.fetch,
      }),
      tools: [createCalculatorTool()],
    });
    await expect(solver.solve('What is 12 squared?')).rejects.toSatisfy((e: unknown) =>
      SolveFailedError.isInstance(e),
    );
    // Analyzer, planner (step 1), generator: the calls a solve makes when each one fails.
    expect(counter.calls()).toBe(3);
  });

  it('fails a policy engine with one server after one attempt', async () => {
    const port = await deadPort();
    const counter = countingFetch();
    const policy = new OpenAIPolicyEngine({
      model: 'm',
      baseURLs: `http://127.0.0.1:${port}/v1`,
      fetch: counter.fetch,
    });
    const error = await policy.generate({ promptTokens: [1, 2], maxTokens: 1 }).then(
      () => undefined,
      (e: unknown) => e,
    );
    expect(LLMRequestError.isInstance(error)).toBe(true);
    expect((error as LLMRequestError).attempts).toBe(1);
    expect(counter.calls()).toBe(1);
  });

  it('is retried when the caller opts in (a server pool), up to maxRetries', async () => {
    let attempts = 0;
    const failure = await runWithRetries(
      async () => {
        attempts++;
        throw refusedError();
      },
      {
        retry: resolveRetryOptions({ maxRetries: 2, initialDelayMs: 1, maxDelayMs: 2 }),
        timeoutMs: 5_000,
        retryConnectionRefused: true,
      },
    ).then(
      () => undefined,
      (e: unknown) => e,
    );
    expect(attempts).toBe(3);
    expect((failure as LLMRequestError).attempts).toBe(3);
  });
});

describe('classifyFailure on network errors', () => {
  it('marks refused as not retryable and a reset as retryable, naming the system code', () => {
    expect(classifyFailure(refusedError())).toMatchObject({
      kind: 'network',
      retryable: false,
      systemCode: 'ECONNREFUSED',
    });
    const reset = new TypeError('fetch failed', {
      cause: Object.assign(new Error('read ECONNRESET'), { code: 'ECONNRESET' }),
    });
    expect(classifyFailure(reset)).toMatchObject({
      kind: 'network',
      retryable: true,
      systemCode: 'ECONNRESET',
      message: 'fetch failed (ECONNRESET)',
    });
  });

  it('finds the code under an AggregateError (a host with several addresses)', () => {
    const aggregate = new AggregateError(
      [
        Object.assign(new Error('connect ECONNREFUSED ::1:9'), { code: 'ECONNREFUSED' }),
        Object.assign(new Error('connect ECONNREFUSED 127.0.0.1:9'), { code: 'ECONNREFUSED' }),
      ],
      'connect failed',
    );
    expect(systemErrorCode(new TypeError('fetch failed', { cause: aggregate }))).toBe(
      'ECONNREFUSED',
    );
    expect(systemErrorCode(new Error('no code here'))).toBeUndefined();
  });
});
