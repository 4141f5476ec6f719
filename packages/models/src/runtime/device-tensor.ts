// Tensors that stay on the device between runs (WebGPU `gpu-buffer` outputs: KV caches, LoRA
// state). ONNX Runtime's Node binding lets such a tensor be fed back to a WebGPU session, but
// `getData()` on it aborts the process and feeding it to a CPU session computes garbage; the
// wrapper hides the raw tensor so neither can happen by accident.

import type * as ort from 'onnxruntime-node';
import { type Device, DeviceTensorAccessError } from './errors.js';

export type DeviceTensorLocation = 'gpu-buffer' | 'cpu';

export class DeviceTensor {
  /** The output name it came from. */
  readonly name: string;
  /** The device of the session that produced it. */
  readonly device: Device;
  readonly type: string;
  readonly dims: readonly number[];
  #tensor: ort.Tensor | undefined;

  /** @internal Made by Session.run; not for user code (a user-made gpu tensor is rejected by ORT). */
  constructor(name: string, device: Device, tensor: ort.Tensor) {
    this.name = name;
    this.device = device;
    this.type = tensor.type;
    this.dims = [...tensor.dims];
    this.#tensor = tensor;
  }

  /** 'gpu-buffer' on WebGPU; 'cpu' on devices without device-resident outputs (CPU, CUDA). */
  get location(): DeviceTensorLocation {
    return this.#tensor?.location === 'gpu-buffer' ? 'gpu-buffer' : 'cpu';
  }

  get disposed(): boolean {
    return this.#tensor === undefined;
  }

  /** Host data of a CPU-located tensor; throws DeviceTensorAccessError for a gpu-buffer one. */
  read(): ort.Tensor['data'] {
    const t = this.#live('read');
    if (t.location === 'gpu-buffer') {
      throw new DeviceTensorAccessError(
        `"${this.name}" lives in a WebGPU buffer and cannot be read on the host (ONNX Runtime's ` +
          'getData() aborts the process); make it a regular output of a run to read it',
        { tensor: this.name, location: 'gpu-buffer', device: this.device },
      );
    }
    return t.data;
  }

  /** Same as `read()`: named like ORT's method so a reflexive `getData()` is refused, not fatal. */
  async getData(): Promise<ort.Tensor['data']> {
    return this.read();
  }

  /** Release the device memory now (otherwise it lives until garbage collection). */
  dispose(): void {
    const t = this.#tensor;
    this.#tensor = undefined;
    if (t?.location === 'gpu-buffer') t.dispose();
  }

  #live(action: string): ort.Tensor {
    if (!this.#tensor) {
      throw new DeviceTensorAccessError(`cannot ${action} "${this.name}": it was disposed`, {
        tensor: this.name,
        location: 'none',
        device: this.device,
      });
    }
    return this.#tensor;
  }

  /**
   * @internal The raw tensor, for feeding to a session on `device`. A gpu-buffer tensor goes only
   * to a WebGPU session.
   */
  static unwrapFor(t: DeviceTensor, device: Device, input: string): ort.Tensor {
    const raw = t.#live(`feed as "${input}"`);
    if (raw.location === 'gpu-buffer' && device !== 'webgpu') {
      throw new DeviceTensorAccessError(
        `"${t.name}" lives in a WebGPU buffer and cannot be fed as "${input}" to a ${device} ` +
          'session (it would read garbage); feed it to a WebGPU session, or keep it as a host output',
        { tensor: t.name, location: 'gpu-buffer', device },
      );
    }
    return raw;
  }
}

/**
 * Named device tensors carried from one run to the next, e.g. `present.*` outputs of a decode step
 * becoming its `past.*` inputs. Replacing an entry disposes the previous tensor.
 */
export class DeviceTensorStore {
  readonly #tensors = new Map<string, DeviceTensor>();

  get size(): number {
    return this.#tensors.size;
  }

  names(): string[] {
    return [...this.#tensors.keys()];
  }

  get(name: string): DeviceTensor | undefined {
    return this.#tensors.get(name);
  }

  /** Store `tensor` under `name` (an input name of the next run), disposing what was there. */
  set(name: string, tensor: DeviceTensor): void {
    const old = this.#tensors.get(name);
    if (old && old !== tensor) old.dispose();
    this.#tensors.set(name, tensor);
  }

  /** Move device outputs into the store, renamed by `carry` (output name → input name). */
  carry(outputs: Record<string, DeviceTensor>, carry: Record<string, string>): void {
    for (const [out, input] of Object.entries(carry)) {
      const t = outputs[out];
      if (t) this.set(input, t);
    }
  }

  /** The stored tensors as feeds (only those whose names are in `inputNames`, when given). */
  feeds(inputNames?: readonly string[]): Record<string, DeviceTensor> {
    const out: Record<string, DeviceTensor> = {};
    for (const [k, v] of this.#tensors) if (!inputNames || inputNames.includes(k)) out[k] = v;
    return out;
  }

  delete(name: string): void {
    this.#tensors.get(name)?.dispose();
    this.#tensors.delete(name);
  }

  dispose(): void {
    for (const t of this.#tensors.values()) t.dispose();
    this.#tensors.clear();
  }
}
