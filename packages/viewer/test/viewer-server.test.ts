// The viewer's server on a real run directory over real HTTP on 127.0.0.1: what the page reads
// (metrics, with a line still being written left for later and lines that are no record skipped
// and counted; alarm episodes; the tokenizer used or where it looked; the steps' rollouts; token
// HTML), and what it must
// never do: write (any method but GET is refused, the folder is unchanged), serve a file outside
// the run directory (`..`, encoded `..`, a symbolic link out), or listen beyond loopback unasked.
import {
  appendFileSync,
  mkdirSync,
  mkdtempSync,
  readdirSync,
  rmSync,
  symlinkSync,
  writeFileSync,
} from 'node:fs';
import { request } from 'node:http';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startViewer, type Viewer } from '../src/index.js';
import { logStep, startRun, writeStepRollouts } from './run-fixture.js';

const tmp = mkdtempSync(join(tmpdir(), 'flowgrpo-viewer-'));
const dir = join(tmp, 'run');
let viewer: Viewer;

/** A raw request (fetch would normalize `..` away before sending it). */
function raw(method: string, path: string): Promise<{ status: number; body: string }> {
  const { hostname, port } = new URL(viewer.url);
  return new Promise((ok, fail) => {
    const req = request({ host: hostname, port, method, path }, (res) => {
      let body = '';
      res.on('data', (c) => {
        body += c;
      });
      res.on('end', () => ok({ status: res.statusCode ?? 0, body }));
    });
    req.on('error', fail);
    req.end();
  });
}

beforeAll(async () => {
  startRun(dir);
  logStep(dir, { step: 1, reward: 0.5 });
  await writeStepRollouts(dir, 1);
  writeFileSync(join(tmp, 'secret.txt'), 'not the run');
  symlinkSync(join(tmp, 'secret.txt'), join(dir, 'link-out.txt'));
  viewer = await startViewer({ runDir: dir });
});
afterAll(async () => {
  await viewer?.close();
  rmSync(tmp, { recursive: true, force: true });
});

describe('flowgrpo view: server', () => {
  it('listens on 127.0.0.1 by default', () => {
    expect(new URL(viewer.url).hostname).toBe('127.0.0.1');
    expect(viewer.server.address()).toMatchObject({ address: '127.0.0.1' });
  });

  it('serves metrics, leaving a line still being written for later', async () => {
    appendFileSync(join(dir, 'metrics.jsonl'), '{"step": 2, "rew');
    const m = JSON.parse((await raw('GET', '/api/metrics')).body);
    expect(m.records).toEqual([{ step: 1, reward: 0.5 }]);
    expect(m.skipped).toBe(0);
    appendFileSync(join(dir, 'metrics.jsonl'), 'ard": 0.7}\n');
    const next = JSON.parse((await raw('GET', '/api/metrics?from=1')).body);
    expect(next).toEqual({
      from: 1,
      total: 2,
      skipped: 0,
      records: [{ step: 2, reward: 0.7 }],
      charts: [{ title: 'Reward', keys: ['reward'] }],
    });
  });

  it('skips and counts metrics lines that are no record (null, a number, a string, an array)', async () => {
    appendFileSync(join(dir, 'metrics.jsonl'), 'null\n3\n"x"\n[1]\n{"step": 3, "reward": 0.9}\n');
    const m = JSON.parse((await raw('GET', '/api/metrics?from=2')).body);
    expect(m).toMatchObject({ total: 3, skipped: 4, records: [{ step: 3, reward: 0.9 }] });
  });

  it('serves the alarm episodes with the charts they go on', async () => {
    const alarms = join(tmp, 'alarms');
    startRun(alarms);
    logStep(alarms, { step: 1, entropy: 1.2, 'alarms/entropy_collapse': 0 });
    logStep(alarms, { step: 2, entropy: 0.1, 'alarms/entropy_collapse': 1 });
    logStep(alarms, {
      step: 3,
      entropy: 0.1,
      'alarms/entropy_collapse': 1,
      'alarms/entropy_collapse/value': 0.08,
    });
    const v = await startViewer({ runDir: alarms });
    try {
      const episodes = await (await fetch(`${v.url}api/alarms`)).json();
      expect(episodes).toEqual([
        {
          name: 'entropy_collapse',
          from: 2,
          to: 3,
          open: true,
          value: 0.08,
          meaning: 'the policy entropy fell far below its early level (recent/early shown)',
          advice: expect.stringContaining('lower learning_rate'),
          metrics: ['entropy'],
          charts: ['Entropy'],
        },
      ]);
    } finally {
      await v.close();
    }
  });

  it('says which tokenizer shows the tokens, or everywhere it looked', async () => {
    const run = JSON.parse((await raw('GET', '/api/run')).body);
    expect(run.tokenizer).toEqual({
      path: join(dir, 'checkpoint-1', 'tokenizer.json'),
      from: 'checkpoint-1',
    });
    expect(run.stopReasons.parse_error.meaning).toContain('could not be parsed');
    const bare = join(tmp, 'bare');
    mkdirSync(join(bare, 'checkpoint-4'), { recursive: true });
    writeFileSync(join(bare, 'config.json'), JSON.stringify({ artifacts: join(tmp, 'artifacts') }));
    const v = await startViewer({ runDir: bare });
    try {
      const { tokenizer } = (await (await fetch(`${v.url}api/run`)).json()) as {
        tokenizer: unknown;
      };
      expect(tokenizer).toEqual({
        missing: [
          {
            from: 'checkpoint-4',
            path: join(bare, 'checkpoint-4', 'tokenizer.json'),
            reason: 'no such file',
          },
          {
            from: 'config.json artifacts',
            path: join(tmp, 'artifacts', 'tokenizer.json'),
            reason: 'no such file',
          },
        ],
      });
    } finally {
      await v.close();
    }
  });

  it('serves a step as summaries and its trajectories token by token', async () => {
    const summaries = JSON.parse((await raw('GET', '/api/steps/1')).body);
    expect(summaries.map((s: { reward: number }) => s.reward)).toEqual([1, 0, 0]);
    expect(summaries[2].error).toEqual({ code: 'TOOL_TIMEOUT', message: 'calculator timed out' });
    expect(summaries[2].roles).toEqual(['prompt', 'action', 'observation', 'rollout']);
    const { html } = JSON.parse((await raw('GET', '/api/steps/1/0,1')).body);
    expect(html).toHaveLength(2);
    // "calc": trained, the sampler's logprobs, the turn's advantage; text from tokenizer.json.
    expect(html[0]).toContain(
      '<span class="tok" data-id="3" data-logprob="-0.25" data-trainable="1" data-advantage="1">c</span>',
    );
    expect(html[0]).toContain('tool call <b>calculator</b>');
    expect(html[0]).toMatch(/class="masked toolresult"[^>]*>→ 42</);
    expect((await raw('GET', '/api/steps/9')).status).toBe(404);
    expect((await raw('GET', '/api/steps/1/7')).status).toBe(404);
  });

  it('confines /files/ to the run directory', async () => {
    expect((await raw('GET', '/files/config.json')).body).toContain('"trainer":"grpo"');
    for (const path of [
      '/files/../secret.txt',
      '/files/%2e%2e/secret.txt',
      '/files/..%2fsecret.txt',
      '/files/link-out.txt',
      `/files/${encodeURIComponent(join(tmp, 'secret.txt'))}`,
    ]) {
      const r = await raw('GET', path);
      expect(r.status, path).toBe(404);
      expect(r.body, path).not.toContain('not the run');
    }
  });

  it('is read-only: any method but GET is refused and the folder is unchanged', async () => {
    const before = readdirSync(dir, { recursive: true }).sort();
    for (const method of ['POST', 'PUT', 'DELETE', 'PATCH'])
      expect((await raw(method, '/files/config.json')).status, method).toBe(405);
    expect(readdirSync(dir, { recursive: true }).sort()).toEqual(before);
  });

  it('names a port in use, and a run directory that does not exist', async () => {
    const port = Number(new URL(viewer.url).port);
    await expect(startViewer({ runDir: dir, port })).rejects.toMatchObject({
      code: 'ADDRESS_IN_USE',
      hint: expect.stringContaining('--port'),
    });
    await expect(startViewer({ runDir: join(tmp, 'nope') })).rejects.toMatchObject({
      code: 'FILE_NOT_FOUND',
    });
  });
});
