// TrainStepRunner on the CPU EP: a 2-layer MLP fitted with AdamW through the runner tracks the
// plain-TypeScript float64 loop of support/mlp-reference.ts (same init, same data, same per-step
// learning rates) step by step; resuming from exportState() continues the uninterrupted run
// bit for bit; misuse raises TrainLoopError. The same two graphs wired by hand in ORT sessions
// track that reference too.

import {
  buildAdamWGraph,
  encodeModel,
  type Graph,
  GraphBuilder,
  toOnnxModel,
} from '@flowgrpo/graph';
import * as ort from 'onnxruntime-node';
import { describe, expect, it } from 'vitest';
import { TrainLoopError, TrainStepRunner } from '../src/index.js';
import {
  buildMlpLoss,
  HP,
  lrAt,
  maxRelError,
  ortBatch,
  ortParams,
  problem,
  referenceRun,
  SHAPES,
  STEPS,
} from './support/mlp-reference.js';

const pr = problem();
const ref = referenceRun(pr);
const cpu = { device: 'cpu', session: { intraOpThreads: 1 } } as const;

describe('TrainStepRunner (CPU EP)', () => {
  it('fits the MLP like the plain-TS AdamW loop: loss curve, grad norms, final params', async () => {
    const runner = await TrainStepRunner.create({
      ...cpu,
      trainStep: buildMlpLoss,
      params: ortParams(pr),
      optimizer: HP,
    });
    expect(runner.device).toBe('cpu');
    const losses: number[] = [];
    const norms: number[] = [];
    const batch = ortBatch(pr);
    for (let t = 1; t <= STEPS; t++) {
      const r = await runner.step(batch, { lr: lrAt(t) });
      expect(r.step).toBe(t);
      losses.push(r.loss);
      norms.push(r.gradNorm);
    }
    expect(maxRelError(losses, ref.losses)).toBeLessThan(1e-4);
    expect(maxRelError(norms, ref.gradNorms)).toBeLessThan(1e-4);
    expect(losses[STEPS - 1]!).toBeLessThan(0.25 * losses[0]!);
    // Some steps clip (norm > 1) and some do not, so both branches of the clip are covered.
    expect(ref.gradNorms.some((g) => g > HP.maxGradNorm)).toBe(true);
    expect(ref.gradNorms.some((g) => g < HP.maxGradNorm)).toBe(true);

    expect(Object.values(runner.residency())).toEqual(Array(12).fill('cpu'));
    const params = await runner.exportParams();
    for (const [k, s] of Object.entries(SHAPES)) {
      expect(params[k]!.dims).toEqual(s);
      const got = params[k]!.data as Float32Array;
      for (let i = 0; i < got.length; i++) expect(got[i]!).toBeCloseTo(ref.params[k]![i]!, 4);
    }
    await runner.release();
  });

  it('resumes from exportState() exactly where an uninterrupted run is', async () => {
    const batch = ortBatch(pr);
    const whole = await TrainStepRunner.create({
      ...cpu,
      trainStep: buildMlpLoss,
      params: ortParams(pr),
      optimizer: HP,
    });
    const wholeLosses: number[] = [];
    for (let t = 1; t <= 12; t++) wholeLosses.push((await whole.step(batch, { lr: lrAt(t) })).loss);
    const wholeParams = await whole.exportParams();
    await whole.release();

    const first = await TrainStepRunner.create({
      ...cpu,
      trainStep: buildMlpLoss,
      params: ortParams(pr),
      optimizer: HP,
    });
    for (let t = 1; t <= 6; t++) await first.step(batch, { lr: lrAt(t) });
    const state = await first.exportState();
    await first.release();
    expect(state.step).toBe(6);

    const second = await TrainStepRunner.create({
      ...cpu,
      trainStep: buildMlpLoss,
      params: state.params,
      state,
      optimizer: HP,
    });
    const resumed: number[] = [];
    for (let t = 7; t <= 12; t++) {
      const r = await second.step(batch, { lr: lrAt(t) });
      expect(r.step).toBe(t);
      resumed.push(r.loss);
    }
    expect(resumed).toEqual(wholeLosses.slice(6));
    const p = await second.exportParams();
    for (const k of Object.keys(SHAPES)) expect(p[k]!.data).toEqual(wholeParams[k]!.data);
    await second.release();
  });

  it('takes a finished graph with its own extra outputs', async () => {
    const b = new GraphBuilder('mlp');
    const ps = Object.fromEntries(
      Object.entries(SHAPES).map(([k, s]) => [k, b.input(k, 'float32', s)]),
    );
    const loss = buildMlpLoss(b, ps);
    b.output(loss, 'loss');
    b.output(b.mul(loss, 2), 'twice');
    b.grad(loss, Object.values(ps));
    const runner = await TrainStepRunner.create({
      ...cpu,
      trainStep: b.graph,
      params: ortParams(pr),
      optimizer: HP,
    });
    const r = await runner.step(ortBatch(pr), { lr: lrAt(1) });
    expect(r.loss).toBeCloseTo(ref.losses[0]!, 5);
    expect(r.outputs.map((o) => Object.keys(o))).toEqual([['twice']]);
    expect((r.outputs[0]!.twice!.data as Float32Array)[0]).toBeCloseTo(2 * r.loss, 5);
    await runner.release();
  });

  it('rejects a graph without the gradients, a batch that feeds a parameter, and use after release', async () => {
    const b = new GraphBuilder('no_grads');
    const ps = Object.fromEntries(
      Object.entries(SHAPES).map(([k, s]) => [k, b.input(k, 'float32', s)]),
    );
    b.output(buildMlpLoss(b, ps), 'loss');
    const e = await TrainStepRunner.create({ ...cpu, trainStep: b.graph, params: ortParams(pr) })
      .then(() => undefined)
      .catch((x: unknown) => x);
    expect(TrainLoopError.isInstance(e)).toBe(true);
    expect((e as Error).message).toContain('output "grad.w1"');
    // The same graph as ONNX bytes: the check happens when the session loads.
    const bytes = encodeModel(toOnnxModel(b.graph, { opset: 21 }));
    const e2 = await TrainStepRunner.create({ ...cpu, trainStep: bytes, params: ortParams(pr) })
      .then(() => undefined)
      .catch((x: unknown) => x);
    expect(TrainLoopError.isInstance(e2)).toBe(true);
    expect((e2 as Error).message).toContain('grad.w1');

    const bad = await TrainStepRunner.create({
      ...cpu,
      trainStep: buildMlpLoss,
      params: { ...ortParams(pr), lr: new ort.Tensor('float32', new Float32Array(1), [1]) },
    }).catch((x: unknown) => x);
    expect(TrainLoopError.isInstance(bad)).toBe(true);

    const runner = await TrainStepRunner.create({
      ...cpu,
      trainStep: buildMlpLoss,
      params: ortParams(pr),
    });
    const w1 = new ort.Tensor('float32', new Float32Array(36), SHAPES.w1!);
    await expect(runner.step({ ...ortBatch(pr), w1 }, { lr: 0.1 })).rejects.toSatisfy((x) =>
      TrainLoopError.isInstance(x),
    );
    await runner.release();
    await expect(runner.step(ortBatch(pr), { lr: 0.1 })).rejects.toSatisfy((x) =>
      TrainLoopError.isInstance(x),
    );
  });
});

// The two graphs the runner runs, without the runner: an autodiff train-step session and
// @flowgrpo/graph's AdamW session, their state (parameters, moments) carried on the host between
// runs. They must track the same float64 reference, so a runner bug and a graph bug tell apart.
describe('train-step and AdamW graphs wired by hand (no runner)', () => {
  it('track the plain-TS AdamW loop: loss curve, grad norms, final params', async () => {
    const session = (graph: Graph) =>
      ort.InferenceSession.create(encodeModel(toOnnxModel(graph, { opset: 21 })), {
        logSeverityLevel: 3,
        intraOpNumThreads: 1,
      });
    const b = new GraphBuilder('train_step');
    const ps = Object.fromEntries(
      Object.entries(SHAPES).map(([k, s]) => [k, b.input(k, 'float32', s)]),
    );
    const loss = buildMlpLoss(b, ps);
    b.output(loss, 'loss');
    b.grad(loss, Object.values(ps));
    const step = await session(b.graph);
    const opt = await session(
      buildAdamWGraph({
        params: Object.entries(SHAPES).map(([name, shape]) => ({ name, shape })),
        beta1: HP.beta1,
        beta2: HP.beta2,
        eps: HP.eps,
        weightDecay: HP.weightDecay,
        maxGradNorm: HP.maxGradNorm,
      }).graph,
    );

    let params = ortParams(pr);
    let moments: Record<string, ort.Tensor> = {};
    for (const [k, s] of Object.entries(SHAPES)) {
      const n = s.reduce((a, d) => a * d, 1);
      moments[`m.${k}`] = new ort.Tensor('float32', new Float32Array(n), s);
      moments[`v.${k}`] = new ort.Tensor('float32', new Float32Array(n), s);
    }
    const losses: number[] = [];
    const norms: number[] = [];
    for (let t = 1; t <= STEPS; t++) {
      const out = await step.run({ ...ortBatch(pr), ...params });
      losses.push((out.loss!.data as Float32Array)[0]!);
      const feeds: Record<string, ort.Tensor> = {
        ...params,
        ...moments,
        lr: new ort.Tensor('float32', Float32Array.of(lrAt(t)), []),
        step: new ort.Tensor('float32', Float32Array.of(t), []),
      };
      for (const k of Object.keys(SHAPES)) feeds[`grad.${k}`] = out[`grad.${k}`]!;
      const upd = await opt.run(feeds);
      norms.push((upd.grad_norm!.data as Float32Array)[0]!);
      params = Object.fromEntries(Object.keys(SHAPES).map((k) => [k, upd[`new.${k}`]!]));
      moments = {};
      for (const k of Object.keys(SHAPES)) {
        moments[`m.${k}`] = upd[`new.m.${k}`]!;
        moments[`v.${k}`] = upd[`new.v.${k}`]!;
      }
    }
    await step.release();
    await opt.release();

    expect(maxRelError(losses, ref.losses)).toBeLessThan(1e-4);
    expect(maxRelError(norms, ref.gradNorms)).toBeLessThan(1e-4);
    expect(losses[STEPS - 1]!).toBeLessThan(0.25 * losses[0]!);
    for (const k of Object.keys(SHAPES)) {
      const got = params[k]!.data as Float32Array;
      for (let i = 0; i < got.length; i++) expect(got[i]!).toBeCloseTo(ref.params[k]![i]!, 4);
    }
  });
});
