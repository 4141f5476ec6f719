// An ONNX Runtime session on a chosen device, with validated feeds, typed load errors, and
// device-resident outputs on WebGPU. Note: `run` blocks the JS thread while the graph executes
// (the binding's promise wraps a synchronous call); use SessionWorker to keep the thread free.

import { existsSync } from 'node:fs';
import * as ort from 'onnxruntime-node';
import { DeviceTensor } from './device-tensor.js';
import { CUDA_FIX, type DeviceRequest, resolveDevice, WEBGPU_FIX } from './devices.js';
import {
  type Device,
  ExecutionProviderUnavailableError,
  ModelLoadError,
  SessionRunError,
} from './errors.js';
import { type ValueSpec, validateFeeds } from './feeds.js';

export type LogSeverity = 'verbose' | 'info' | 'warning' | 'error' | 'fatal';

export interface CreateSessionOptions {
  /** 'auto' = cuda if available, else webgpu if a Vulkan device works, else cpu. Default 'auto'. */
  device?: DeviceRequest;
  /** GPU ordinal for CUDA (the only CUDA option the Node binding reads). */
  deviceId?: number;
  /** Threads inside one op (CPU EP). Default: ORT's choice (one per physical core). */
  intraOpThreads?: number;
  /** Threads across independent ops; only used with executionMode 'parallel'. */
  interOpThreads?: number;
  executionMode?: 'sequential' | 'parallel';
  /** External data handed over in memory: `path` is the `location` written in the model. */
  externalData?: { path: string; data: Uint8Array | string }[];
  graphOptimizationLevel?: 'disabled' | 'basic' | 'extended' | 'all';
  /** ORT's log level for this session. Default 'error' (ORT's own default prints warnings). */
  logSeverity?: LogSeverity;
  /**
   * Fail at load time when a node would fall back to the CPU EP (cuda/webgpu only). Use it in
   * tests to catch ops the GPU EP lacks (e.g. LogSoftmax, variadic Sum on WebGPU).
   */
  disableCpuFallback?: boolean;
  /**
   * Outputs to keep on the device between runs: on WebGPU they stay in GPU buffers
   * (`preferredOutputLocation: 'gpu-buffer'`); elsewhere they are host tensors. Either way
   * `run` returns them wrapped as DeviceTensor, to be fed back, not read.
   */
  deviceOutputs?: string[];
  /** Fix symbolic dimensions (lets ORT plan memory statically). */
  freeDimensionOverrides?: Record<string, number>;
  /** ORT's CPU memory arena (default: MEMORY_DEFAULTS). */
  enableCpuMemArena?: boolean;
  /** ORT's memory pattern (one planned block per input shape; default: MEMORY_DEFAULTS). */
  enableMemPattern?: boolean;
  /**
   * Whose defaults apply to the two memory settings above when they are left out: flowgrpo's
   * (MEMORY_DEFAULTS, chosen by measurement) or onnxruntime's own (both on). Default 'flowgrpo'.
   */
  memory?: 'flowgrpo' | 'ort';
  /**
   * ORT's prepacking of constant weights (default true). Each Gemm whose B is an initializer
   * keeps B re-laid out for its kernel: a copy per session, and per layout within one (the train
   * step's forward and backward). false (`session.disable_prepacking`): the Gemms read the weights
   * where ORT loaded them, which for external data on the CPU is a read-only map of the weights
   * file — one copy in the page cache, shared by every session and process that maps the file.
   * The kernels pack B on each call instead (docs/performance.md, "Frozen weights held once").
   */
  prepackWeights?: boolean;
}

/**
 * flowgrpo's defaults for ORT's memory settings, from `pnpm bench train-memory`
 * (docs/performance.md, "Training memory"; undefined leaves onnxruntime's own default). The
 * memory pattern (one pre-planned block per input shape) held a LoRA train step's peak well above
 * PyTorch's; without it the peak is PyTorch's and the step no slower. The arena stays on: off, it
 * cost speed and saved less.
 */
export const MEMORY_DEFAULTS: { enableCpuMemArena?: boolean; enableMemPattern?: boolean } = {
  enableMemPattern: false,
};

export type FeedValue = ort.Tensor | DeviceTensor;

export interface RunResult {
  /** Host tensors (readable with `.data`). */
  outputs: Record<string, ort.Tensor>;
  /** The session's `deviceOutputs`, to feed to the next run. */
  device: Record<string, DeviceTensor>;
}

const SEVERITY: Record<LogSeverity, 0 | 1 | 2 | 3 | 4> = {
  verbose: 0,
  info: 1,
  warning: 2,
  error: 3,
  fatal: 4,
};

/** The ORT session options a set of flowgrpo options maps to (exported for the worker host). */
export function ortSessionOptions(
  device: Device,
  o: CreateSessionOptions,
): ort.InferenceSession.SessionOptions {
  const ep: ort.InferenceSession.ExecutionProviderConfig =
    device === 'cuda'
      ? { name: 'cuda', deviceId: o.deviceId ?? 0 }
      : device === 'webgpu'
        ? { name: 'webgpu' }
        : { name: 'cpu' };
  const opts: ort.InferenceSession.SessionOptions = {
    executionProviders: [ep],
    logSeverityLevel: SEVERITY[o.logSeverity ?? 'error'],
  };
  if (o.intraOpThreads !== undefined) opts.intraOpNumThreads = o.intraOpThreads;
  if (o.interOpThreads !== undefined) opts.interOpNumThreads = o.interOpThreads;
  if (o.executionMode) opts.executionMode = o.executionMode;
  if (o.graphOptimizationLevel) opts.graphOptimizationLevel = o.graphOptimizationLevel;
  if (o.externalData) opts.externalData = o.externalData;
  if (o.freeDimensionOverrides) opts.freeDimensionOverrides = o.freeDimensionOverrides;
  const mem = o.memory === 'ort' ? {} : MEMORY_DEFAULTS;
  const arena = o.enableCpuMemArena ?? mem.enableCpuMemArena;
  const pattern = o.enableMemPattern ?? mem.enableMemPattern;
  if (arena !== undefined) opts.enableCpuMemArena = arena;
  if (pattern !== undefined) opts.enableMemPattern = pattern;
  // The binding rejects `extra: undefined`, so the key is only set when there is something in it.
  const config: Record<string, string> = {};
  if (o.disableCpuFallback && device !== 'cpu') config.disable_cpu_ep_fallback = '1';
  if (o.prepackWeights === false) config.disable_prepacking = '1';
  if (Object.keys(config).length) opts.extra = { session: config };
  if (device === 'webgpu' && o.deviceOutputs?.length) {
    opts.preferredOutputLocation = Object.fromEntries(
      o.deviceOutputs.map((n) => [n, 'gpu-buffer' as const]),
    );
  }
  return opts;
}

function specsOf(meta: readonly ort.InferenceSession.ValueMetadata[]): ValueSpec[] {
  return meta.map((m) =>
    m.isTensor ? { name: m.name, type: m.type, shape: m.shape } : { name: m.name },
  );
}

function messageOf(e: unknown): string {
  return e instanceof Error ? e.message : String(e);
}

/** Turn an ORT load failure into ModelLoadError, or ExecutionProviderUnavailableError for EP ones. */
export function classifyLoadError(
  device: Device,
  file: string,
  reason: string,
  cause?: unknown,
): Error {
  // Only failures to bring the provider up count: a kernel or graph error that merely mentions
  // CUDA/WebGPU is a model problem.
  const epFailure =
    device === 'cuda'
      ? /providers_(shared|cuda)|AppendExecutionProvider_Cuda|lib(cudart|cudnn|cublas)|CUDA driver|no CUDA-capable device|cudaErrorNoDevice/i.test(
          reason,
        )
      : device === 'webgpu'
        ? /WebGPU adapter|No supported adapters|vulkan|WebGpuContext::Initialize/i.test(reason)
        : false;
  if (epFailure) {
    return new ExecutionProviderUnavailableError(
      { device, reason, fix: device === 'cuda' ? CUDA_FIX : WEBGPU_FIX },
      { cause },
    );
  }
  return new ModelLoadError({ file, reason }, { cause });
}

export class Session {
  readonly device: Device;
  /** The model path, or '<bytes>'. */
  readonly file: string;
  readonly inputs: readonly ValueSpec[];
  readonly outputs: readonly ValueSpec[];
  readonly deviceOutputs: ReadonlySet<string>;
  #session: ort.InferenceSession | undefined;

  /** @internal Use createSession. */
  constructor(
    session: ort.InferenceSession,
    device: Device,
    file: string,
    deviceOutputs: readonly string[],
  ) {
    this.#session = session;
    this.device = device;
    this.file = file;
    this.inputs = specsOf(session.inputMetadata);
    this.outputs = specsOf(session.outputMetadata);
    this.deviceOutputs = new Set(deviceOutputs);
  }

  get inputNames(): string[] {
    return this.inputs.map((s) => s.name);
  }

  get outputNames(): string[] {
    return this.outputs.map((s) => s.name);
  }

  /** The underlying ORT session (escape hatch: bypasses validation and device checks). */
  get raw(): ort.InferenceSession {
    if (!this.#session) throw new SessionRunError({ reason: `session ${this.file} was released` });
    return this.#session;
  }

  /** Validate feeds, run, and split outputs into host tensors and device-kept ones. */
  async run(feeds: Record<string, FeedValue>, fetches?: readonly string[]): Promise<RunResult> {
    const session = this.raw;
    validateFeeds(this.inputs, feeds);
    const ortFeeds: Record<string, ort.Tensor> = {};
    for (const [name, v] of Object.entries(feeds)) {
      ortFeeds[name] = v instanceof DeviceTensor ? DeviceTensor.unwrapFor(v, this.device, name) : v;
    }
    let raw: ort.InferenceSession.ReturnType;
    try {
      raw = fetches ? await session.run(ortFeeds, [...fetches]) : await session.run(ortFeeds);
    } catch (e) {
      throw new SessionRunError({ reason: messageOf(e) }, { cause: e });
    }
    const result: RunResult = { outputs: {}, device: {} };
    for (const [name, value] of Object.entries(raw)) {
      const t = value as ort.Tensor;
      if (this.deviceOutputs.has(name))
        result.device[name] = new DeviceTensor(name, this.device, t);
      else result.outputs[name] = t;
    }
    return result;
  }

  async release(): Promise<void> {
    const s = this.#session;
    this.#session = undefined;
    await s?.release();
  }
}

/**
 * Load a model (a path, or bytes plus `externalData`) on a device. Throws
 * ExecutionProviderUnavailableError (with the fix) for a device that cannot run here, and
 * ModelLoadError for a missing, corrupt or invalid model.
 */
export async function createSession(
  model: string | Uint8Array,
  options: CreateSessionOptions = {},
): Promise<Session> {
  const device = await resolveDevice(options.device ?? 'auto');
  const file = typeof model === 'string' ? model : '<bytes>';
  if (typeof model === 'string' && !existsSync(model)) {
    throw new ModelLoadError({ file, reason: 'no such file' });
  }
  const deviceOutputs = options.deviceOutputs ?? [];
  let session: ort.InferenceSession;
  try {
    session = await ort.InferenceSession.create(
      model as Uint8Array,
      ortSessionOptions(device, options),
    );
  } catch (e) {
    throw classifyLoadError(device, file, messageOf(e), e);
  }
  const outputNames = new Set(session.outputNames);
  const unknown = deviceOutputs.filter((n) => !outputNames.has(n));
  if (unknown.length) {
    await session.release();
    throw new ModelLoadError({
      file,
      reason: `deviceOutputs names outputs the model does not have: ${unknown.join(', ')}`,
    });
  }
  return new Session(session, device, file, deviceOutputs);
}
