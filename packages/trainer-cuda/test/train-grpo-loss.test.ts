// The in-graph GRPO objective against @flowgrpo/grpo, on a batch of recorded Flow turns:
// - the graph's log-probs against a plain-TS forward of the base weights with the LoRA adapter
//   merged in (ReferenceDecoder + mergeLora: an independent implementation), entropies too;
// - loss, its parts and TRL's statistics against grpoLoss() for every loss type (float32 vs
//   float64, 1e-5);
// - gradient accumulation: the gradients over many token-budgeted micro-batches equal the
//   one-batch gradients for every loss type (the classic bug normalises per micro-batch);
// - token exactness: rows are the sampled ids, and the logprobs graph equals the sampler.
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { createRng, type Trajectory } from '@flowgrpo/core';
import { grpoLoss, type LossAggregation } from '@flowgrpo/grpo';
import {
  type DecoderConfig,
  initLoraParams,
  initTinyWeights,
  type LoraConfig,
  type LoraParams,
  mergeLora,
  tinyQwen2Config,
} from '@flowgrpo/models';
import { ReferenceDecoder } from '@flowgrpo/models/testing';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import {
  buildTrainingArtifacts,
  LoraPolicy,
  rowsFromTrajectories,
  type Targets,
  type TrainRow,
  targetsOf,
  type UpdateHyperParams,
} from '../src/index.js';
import { aggregationWeights } from '../src/update/lora-policy.js';

const tmp = mkdtempSync(join(tmpdir(), 'flowgrpo-grpo-loss-'));
afterAll(() => rmSync(tmp, { recursive: true, force: true }));

const config: DecoderConfig = tinyQwen2Config({
  seed: 1,
  hiddenSize: 16,
  layers: 2,
  heads: 4,
  kvHeads: 2,
  intermediateSize: 24,
});
const lora: LoraConfig = {
  r: 2,
  alpha: 4,
  targetModules: ['q_proj', 'k_proj', 'v_proj', 'o_proj', 'gate_proj', 'up_proj', 'down_proj'],
};
const weights = initTinyWeights(config, 'grpo-loss');
// An adapter that is not the identity: B ≠ 0, so policy ≠ reference.
const params: LoraParams = initLoraParams(config, lora, 7);
for (const [name, v] of params)
  if (name.includes('lora_B'))
    for (let i = 0; i < v.length; i++) v[i] = Math.fround(0.2 * Math.sin(5 * i + name.length));

const T = 0.9;
/** Three groups × two trajectories, 1–3 planner turns each; prompts 3–12 tokens, actions 1–6. */
function trajectories(): { trajectories: Trajectory[]; advantages: number[] } {
  const rng = createRng('batch');
  const id = () => 3 + Math.floor(rng.next() * (config.vocabSize - 3));
  const out: Trajectory[] = [];
  for (let g = 0; g < 3; g++)
    for (let k = 0; k < 2; k++) {
      const turns = Array.from({ length: 1 + Math.floor(rng.next() * 3) }, (_, index) => {
        const promptTokens = Int32Array.from({ length: 3 + Math.floor(rng.next() * 10) }, id);
        const actionTokens = Int32Array.from({ length: 1 + Math.floor(rng.next() * 6) }, id);
        return {
          index,
          promptTokens,
          actionTokens,
          actionLogprobs: new Float32Array(actionTokens.length),
          text: '',
          parsed: true,
        };
      });
      out.push({
        queryId: `q${g}`,
        groupId: `g${g}`,
        turns,
        finalAnswer: '',
        stopReason: 'answer',
        timings: {},
      });
    }
  return { trajectories: out, advantages: [1.1, -0.9, 0.4, -0.4, 0.8, -1.3] };
}

let policy: LoraPolicy;
let rows: TrainRow[];
let targets: Targets;
let logp: Float32Array;
let old: Float32Array;
let ref: Float32Array;
beforeAll(async () => {
  const dir = join(tmp, 'artifacts');
  buildTrainingArtifacts(weights, dir, { lora, graphs: ['logprobs', 'train_step'] });
  policy = await LoraPolicy.open({
    artifacts: dir,
    params,
    intraOpThreads: 1,
    optimizer: { weightDecay: 0 },
  });
  const batch = trajectories();
  rows = rowsFromTrajectories(batch.trajectories, batch.advantages);
  targets = targetsOf(rows);
  const opts = { temperature: T, maxTokensPerMicrobatch: 4096 };
  logp = await policy.logprobs(rows, targets, { ...opts, loraScale: 1 });
  ref = await policy.logprobs(rows, targets, { ...opts, loraScale: 0 });
  // The "sampling" policy differs from the current one by up to ±0.5 nats per token, so ratios
  // fall on both sides of both clip bounds.
  const rng = createRng('old');
  old = Float32Array.from(logp, (x) => x + (rng.next() - 0.5));
});
afterAll(() => policy?.release());

describe('collation', () => {
  it('rows are the sampled ids: prompt + action per planner turn, loss on the action only', () => {
    const batch = trajectories();
    let r = 0;
    batch.trajectories.forEach((t, ti) => {
      for (const turn of t.turns!) {
        const row = rows[r++]!;
        expect(Array.from(row.tokens)).toEqual([...turn.promptTokens, ...turn.actionTokens]);
        expect(Array.from(row.mask)).toEqual([
          ...new Array(turn.promptTokens.length).fill(0),
          ...new Array(turn.actionTokens.length).fill(1),
        ]);
        expect(row.advantage).toBe(batch.advantages[ti]);
        expect(row.trajectory).toBe(ti);
      }
    });
    expect(r).toBe(rows.length);
    const actions = batch.trajectories
      .flatMap((t) => t.turns!)
      .reduce((s, u) => s + u.actionTokens.length, 0);
    expect(targets.count).toBe(actions);
  });
});

describe('logprobs graph', () => {
  it('equals a plain-TS forward of the merged weights (policy) and of the base weights (reference)', () => {
    // Independent reference: ReferenceDecoder over W + (alpha/r)·B·A, token by token.
    const merged = new ReferenceDecoder(mergeLora(weights, lora, params));
    const base = new ReferenceDecoder(weights);
    for (const [model, got] of [
      [merged, logp],
      [base, ref],
    ] as const) {
      let worst = 0;
      for (let j = 0; j < targets.count; j++) {
        const row = rows[targets.row[j]!]!;
        const cache = model.newCache(row.tokens.length);
        let logits: Float32Array = new Float32Array(0);
        for (let p = 0; p <= targets.pos[j]!; p++) logits = model.forward(row.tokens[p]!, p, cache);
        const want = logSoftmaxAt(logits, targets.id[j]!, T);
        worst = Math.max(worst, Math.abs(got[j]! - want));
      }
      expect(worst).toBeLessThan(1e-5);
    }
  });
});

const LOSS_TYPES: [string, LossAggregation][] = [
  ['grpo', 'seq-mean-token-mean'],
  ['bnpo/dapo', 'token-mean'],
  ['dr_grpo', 'seq-sum-norm'],
  ['flow', 'flow'],
];
const hp: UpdateHyperParams = {
  learningRate: 0,
  temperature: T,
  epsilonLow: 0.2,
  epsilonHigh: 0.28,
  clipRatioC: 3,
  beta: 0.04,
  klEstimator: 'k3',
  maxTokensPerMicrobatch: 4096,
};
const MAX_LEN = 6; // Dr.GRPO's max_completion_length

describe.each(LOSS_TYPES)('loss type %s', (_name, aggregation) => {
  const weightsFor = () => aggregationWeights(targets, aggregation, { maxLen: MAX_LEN });
  const layout = () =>
    aggregation === 'flow'
      ? {
          mask: new Uint8Array(targets.count).fill(1),
          seqIndex: targets.trajectory,
          turnIndex: targets.turn,
        }
      : { mask: new Uint8Array(targets.count).fill(1), seqIndex: targets.row };

  it('in-graph loss and statistics equal @flowgrpo/grpo (1e-5)', async () => {
    for (const klEstimator of ['k1', 'k2', 'k3'] as const) {
      const r = await policy.update(
        rows,
        targets,
        { old, ref, pgWeights: weightsFor() },
        { ...hp, klEstimator },
      );
      expect(r.skipped).toBeUndefined();
      const want = grpoLoss({
        layout: layout(),
        logp: r.logprobs,
        oldLogp: old,
        refLogp: ref,
        advantages: targets.advantage,
        aggregation,
        maxLen: MAX_LEN,
        beta: hp.beta,
        klEstimator,
        clipLow: hp.epsilonLow,
        clipHigh: hp.epsilonHigh,
        clipRatioC: hp.clipRatioC,
      });
      const close = (got: number, w: number, what: string) =>
        expect(Math.abs(got - w), `${what} (${klEstimator}): ${got} vs ${w}`).toBeLessThan(
          1e-5 * Math.max(1, Math.abs(w)),
        );
      close(r.stats.loss, want.loss, 'loss');
      close(r.stats.pg_loss, want.pgLoss, 'pg_loss');
      close(r.stats.kl_loss, want.klLoss, 'kl_loss');
      close(r.stats.kl_sum, want.kl!, 'kl');
      close(r.stats.clip_low_sum, want.clipFracLow, 'clip_ratio/low_mean');
      close(r.stats.clip_high_sum, want.clipFracHigh, 'clip_ratio/high_mean');
      close(r.stats.clip_region_sum, want.clipFrac, 'clip_ratio/region_mean');
      close(r.stats.clip_dual_sum, want.clipFracDual, 'clip_dual');
      // The batch really exercises the clip on both sides.
      expect(want.clipFracLow).toBeGreaterThan(0);
      expect(want.clipFracHigh).toBeGreaterThan(0);
      // The logprobs the train step used are the logprobs graph's (same parameters: lr = 0).
      let worst = 0;
      for (let j = 0; j < targets.count; j++)
        worst = Math.max(worst, Math.abs(r.logprobs[j]! - logp[j]!));
      expect(worst).toBeLessThan(1e-5);
    }
  });

  it("old omitted (on-policy): the update's own log-probs, detached — the bits of feeding the logprobs graph's", async () => {
    // What GRPOTrainer does for the first update on a batch (TRL's old_per_token_logps = None):
    // no log-probs pass before the update. Reference: the same batch with old = the logprobs
    // graph's log-probs under the same parameters (the path checked against @flowgrpo/grpo
    // above), in one micro-batch and in many.
    for (const maxTokensPerMicrobatch of [4096, 16]) {
      const h = { ...hp, maxTokensPerMicrobatch };
      const fed = await policy.gradients(
        rows,
        targets,
        { old: logp, ref, pgWeights: weightsFor() },
        h,
      );
      const own = await policy.gradients(rows, targets, { ref, pgWeights: weightsFor() }, h);
      expect(own.loss).toBe(fed.loss);
      for (const [name, g] of Object.entries(fed.grads))
        expect(Array.from(own.grads[name]!), name).toEqual(Array.from(g));
      expect(Object.values(own.grads).some((g) => g.some((x) => x !== 0))).toBe(true);
    }
  });

  it('gradients accumulated over micro-batches equal the one-batch gradients', async () => {
    const inputs = { old, ref, pgWeights: weightsFor() };
    const one = await policy.gradients(rows, targets, inputs, hp);
    // A budget below most rows' padded size: many micro-batches.
    const many = await policy.gradients(rows, targets, inputs, {
      ...hp,
      maxTokensPerMicrobatch: 16,
    });
    expect(one.microBatches).toBe(1);
    expect(many.microBatches).toBeGreaterThan(4);
    expect(Math.abs(many.loss - one.loss)).toBeLessThan(1e-6 * Math.max(1, Math.abs(one.loss)));
    let scale = 0;
    let worst = 0;
    for (const [name, g] of Object.entries(one.grads)) {
      const h = many.grads[name]!;
      for (let i = 0; i < g.length; i++) {
        scale = Math.max(scale, Math.abs(g[i]!));
        worst = Math.max(worst, Math.abs(g[i]! - h[i]!));
      }
    }
    expect(scale).toBeGreaterThan(1e-4);
    expect(worst / scale).toBeLessThan(1e-5);
  });
});

it('entropy statistic equals the reference entropy of softmax(logits / T)', async () => {
  const merged = new ReferenceDecoder(mergeLora(weights, lora, params));
  let sum = 0;
  for (let j = 0; j < targets.count; j++) {
    const row = rows[targets.row[j]!]!;
    const cache = merged.newCache(row.tokens.length);
    let logits: Float32Array = new Float32Array(0);
    for (let p = 0; p <= targets.pos[j]!; p++) logits = merged.forward(row.tokens[p]!, p, cache);
    sum += entropyOf(logits, T);
  }
  const r = await policy.update(
    rows,
    targets,
    { old, pgWeights: aggregationWeights(targets, 'token-mean') },
    {
      ...hp,
      beta: 0,
    },
  );
  expect(Math.abs(r.stats.entropy_sum - sum / targets.count)).toBeLessThan(1e-5);
});

function logSoftmaxAt(logits: Float32Array, id: number, t: number): number {
  let max = Number.NEGATIVE_INFINITY;
  for (const z of logits) max = Math.max(max, z / t);
  let s = 0;
  for (const z of logits) s += Math.exp(z / t - max);
  return logits[id]! / t - max - Math.log(s);
}

function entropyOf(logits: Float32Array, t: number): number {
  let max = Number.NEGATIVE_INFINITY;
  for (const z of logits) max = Math.max(max, z / t);
  let s = 0;
  for (const z of logits) s += Math.exp(z / t - max);
  let h = 0;
  for (const z of logits) {
    const lp = z / t - max - Math.log(s);
    h -= Math.exp(lp) * lp;
  }
  return h;
}
