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

/** Payloads up to this size are copied into the writer's buffer; larger ones are referenced. */
const COPY_LIMIT = 4096;
/** Inline buffer size past which it is flushed to the chunk list instead of grown. */
const MAX_INLINE = 1 << 16;

const f32Bytes = new Uint8Array(4);
const f32View = new DataView(f32Bytes.buffer);

/**
 * Builds one message. Scalars and small payloads go into a growable inline buffer; large `bytes`
 * payloads (tensor data) are appended as separate chunks after their length prefix, so they are
 * referenced, never copied. Nested messages are built by their own writer and spliced in.
 */
export class ProtoWriter {
  private readonly chunks: Uint8Array[] = [];
  private buf = new Uint8Array(64);
  private pos = 0;
  private flushedLength = 0;

  /** Total encoded length in bytes so far. */
  get length(): number {
    return this.flushedLength + this.pos;
  }

  private ensure(n: number): void {
    if (this.pos + n <= this.buf.length) return;
    if (this.pos + n <= MAX_INLINE) {
      const grown = new Uint8Array(Math.max(this.buf.length * 2, this.pos + n));
      grown.set(this.buf.subarray(0, this.pos));
      this.buf = grown;
      return;
    }
    this.flushInline();
    if (n > this.buf.length) this.buf = new Uint8Array(n);
  }

  private flushInline(): void {
    if (this.pos === 0) return;
    this.chunks.push(this.buf.subarray(0, this.pos));
    this.flushedLength += this.pos;
    this.buf = new Uint8Array(Math.min(MAX_INLINE, this.buf.length));
    this.pos = 0;
  }

  /** Append payload bytes: copied when small, referenced when large. */
  private payload(bytes: Uint8Array): void {
    if (bytes.byteLength <= COPY_LIMIT) {
      this.ensure(bytes.byteLength);
      this.buf.set(bytes, this.pos);
      this.pos += bytes.byteLength;
    } else {
      this.flushInline();
      this.chunks.push(bytes);
      this.flushedLength += bytes.byteLength;
    }
  }

  /** Unsigned varint for a non-negative safe integer. */
  private rawVarint(value: number): void {
    if (!Number.isSafeInteger(value) || value < 0) {
      throw new RangeError(`varint expects a non-negative safe integer, got ${value}`);
    }
    this.ensure(10);
    if (value < 0x80000000) {
      while (value >= 0x80) {
        this.buf[this.pos++] = (value & 0x7f) | 0x80;
        value >>>= 7;
      }
      this.buf[this.pos++] = value;
      return;
    }
    while (value >= 0x80) {
      this.buf[this.pos++] = (value % 0x80) | 0x80;
      value = Math.floor(value / 0x80);
    }
    this.buf[this.pos++] = value;
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
      this.buf[this.pos++] = Number(v & 0x7fn) | 0x80;
      v >>= 7n;
    }
    this.buf[this.pos++] = Number(v);
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
    f32View.setFloat32(0, value, true);
    this.ensure(4);
    this.buf.set(f32Bytes, this.pos);
    this.pos += 4;
    return this;
  }

  /** A `bytes` field; a large payload is referenced, not copied. */
  bytes(field: number, payload: Uint8Array): this {
    this.tag(field, WireType.LEN);
    this.rawVarint(payload.byteLength);
    if (payload.byteLength > 0) this.payload(payload);
    return this;
  }

  string(field: number, value: string): this {
    // Names are almost always ASCII: write them directly instead of allocating an encoded copy.
    const n = value.length;
    if (n <= COPY_LIMIT) {
      let ascii = true;
      for (let i = 0; i < n; i++) {
        if (value.charCodeAt(i) >= 0x80) {
          ascii = false;
          break;
        }
      }
      if (ascii) {
        this.tag(field, WireType.LEN);
        this.rawVarint(n);
        this.ensure(n);
        for (let i = 0; i < n; i++) this.buf[this.pos++] = value.charCodeAt(i);
        return this;
      }
    }
    return this.bytes(field, textEncoder.encode(value));
  }

  /** A nested message built by another writer (which must not be used afterwards). */
  message(field: number, inner: ProtoWriter): this {
    this.tag(field, WireType.LEN);
    this.rawVarint(inner.length);
    for (const chunk of inner.finish()) this.payload(chunk);
    return this;
  }

  /** The encoded message as a list of chunks (the writer must not be used afterwards). */
  finish(): Uint8Array[] {
    this.flushInline();
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
