import {
  type DecoderConfig,
  type Device,
  type LoraConfig,
  type LoraParams,
  startModuleWorker,
} from '@flowgrpo/models';
import { TrainLoopError } from '../optimizer-step/errors.js';
import type { TrainStepState } from '../optimizer-step/train-step-runner.js';
import type { Targets, TrainRow } from './collate.js';
import type {
  LoraPolicy,
  LoraPolicyOptions,
  UpdateHyperParams,
  UpdateInputs,
  UpdateResult,
} from './lora-policy.js';
import {
  mapRecord,
  type OpenedPolicy,
  type PolicyCall,
  type PolicyReply,
  stateFromWire,
  toWire,
  type UpdatedPolicy,
  type WireTrainStepState,
} from './policy-worker-protocol.js';

// A LoraPolicy in a worker thread. ONNX Runtime's `run` blocks the thread it runs on (the Node
// binding's promise wraps a synchronous call), so an update on the thread that also drives the
// agents stops every rollout sampled meanwhile: their tool calls, HTTP requests and the next turn
// of each wait until the update's graph returns. With rollouts sampled while the update runs
// (max_staleness ≥ 1) the trainer keeps its policy here instead; the agents' thread only posts
// the batch and awaits the answer. The same LoraPolicy runs inside, so the numbers are the same
// bits; the adapter's host copy comes back with each update (a few small LoRA tensors).

/** What the GRPO loop needs of a policy being trained: a LoraPolicy, here or in a worker. */
export type TrainablePolicy = Pick<
  LoraPolicy,
  | 'config'
  | 'lora'
  | 'params'
  | 'step'
  | 'device'
  | 'logprobs'
  | 'update'
  | 'exportState'
  | 'release'
>;

interface Pending {
  resolve: (v: unknown) => void;
  reject: (e: Error) => void;
}

/** The worker thread and its calls in flight; once it fails, every call fails with that error. */
class PolicyThread {
  readonly #worker = startModuleWorker(import.meta.url, 'policy-worker-main');
  readonly #pending = new Map<number, Pending>();
  #nextId = 1;
  #failed: Error | undefined;

  constructor() {
    this.#worker.on('message', (r: PolicyReply) => {
      const p = this.#pending.get(r.id);
      if (!p) return;
      this.#pending.delete(r.id);
      if (r.ok) p.resolve(r.value);
      else
        p.reject(
          new TrainLoopError(r.error.message, {
            ...(r.error.hint && { hint: r.error.hint }),
            cause: Object.assign(new Error(r.error.message), {
              name: r.error.name,
              stack: r.error.stack,
            }),
          }),
        );
    });
    this.#worker.on('error', (e) =>
      this.fail(new TrainLoopError(`policy worker failed: ${e.message}`, { cause: e })),
    );
    this.#worker.on('exit', (code) =>
      this.fail(new TrainLoopError(`policy worker exited (code ${code})`)),
    );
  }

  get failed(): boolean {
    return this.#failed !== undefined;
  }

  fail(e: Error): void {
    this.#failed ??= e;
    for (const p of this.#pending.values()) p.reject(e);
    this.#pending.clear();
  }

  call<T>(call: PolicyCall): Promise<T> {
    if (this.#failed) return Promise.reject(this.#failed);
    const id = this.#nextId++;
    return new Promise<T>((resolve, reject) => {
      this.#pending.set(id, { resolve: resolve as (v: unknown) => void, reject });
      this.#worker.postMessage({ id, call });
    });
  }

  async terminate(): Promise<void> {
    this.fail(new TrainLoopError('the policy was released'));
    await this.#worker.terminate();
  }
}

export class WorkerLoraPolicy implements TrainablePolicy {
  readonly config: DecoderConfig;
  readonly lora: LoraConfig | undefined;
  readonly paramSpecs: readonly { name: string; shape: number[] }[];
  readonly device: Device;
  readonly #thread: PolicyThread;
  #params: LoraParams;
  #step: number;

  private constructor(thread: PolicyThread, opened: OpenedPolicy) {
    this.#thread = thread;
    this.config = opened.config;
    this.lora = opened.lora;
    this.paramSpecs = opened.paramSpecs;
    this.device = opened.device;
    this.#params = opened.params;
    this.#step = opened.step;
  }

  /** Opens a LoraPolicy (LoraPolicy.open's options) in a new worker thread. */
  static async open(o: LoraPolicyOptions): Promise<WorkerLoraPolicy> {
    const thread = new PolicyThread();
    const { state, ...rest } = o;
    try {
      const opened = await thread.call<OpenedPolicy>({
        op: 'open',
        options: {
          ...rest,
          ...(state && {
            state: {
              step: state.step,
              m: mapRecord(state.m, toWire),
              v: mapRecord(state.v, toWire),
            },
          }),
        },
      });
      return new WorkerLoraPolicy(thread, opened);
    } catch (e) {
      await thread.terminate();
      throw e;
    }
  }

  /** The current adapter (host copy, refreshed after every update; do not mutate). */
  get params(): LoraParams {
    return this.#params;
  }

  get step(): number {
    return this.#step;
  }

  logprobs(
    rows: readonly TrainRow[],
    targets: Targets,
    options: { loraScale: number; temperature: number; maxTokensPerMicrobatch: number },
  ): Promise<Float32Array> {
    return this.#thread.call({ op: 'logprobs', rows, targets, options });
  }

  async update(
    rows: readonly TrainRow[],
    targets: Targets,
    inputs: UpdateInputs,
    hp: UpdateHyperParams,
  ): Promise<UpdateResult> {
    const u = await this.#thread.call<UpdatedPolicy>({ op: 'update', rows, targets, inputs, hp });
    this.#params = u.params;
    this.#step = u.step;
    return u.result;
  }

  async exportState(): Promise<TrainStepState> {
    return stateFromWire(await this.#thread.call<WireTrainStepState>({ op: 'exportState' }));
  }

  /** Releases the sessions and ends the thread. */
  async release(): Promise<void> {
    try {
      if (!this.#thread.failed) await this.#thread.call({ op: 'release' });
    } finally {
      await this.#thread.terminate();
    }
  }
}
