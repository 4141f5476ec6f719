// One training step = two session runs: the train-step graph (forward + loss + gradients from the
// IR's `grad`) and the AdamW graph (src/optim). Parameters, gradients and the moments m, v never
// leave the device between steps where the EP can hold them:
//
//   WebGPU  grads, new params, new m/v are `gpu-buffer` outputs (`deviceOutputs`), fed straight to
//           the next run — of the other session too: ORT's WebGPU sessions share one device, so a
//           buffer made by the train step is a valid input of the optimizer session. Only `loss`
//           and `grad_norm` (scalars) are host outputs.
//   CPU     the same DeviceTensors, located on the host; nothing is copied beyond ORT's own outputs.
//
// Reading parameters back: a gpu-buffer tensor can be neither read (`getData()` aborts) nor fed
// to a CPU session, and a session's output locations are fixed when it is created. So export runs
// a third, tiny WebGPU session — one Identity per state tensor, with host outputs — which copies
// the requested tensors GPU → host. On the CPU the state tensors are read directly.
//
// The `step` input of AdamW is float32, not int64: on WebGPU a Cast from int64 lands on the CPU EP
// (found with `disable_cpu_ep_fallback`), and float32 counts steps exactly up to 2^24.

import { shapeSize } from '@flowgrpo/core';
import type { Graph, Value } from '@flowgrpo/graph';
import {
  type AdamWHyperParams,
  buildAdamWGraph,
  encodeModel,
  GraphBuilder,
  toOnnxModel,
} from '@flowgrpo/graph';
import type { DeviceRequest } from '@flowgrpo/models';
import {
  type CreateSessionOptions,
  createSession,
  type Device,
  type DeviceTensor,
  type DeviceTensorLocation,
  DeviceTensorStore,
  type FeedValue,
  ModelLoadError,
  type Session,
} from '@flowgrpo/models';
import * as ort from 'onnxruntime-node';
import { TrainLoopError } from './errors.js';

/** Builds forward + loss from the parameter inputs the runner creates; returns the loss. */
export type TrainStepBuild = (b: GraphBuilder, params: Readonly<Record<string, Value>>) => Value;

/** Numbers only: hyper-parameters as graph inputs would need feeding every step. */
export type TrainStepOptimizer = {
  [K in keyof AdamWHyperParams]?: number;
};

export type TrainStepSessionOptions = Omit<CreateSessionOptions, 'device' | 'deviceOutputs'>;

export interface TrainStepRunnerOptions {
  /**
   * The train step: a build function (the runner adds the parameter inputs, the `loss` output
   * and `grad(loss, params)`), or a finished graph / ONNX model (path or bytes) whose inputs
   * include every parameter and whose outputs include the loss and `grad.<param>` per parameter.
   */
  trainStep: TrainStepBuild | Graph | string | Uint8Array;
  /** Initial float32 parameter values by input name. The runner copies nothing it does not need. */
  params: Readonly<Record<string, ort.Tensor>>;
  /** Default 'auto'. */
  device?: DeviceRequest;
  /** Session options for all three sessions (threads, `disableCpuFallback`, external data, …). */
  session?: TrainStepSessionOptions;
  /** AdamW hyper-parameters (torch defaults otherwise: 0.9, 0.999, 1e-8, wd 0.01, no clipping). */
  optimizer?: TrainStepOptimizer;
  /** Name of the scalar loss output (default 'loss'). */
  lossName?: string;
  /** Opset of graphs the runner exports (default 21). */
  opset?: number;
  /** Resume from `exportState()`: the number of updates done and the moments. */
  state?: { step: number; m: Record<string, ort.Tensor>; v: Record<string, ort.Tensor> };
}

export interface TrainStepResult {
  /** The number of updates done after this step (unchanged when the update was skipped). */
  step: number;
  /** The loss at the parameters before this update (summed over micro-batches). */
  loss: number;
  /** Global L2 norm of the (accumulated) gradients, before clipping; NaN when not computed. */
  gradNorm: number;
  /** Other host outputs of the train-step graph, one record per micro-batch. */
  outputs: Record<string, ort.Tensor>[];
  /**
   * Why the update was not applied — the parameters and moments are exactly as before:
   * 'nonfinite_loss' (a micro-batch's loss is NaN/±∞; the optimizer did not run) or
   * 'nonfinite_grad_norm' (the optimizer's outputs were discarded).
   */
  skipped?: 'nonfinite_loss' | 'nonfinite_grad_norm';
}

export interface TrainStepState {
  step: number;
  params: Record<string, ort.Tensor>;
  m: Record<string, ort.Tensor>;
  v: Record<string, ort.Tensor>;
}

const accName = (p: string) => `acc.${p}`;
const mName = (p: string) => `m.${p}`;
const vName = (p: string) => `v.${p}`;
const gName = (p: string) => `grad.${p}`;
const RESERVED = new Set(['lr', 'step']);

function zerosLike(t: ort.Tensor): ort.Tensor {
  return new ort.Tensor('float32', new Float32Array(t.size), [...t.dims]);
}

function copyOf(data: ort.Tensor['data'], dims: readonly number[]): ort.Tensor {
  return new ort.Tensor('float32', Float32Array.from(data as Float32Array), [...dims]);
}

function scalar(x: number): ort.Tensor {
  return new ort.Tensor('float32', Float32Array.of(x), []);
}

function modelBytes(graph: Graph, opset: number): Uint8Array {
  return encodeModel(toOnnxModel(graph, { opset }));
}

export class TrainStepRunner {
  readonly device: Device;
  readonly paramNames: readonly string[];
  readonly lossName: string;
  /** The graph takes `acc.<param>` inputs: gradients accumulate on the device over micro-batches. */
  readonly accumulates: boolean;
  readonly #train: Session;
  readonly #optimizer: Session;
  readonly #opset: number;
  readonly #sessionOptions: TrainStepSessionOptions;
  /** Parameters and moments by their input names (`w`, `m.w`, `v.w`) once they live on the device. */
  readonly #store = new DeviceTensorStore();
  /** Initial values, fed until the first update replaces them with device tensors. */
  readonly #host = new Map<string, ort.Tensor>();
  readonly #zeroCache = new Map<string, ort.Tensor>();
  #export: Session | undefined;
  #step: number;
  #released = false;

  private constructor(
    train: Session,
    optimizer: Session,
    o: TrainStepRunnerOptions,
    names: readonly string[],
  ) {
    this.#train = train;
    this.#optimizer = optimizer;
    this.device = train.device;
    this.paramNames = names;
    this.lossName = o.lossName ?? 'loss';
    this.#opset = o.opset ?? 21;
    this.#sessionOptions = o.session ?? {};
    this.#step = o.state?.step ?? 0;
    this.accumulates = names.every((p) => train.inputNames.includes(accName(p)));
    for (const p of names) {
      const init = o.params[p]!;
      this.#host.set(p, init);
      this.#host.set(mName(p), o.state?.m[p] ?? zerosLike(init));
      this.#host.set(vName(p), o.state?.v[p] ?? zerosLike(init));
    }
  }

  /** Builds (if needed) and loads the train-step and AdamW graphs on one device. */
  static async create(o: TrainStepRunnerOptions): Promise<TrainStepRunner> {
    const names = Object.keys(o.params);
    if (names.length === 0) throw new TrainLoopError('a train step needs at least one parameter');
    for (const p of names) {
      const t = o.params[p]!;
      if (t.type !== 'float32')
        throw new TrainLoopError(`parameter "${p}" is ${t.type}; the runner trains float32 only`);
      if (RESERVED.has(p) || p.startsWith('m.') || p.startsWith('v.') || p.startsWith('grad.'))
        throw new TrainLoopError(`parameter name "${p}" clashes with the optimizer's inputs`);
      for (const [what, src] of [
        ['m', o.state?.m],
        ['v', o.state?.v],
      ] as const) {
        const s = src?.[p];
        if (o.state && (s?.type !== 'float32' || s.dims.join() !== t.dims.join()))
          throw new TrainLoopError(`state.${what}["${p}"] must be float32 [${t.dims.join(', ')}]`);
      }
    }
    const lossName = o.lossName ?? 'loss';
    const opset = o.opset ?? 21;
    let graph: Graph | undefined;
    if (typeof o.trainStep === 'function') {
      const b = new GraphBuilder('train_step');
      const inputs: Record<string, Value> = {};
      for (const p of names) inputs[p] = b.input(p, 'float32', [...o.params[p]!.dims]);
      const loss = o.trainStep(b, inputs);
      b.output(loss, lossName);
      b.grad(
        loss,
        names.map((p) => inputs[p]!),
      );
      graph = b.graph;
    } else if (!(typeof o.trainStep === 'string' || o.trainStep instanceof Uint8Array)) {
      graph = o.trainStep;
    }
    const checkIO = (inputs: readonly string[], outputs: readonly string[]) => {
      const ins = new Set(inputs);
      const outs = new Set(outputs);
      const missing = [
        ...names.filter((p) => !ins.has(p)).map((p) => `input "${p}"`),
        ...[lossName, ...names.map(gName)].filter((n) => !outs.has(n)).map((n) => `output "${n}"`),
      ];
      if (missing.length)
        throw new TrainLoopError(`the train-step graph lacks ${missing.join(', ')}`);
    };
    if (graph) {
      checkIO(
        graph.inputs.map((v) => v.name),
        graph.outputs.map((v) => v.name),
      );
    }
    const model = graph ? modelBytes(graph, opset) : (o.trainStep as string | Uint8Array);

    const common = { ...o.session, device: o.device ?? 'auto' } satisfies CreateSessionOptions;
    const train = await createSession(model, { ...common, deviceOutputs: names.map(gName) }).catch(
      (e: unknown) => {
        // A model file without the gradient outputs fails on `deviceOutputs`; say what is missing.
        if (ModelLoadError.isInstance(e) && e.reason.startsWith('deviceOutputs'))
          throw new TrainLoopError(`the train-step graph lacks outputs: ${e.reason}`, { cause: e });
        throw e;
      },
    );
    try {
      checkIO(train.inputNames, train.outputNames);
    } catch (e) {
      await train.release();
      throw e;
    }

    const adamw = buildAdamWGraph({
      params: names.map((name) => ({ name, shape: [...o.params[name]!.dims] })),
      ...o.optimizer,
      stepDtype: 'float32',
    });
    const optimizer = await createSession(modelBytes(adamw.graph, opset), {
      ...common,
      device: train.device,
      deviceOutputs: names.flatMap((p) => [`new.${p}`, `new.${mName(p)}`, `new.${vName(p)}`]),
    }).catch(async (e: unknown) => {
      await train.release();
      throw e;
    });
    return new TrainStepRunner(train, optimizer, o, names);
  }

  /** Number of updates done so far (TRL's `global_step`). */
  get globalStep(): number {
    return this.#step;
  }

  /** Where each parameter and moment lives now: 'host' until its first update. */
  residency(): Record<string, DeviceTensorLocation | 'host'> {
    const out: Record<string, DeviceTensorLocation | 'host'> = {};
    for (const p of this.paramNames) {
      for (const n of [p, mName(p), vName(p)]) out[n] = this.#store.get(n)?.location ?? 'host';
    }
    return out;
  }

  /**
   * One update: runs the train step on `batch` (every non-parameter input of the graph), or on
   * several micro-batches whose gradients add up (the graph must take `acc.<param>` inputs: see
   * `accumulates`), then AdamW with learning rate `lr`. Reads back only the losses, the gradient
   * norm and the graph's other host outputs. A non-finite loss or gradient norm leaves the
   * parameters and moments untouched and says so in `skipped`.
   */
  async step(
    batch: Readonly<Record<string, FeedValue>> | readonly Readonly<Record<string, FeedValue>>[],
    options: { lr: number },
  ): Promise<TrainStepResult> {
    this.#live();
    const micro = Array.isArray(batch) ? batch : [batch as Readonly<Record<string, FeedValue>>];
    const fed = (n: string): FeedValue => this.#store.get(n) ?? this.#host.get(n)!;
    const { grads, outputs, loss } = await this.#accumulate(micro);
    if (!Number.isFinite(loss)) {
      for (const g of Object.values(grads)) g.dispose();
      return { step: this.#step, loss, gradNorm: Number.NaN, outputs, skipped: 'nonfinite_loss' };
    }

    const t = this.#step + 1;
    const optFeeds: Record<string, FeedValue> = { lr: scalar(options.lr), step: scalar(t) };
    for (const p of this.paramNames) {
      optFeeds[p] = fed(p);
      optFeeds[mName(p)] = fed(mName(p));
      optFeeds[vName(p)] = fed(vName(p));
      optFeeds[gName(p)] = grads[gName(p)]!;
    }
    let u: Awaited<ReturnType<Session['run']>>;
    try {
      u = await this.#optimizer.run(optFeeds);
    } finally {
      for (const g of Object.values(grads)) g.dispose();
    }
    const gradNorm = Number(u.outputs.grad_norm!.data[0]);
    if (!Number.isFinite(gradNorm)) {
      for (const d of Object.values(u.device)) d.dispose();
      return { step: this.#step, loss, gradNorm, outputs, skipped: 'nonfinite_grad_norm' };
    }
    const carry: Record<string, string> = {};
    for (const p of this.paramNames) {
      carry[`new.${p}`] = p;
      carry[`new.${mName(p)}`] = mName(p);
      carry[`new.${vName(p)}`] = vName(p);
    }
    this.#store.carry(u.device, carry); // disposes the previous step's tensors
    this.#host.clear();
    this.#step = t;
    return { step: t, loss, gradNorm, outputs };
  }

  /**
   * The gradients of the summed loss over `micro` (accumulated as `step` accumulates them), as
   * host copies, without updating anything. CPU-located gradients only (a test and debugging
   * aid: on WebGPU they live in GPU buffers).
   */
  async gradients(
    micro: readonly Readonly<Record<string, FeedValue>>[],
  ): Promise<{ loss: number; grads: Record<string, Float32Array> }> {
    this.#live();
    const { grads, loss } = await this.#accumulate(micro);
    const out: Record<string, Float32Array> = {};
    try {
      for (const p of this.paramNames)
        out[p] = Float32Array.from(grads[gName(p)]!.read() as Float32Array);
    } finally {
      for (const g of Object.values(grads)) g.dispose();
    }
    return { loss, grads: out };
  }

  /** Runs the train step over micro-batches, gradients accumulating in `acc.<param>`. */
  async #accumulate(micro: readonly Readonly<Record<string, FeedValue>>[]): Promise<{
    grads: Record<string, DeviceTensor>;
    outputs: Record<string, ort.Tensor>[];
    loss: number;
  }> {
    if (micro.length === 0) throw new TrainLoopError('a step needs at least one micro-batch');
    if (micro.length > 1 && !this.accumulates)
      throw new TrainLoopError(
        'several micro-batches need a train-step graph with acc.<param> inputs (gradient accumulation)',
      );
    const fed = (n: string): FeedValue => this.#store.get(n) ?? this.#host.get(n)!;
    let grads: Record<string, DeviceTensor> | undefined;
    const outputs: Record<string, ort.Tensor>[] = [];
    let loss = 0;
    try {
      for (const mb of micro) {
        for (const k of Object.keys(mb)) {
          if (this.#host.has(k) || this.#store.get(k) || k.startsWith('acc.'))
            throw new TrainLoopError(`batch feeds "${k}", which the runner owns`);
        }
        const feeds: Record<string, FeedValue> = { ...mb };
        for (const p of this.paramNames) {
          feeds[p] = fed(p);
          if (this.accumulates) feeds[accName(p)] = grads?.[gName(p)] ?? this.#zeros(p);
        }
        const r = await this.#train.run(feeds);
        for (const g of Object.values(grads ?? {})) g.dispose();
        grads = r.device;
        const lossT = r.outputs[this.lossName]!;
        if (lossT.size !== 1)
          throw new TrainLoopError(`loss "${this.lossName}" has ${lossT.size} elements, not 1`);
        loss += Number(lossT.data[0]);
        const rest = { ...r.outputs };
        delete rest[this.lossName];
        outputs.push(rest);
      }
    } catch (e) {
      for (const g of Object.values(grads ?? {})) g.dispose();
      throw e;
    }
    return { grads: grads!, outputs, loss };
  }

  /**
   * Runs the train step's forward + backward without updating anything (e.g. to read logprobs or
   * statistics at the current parameters). Gradients are discarded.
   */
  async evaluate(batch: Readonly<Record<string, FeedValue>>): Promise<Record<string, ort.Tensor>> {
    this.#live();
    const feeds: Record<string, FeedValue> = { ...batch };
    for (const p of this.paramNames) {
      feeds[p] = this.#store.get(p) ?? this.#host.get(p)!;
      if (this.accumulates) feeds[accName(p)] = this.#zeros(p);
    }
    const r = await this.#train.run(feeds);
    for (const g of Object.values(r.device)) g.dispose();
    return r.outputs;
  }

  /** Cached host zeros shaped like parameter `p` (the first micro-batch's accumulator). */
  #zeros(p: string): ort.Tensor {
    let z = this.#zeroCache.get(p);
    if (!z) {
      const like = this.#store.get(p) ?? this.#host.get(p)!;
      z = new ort.Tensor('float32', new Float32Array(shapeSize(like.dims)), [...like.dims]);
      this.#zeroCache.set(p, z);
    }
    return z;
  }

  /** The current parameters as host tensors (copies). */
  async exportParams(): Promise<Record<string, ort.Tensor>> {
    return this.#read(this.paramNames);
  }

  /** Parameters, moments and step count, enough to resume exactly (`state` of create). */
  async exportState(): Promise<TrainStepState> {
    const all = await this.#read(this.paramNames.flatMap((p) => [p, mName(p), vName(p)]));
    const pick = (f: (p: string) => string) =>
      Object.fromEntries(this.paramNames.map((p) => [p, all[f(p)]!]));
    return { step: this.#step, params: pick((p) => p), m: pick(mName), v: pick(vName) };
  }

  async release(): Promise<void> {
    if (this.#released) return;
    this.#released = true;
    this.#store.dispose();
    await this.#train.release();
    await this.#optimizer.release();
    await this.#export?.release();
  }

  async #read(names: readonly string[]): Promise<Record<string, ort.Tensor>> {
    this.#live();
    const out: Record<string, ort.Tensor> = {};
    const onDevice: string[] = [];
    for (const n of names) {
      const host = this.#host.get(n);
      const d = this.#store.get(n);
      if (host) out[n] = copyOf(host.data, host.dims);
      else if (d && d.location !== 'gpu-buffer') out[n] = copyOf(d.read(), d.dims);
      else onDevice.push(n);
    }
    if (onDevice.length === 0) return out;
    const s = await this.#exportSession();
    const feeds: Record<string, DeviceTensor> = {};
    for (const n of s.inputNames) feeds[n] = this.#store.get(n)!;
    const r = await s.run(
      feeds,
      onDevice.map((n) => `out.${n}`),
    );
    for (const n of onDevice) out[n] = r.outputs[`out.${n}`]!;
    return out;
  }

  /** Identity per state tensor, host outputs: the only way to copy gpu-buffer tensors back. */
  async #exportSession(): Promise<Session> {
    if (this.#export) return this.#export;
    const b = new GraphBuilder('export_state');
    for (const p of this.paramNames) {
      const t = this.#store.get(p)!;
      for (const n of [p, mName(p), vName(p)])
        b.output(b.input(n, 'float32', [...t.dims]), `out.${n}`);
    }
    this.#export = await createSession(modelBytes(b.graph, this.#opset), {
      ...this.#sessionOptions,
      device: this.device,
    });
    return this.#export;
  }

  #live(): void {
    if (this.#released) throw new TrainLoopError('the train-step runner was released');
  }
}
