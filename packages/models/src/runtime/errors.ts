import { FlowGrpoError, type FlowGrpoErrorOptions } from '@flowgrpo/core';

export type Device = 'cuda' | 'webgpu' | 'cpu';

/** A requested execution provider cannot run here; `fix` says what to install. */
export class ExecutionProviderUnavailableError extends FlowGrpoError {
  static override readonly code = 'EXECUTION_PROVIDER_UNAVAILABLE';
  readonly device: Device;
  readonly reason: string;
  readonly fix: string;
  constructor(
    fields: { device: Device; reason: string; fix: string },
    options?: FlowGrpoErrorOptions,
  ) {
    super(
      `the ${fields.device} execution provider is unavailable: ${fields.reason}. Fix: ${fields.fix}`,
      options,
    );
    this.device = fields.device;
    this.reason = fields.reason;
    this.fix = fields.fix;
  }
}

/** ONNX Runtime could not load a model (missing file, corrupt protobuf, bad graph, missing data). */
export class ModelLoadError extends FlowGrpoError {
  static override readonly code = 'MODEL_LOAD_ERROR';
  /** The model path, or '<bytes>' for an in-memory model. */
  readonly file: string;
  readonly reason: string;
  constructor(fields: { file: string; reason: string }, options?: FlowGrpoErrorOptions) {
    super(`cannot load ONNX model ${fields.file}: ${fields.reason}`, options);
    this.file = fields.file;
    this.reason = fields.reason;
  }
}

export type FeedProblem = 'missing' | 'unknown' | 'dtype' | 'rank' | 'dims';

/** A feed does not match the model's inputs: missing, unexpected, or of the wrong type/shape. */
export class InvalidFeedError extends FlowGrpoError {
  static override readonly code = 'INVALID_FEED';
  readonly input: string;
  readonly problem: FeedProblem;
  /** What the model declares, e.g. `float32 [batch, 3]`, or '' for an unknown input. */
  readonly expected: string;
  /** What was given, e.g. `int64 [2, 3]`, or '' for a missing input. */
  readonly got: string;
  constructor(
    message: string,
    fields: { input: string; problem: FeedProblem; expected: string; got: string },
    options?: FlowGrpoErrorOptions,
  ) {
    super(message, options);
    this.input = fields.input;
    this.problem = fields.problem;
    this.expected = fields.expected;
    this.got = fields.got;
  }
}

/**
 * A device-resident tensor (WebGPU `gpu-buffer`) was read on the host or fed to a session on
 * another device. Reading one with ONNX Runtime's `getData()` aborts the process and feeding it to
 * a CPU session silently computes garbage, so flowgrpo refuses both.
 */
export class DeviceTensorAccessError extends FlowGrpoError {
  static override readonly code = 'DEVICE_TENSOR_ACCESS';
  readonly tensor: string;
  readonly location: string;
  readonly device: Device;
  constructor(
    message: string,
    fields: { tensor: string; location: string; device: Device },
    options?: FlowGrpoErrorOptions,
  ) {
    super(message, options);
    this.tensor = fields.tensor;
    this.location = fields.location;
    this.device = fields.device;
  }
}

/** A session run failed inside ONNX Runtime (after the feeds were validated). */
export class SessionRunError extends FlowGrpoError {
  static override readonly code = 'SESSION_RUN_ERROR';
  readonly reason: string;
  constructor(fields: { reason: string }, options?: FlowGrpoErrorOptions) {
    super(`ONNX Runtime run failed: ${fields.reason}`, options);
    this.reason = fields.reason;
  }
}

/** The worker hosting sessions exited or was terminated while calls were pending. */
export class SessionWorkerError extends FlowGrpoError {
  static override readonly code = 'SESSION_WORKER_ERROR';
}
