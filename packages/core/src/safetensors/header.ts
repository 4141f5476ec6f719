import { DTYPES, type DType, isDType } from '../dtype.js';
import { SafetensorsError } from './errors.js';

// The safetensors layout (https://huggingface.co/docs/safetensors):
//   8 bytes   N, unsigned 64-bit little-endian
//   N bytes   UTF-8 JSON object: { "__metadata__"?: {string: string},
//             "<name>": { "dtype": "F32", "shape": [..], "data_offsets": [begin, end] }, ... }
//             HF pads it with spaces so that the data starts on an 8-byte boundary.
//   rest      the data section; offsets are relative to its start, tensors are little-endian,
//             row-major.

/** HF's reader refuses headers above 100 MB; a larger length means a corrupt or hostile file. */
export const SAFETENSORS_MAX_HEADER_BYTES = 100_000_000;

export interface SafetensorsTensorInfo {
  name: string;
  dtype: DType;
  shape: number[];
  /** [begin, end) relative to the start of the data section. */
  dataOffsets: [number, number];
  byteLength: number;
}

export interface SafetensorsHeader {
  metadata: Record<string, string>;
  /** Tensors in data order (ascending offsets). */
  tensors: SafetensorsTensorInfo[];
  /** N, the JSON header's byte length (padding included). */
  headerByteLength: number;
  /** Absolute file offset of the data section: 8 + N. */
  dataStart: number;
}

/** Reads N from the 8-byte prefix, checking it against the file size. */
export function parseHeaderLength(
  prefix: Uint8Array,
  fileSize: number,
  file: string | undefined,
): number {
  if (prefix.byteLength < 8 || fileSize < 8) {
    throw new SafetensorsError(
      `file has ${fileSize} bytes, fewer than the 8-byte header length prefix`,
      {
        file,
        reason: 'truncated',
      },
    );
  }
  const n = new DataView(prefix.buffer, prefix.byteOffset, 8).getBigUint64(0, true);
  if (n > BigInt(fileSize - 8)) {
    throw new SafetensorsError(
      `header length ${n} goes beyond the end of the file (${fileSize} bytes)`,
      { file, reason: 'header_out_of_bounds' },
    );
  }
  if (n > BigInt(SAFETENSORS_MAX_HEADER_BYTES)) {
    throw new SafetensorsError(
      `header length ${n} exceeds the ${SAFETENSORS_MAX_HEADER_BYTES}-byte limit`,
      { file, reason: 'header_too_large' },
    );
  }
  return Number(n);
}

function isNonNegativeInt(x: unknown): x is number {
  return typeof x === 'number' && Number.isSafeInteger(x) && x >= 0;
}

/**
 * Parses and validates the JSON header. `dataLength` is the size of the data section
 * (file size - 8 - N). Gaps between tensors and bytes after the last one are tolerated (HF's
 * Rust reader rejects them; they are harmless); overlaps and out-of-range offsets are not.
 */
export function parseHeaderJson(
  json: Uint8Array,
  dataLength: number,
  file: string | undefined,
): SafetensorsHeader {
  let parsed: unknown;
  try {
    parsed = JSON.parse(new TextDecoder('utf-8', { fatal: true }).decode(json));
  } catch (cause) {
    throw new SafetensorsError(
      `header is not valid UTF-8 JSON: ${(cause as Error).message}`,
      { file, reason: 'invalid_json' },
      { cause },
    );
  }
  if (typeof parsed !== 'object' || parsed === null || Array.isArray(parsed)) {
    throw new SafetensorsError('header is not a JSON object', { file, reason: 'invalid_json' });
  }
  const metadata: Record<string, string> = {};
  const tensors: SafetensorsTensorInfo[] = [];
  for (const [name, value] of Object.entries(parsed)) {
    if (name === '__metadata__') {
      if (typeof value !== 'object' || value === null || Array.isArray(value)) {
        throw new SafetensorsError('__metadata__ must be an object of strings', {
          file,
          reason: 'invalid_header',
        });
      }
      for (const [k, v] of Object.entries(value)) {
        if (typeof v !== 'string') {
          throw new SafetensorsError(`__metadata__.${k} must be a string, got ${typeof v}`, {
            file,
            reason: 'invalid_header',
          });
        }
        metadata[k] = v;
      }
      continue;
    }
    tensors.push(parseTensorEntry(name, value, file));
  }
  tensors.sort(
    (a, b) => a.dataOffsets[0] - b.dataOffsets[0] || a.dataOffsets[1] - b.dataOffsets[1],
  );
  let prevEnd = 0;
  let prev: SafetensorsTensorInfo | undefined;
  for (const t of tensors) {
    const [begin, end] = t.dataOffsets;
    if (prev !== undefined && begin < prevEnd && end > begin) {
      throw new SafetensorsError(
        `bytes [${begin}, ${end}) overlap tensor '${prev.name}' [${prev.dataOffsets[0]}, ${prevEnd})`,
        { file, tensor: t.name, reason: 'overlapping_offsets' },
      );
    }
    if (end > dataLength) {
      // Contiguous with what precedes it and starting inside the data: the file was cut short.
      const cut = begin <= dataLength && begin === prevEnd;
      throw new SafetensorsError(
        cut
          ? `file is truncated: the data section has ${dataLength} bytes but the tensor ends at ${end}`
          : `bytes [${begin}, ${end}) lie beyond the ${dataLength}-byte data section`,
        { file, tensor: t.name, reason: cut ? 'truncated' : 'out_of_bounds' },
      );
    }
    if (end > prevEnd) {
      prevEnd = end;
      prev = t;
    }
  }
  return { metadata, tensors, headerByteLength: json.byteLength, dataStart: 8 + json.byteLength };
}

function parseTensorEntry(
  name: string,
  value: unknown,
  file: string | undefined,
): SafetensorsTensorInfo {
  const bad = (message: string, reason: 'invalid_header' | 'unknown_dtype' = 'invalid_header') =>
    new SafetensorsError(message, { file, tensor: name, reason });
  if (typeof value !== 'object' || value === null || Array.isArray(value)) {
    throw bad('entry must be an object with dtype, shape and data_offsets');
  }
  const { dtype, shape, data_offsets: offsets } = value as Record<string, unknown>;
  if (!isDType(dtype)) {
    throw bad(`unknown dtype ${JSON.stringify(dtype)}`, 'unknown_dtype');
  }
  if (!Array.isArray(shape) || !shape.every(isNonNegativeInt)) {
    throw bad(`shape must be an array of non-negative integers, got ${JSON.stringify(shape)}`);
  }
  if (
    !Array.isArray(offsets) ||
    offsets.length !== 2 ||
    !isNonNegativeInt(offsets[0]) ||
    !isNonNegativeInt(offsets[1]) ||
    offsets[1] < offsets[0]
  ) {
    throw bad(
      `data_offsets must be [begin, end] with 0 <= begin <= end, got ${JSON.stringify(offsets)}`,
    );
  }
  const [begin, end] = offsets as [number, number];
  let expected = DTYPES[dtype].bytes;
  for (const d of shape) expected *= d;
  if (!Number.isSafeInteger(expected) || expected !== end - begin) {
    throw new SafetensorsError(
      `${dtype} [${shape.join(', ')}] needs ${expected} bytes but data_offsets [${begin}, ${end}) hold ${end - begin}`,
      { file, tensor: name, reason: 'size_mismatch' },
    );
  }
  return {
    name,
    dtype,
    shape: shape as number[],
    dataOffsets: [begin, end],
    byteLength: end - begin,
  };
}

export interface HeaderTensorSpec {
  name: string;
  dtype: DType;
  shape: readonly number[];
}

export interface BuiltHeader {
  /** Prefix + padded JSON: the bytes before the data section. */
  bytes: Uint8Array;
  /** Tensors in the order their data must be written. */
  tensors: SafetensorsTensorInfo[];
  dataLength: number;
}

/**
 * Lays tensors out as HF's writer does: larger element sizes first, then by name, so every
 * tensor starts at a multiple of its element size; the JSON is space-padded to 8 bytes.
 */
export function buildHeader(
  specs: readonly HeaderTensorSpec[],
  metadata: Record<string, string> | undefined,
  file?: string,
): BuiltHeader {
  const seen = new Set<string>();
  for (const s of specs) {
    if (s.name === '__metadata__') {
      throw new SafetensorsError('"__metadata__" is reserved and cannot name a tensor', {
        file,
        tensor: s.name,
        reason: 'invalid_header',
      });
    }
    if (seen.has(s.name)) {
      throw new SafetensorsError('duplicate tensor name', {
        file,
        tensor: s.name,
        reason: 'invalid_header',
      });
    }
    seen.add(s.name);
    if (!isDType(s.dtype)) {
      throw new SafetensorsError(`unknown dtype ${JSON.stringify(s.dtype)}`, {
        file,
        tensor: s.name,
        reason: 'unknown_dtype',
      });
    }
    if (!s.shape.every((d) => isNonNegativeInt(d))) {
      throw new SafetensorsError(`invalid shape [${s.shape.join(', ')}]`, {
        file,
        tensor: s.name,
        reason: 'invalid_header',
      });
    }
  }
  const ordered = [...specs].sort(
    (a, b) =>
      DTYPES[b.dtype].bytes - DTYPES[a.dtype].bytes ||
      (a.name < b.name ? -1 : a.name > b.name ? 1 : 0),
  );
  const header: Record<string, unknown> = {};
  if (metadata !== undefined) {
    for (const [k, v] of Object.entries(metadata)) {
      if (typeof v !== 'string') {
        throw new SafetensorsError(`metadata value for '${k}' must be a string`, {
          file,
          reason: 'invalid_header',
        });
      }
    }
    header.__metadata__ = metadata;
  }
  const tensors: SafetensorsTensorInfo[] = [];
  let offset = 0;
  for (const s of ordered) {
    let bytes = DTYPES[s.dtype].bytes;
    for (const d of s.shape) bytes *= d;
    const info: SafetensorsTensorInfo = {
      name: s.name,
      dtype: s.dtype,
      shape: [...s.shape],
      dataOffsets: [offset, offset + bytes],
      byteLength: bytes,
    };
    tensors.push(info);
    header[s.name] = { dtype: s.dtype, shape: info.shape, data_offsets: info.dataOffsets };
    offset += bytes;
  }
  const json = new TextEncoder().encode(JSON.stringify(header));
  const padded = Math.ceil(json.byteLength / 8) * 8;
  const bytes = new Uint8Array(8 + padded).fill(0x20, 8);
  new DataView(bytes.buffer).setBigUint64(0, BigInt(padded), true);
  bytes.set(json, 8);
  return { bytes, tensors, dataLength: offset };
}
