import { open, rename, rm } from 'node:fs/promises';
import { bytesOf, type DType, dtypeByteSize, shapeSize } from '../dtype.js';
import { SafetensorsError } from './errors.js';
import { type BuiltHeader, buildHeader, type SafetensorsTensorInfo } from './header.js';
import { assertLittleEndianHost } from './read.js';

/**
 * A tensor to write. `data` holds its little-endian bytes (any typed array or byte view of the
 * right length), or is a function producing them when the writer reaches the tensor, so large
 * exports can compute one tensor at a time instead of holding them all.
 */
export interface TensorSource {
  dtype: DType;
  shape: readonly number[];
  data: ArrayBufferView | (() => ArrayBufferView | Promise<ArrayBufferView>);
}

export type TensorSources =
  | ReadonlyMap<string, TensorSource>
  | Record<string, TensorSource>
  | Iterable<readonly [string, TensorSource]>;

export interface WriteSafetensorsOptions {
  /** Written as `__metadata__` (string values only). */
  metadata?: Record<string, string>;
}

export function tensorSourceEntries(tensors: TensorSources): [string, TensorSource][] {
  if (tensors instanceof Map) return [...tensors.entries()];
  if (Symbol.iterator in tensors) {
    return [...(tensors as Iterable<readonly [string, TensorSource]>)].map(([k, v]) => [k, v]);
  }
  return Object.entries(tensors as Record<string, TensorSource>);
}

async function resolveBytes(
  source: TensorSource,
  info: SafetensorsTensorInfo,
  file: string | undefined,
): Promise<Uint8Array> {
  const view = typeof source.data === 'function' ? await source.data() : source.data;
  if (view.byteLength !== info.byteLength) {
    throw new SafetensorsError(
      `${info.dtype} [${info.shape.join(', ')}] needs ${info.byteLength} bytes, data has ${view.byteLength}`,
      { file, tensor: info.name, reason: 'size_mismatch' },
    );
  }
  return bytesOf(view);
}

function checkSizes(entries: [string, TensorSource][], file: string | undefined): void {
  // Fail before writing anything when an eager tensor's size is wrong.
  for (const [name, s] of entries) {
    if (typeof s.data === 'function') continue;
    const need = shapeSize(s.shape) * dtypeByteSize(s.dtype);
    if (s.data.byteLength !== need) {
      throw new SafetensorsError(
        `${s.dtype} [${s.shape.join(', ')}] needs ${need} bytes, data has ${s.data.byteLength}`,
        { file, tensor: name, reason: 'size_mismatch' },
      );
    }
  }
}

/** Checks eager tensors' sizes and lays out the header; `file` names the target in errors. */
function prepare(
  tensors: TensorSources,
  options: WriteSafetensorsOptions,
  file: string | undefined,
): { built: BuiltHeader; sources: Map<string, TensorSource> } {
  assertLittleEndianHost();
  const entries = tensorSourceEntries(tensors);
  checkSizes(entries, file);
  const built = buildHeader(
    entries.map(([name, s]) => ({ name, dtype: s.dtype, shape: s.shape })),
    options.metadata,
    file,
  );
  return { built, sources: new Map(entries) };
}

/** Serialises tensors to one in-memory safetensors image. */
export async function serializeSafetensors(
  tensors: TensorSources,
  options: WriteSafetensorsOptions = {},
): Promise<Uint8Array> {
  const { built, sources } = prepare(tensors, options, undefined);
  const out = new Uint8Array(built.bytes.byteLength + built.dataLength);
  out.set(built.bytes, 0);
  for (const info of built.tensors) {
    const bytes = await resolveBytes(sources.get(info.name)!, info, undefined);
    out.set(bytes, built.bytes.byteLength + info.dataOffsets[0]);
  }
  return out;
}

export interface WrittenSafetensors {
  path: string;
  /** Size of the file in bytes. */
  fileSize: number;
  /** Sum of the tensors' byte sizes. */
  dataLength: number;
  tensors: SafetensorsTensorInfo[];
}

const CHUNK = 1 << 30;

/**
 * Writes a safetensors file, streaming each tensor's bytes straight from its array (nothing is
 * concatenated). The file appears atomically: it is written to `<path>.tmp-<pid>` and renamed.
 */
export async function writeSafetensors(
  path: string,
  tensors: TensorSources,
  options: WriteSafetensorsOptions = {},
): Promise<WrittenSafetensors> {
  const { built, sources } = prepare(tensors, options, path);
  const tmp = `${path}.tmp-${process.pid}`;
  const fh = await open(tmp, 'w');
  let ok = false;
  try {
    await fh.write(built.bytes, 0, built.bytes.byteLength, 0);
    let position = built.bytes.byteLength;
    for (const info of built.tensors) {
      const bytes = await resolveBytes(sources.get(info.name)!, info, path);
      for (let done = 0; done < bytes.byteLength; ) {
        const len = Math.min(CHUNK, bytes.byteLength - done);
        const { bytesWritten } = await fh.write(bytes, done, len, position);
        done += bytesWritten;
        position += bytesWritten;
      }
    }
    await fh.sync();
    ok = true;
  } finally {
    await fh.close();
    if (!ok) await rm(tmp, { force: true });
  }
  await rename(tmp, path);
  return {
    path,
    fileSize: built.bytes.byteLength + built.dataLength,
    dataLength: built.dataLength,
    tensors: built.tensors,
  };
}
