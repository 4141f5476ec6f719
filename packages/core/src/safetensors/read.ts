import { type FileHandle, open } from 'node:fs/promises';
import { endianness } from 'node:os';
import { type DType, type Tensor, typedArrayFromBytes } from '../dtype.js';
import { FlowGrpoError } from '../errors.js';
import { SafetensorsError } from './errors.js';
import {
  parseHeaderJson,
  parseHeaderLength,
  type SafetensorsHeader,
  type SafetensorsTensorInfo,
} from './header.js';

/** Reads tensors of one safetensors file (or of a sharded set) without loading the rest. */
export interface SafetensorsReader {
  /** The header's `__metadata__` (for a sharded set, the index's `metadata`). */
  readonly metadata: Record<string, string | number>;
  /** Tensor names, in data order. */
  names(): string[];
  has(name: string): boolean;
  info(name: string): SafetensorsTensorInfo;
  /** One tensor's raw little-endian bytes. */
  readBytes(name: string): Promise<Uint8Array>;
  /** One tensor as a typed array (16-bit floats as raw bits; see dtype-convert.ts). */
  read(name: string): Promise<Tensor>;
  close(): Promise<void>;
  [Symbol.asyncDispose](): Promise<void>;
}

export interface SafetensorsFile extends SafetensorsReader {
  readonly path: string;
  readonly header: SafetensorsHeader;
  readonly metadata: Record<string, string>;
}

// Single positional reads are capped below 2 GiB (the most one read(2) call moves).
const CHUNK = 1 << 30;

export function assertLittleEndianHost(): void {
  if (endianness() !== 'LE') {
    // Typed arrays use the host byte order; safetensors data is little-endian.
    throw new FlowGrpoError('safetensors support needs a little-endian host');
  }
}

async function readFully(
  fh: FileHandle,
  into: Uint8Array,
  position: number,
  file: string,
  tensor?: string,
): Promise<void> {
  let done = 0;
  while (done < into.byteLength) {
    const len = Math.min(CHUNK, into.byteLength - done);
    const { bytesRead } = await fh.read(into, done, len, position + done);
    if (bytesRead === 0) {
      throw new SafetensorsError(
        `file ended after ${position + done} bytes while reading ${into.byteLength} bytes at ${position}`,
        { file, tensor, reason: 'truncated' },
      );
    }
    done += bytesRead;
  }
}

function tensorFromBytes(info: SafetensorsTensorInfo, bytes: Uint8Array): Tensor {
  return {
    dtype: info.dtype,
    shape: [...info.shape],
    data: typedArrayFromBytes(info.dtype as DType, bytes),
  } as Tensor;
}

/**
 * Opens a safetensors file and validates its header; tensors are read on demand with positional
 * reads, so only what `read` asks for is loaded. Close it (or use `await using`) when done.
 */
export async function openSafetensors(path: string): Promise<SafetensorsFile> {
  assertLittleEndianHost();
  const fh = await open(path, 'r');
  try {
    const size = (await fh.stat()).size;
    const prefix = new Uint8Array(8);
    if (size >= 8) await readFully(fh, prefix, 0, path);
    const n = parseHeaderLength(prefix, size, path);
    const json = new Uint8Array(n);
    await readFully(fh, json, 8, path);
    const header = parseHeaderJson(json, size - 8 - n, path);
    return new FileReader(path, fh, header);
  } catch (e) {
    await fh.close();
    throw e;
  }
}

class FileReader implements SafetensorsFile {
  readonly metadata: Record<string, string>;
  private readonly byName: Map<string, SafetensorsTensorInfo>;
  private closed = false;

  constructor(
    readonly path: string,
    private readonly fh: FileHandle,
    readonly header: SafetensorsHeader,
  ) {
    this.metadata = header.metadata;
    this.byName = new Map(header.tensors.map((t) => [t.name, t]));
  }

  names(): string[] {
    return this.header.tensors.map((t) => t.name);
  }

  has(name: string): boolean {
    return this.byName.has(name);
  }

  info(name: string): SafetensorsTensorInfo {
    const t = this.byName.get(name);
    if (t === undefined) {
      throw new SafetensorsError('no such tensor in this file', {
        file: this.path,
        tensor: name,
        reason: 'missing_tensor',
      });
    }
    return t;
  }

  async readBytes(name: string): Promise<Uint8Array> {
    const t = this.info(name);
    if (this.closed) throw new FlowGrpoError(`${this.path}: safetensors file is closed`);
    const out = new Uint8Array(t.byteLength);
    await readFully(this.fh, out, this.header.dataStart + t.dataOffsets[0], this.path, name);
    return out;
  }

  async read(name: string): Promise<Tensor> {
    return tensorFromBytes(this.info(name), await this.readBytes(name));
  }

  async close(): Promise<void> {
    if (this.closed) return;
    this.closed = true;
    await this.fh.close();
  }

  [Symbol.asyncDispose](): Promise<void> {
    return this.close();
  }
}

export interface SafetensorsContents {
  metadata: Record<string, string>;
  /** Tensors in data order. */
  tensors: Map<string, Tensor>;
}

/** Parses a whole safetensors file held in memory; tensors are views into `bytes` where aligned. */
export function parseSafetensors(bytes: Uint8Array, file?: string): SafetensorsContents {
  assertLittleEndianHost();
  const n = parseHeaderLength(bytes, bytes.byteLength, file);
  const header = parseHeaderJson(bytes.subarray(8, 8 + n), bytes.byteLength - 8 - n, file);
  const tensors = new Map<string, Tensor>();
  for (const t of header.tensors) {
    const start = header.dataStart + t.dataOffsets[0];
    tensors.set(t.name, tensorFromBytes(t, bytes.subarray(start, start + t.byteLength)));
  }
  return { metadata: header.metadata, tensors };
}

/** Reads every tensor of a safetensors file. */
export async function readSafetensors(path: string): Promise<SafetensorsContents> {
  const f = await openSafetensors(path);
  try {
    const tensors = new Map<string, Tensor>();
    for (const name of f.names()) tensors.set(name, await f.read(name));
    return { metadata: f.metadata, tensors };
  } finally {
    await f.close();
  }
}
