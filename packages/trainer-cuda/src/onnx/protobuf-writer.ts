/**
 * A minimal protobuf encoder for the ONNX messages flowgrpo writes.
 *
 * Why hand-written rather than generated (protobufjs, ts-proto, @bufbuild): we need eight messages
 * and four wire types; codegen would add a build step and a runtime dependency for that. More
 * importantly, the generated encoders copy every `bytes` field into one contiguous output buffer,
 * while ONNX models carry hundreds of megabytes of `raw_data`. Here a message is a list of chunks:
 * small header buffers we produce, plus the caller's tensor `Uint8Array`s held by reference. The
 * list can be written to a file piece by piece (`writeChunks`) without ever concatenating the
 * weights, and its total length is known before writing, so the 2 GB protobuf limit is checked up
 * front.
 */

/** Protobuf wire types (https://protobuf.dev/programming-guides/encoding/). */
export const WireType = {
  VARINT: 0,
  I64: 1,
  LEN: 2,
  I32: 5,
} as const;

const SCRATCH_SIZE = 4096;

/**
 * Builds one message. Scalars go into a scratch buffer; `bytes`/nested messages are appended as
 * separate chunks after a length prefix, so large payloads are referenced, not copied.
 */
export class ProtoWriter {
  private readonly chunks: Uint8Array[] = [];
  private scratch = new Uint8Array(SCRATCH_SIZE);
  private view = new DataView(this.scratch.buffer);
  private pos = 0;
  private flushedLength = 0;

  /** Total encoded length in bytes so far. */
  get length(): number {
    return this.flushedLength + this.pos;
  }

  private ensure(n: number): void {
    if (this.pos + n <= this.scratch.length) return;
    this.flushScratch();
    if (n > this.scratch.length) {
      this.scratch = new Uint8Array(n);
      this.view = new DataView(this.scratch.buffer);
    }
  }

  private flushScratch(): void {
    if (this.pos === 0) return;
    this.chunks.push(this.scratch.subarray(0, this.pos));
    this.flushedLength += this.pos;
    this.scratch = new Uint8Array(SCRATCH_SIZE);
    this.view = new DataView(this.scratch.buffer);
    this.pos = 0;
  }

  /** Unsigned varint for a non-negative safe integer. */
  private rawVarint(value: number): void {
    if (!Number.isSafeInteger(value) || value < 0) {
      throw new RangeError(`varint expects a non-negative safe integer, got ${value}`);
    }
    this.ensure(10);
    while (value >= 0x80) {
      this.scratch[this.pos++] = (value % 0x80) | 0x80;
      value = Math.floor(value / 0x80);
    }
    this.scratch[this.pos++] = value;
  }

  /** Varint of an int64 (negative values take ten bytes, two's complement). */
  private rawVarint64(value: number | bigint): void {
    if (typeof value === 'number') {
      if (!Number.isSafeInteger(value)) {
        throw new RangeError(`int64 field expects an integer, got ${value}`);
      }
      if (value >= 0) {
        this.rawVarint(value);
        return;
      }
      value = BigInt(value);
    }
    let v = BigInt.asUintN(64, value);
    this.ensure(10);
    while (v >= 0x80n) {
      this.scratch[this.pos++] = Number(v & 0x7fn) | 0x80;
      v >>= 7n;
    }
    this.scratch[this.pos++] = Number(v);
  }

  private tag(field: number, wire: number): void {
    this.rawVarint(field * 8 + wire);
  }

  /** int32 / int64 / enum field. */
  int64(field: number, value: number | bigint): this {
    this.tag(field, WireType.VARINT);
    this.rawVarint64(value);
    return this;
  }

  float(field: number, value: number): this {
    this.tag(field, WireType.I32);
    this.ensure(4);
    this.view.setFloat32(this.pos, value, true);
    this.pos += 4;
    return this;
  }

  /** A `bytes` field; the payload is referenced, not copied. */
  bytes(field: number, payload: Uint8Array): this {
    this.tag(field, WireType.LEN);
    this.rawVarint(payload.byteLength);
    if (payload.byteLength === 0) return this;
    if (payload.byteLength <= 256) {
      this.ensure(payload.byteLength);
      this.scratch.set(payload, this.pos);
      this.pos += payload.byteLength;
    } else {
      this.flushScratch();
      this.chunks.push(payload);
      this.flushedLength += payload.byteLength;
    }
    return this;
  }

  string(field: number, value: string): this {
    return this.bytes(field, textEncoder.encode(value));
  }

  /** A nested message built by another writer; its chunks are moved, not copied. */
  message(field: number, inner: ProtoWriter): this {
    this.tag(field, WireType.LEN);
    this.rawVarint(inner.length);
    this.flushScratch();
    for (const chunk of inner.finish()) this.chunks.push(chunk);
    this.flushedLength += inner.length;
    return this;
  }

  /** The encoded message as a list of chunks (the writer must not be used afterwards). */
  finish(): Uint8Array[] {
    this.flushScratch();
    return this.chunks;
  }
}

const textEncoder = new TextEncoder();

/** Concatenate chunks into one buffer (for in-memory use; files use `writeChunks`). */
export function concatChunks(chunks: readonly Uint8Array[]): Uint8Array {
  let total = 0;
  for (const c of chunks) total += c.byteLength;
  const out = new Uint8Array(total);
  let offset = 0;
  for (const c of chunks) {
    out.set(c, offset);
    offset += c.byteLength;
  }
  return out;
}
