// One external-data file shared by several ONNX graphs: the artifacts builder writes the base
// weights once and every graph (train_step, logprobs, prefill, decode) points into it.

import { closeSync, openSync, writeSync } from 'node:fs';
import { basename } from 'node:path';
import type { OnnxExternalData } from './model.js';

export interface WeightsFileWriterOptions {
  /** Byte alignment of every tensor's offset (ORT only needs element alignment; 64 suits SIMD). */
  alignment?: number;
  /** The `location` written into models; must be the file's path relative to the model folder. */
  location?: string;
}

const ZEROS = new Uint8Array(4096);

/**
 * Appends tensors' raw bytes to one file and returns where each landed. The same bytes (the same
 * memory range of the same ArrayBuffer) appended twice are stored once, so graphs built from the
 * same weight arrays share them without the caller tracking anything.
 */
export class WeightsFileWriter {
  readonly path: string;
  readonly location: string;
  readonly alignment: number;
  private fd: number | undefined;
  private offset = 0;
  private readonly seen = new WeakMap<ArrayBufferLike, Map<string, OnnxExternalData>>();
  private tensorCount = 0;

  /** Create (truncating) the file at `path`. */
  constructor(path: string, options: WeightsFileWriterOptions = {}) {
    this.path = path;
    this.location = options.location ?? basename(path);
    this.alignment = options.alignment ?? 64;
    if (!Number.isInteger(this.alignment) || this.alignment < 1) {
      throw new RangeError(`alignment must be a positive integer, got ${this.alignment}`);
    }
    this.fd = openSync(path, 'w');
  }

  /** Bytes written so far (including alignment padding). */
  get size(): number {
    return this.offset;
  }

  /** Distinct tensors stored. */
  get count(): number {
    return this.tensorCount;
  }

  get closed(): boolean {
    return this.fd === undefined;
  }

  /** Append `bytes` (aligned) unless the same memory was appended before; returns its location. */
  append(bytes: Uint8Array): OnnxExternalData {
    const fd = this.fd;
    if (fd === undefined) throw new Error(`weights file ${this.path} is closed`);
    const key = `${bytes.byteOffset}:${bytes.byteLength}`;
    let byBuffer = this.seen.get(bytes.buffer);
    const known = byBuffer?.get(key);
    if (known) return { ...known };

    const pad = (this.alignment - (this.offset % this.alignment)) % this.alignment;
    writeAll(fd, pad <= ZEROS.length ? ZEROS.subarray(0, pad) : new Uint8Array(pad));
    this.offset += pad;
    const ext: OnnxExternalData = {
      location: this.location,
      offset: this.offset,
      length: bytes.byteLength,
    };
    writeAll(fd, bytes);
    this.offset += bytes.byteLength;
    this.tensorCount++;

    if (!byBuffer) {
      byBuffer = new Map();
      this.seen.set(bytes.buffer, byBuffer);
    }
    byBuffer.set(key, ext);
    return { ...ext };
  }

  close(): void {
    if (this.fd === undefined) return;
    closeSync(this.fd);
    this.fd = undefined;
  }
}

/** Write all of `bytes` at the file position, looping over partial writes and the 2 GB cap. */
export function writeAll(fd: number, bytes: Uint8Array): void {
  const MAX = 1 << 30;
  let done = 0;
  while (done < bytes.byteLength) {
    const n = Math.min(MAX, bytes.byteLength - done);
    done += writeSync(fd, bytes, done, n);
  }
}
