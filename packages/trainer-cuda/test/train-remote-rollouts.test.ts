// GRPO with rollouts on remote servers (`rolloutEngine`): two OpenAITestServers (real HTTP on
// 127.0.0.1, @flowgrpo/agent/testing) behind one OpenAIPolicyEngine, on the tiny demo setup of
// the other GRPOTrainer tests. The servers answer every completion with a text chosen by the
// request's seed (so the run, its requests included, is the same whatever server the balancer
// picks), and refuse one that names an adapter they have not loaded, as vLLM does (404). The
// last test samples for real: two of our own gateways (`flowgrpo serve`'s LocalPolicyHost over the
// tiny model's artifacts), hot-loading the adapters the trainer sends.
import { createHash } from 'node:crypto';
import { existsSync, mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { LLMRequestError, OpenAIPolicyEngine } from '@flowgrpo/agent';
import {
  checkVllmRequest,
  OpenAITestServer,
  type RecordedRequest,
  reply,
} from '@flowgrpo/agent/testing';
import type { SampleRow } from '@flowgrpo/core';
import { createPolicyGateway, LocalPolicyHost } from '@flowgrpo/gateway';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { makeQuestions, questionRows } from '../src/demo/index.js';
import type { GRPOConfigInput, TrainResult } from '../src/index.js';
import { rolloutJobs } from '../src/trainers/rollout-jobs.js';
import { tinyConfig, tinySetup, tinyTrainer } from './support/tiny-grpo.js';

const root = mkdtempSync(join(tmpdir(), 'flowgrpo-remote-rollouts-'));
afterAll(() => rmSync(root, { recursive: true, force: true }));
beforeAll(async () => {
  await tinySetup(root);
}, 120_000);

const servers: OpenAITestServer[] = [];
afterEach(async () => {
  await Promise.all(servers.splice(0).map((s) => s.close()));
});

// Three planner texts with different shares of double quotes (the tiny setup's reward), so the
// groups' rewards differ and the updates are not all skipped.
const TEXTS = ['"a" "b"', 'plain words', '"x" y'];

/** Two test servers and the engine over them, as `flowgrpo train` builds it for `rollout:`. */
async function fleet() {
  const { model } = await tinySetup(root);
  const tok = model.tokenizer;
  for (let i = 0; i < 2; i++) {
    const s = await OpenAITestServer.start({ model: 'tiny' });
    s.setFallback(
      'completions',
      reply.dynamic((req) => {
        const name = req.body.model;
        if (name !== 'tiny' && !s.adapters.has(String(name)))
          return reply.error(404, `The model \`${String(name)}\` does not exist.`);
        const text = TEXTS[Number(req.body.seed ?? 0) % TEXTS.length]!;
        const ids = [...tok.encode(text)];
        return reply.tokens(text, { ids, logprobs: ids.map(() => -1) });
      }),
    );
    servers.push(s);
  }
  const engine = new OpenAIPolicyEngine({
    model: 'tiny',
    baseURLs: servers.map((s) => s.baseURL),
    tokenizer: { encode: (t) => tok.encode(t), decode: (ids) => tok.decode(ids) },
    retry: { maxRetries: 0 },
  });
  return { engine, servers: [...servers] };
}

const config = (out: string, extra: Partial<GRPOConfigInput>) =>
  tinyConfig(join(root, out), { queries_per_step: 2, learning_rate: 0.03, ...extra });

const steps = (r: TrainResult) => r.metrics.filter((m) => typeof m.reward === 'number');

/** A request as the log compares it: route, path and body (its arrival order dropped). */
const logged = (r: RecordedRequest) => JSON.stringify([r.route, r.path, r.body]);

describe('rolloutEngine', () => {
  it('max_staleness 0: the requests the servers saw before max_staleness ≥ 1 existed', async () => {
    const { engine, servers } = await fleet();
    await (
      await tinyTrainer(root, config('sync', { max_steps: 3, max_staleness: 0 }), {
        extra: { rolloutEngine: engine },
      })
    ).train();
    // Every server: unload (404, nothing loaded yet) then load of 'flowgrpo-policy' for the
    // adapter the run starts from and after each of the 3 steps — adapters/step-<n>.
    for (const s of servers) {
      const lora = s.requests.filter((r) => r.route !== 'completions');
      expect(lora.map((r) => [r.route, r.body.lora_name])).toEqual(
        [0, 1, 2, 3].flatMap(() => [
          ['unload_lora_adapter', 'flowgrpo-policy'],
          ['load_lora_adapter', 'flowgrpo-policy'],
        ]),
      );
      expect(
        lora.filter((r) => r.route === 'load_lora_adapter').map((r) => r.body.lora_path),
      ).toEqual([0, 1, 2, 3].map((n) => join(root, 'sync', 'adapters', `step-${n}`)));
    }
    // The whole log (every body, the completions' included), sorted: the balancer's choice of
    // server is timing, not behaviour. Paths under the run's temporary folder are made relative.
    const all = servers
      .flatMap((s) => s.requests.map(logged))
      .map((l) => l.replaceAll(root, '<root>'))
      .sort();
    // One planner turn per rollout (3 steps × 2 questions × 4 generations): the texts are no
    // plan the demo agent could go on with. Each names the adapter loaded last.
    const completions = all.filter((l) => l.startsWith('["completions"'));
    expect(completions.length).toBe(3 * 2 * 4);
    for (const l of completions) expect(JSON.parse(l)[2].model).toBe('flowgrpo-policy');
    // Recorded at 9061b8a (main, before max_staleness ≥ 1 took a rolloutEngine), same config.
    expect(createHash('sha256').update(all.join('\n')).digest('hex')).toBe(
      '43fb95d6bfc3ced411c3e4e8554ce9f8f21771e642af223514742ebd1a2e1f17',
    );
    expect(existsSync(join(root, 'sync', 'adapters', 'step-3'))).toBe(true);
  }, 120_000);

  it('max_staleness 1 on two servers: each version loaded on both under its own name, batch b sampled from version b − 1, old versions unloaded', async () => {
    const { engine, servers } = await fleet();
    const { almanac } = await tinySetup(root);
    const out = join(root, 'k1');
    const r = await (
      await tinyTrainer(root, config('k1', { max_steps: 4, max_staleness: 1 }), {
        extra: {
          rolloutEngine: engine,
          evalDataset: questionRows(makeQuestions(almanac, 'test', 2, 'tiny')),
        },
      })
    ).train();
    const got = steps(r);
    // As with the local engine (train-async-rollouts.test.ts): batch 0 has nothing to be sampled
    // ahead of, batch b ≥ 1 is sampled from the adapter batch b − 1 started from, one update
    // (μ = 1) before the one trained on it.
    expect(got.map((m) => m['async/staleness_max'])).toEqual([0, 1, 1, 1]);
    expect(got.map((m) => m['async/staleness_mean'])).toEqual([0, 1, 1, 1]);
    for (const m of got)
      for (const k of ['timing/wait_rollout_s', 'timing/wait_train_s', 'timing/rollout_s'])
        expect(m[k], k).toBeGreaterThanOrEqual(0);

    // Versions (the global_step of the adapter): 0 for batches 0 and 1, 1 for batch 2, 2 for
    // batch 3, and — sampled while step 4 trained, then discarded — 3 for batch 4, unless the
    // run ended before the sampler started it; then 4 for the final evaluation. Each is loaded
    // once, before the batch using it, and unloaded once no batch or evaluation holds it.
    const name = (v: number) => `flowgrpo-policy-v${v}`;
    const loadsOf = (s: OpenAITestServer) =>
      s.requestsTo('load_lora_adapter').map((q) => q.body.lora_name);
    const loads = loadsOf(servers[0]!);
    expect([[0, 1, 2, 4].map(name), [0, 1, 2, 3, 4].map(name)]).toContainEqual(loads);
    // A version is unloaded once the batch after its last has loaded its own (the sampler's
    // batches run one after the other); the evaluation's last.
    const lora = (s: OpenAITestServer) =>
      s.requests
        .filter((q) => q.route !== 'completions')
        .map((q) => `${q.route === 'load_lora_adapter' ? 'load' : 'unload'} ${q.body.lora_name}`);
    const v = (op: string, n: number) => `${op} ${name(n)}`;
    expect([
      [v('load', 0), v('load', 1), v('unload', 0), v('load', 2), v('unload', 1)],
    ]).toContainEqual(lora(servers[0]!).slice(0, 5));
    expect(lora(servers[0]!).slice(5)).toEqual(
      loads.length === 5
        ? [v('load', 3), v('unload', 2), v('unload', 3), v('load', 4), v('unload', 4)]
        : [v('unload', 2), v('load', 4), v('unload', 4)],
    );
    for (const s of servers) {
      // Every server received every version's load, in the same order, and its unload.
      expect(loadsOf(s)).toEqual(loads);
      expect(
        s
          .requestsTo('unload_lora_adapter')
          .map((q) => q.body.lora_name)
          .sort(),
      ).toEqual([...loads].sort());
      expect(s.adapters.size).toBe(0);
      for (const q of s.requestsTo('load_lora_adapter')) {
        const v = Number(String(q.body.lora_name).slice(name(0).length - 1));
        expect(q.body).toEqual({
          lora_name: name(v),
          lora_path: join(out, 'adapters', `step-${v}`),
        });
        // vLLM's LoadLoRAAdapterRequest / UnloadLoRAAdapterRequest (vllm-protocol.ts cites them).
        expect(checkVllmRequest('load', q.body)).toEqual({ ignored: [] });
      }
      for (const q of s.requestsTo('unload_lora_adapter'))
        expect(checkVllmRequest('unload', q.body)).toEqual({ ignored: [] });
      for (const q of s.requestsTo('completions'))
        expect(checkVllmRequest('completion', q.body)).toEqual({ ignored: [] });
      // Only the synchronous loop's single name is hot-loaded by updateAdapter: never here.
      expect(loadsOf(s)).not.toContain('flowgrpo-policy');
    }
    // The folders went with their versions.
    for (const v of [0, 1, 2, 3, 4])
      expect(existsSync(join(out, 'adapters', `step-${v}`)), `step-${v}`).toBe(false);

    // Each request's batch, from its seed: rollout j of batch b samples with seed
    // (base_b + j)·1000 + turn (rollout-jobs.ts, the agent's callSeed).
    const rows = Array.from({ length: 2 }, (_, id) => ({ id, question: '' }) as SampleRow);
    const batchOf = (seed: number) =>
      [0, 1, 2, 3, 4].find((b) =>
        rolloutJobs(7, b, rows, 4).some((j) => j.seed === Math.floor(seed / 1000)),
      );
    const completions = servers.flatMap((s) => s.requestsTo('completions'));
    const sampled = completions.filter((q) => q.body.temperature === 1);
    for (const q of sampled) {
      const b = batchOf(Number(q.body.seed));
      expect(b, `seed ${q.body.seed}`).toBeDefined();
      expect(q.body.model, `batch ${b}`).toBe(name(Math.max(0, b! - 1)));
    }
    // Batches 0–3 are trained (4 rollouts × 2 questions, one turn each), batch 4 maybe begun.
    for (const b of [0, 1, 2, 3])
      expect(sampled.filter((q) => batchOf(Number(q.body.seed)) === b)).toHaveLength(8);
    // The final evaluation (greedy) names the adapter trained last.
    const evaluated = completions.filter((q) => q.body.temperature === 0);
    expect(evaluated.length).toBeGreaterThan(0);
    for (const q of evaluated) expect(q.body.model).toBe(name(4));
    // Both servers sampled (the balancer spreads requests over them).
    for (const s of servers) expect(s.requestsTo('completions').length).toBeGreaterThan(0);
  }, 120_000);

  it('max_staleness 1, aborted and resumed: the batch in flight is sampled again from the version the checkpoint kept', async () => {
    const { engine, servers } = await fleet();
    const cfg = (more: Partial<GRPOConfigInput> = {}) =>
      config('resume', { max_steps: 4, max_staleness: 1, save_steps: 1, ...more });
    const stop = new AbortController();
    const first = await (
      await tinyTrainer(root, cfg(), {
        extra: {
          rolloutEngine: engine,
          signal: stop.signal,
          onLog: (m) => m.step === 2 && stop.abort(),
        },
      })
    ).train();
    expect(first.globalStep).toBe(2);
    // The aborted run left nothing loaded (its versions were unloaded as it stopped).
    for (const s of servers) expect(s.adapters.size).toBe(0);
    const before = servers.map((s) => s.requests.length);
    const resumed = await (
      await tinyTrainer(root, cfg({ resume_from_checkpoint: true }), {
        extra: { rolloutEngine: engine },
      })
    ).train();
    // (The run's metrics.jsonl holds steps 1 and 2 from before the abort.)
    expect(
      steps(resumed)
        .filter((m) => (m.step as number) > 2)
        .map((m) => [m.step, m['async/staleness_max']]),
    ).toEqual([
      [3, 1],
      [4, 1],
    ]);
    // checkpoint-2 kept the adapter of step 1 that batch 2 is sampled from (async-rollouts.ts):
    // the resumed run loads it first, as version 1, and batch 2's requests name it.
    for (const [i, s] of servers.entries()) {
      const after = s.requests.slice(before[i]);
      expect(after.find((q) => q.route === 'load_lora_adapter')?.body.lora_name).toBe(
        'flowgrpo-policy-v1',
      );
      expect(s.adapters.size).toBe(0);
    }
  }, 120_000);

  it('max_staleness 1: a server that fails to load a version fails the step with its error; no request names another adapter', async () => {
    const { engine, servers } = await fleet();
    // The second server refuses version 1 (as vLLM answers a load it cannot do: an error status).
    const s = servers[1]!;
    s.setFallback(
      'load_lora_adapter',
      reply.dynamic((req) => {
        const name = String(req.body.lora_name);
        if (name === 'flowgrpo-policy-v1') return reply.error(500, 'CUDA out of memory');
        s.adapters.set(name, String(req.body.lora_path));
        return reply.json(`Success: LoRA adapter '${name}' added successfully.`);
      }),
    );
    const seen: number[] = [];
    const e = await (
      await tinyTrainer(root, config('fail', { max_steps: 4, max_staleness: 1 }), {
        extra: { rolloutEngine: engine, onLog: (m) => seen.push(m.step as number) },
      })
    )
      .train()
      .then(
        () => undefined,
        (x: unknown) => x,
      );
    // The engine's typed error, as a failed updateAdapter surfaces with max_staleness 0.
    expect(LLMRequestError.isInstance(e), String(e)).toBe(true);
    expect((e as LLMRequestError).status).toBe(500);
    // Batches 0 and 1 (version 0) were trained; batch 2, sampled from version 1, never started.
    expect(seen.filter((step) => step > 0)).toEqual([1, 2]);
    for (const srv of servers)
      for (const q of srv.requestsTo('completions'))
        expect(q.body.model).toBe('flowgrpo-policy-v0');
  }, 120_000);

  it('max_staleness 1 against two `flowgrpo serve` gateways: real samples from the version each batch names, hot-loaded and unloaded', async () => {
    const { model, artifacts } = await tinySetup(root);
    const seen: string[][] = [];
    const gateways = [];
    for (let i = 0; i < 2; i++) {
      const host = await LocalPolicyHost.open({
        artifacts,
        tokenizer: model.tokenizer,
        baseModel: 'tiny',
      });
      // What each server saw: its adapter loads and unloads, and the model of every generation.
      const log: string[] = [];
      seen.push(log);
      const load = host.loadAdapter.bind(host);
      const unload = host.unloadAdapter.bind(host);
      const engineOf = host.engine.bind(host);
      host.loadAdapter = (name, path, o) => {
        log.push(`load ${name}`);
        return load(name, path, o);
      };
      host.unloadAdapter = (name) => {
        log.push(`unload ${name}`);
        return unload(name);
      };
      host.engine = (name) => {
        log.push(`generate ${name}`);
        return engineOf(name);
      };
      const gw = await createPolicyGateway({ host });
      gateways.push({ gw, host });
    }
    try {
      const tok = model.tokenizer;
      const engine = new OpenAIPolicyEngine({
        model: 'tiny',
        baseURLs: gateways.map((g) => g.gw.baseURL),
        tokenizer: { encode: (t) => tok.encode(t), decode: (ids) => tok.decode(ids) },
        retry: { maxRetries: 0 },
      });
      const r = await (
        await tinyTrainer(
          root,
          config('serve', { max_steps: 4, max_staleness: 1, queries_per_step: 4 }),
          {
            extra: { rolloutEngine: engine },
          },
        )
      ).train();
      const got = steps(r);
      // As with the local engine: batch b ≥ 1 sampled from the adapter batch b − 1 started from.
      expect(got.map((m) => m['async/staleness_max'])).toEqual([0, 1, 1, 1]);
      // The servers' log-probs are their decode graph's for the adapter the batch named: on batch
      // 0 (version 0 = the adapter trained on) they agree with the trainer's to the graphs'
      // precision (measured 1.4e-6); later batches come from the version before the trained one,
      // so they differ by far more (measured 0.02–0.07) — the gateways did sample the old version.
      expect(got[0]!['logprob_mismatch/max']).toBeLessThanOrEqual(1e-4);
      for (const m of got.slice(1)) expect(m['logprob_mismatch/max']).toBeGreaterThan(1e-3);
      const name = (v: number) => `flowgrpo-policy-v${v}`;
      for (const log of seen) {
        // Both servers loaded and unloaded the same versions in the same order: 0 (batches 0
        // and 1), 1, 2, 3 (batches 2, 3 and the discarded batch 4, unless the run ended first).
        expect(log.filter((l) => !l.startsWith('generate'))).toEqual(
          seen[0]!.filter((l) => !l.startsWith('generate')),
        );
        expect(log.slice(0, 2)).toEqual([`load ${name(0)}`, `generate ${name(0)}`]);
        // Every generation named a version loaded on that server at the time, the newest one.
        const loaded: string[] = [];
        for (const l of log) {
          const [op, n] = l.split(' ') as [string, string];
          if (op === 'load') loaded.push(n);
          else if (op === 'unload') loaded.splice(loaded.indexOf(n), 1);
          else expect(n, l).toBe(loaded.at(-1));
        }
        expect(loaded).toEqual([]);
        // Batches 0–3 are sampled from versions 0, 0, 1, 2.
        const generated = new Set(log.filter((l) => l.startsWith('generate')));
        for (const v of [0, 1, 2]) expect(generated, name(v)).toContain(`generate ${name(v)}`);
      }
      for (const g of gateways) expect(g.host.models().map((m) => m.id)).toEqual(['tiny']);
    } finally {
      for (const g of gateways) {
        await g.gw.close();
        await g.host.close();
      }
    }
  }, 120_000);
});
