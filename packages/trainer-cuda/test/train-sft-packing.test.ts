// SFT sequence packing (TRL's `packing`), padding-free and exact:
// - the independent reference: examples run unpacked, one per row (the pre-packing path) — a
//   packed batch must give every target token the same log-probability, and the batch the same
//   loss and the same gradients (LoRA and full fine-tuning), to float32 rounding; the unpacked
//   log-probs are also checked against the logprobs graph, which has no segment input at all;
// - best-fit decreasing: hand-worked cases (where it differs from first fit), and on random
//   lengths against a plain O(n·bins) best-fit written here; every example exactly once, no row
//   over max_length; wrapped rows are the examples end to end, cut every max_length tokens;
// - SFTTrainer with packing: fewer rows and less padding than unpacked on the same data, the same
//   first-step loss and gradient norm (the batch is the whole dataset in both runs), a loss that
//   goes down, checkpoints; LoRA and full fine-tuning; config errors name the key.
import { existsSync, mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { ConfigError, createRng } from '@flowgrpo/core';
import {
  createTinyQwen2,
  initLoraParams,
  type LoraConfig,
  type LoraParams,
  type TinyModel,
} from '@flowgrpo/models';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import {
  buildTrainingArtifacts,
  LoraPolicy,
  SFTTrainer,
  type Targets,
  type TrainRow,
  targetsOf,
  type UpdateHyperParams,
} from '../src/index.js';
import { type SFTExample, sftRows } from '../src/trainers/sft-trainer.js';
import { packBestFitDecreasing, packRows } from '../src/update/packing.js';

const tmp = mkdtempSync(join(tmpdir(), 'flowgrpo-sft-packing-'));
afterAll(() => rmSync(tmp, { recursive: true, force: true }));

const lora: LoraConfig = {
  r: 2,
  alpha: 4,
  targetModules: ['q_proj', 'k_proj', 'v_proj', 'o_proj', 'gate_proj', 'up_proj', 'down_proj'],
};
let model: TinyModel;
let artifacts: string;
beforeAll(async () => {
  // GQA 4:2 and two layers, so the segment mask is stacked over a query group and composes.
  model = await createTinyQwen2(join(tmp, 'model'), {
    seed: 'packing',
    hiddenSize: 32,
    layers: 2,
    heads: 4,
    kvHeads: 2,
    intermediateSize: 48,
    embeddingInitRange: 0.2,
  });
  artifacts = join(tmp, 'artifacts');
  buildTrainingArtifacts(model.weights, artifacts, {
    lora,
    graphs: ['logprobs', 'train_step'],
    maxPositions: 128,
  });
});

/** An example row: random ids, the first `prompt` tokens without loss (0: loss on every token). */
function exampleRow(rng: ReturnType<typeof createRng>, length: number, prompt: number): TrainRow {
  const tokens = Int32Array.from({ length }, () => 3 + Math.floor(rng.next() * 250));
  const mask = Uint8Array.from({ length }, (_, i) => (i < prompt ? 0 : 1));
  return {
    tokens,
    mask,
    logprobs: new Float32Array(length).fill(Number.NaN),
    advantage: 1,
    trajectory: 0,
    turn: 0,
  };
}

const maxDiff = (a: ArrayLike<number>, b: ArrayLike<number>) => {
  expect(a.length).toBe(b.length);
  let worst = 0;
  for (let i = 0; i < a.length; i++) worst = Math.max(worst, Math.abs(a[i]! - b[i]!));
  return worst;
};

describe('a packed batch equals the same examples unpacked', () => {
  // Seven examples, 3–13 tokens; three with a prompt, four with loss on every token (their first
  // token is then the one trainable token that no row can predict, packed or not).
  const rng = createRng('examples');
  const shapes: [number, number][] = [
    [13, 5],
    [9, 0],
    [8, 3],
    [6, 0],
    [5, 2],
    [4, 0],
    [3, 0],
  ];
  const examples = shapes.map(([n, p]) => exampleRow(rng, n, p));
  const MAX_LENGTH = 20;
  const bins = packBestFitDecreasing(
    examples.map((e) => e.tokens.length),
    MAX_LENGTH,
  );
  const packed = packRows(examples, MAX_LENGTH);
  const unpackedTargets = targetsOf(examples);
  const packedTargets = targetsOf(packed);

  /** Per target of the packed batch: its index among the unpacked targets (same example, position). */
  function unpackedIndex(t: Targets, rows: readonly TrainRow[]): Int32Array {
    const out = new Int32Array(t.count);
    for (let j = 0; j < t.count; j++) {
      const row = rows[t.row[j]!]!;
      const seg = row.segments![t.pos[j]! + 1]!;
      const start = row.segments!.indexOf(seg);
      const example = bins[t.row[j]!]![seg]!;
      const pos = t.pos[j]! - start;
      let k = unpackedTargets.rowStart[example]!;
      while (unpackedTargets.pos[k] !== pos) k++;
      out[j] = k;
    }
    return out;
  }

  it('the packed rows: best-fit bins of whole examples, positions restart, one segment each', () => {
    // Lengths 13 9 8 6 5 4 3 into rows of 20: 13+6 (19), 9+8+3 (20), 5+4 (9) — two rows end in
    // padding in a micro-batch of all three (worked by hand: 13→A(7), 9→B(11), 8→B(3), 6→A(1),
    // 5→C(15), 4→C(11), 3→B(0)).
    expect(bins).toEqual([
      [0, 3],
      [1, 2, 6],
      [4, 5],
    ]);
    expect(packed.map((r) => r.tokens.length)).toEqual([19, 20, 9]);
    packed.forEach((row, r) => {
      const parts = bins[r]!.map((e) => examples[e]!);
      expect(Array.from(row.tokens)).toEqual(parts.flatMap((e) => Array.from(e.tokens)));
      expect(Array.from(row.mask)).toEqual(parts.flatMap((e) => Array.from(e.mask)));
      expect(Array.from(row.segments!)).toEqual(
        parts.flatMap((e, s) => new Array(e.tokens.length).fill(s)),
      );
    });
    // The same targets (no example's first token predicted from the previous example).
    expect(packedTargets.count).toBe(unpackedTargets.count);
    const map = unpackedIndex(packedTargets, packed);
    expect(new Set(map).size).toBe(unpackedTargets.count);
    for (let j = 0; j < packedTargets.count; j++)
      expect(packedTargets.id[j]).toBe(unpackedTargets.id[map[j]!]);
  });

  const hp = (maxTokensPerMicrobatch: number): UpdateHyperParams => ({
    learningRate: 0, // AdamW with lr 0 leaves the parameters as they are: update() only reads
    temperature: 1,
    epsilonLow: 0.2,
    epsilonHigh: 0.2,
    beta: 0,
    klEstimator: 'k3',
    maxTokensPerMicrobatch,
  });
  const sft = (t: Targets) => ({ nllWeights: new Float64Array(t.count).fill(1 / t.count) });

  /** Log-probs, loss and gradients of the SFT objective on `rows` at the policy's parameters. */
  async function objective(policy: LoraPolicy, rows: readonly TrainRow[], budget: number) {
    const t = targetsOf(rows);
    const g = await policy.gradients(rows, t, sft(t), hp(budget));
    const u = await policy.update(rows, t, sft(t), hp(budget));
    return { ...g, logprobs: u.logprobs, nll: u.stats.nll_loss, micro: u.microBatches };
  }

  async function compare(policy: LoraPolicy, what: string) {
    // Unpacked: 7 rows in one micro-batch (the reference); packed: 3 rows in one micro-batch, and
    // one packed row per micro-batch (budget 20: accumulation across packed rows).
    const ref = await objective(policy, examples, 4096);
    const one = await objective(policy, packed, 4096);
    const split = await objective(policy, packed, MAX_LENGTH);
    expect([ref.micro, one.micro, split.micro]).toEqual([1, 1, 3]);
    const map = unpackedIndex(packedTargets, packed);
    const figures: Record<string, number> = {};
    for (const [name, got] of [
      ['packed', one],
      ['packed, 3 micro-batches', split],
    ] as const) {
      const lp = Float32Array.from(map, (k) => ref.logprobs[k]!);
      figures[`${name}: logprobs`] = maxDiff(got.logprobs, lp);
      figures[`${name}: loss`] = Math.abs(got.loss - ref.loss);
      figures[`${name}: nll_loss`] = Math.abs(got.nll - ref.nll);
      let grad = 0;
      let scale = 0;
      for (const [p, g] of Object.entries(ref.grads)) {
        grad = Math.max(grad, maxDiff(got.grads[p]!, g));
        for (const x of g) scale = Math.max(scale, Math.abs(x));
      }
      figures[`${name}: grads`] = grad;
      expect(scale, `${what}: the gradients are not trivial`).toBeGreaterThan(1e-3);
    }
    console.info(`[packing] ${what} max |packed − unpacked|:`, figures);
    for (const [k, v] of Object.entries(figures)) expect(v, `${what} ${k}`).toBeLessThan(1e-5);
    return ref;
  }

  it('LoRA: the same per-token log-probs, loss and LoRA gradients (1e-5, float32)', async () => {
    // A non-identity adapter (B ≠ 0), so the LoRA path shapes the forward.
    const params: LoraParams = initLoraParams(model.weights.config, lora, 3);
    for (const [name, v] of params)
      if (name.includes('lora_B'))
        for (let i = 0; i < v.length; i++) v[i] = Math.fround(0.2 * Math.sin(3 * i + name.length));
    const policy = await LoraPolicy.open({ artifacts, params, intraOpThreads: 1 });
    try {
      const ref = await compare(policy, 'LoRA');
      // The unpacked train_step log-probs against the logprobs graph (no segment input: the
      // attention mask as it was before packing existed).
      const lp = await policy.logprobs(examples, unpackedTargets, {
        loraScale: 1,
        temperature: 1,
        maxTokensPerMicrobatch: 4096,
      });
      expect(maxDiff(ref.logprobs, lp)).toBeLessThan(1e-5);
      // And the logprobs graph refuses packed rows rather than mixing their examples.
      await expect(
        policy.logprobs(packed, packedTargets, {
          loraScale: 1,
          temperature: 1,
          maxTokensPerMicrobatch: 4096,
        }),
      ).rejects.toThrow(/segment_ids/);
    } finally {
      await policy.release();
    }
  });

  it('full fine-tuning: the same log-probs, loss and gradients of every weight (1e-5)', async () => {
    const policy = await LoraPolicy.openFull({
      weights: model.weights,
      dir: join(tmp, 'full-graphs'),
      intraOpThreads: 1,
      maxPositions: 64,
    });
    try {
      await compare(policy, 'full');
    } finally {
      await policy.release();
    }
  });
});

describe('bin packing', () => {
  it('best-fit decreasing on hand-worked cases', () => {
    // Capacity 10, lengths 2 4 7 4: 7→A(3), 4→B(6), 4→B(2), then 2 goes to B, the tightest bin
    // that fits (first fit would put it into A).
    expect(packBestFitDecreasing([2, 4, 7, 4], 10)).toEqual([[2], [1, 3, 0]]);
    // Equally full bins: the one that reached that space first. 6→A(4), 6→B(4), 4→A.
    expect(packBestFitDecreasing([6, 6, 4], 10)).toEqual([[0, 2], [1]]);
    // Exact fits close a bin; equal lengths keep index order.
    expect(packBestFitDecreasing([5, 5, 5, 5, 10], 10)).toEqual([[4], [0, 1], [2, 3]]);
    expect(packBestFitDecreasing([], 10)).toEqual([]);
    expect(() => packBestFitDecreasing([3, 11], 10)).toThrow(/item 1 has length 11/);
    expect(() => packBestFitDecreasing([0], 10)).toThrow(RangeError);
  });

  it('equals a plain best-fit on random lengths; every example once, no row over capacity', () => {
    // The reference: for each item (longest first, ties by index), scan every bin and take the
    // one with the least free space that fits; among equals, the one that reached it first.
    function plainBestFit(lengths: number[], capacity: number): number[][] {
      const order = lengths.map((_, i) => i).sort((a, b) => lengths[b]! - lengths[a]! || a - b);
      const bins: { items: number[]; free: number; since: number }[] = [];
      order.forEach((i, tick) => {
        let best: (typeof bins)[number] | undefined;
        for (const b of bins)
          if (
            b.free >= lengths[i]! &&
            (!best || b.free < best.free || (b.free === best.free && b.since < best.since))
          )
            best = b;
        if (!best) {
          best = { items: [], free: capacity, since: 0 };
          bins.push(best);
        }
        best.items.push(i);
        best.free -= lengths[i]!;
        best.since = tick;
      });
      return bins.map((b) => b.items);
    }
    const rng = createRng('lengths');
    for (let trial = 0; trial < 20; trial++) {
      const capacity = 8 + Math.floor(rng.next() * 60);
      const n = Math.floor(rng.next() * 200);
      const lengths = Array.from({ length: n }, () => 1 + Math.floor(rng.next() * capacity));
      const bins = packBestFitDecreasing(lengths, capacity);
      expect(bins).toEqual(plainBestFit(lengths, capacity));
      expect(
        bins
          .flat()
          .slice()
          .sort((a, b) => a - b),
      ).toEqual(lengths.map((_, i) => i));
      for (const b of bins)
        expect(b.reduce((s, i) => s + lengths[i]!, 0)).toBeLessThanOrEqual(capacity);
      // Better than one example per row whenever two examples could share one.
      const sorted = [...lengths].sort((a, b) => a - b);
      if (sorted.length >= 2 && sorted[0]! + sorted[1]! <= capacity)
        expect(bins.length).toBeLessThan(n);
    }
  });

  it('wrapped: the examples end to end in order, cut every max_length tokens', () => {
    const rng = createRng('wrapped');
    const rows = [7, 3, 12, 5, 1].map((n) => exampleRow(rng, n, 1));
    const wrapped = packRows(rows, 8, 'wrapped');
    // 28 tokens: rows of 8, 8, 8 and 4.
    expect(wrapped.map((r) => r.tokens.length)).toEqual([8, 8, 8, 4]);
    expect(wrapped.flatMap((r) => Array.from(r.tokens))).toEqual(
      rows.flatMap((r) => Array.from(r.tokens)),
    );
    expect(wrapped.flatMap((r) => Array.from(r.mask))).toEqual(
      rows.flatMap((r) => Array.from(r.mask)),
    );
    // Row 0 = example 0 (7) + the first token of example 1; row 1 = the rest of 1 (2) + the first
    // 6 of 2; row 2 = the last 6 of 2 + 2 of 3; row 3 = the last 3 of 3 + example 4.
    expect(wrapped.map((r) => Array.from(r.segments!))).toEqual([
      [0, 0, 0, 0, 0, 0, 0, 1],
      [0, 0, 1, 1, 1, 1, 1, 1],
      [0, 0, 0, 0, 0, 0, 1, 1],
      [0, 0, 0, 1],
    ]);
    expect(() => packRows(wrapped, 8)).toThrow(/unpacked rows/);
    // bfd keeps examples whole: one longer than max_length is an error (sftRows truncates first).
    expect(() => packRows(rows, 8)).toThrow(/outside \[1, 8\]/);
  });
});

describe('SFTTrainer with packing', () => {
  // Sixteen prompt/completion examples of varying length (the tokenizer is byte-level: one token
  // per character, plus BOS and EOS).
  const words = ['red', 'green', 'blue', 'amber', 'violet', 'ochre', 'teal', 'indigo'];
  const data: SFTExample[] = Array.from({ length: 16 }, (_, i) => ({
    prompt: `Colour ${i}${'?'.repeat(i % 5)} `,
    completion: `${words[i % words.length]!}${i % 3 === 0 ? ' and grey' : ''}.`,
  }));
  const config = (dir: string, extra: Record<string, unknown> = {}) => ({
    output_dir: join(tmp, dir),
    max_steps: 6,
    learning_rate: 0.02,
    per_device_train_batch_size: 16,
    max_length: 64,
    lora: { r: lora.r, lora_alpha: lora.alpha, target_modules: [...lora.targetModules] },
    seed: 3,
    ...extra,
  });
  const metricsOf = (dir: string) =>
    readFileSync(join(tmp, dir, 'metrics.jsonl'), 'utf8')
      .trim()
      .split('\n')
      .map((l) => JSON.parse(l) as Record<string, number>);

  it.each([
    ['LoRA', {}],
    ['full fine-tuning', { use_peft: false }],
  ] as const)(
    '%s: fewer rows, less padding, the same first step; the loss goes down',
    async (label, extra) => {
      // The batch is the whole dataset in both runs: 16 examples, or all of their packed rows.
      const rows = data.flatMap((e) =>
        sftRows(e, model.tokenizer, { assistantOnly: true, maxLength: 64 }),
      );
      const packedRows = packRows(rows, 64).length;
      expect(packedRows).toBeLessThan(16);
      const run = async (dir: string, packing: Record<string, unknown>) =>
        new SFTTrainer({
          config: config(dir, {
            ...extra,
            per_device_train_batch_size: packing.packing ? packedRows : 16,
            ...packing,
          }),
          ...(label === 'LoRA' ? { artifacts } : { model: model.dir }),
          tokenizer: model.tokenizer,
          trainDataset: data,
        }).train();
      const tag = label === 'LoRA' ? 'lora' : 'full';
      const packed = await run(`${tag}-packed`, { packing: true });
      await run(`${tag}-unpacked`, {});
      expect(existsSync(join(packed.checkpoint, 'trainer_state.json'))).toBe(true);
      expect(packed.checkpoint.endsWith('checkpoint-6')).toBe(true);
      const p = metricsOf(`${tag}-packed`);
      const u = metricsOf(`${tag}-unpacked`);
      expect(p.map((r) => r.step)).toEqual([1, 2, 3, 4, 5, 6]);
      const p1 = p[0]!;
      const u1 = u[0]!;
      expect(u1['train/rows']).toBe(16);
      expect(p1['train/rows']).toBe(packedRows);
      expect(p1['train/padding_ratio']).toBeLessThan(u1['train/padding_ratio']!);
      expect(p1['train/tokens']).toBe(u1['train/tokens']);
      expect(p.at(-1)!.num_tokens).toBe(6 * p1['train/tokens']!); // TRL's: cumulative
      // The same batch and loss weights, packed or not: the same first loss and gradient norm.
      const figures = {
        loss: Math.abs(p1.loss! - u1.loss!),
        grad_norm: Math.abs(p1.grad_norm! - u1.grad_norm!),
      };
      console.info(`[packing] SFTTrainer ${label}, step 1 |packed − unpacked|:`, figures, {
        rows: [p1['train/rows'], u1['train/rows']],
        padding_ratio: [p1['train/padding_ratio'], u1['train/padding_ratio']],
        loss: p.map((r) => r.loss),
      });
      expect(figures.loss).toBeLessThan(1e-5);
      expect(figures.grad_norm).toBeLessThan(1e-4 * Math.max(1, u1.grad_norm!));
      expect(p.at(-1)!.loss).toBeLessThan(p1.loss! - 0.1);
    },
  );

  it('packing_strategy and packing are checked: a ConfigError names the key', () => {
    const make = (extra: Record<string, unknown>) => () =>
      new SFTTrainer({
        config: config('bad', extra),
        artifacts,
        tokenizer: model.tokenizer,
        trainDataset: data,
      });
    expect(make({ packing: true, packing_strategy: 'ffd' })).toThrow(ConfigError);
    expect(make({ packing: true, packing_strategy: 'ffd' })).toThrow(
      /packing_strategy: must be 'bfd' or 'wrapped' \(got "ffd"\)/,
    );
    expect(make({ packing: 'yes' })).toThrow(/packing: /);
    expect(() => make({ packing: true, packing_strategy: 'wrapped' })()).not.toThrow();
  });
});
