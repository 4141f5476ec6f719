import { mkdirSync, mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { OpenAITestServer, reply } from '@flowgrpo/agent/testing';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { checkEndpoints, EndpointUnreachableError } from '../src/endpoint-check.js';
import { runCli } from '../src/main.js';
import { captureIO } from './support.js';
import { grpoConfig, tinyModel, writeConfig } from './train-fixtures.js';

// Preflight asks each server a run names (agent.engine, judge, rollout servers) for GET /models
// before anything is built: real HTTP servers on 127.0.0.1 (OpenAITestServer) that answer, refuse
// with a status, or never answer; and the port of a server this file opened and closed, for a
// refused connection (fetch itself refuses port 9, the usual "nothing listens" port). The
// expected messages are the check's own wording (endpoint-check.ts).

let DOWN: string;
beforeAll(async () => {
  const closed = await OpenAITestServer.start();
  DOWN = closed.baseURL;
  await closed.close();
});
let server: OpenAITestServer | undefined;
afterEach(async () => {
  await server?.close();
  server = undefined;
});

describe('checkEndpoints', () => {
  it('a server that answers passes; the API key is sent as a bearer token', async () => {
    server = await OpenAITestServer.start();
    const errors = await checkEndpoints([
      { key: 'agent.engine', baseUrl: server.baseURL, apiKey: 'sk-test' },
    ]);
    expect(errors).toEqual([]);
    expect(server.requests.map((r) => [r.method, r.path])).toEqual([['GET', '/v1/models']]);
    expect(server.requests[0]!.headers.authorization).toBe('Bearer sk-test');
  });

  it('nothing listening: ENDPOINT_UNREACHABLE naming every key that uses the URL, with the fix', async () => {
    const errors = await checkEndpoints([
      { key: 'agent.engine', baseUrl: DOWN, alternative: 'remove agent.engine' },
      { key: 'judge', baseUrl: `${DOWN}/` },
    ]);
    expect(errors).toHaveLength(1);
    const e = errors[0]!;
    expect(EndpointUnreachableError.isInstance(e)).toBe(true);
    expect(e.code).toBe('ENDPOINT_UNREACHABLE');
    expect(e.keys).toEqual(['agent.engine', 'judge']);
    expect(e.url).toBe(DOWN);
    expect(e.status).toBeUndefined();
    expect(e.message).toBe(`${DOWN} did not answer GET /models (connection refused)`);
    expect(e.hint).toBe(
      `start the server at ${DOWN} (e.g. vllm serve <model> --port N), or fix base_url, or remove agent.engine`,
    );
  });

  it('an error status names it, with the fix for that status', async () => {
    server = await OpenAITestServer.start();
    server.enqueue('models', reply.error(401, 'bad key'));
    const [e] = await checkEndpoints([{ key: 'judge', baseUrl: server.baseURL }]);
    expect(e?.status).toBe(401);
    expect(e?.message).toBe(`${server.baseURL} did not answer GET /models (HTTP 401)`);
    expect(e?.hint).toContain('check the API key');
  });

  it('a server that never answers: given up after the timeout', async () => {
    server = await OpenAITestServer.start();
    server.enqueue('models', reply.hang());
    const [e] = await checkEndpoints([{ key: 'judge', baseUrl: server.baseURL }], {
      timeoutMs: 200,
    });
    expect(e?.message).toBe(
      `${server.baseURL} did not answer GET /models (no answer within 0.2 s)`,
    );
  });
});

describe('flowgrpo train --dry-run: the servers a run names', () => {
  const tmp = mkdtempSync(join(tmpdir(), 'flowgrpo-cli-endpoints-'));
  let model: string;
  beforeAll(async () => {
    model = await tinyModel(join(tmp, 'tiny'));
  });
  afterAll(() => rmSync(tmp, { recursive: true, force: true }));

  const flow = (name: string, engine: Record<string, unknown> | undefined) => {
    const dir = join(tmp, name);
    mkdirSync(dir);
    const config = grpoConfig(dir, model, {
      agent: { type: 'flow', tools: ['calculator'], ...(engine && { engine }) },
      max_positions: 4096,
    });
    return { dir, file: writeConfig(join(dir, 'run.json'), config) };
  };

  it("refuses a Flow run whose roles' server does not answer, naming the URL and the fix", async () => {
    const { dir, file } = flow('down', { base_url: DOWN, model: 'roles' });
    const io = captureIO(dir);
    expect(await runCli(['train', '--config', file, '--dry-run'], io)).toBe(1);
    expect(io.err).toContain(
      `[ENDPOINT_UNREACHABLE] agent.engine: ${DOWN} did not answer GET /models (connection refused)`,
    );
    expect(io.err).toContain(
      'remove agent.engine to run the executor, verifier and generator offline (rule-based)',
    );
    expect(io.out).not.toContain('passed every check');
  });

  it('passes when the server answers, and offline (no agent.engine) with no server at all', async () => {
    server = await OpenAITestServer.start();
    const up = flow('up', { base_url: server.baseURL, model: 'roles' });
    const io = captureIO(up.dir);
    expect(await runCli(['train', '--config', up.file, '--dry-run'], io), io.err).toBe(0);
    expect(io.out).toMatch(/^dry run: .* passed every check/);
    expect(server.requests.map((r) => r.path)).toEqual(['/v1/models']);

    const offline = flow('offline', undefined);
    const io2 = captureIO(offline.dir);
    expect(await runCli(['train', '--config', offline.file, '--dry-run'], io2), io2.err).toBe(0);
  });
});
