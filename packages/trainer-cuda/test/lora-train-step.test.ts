// LoRA: PEFT names/shapes/init, the PEFT folder format (read back here and by an independent
// stdlib python3 reader), and the train_step graph: gradients w.r.t. every LoRA matrix from the
// autodiff checked against central finite differences in float64 (the TS reference evaluator,
// on a tiny GQA model with biases), and the same graph in a real ORT session (float32) giving the
// evaluator's loss, logprobs and gradients.
import { execFileSync } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { createTensor } from '@flowgrpo/core';
import {
  checkGradients,
  evaluate,
  type HostTensor,
  tensor,
  WeightsFileWriter,
} from '@flowgrpo/graph';
import { klEstimate, tokenPolicyLoss } from '@flowgrpo/grpo';
import {
  DecoderArtifacts,
  type DecoderConfig,
  expectedTensorShapes,
  initLoraParams,
  initTinyWeights,
  LORA_SCALE,
  type LoraConfig,
  loadLoraAdapter,
  loraParamSpecs,
  loraScaling,
  ROPE_COS,
  ROPE_SIN,
  ropeTables,
  saveLoraAdapter,
  weightAsFloat32,
  writeBaseWeights,
} from '@flowgrpo/models';
import * as ort from 'onnxruntime-node';
import { afterAll, describe, expect, it } from 'vitest';
import { buildTrainStepGraph } from '../src/graphs/train-step-graph.js';
import { buildTrainingArtifacts } from '../src/index.js';

const tmp = mkdtempSync(join(tmpdir(), 'flowgrpo-lora-'));
afterAll(() => rmSync(tmp, { recursive: true, force: true }));

/** A tiny Qwen2-shaped decoder: GQA (4 query heads over 2 kv heads), q/k/v biases, untied head. */
const tiny: DecoderConfig = {
  modelType: 'qwen2',
  vocabSize: 11,
  hiddenSize: 8,
  intermediateSize: 6,
  numHiddenLayers: 2,
  numAttentionHeads: 4,
  numKeyValueHeads: 2,
  headDim: 2,
  ropeTheta: 10000,
  rmsNormEps: 1e-6,
  tieWordEmbeddings: false,
  qkvBias: true,
  oBias: false,
  mlpBias: false,
  qkNorm: false,
  maxPositionEmbeddings: 16,
  torchDtype: 'float32',
  initializerRange: 0.5,
  bosTokenId: 1,
  eosTokenId: 2,
};
const allModules: LoraConfig = {
  r: 1,
  alpha: 3,
  targetModules: ['q_proj', 'k_proj', 'v_proj', 'o_proj', 'gate_proj', 'up_proj', 'down_proj'],
};

describe('LoRA parameters', () => {
  it('uses PEFT names and shapes (A [r, in], B [out, r]) for any subset of modules and layers', () => {
    const specs = loraParamSpecs(tiny, {
      r: 2,
      alpha: 4,
      targetModules: ['v_proj', 'q_proj', 'down_proj'],
      layers: [1],
    });
    expect(specs.map((s) => [s.name, s.shape])).toEqual([
      ['base_model.model.model.layers.1.self_attn.q_proj.lora_A.weight', [2, 8]],
      ['base_model.model.model.layers.1.self_attn.q_proj.lora_B.weight', [8, 2]],
      ['base_model.model.model.layers.1.self_attn.v_proj.lora_A.weight', [2, 8]],
      ['base_model.model.model.layers.1.self_attn.v_proj.lora_B.weight', [4, 2]],
      ['base_model.model.model.layers.1.mlp.down_proj.lora_A.weight', [2, 6]],
      ['base_model.model.model.layers.1.mlp.down_proj.lora_B.weight', [8, 2]],
    ]);
    expect(loraScaling({ r: 4, alpha: 8, targetModules: ['q_proj'] })).toBe(2);
    expect(loraScaling({ r: 4, alpha: 8, targetModules: ['q_proj'], useRslora: true })).toBe(4);
  });

  it("init: A ~ U(±1/√in) (nn.Linear's Kaiming-uniform, a = √5), B = 0, reproducible from the seed", () => {
    const cfg = { ...tiny, hiddenSize: 64, intermediateSize: 256, headDim: 16 };
    const a = initLoraParams(cfg, allModules, 5);
    const b = initLoraParams(cfg, allModules, 5);
    const c = initLoraParams(cfg, allModules, 6);
    for (const s of loraParamSpecs(cfg, allModules)) {
      const v = a.get(s.name)!;
      expect(Array.from(v)).toEqual(Array.from(b.get(s.name)!));
      if (s.which === 'B') expect(v.every((x) => x === 0)).toBe(true);
      else {
        const bound = 1 / Math.sqrt(s.shape[1]);
        expect(v.every((x) => Math.abs(x) <= bound)).toBe(true);
        // Uniform on [−bound, bound]: variance bound²/3 (within sampling error at n ≥ 128).
        const varc = v.reduce((acc, x) => acc + x * x, 0) / v.length;
        expect(Math.abs(varc / ((bound * bound) / 3) - 1)).toBeLessThan(0.35);
        expect(Array.from(v)).not.toEqual(Array.from(c.get(s.name)!));
      }
    }
  });

  it('saves and loads a PEFT adapter folder; a stdlib python3 reader sees the same tensors', async () => {
    const lora: LoraConfig = {
      r: 2,
      alpha: 4,
      targetModules: ['q_proj', 'up_proj'],
      useRslora: true,
    };
    const params = initLoraParams(tiny, lora, 1);
    for (const v of params.values())
      for (let i = 0; i < v.length; i++) v[i] = Math.fround(v[i]! + i / 7);
    const dir = join(tmp, 'adapter');
    await saveLoraAdapter(dir, tiny, lora, params, { baseModel: 'tiny' });
    const cfg = JSON.parse(readFileSync(join(dir, 'adapter_config.json'), 'utf8'));
    expect(cfg).toMatchObject({
      peft_type: 'LORA',
      r: 2,
      lora_alpha: 4,
      use_rslora: true,
      target_modules: ['q_proj', 'up_proj'],
      base_model_name_or_path: 'tiny',
    });
    const back = await loadLoraAdapter(dir, tiny);
    expect(back.lora).toEqual({
      r: 2,
      alpha: 4,
      targetModules: ['q_proj', 'up_proj'],
      useRslora: true,
    });
    for (const [k, v] of params) expect(Array.from(back.params.get(k)!)).toEqual(Array.from(v));
    const py = `
import json, math, struct, sys
b = open(sys.argv[1], 'rb').read()
n = struct.unpack('<Q', b[:8])[0]
h = json.loads(b[8:8 + n])
out = {}
for k, v in h.items():
    if k == '__metadata__': continue
    s, e = v['data_offsets']
    count = math.prod(v['shape'])
    assert e - s == 4 * count, (k, e - s, count)
    a = struct.unpack('<%df' % count, b[8 + n + s:8 + n + e])
    out[k] = [v['dtype'], list(v['shape']), math.fsum(a)]
print(json.dumps(out))`;
    const got = JSON.parse(
      execFileSync('python3', ['-c', py, join(dir, 'adapter_model.safetensors')], {
        encoding: 'utf8',
      }),
    );
    for (const s of loraParamSpecs(tiny, lora)) {
      const sum = Array.from(params.get(s.name)!).reduce((p, q) => p + q, 0);
      expect(got[s.name][0]).toBe('F32');
      expect(got[s.name][1]).toEqual(s.shape);
      expect(got[s.name][2]).toBeCloseTo(sum, 4);
    }
  });
});

describe('train_step: LoRA gradients', () => {
  const weights = initTinyWeights(tiny, 'train-step');
  // Non-zero biases so their path is exercised too.
  for (const [name, t] of weights.tensors)
    if (name.endsWith('.bias'))
      weights.tensors.set(
        name,
        createTensor(
          'F32',
          [...t.shape],
          Float32Array.from(t.data as Float32Array, (_, i) => 0.1 * Math.cos(i)),
        ),
      );
  const params = initLoraParams(tiny, allModules, 3);
  for (const [name, v] of params)
    if (name.includes('lora_B'))
      for (let i = 0; i < v.length; i++) v[i] = Math.fround(0.3 * Math.sin(3 * i + name.length));

  // Two left-padded rows; loss over the last three next-token predictions of each.
  const B = 2;
  const T = 6;
  const ids = [0, 0, 1, 5, 7, 3, 1, 4, 9, 2, 8, 6];
  const mask = [0, 0, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1];
  const pos = [0, 0, 0, 1, 2, 3, 0, 1, 2, 3, 4, 5];
  const tpos = [2, 3, 4, 3, 4, 4];
  const tids = [5, 7, 3, 2, 8, 10];
  const lmask = [1, 1, 1, 0, 1, 1];

  // Two objectives through the same graph: SFT (nll_weights = mask / 5, the rest 0) and a GRPO
  // batch with every term on (clip, dual clip, k3 KL with beta 0.1, an NLL term too). The old and
  // reference log-probs sit 0.05–0.6 away from the policy's, so no token is at a clip kink.
  const zeros6 = [0, 0, 0, 0, 0, 0];
  const objectives = {
    sft: {
      old_logprobs: zeros6,
      ref_logprobs: zeros6,
      advantages: zeros6,
      pg_weights: zeros6,
      nll_weights: lmask.map((m) => m / 5),
      beta: 0,
      sampler_logprobs: zeros6,
      is_weighted: zeros6,
    },
    grpo: {
      old_logprobs: [-2.1, -2.9, -2.0, -3.0, -1.7, -2.6],
      ref_logprobs: [-2.6, -2.2, -2.4, -2.5, -2.8, -2.3],
      advantages: [1.2, -0.7, 0.4, 0.9, -1.5, 0.3],
      pg_weights: [0.25, 0.1, 0.2, 0, 0.3, 0.15],
      nll_weights: [0.05, 0, 0, 0, 0.05, 0],
      beta: 0.1,
      // Four tokens came from another sampler (importance ratios π_old / π_sampler e^0.9 = 2.46,
      // capped at 2; e^−0.3; e^0.2; e^−1.1), the fifth and sixth from this policy.
      sampler_logprobs: [-3.0, -2.6, -2.2, -1.9, 0, 0],
      is_weighted: [1, 1, 1, 1, 0, 0],
    },
  };
  const dataFeeds = (
    temperature: number,
    objective: keyof typeof objectives = 'sft',
  ): Record<string, HostTensor> => {
    const o = objectives[objective];
    const perToken = (v: number[]) => tensor('float32', [B, 3], v);
    return {
      input_ids: tensor('int64', [B, T], ids),
      attention_mask: tensor('int64', [B, T], mask),
      position_ids: tensor('int64', [B, T], pos),
      segment_ids: tensor('int64', [B, T], 0), // one example per row (packing: train-sft-packing)
      target_positions: tensor('int64', [B, 3], tpos),
      target_ids: tensor('int64', [B, 3], tids),
      temperature: tensor('float32', [], [temperature]),
      [LORA_SCALE]: tensor('float32', [], [1]),
      old_logprobs: perToken(o.old_logprobs),
      on_policy: tensor('bool', [], [0]),
      ref_logprobs: perToken(o.ref_logprobs),
      advantages: perToken(o.advantages),
      pg_weights: perToken(o.pg_weights),
      sampler_logprobs: perToken(o.sampler_logprobs),
      is_weighted: tensor('bool', [B, 3], o.is_weighted),
      is_cap: tensor('float32', [], [2]),
      is_mask: tensor('bool', [], [0]),
      nll_weights: perToken(o.nll_weights),
      stat_weights: perToken(lmask.map((m) => m / 5)),
      epsilon_low: tensor('float32', [], [0.2]),
      epsilon_high: tensor('float32', [], [0.28]),
      clip_ratio_c: tensor('float32', [], [3]),
      beta: tensor('float32', [], [o.beta]),
      kl_coeffs: tensor('float32', [3], [0, 0, 1]),
    };
  };

  const trainStepArtifacts = async () => {
    const dir = join(tmp, 'art');
    buildTrainingArtifacts(weights, dir, { lora: allModules, graphs: ['train_step'] });
    return DecoderArtifacts.open(dir, { intraOpThreads: 1 });
  };
  /** dataFeeds as ORT tensors, with the LoRA parameters and zero accumulators. */
  const ortFeeds = (data: Record<string, HostTensor>) => {
    const out: Record<string, ort.Tensor> = {};
    for (const [name, t] of Object.entries(data))
      out[name] =
        t.dtype === 'int64'
          ? new ort.Tensor(
              'int64',
              BigInt64Array.from(t.data, (x) => BigInt(x)),
              [...t.shape],
            )
          : t.dtype === 'bool'
            ? new ort.Tensor('bool', Uint8Array.from(t.data), [...t.shape])
            : new ort.Tensor('float32', Float32Array.from(t.data), [...t.shape]);
    for (const s of loraParamSpecs(tiny, allModules)) {
      out[s.name] = new ort.Tensor('float32', params.get(s.name)!, s.shape);
      out[`acc.${s.name}`] = new ort.Tensor(
        'float32',
        new Float32Array(s.shape[0] * s.shape[1]),
        s.shape,
      );
    }
    return out;
  };

  /** The train_step graph and every feed the float64 TS evaluator needs to run it. */
  const evaluatorTrainStep = (tag: string, objective: keyof typeof objectives = 'sft') => {
    const writer = new WeightsFileWriter(join(tmp, `${tag}.data`));
    const base = writeBaseWeights(weights, writer);
    writer.close();
    const g = buildTrainStepGraph(base, allModules);
    const feeds: Record<string, HostTensor> = { ...dataFeeds(0.8, objective) };
    for (const [name, shape] of expectedTensorShapes(tiny))
      feeds[name] = tensor('float32', shape, weightAsFloat32(weights, name));
    const rope = ropeTables(tiny, base.maxPositions);
    feeds[ROPE_COS] = tensor('float32', [base.maxPositions, 1], rope.cos);
    feeds[ROPE_SIN] = tensor('float32', [base.maxPositions, 1], rope.sin);
    for (const s of loraParamSpecs(tiny, allModules)) {
      feeds[s.name] = tensor('float32', s.shape, params.get(s.name)!);
      feeds[`acc.${s.name}`] = tensor('float32', s.shape, 0);
    }
    return { g, feeds };
  };

  it.each(['sft', 'grpo'] as const)(
    '%s: autodiff gradients match central finite differences (float64 evaluator, ε = 1e-6)',
    (objective) => {
      const { g, feeds } = evaluatorTrainStep(`fd-${objective}`, objective);
      const specs = loraParamSpecs(tiny, allModules);
      const input = (n: string) => g.graph.inputs.find((v) => v.name === n)!;
      const output = (n: string) => g.graph.outputs.find((v) => v.name === n)!;
      const loss = output('loss');
      const results = checkGradients(
        g.graph,
        feeds,
        loss,
        specs.map((s) => input(s.name)),
        specs.map((s) => output(`grad.${s.name}`)),
      );
      expect(results).toHaveLength(specs.length);
      for (const r of results) {
        expect(r.maxError, r.name).toBeLessThan(1e-6);
        expect(
          r.analytic.some((x) => Math.abs(x) > 1e-4),
          `${r.name} non-trivial`,
        ).toBe(true);
      }
      const out = evaluate(g.graph, feeds, [loss, output('logprobs')]);
      const lp = out.logprobs!.data;
      if (objective === 'sft') {
        // SFT: the loss is −Σ mask·logp / Σ mask over the logprobs the graph outputs.
        const want = -lmask.reduce((s, m, i) => s + m * lp[i]!, 0) / 5;
        expect(out.loss!.data[0]).toBeCloseTo(want, 12);
        return;
      }
      // GRPO, token by token with @flowgrpo/grpo's own loss functions, the importance weight
      // written out: min(exp(old − sampler), cap 2) where weighted (TRL's token_truncate).
      const o = objectives.grpo;
      const want = lp.reduce((sum, logp, i) => {
        const w = o.is_weighted[i]
          ? Math.min(Math.exp(o.old_logprobs[i]! - o.sampler_logprobs[i]!), 2)
          : 1;
        const pg = tokenPolicyLoss(logp, o.old_logprobs[i]!, o.advantages[i]!, {
          clipLow: 0.2,
          clipHigh: 0.28,
          clipRatioC: 3,
        }).loss;
        const kl = klEstimate(logp, o.ref_logprobs[i]!, 'k3');
        return sum + o.pg_weights[i]! * w * (pg + o.beta * kl) - o.nll_weights[i]! * logp;
      }, 0);
      expect(out.loss!.data[0]).toBeCloseTo(want, 12);
    },
  );

  it('train_step.onnx in ORT (float32) gives the evaluator loss, logprobs and gradients', async () => {
    const art = await trainStepArtifacts();
    const got = (await art.session('train_step').run(ortFeeds(dataFeeds(0.8)))).outputs;
    await art.release();

    const { g, feeds } = evaluatorTrainStep('ev');
    const want = evaluate(g.graph, feeds);
    expect(Object.keys(got).sort()).toEqual(Object.keys(want).sort());
    for (const [name, t] of Object.entries(want)) {
      const o = got[name]!.data as Float32Array;
      let scale = 1;
      for (const x of t.data) scale = Math.max(scale, Math.abs(x));
      let worst = 0;
      for (let i = 0; i < t.data.length; i++) worst = Math.max(worst, Math.abs(o[i]! - t.data[i]!));
      expect(worst / scale, name).toBeLessThan(2e-5);
    }
  });

  it("on_policy: old = the forward's own log-probs, detached — the bits of feeding them as old", async () => {
    // The reference is the path checked above by finite differences: old_logprobs fed from the
    // outside (here, the log-probs the on-policy run itself returned). Same loss, same
    // statistics, same gradients, to the bit; the fed old_logprobs are not read (NaN here).
    const art = await trainStepArtifacts();
    const session = art.session('train_step');
    const data = dataFeeds(0.8, 'grpo');
    const onPolicy = (
      await session.run(
        ortFeeds({
          ...data,
          on_policy: tensor('bool', [], [1]),
          old_logprobs: tensor('float32', [B, 3], Number.NaN),
        }),
      )
    ).outputs;
    const fed = (
      await session.run(
        ortFeeds({
          ...data,
          old_logprobs: tensor(
            'float32',
            [B, 3],
            Array.from(onPolicy.logprobs!.data as Float32Array),
          ),
        }),
      )
    ).outputs;
    await art.release();
    for (const name of Object.keys(fed))
      expect(Array.from(onPolicy[name]!.data as Float32Array), name).toEqual(
        Array.from(fed[name]!.data as Float32Array),
      );
    // ρ = 1 everywhere: no token clipped, and the gradients are not zero (the pg term flows).
    expect(onPolicy.clip_region_sum!.data[0]).toBe(0);
    const grads = Object.keys(onPolicy).filter((k) => k.startsWith('grad.'));
    expect(grads.length).toBeGreaterThan(0);
    for (const k of grads)
      expect(
        Array.from(onPolicy[k]!.data as Float32Array).some((x) => x !== 0),
        k,
      ).toBe(true);
  });
});
