// The decoding half of protobuf-writer.ts: walks the fields of one message. Length-delimited
// payloads are returned as views into the input (no copies), so decoding a model with inline
// weights stays cheap.

import { OnnxDecodeError } from './errors.js';
import { WireType } from './protobuf-writer.js';

export interface ProtoField {
  field: number;
  wire: number;
}

const textDecoder = new TextDecoder('utf-8', { fatal: true });

export class ProtoReader {
  private pos: number;
  private readonly end: number;
  private viewCache: DataView | undefined;

  constructor(
    private readonly buf: Uint8Array,
    start = 0,
    end = buf.byteLength,
  ) {
    this.pos = start;
    this.end = end;
  }

  private get view(): DataView {
    this.viewCache ??= new DataView(this.buf.buffer, this.buf.byteOffset, this.buf.byteLength);
    return this.viewCache;
  }

  get done(): boolean {
    return this.pos >= this.end;
  }

  /** The next field's number and wire type. */
  next(): ProtoField {
    const key = this.varint();
    const field = Math.floor(key / 8);
    if (field === 0) throw new OnnxDecodeError(`invalid field number 0 at byte ${this.pos}`);
    return { field, wire: key % 8 };
  }

  /** An unsigned varint that fits a safe integer (lengths, tags, small counts). */
  varint(): number {
    // Fast path: up to 4 bytes (28 bits) with plain integer arithmetic; no BigInt.
    let result = 0;
    for (let i = 0, shift = 0; i < 4; i++, shift += 7) {
      if (this.pos >= this.end) throw new OnnxDecodeError('truncated varint');
      const byte = this.buf[this.pos++]!;
      result |= (byte & 0x7f) << shift;
      if (byte < 0x80) return result;
    }
    this.pos -= 4;
    const v = this.varint64();
    if (v > BigInt(Number.MAX_SAFE_INTEGER)) {
      throw new OnnxDecodeError(`varint ${v} exceeds the safe integer range`);
    }
    return Number(v);
  }

  /** A raw 64-bit varint as an unsigned bigint. */
  varint64(): bigint {
    let result = 0n;
    let shift = 0n;
    for (let i = 0; i < 10; i++) {
      if (this.pos >= this.end) throw new OnnxDecodeError('truncated varint');
      const byte = this.buf[this.pos++]!;
      result |= BigInt(byte & 0x7f) << shift;
      if (byte < 0x80) return result;
      shift += 7n;
    }
    throw new OnnxDecodeError('varint longer than 10 bytes');
  }

  /** An int64 field: a safe number when it fits, a bigint otherwise. */
  int64(): number | bigint {
    // Fast path for small non-negative values (dims, types, attribute ints).
    const b = this.pos < this.end ? this.buf[this.pos]! : 0x80;
    if (b < 0x80) {
      this.pos++;
      return b;
    }
    const v = BigInt.asIntN(64, this.varint64());
    return v >= BigInt(Number.MIN_SAFE_INTEGER) && v <= BigInt(Number.MAX_SAFE_INTEGER)
      ? Number(v)
      : v;
  }

  float(): number {
    if (this.pos + 4 > this.end) throw new OnnxDecodeError('truncated float');
    const v = this.view.getFloat32(this.pos, true);
    this.pos += 4;
    return v;
  }

  double(): number {
    if (this.pos + 8 > this.end) throw new OnnxDecodeError('truncated double');
    const v = this.view.getFloat64(this.pos, true);
    this.pos += 8;
    return v;
  }

  /** A length-delimited payload, as a view into the input. */
  bytes(): Uint8Array {
    const len = this.varint();
    if (this.pos + len > this.end) {
      throw new OnnxDecodeError(`length ${len} at byte ${this.pos} runs past the message end`);
    }
    const out = this.buf.subarray(this.pos, this.pos + len);
    this.pos += len;
    return out;
  }

  string(): string {
    const start = this.pos;
    const len = this.varint();
    if (len <= 64 && this.pos + len <= this.end) {
      // Short ASCII names (the common case) without a TextDecoder call.
      let ascii = true;
      for (let i = this.pos; i < this.pos + len; i++) {
        if (this.buf[i]! >= 0x80) {
          ascii = false;
          break;
        }
      }
      if (ascii) {
        const out = String.fromCharCode(...this.buf.subarray(this.pos, this.pos + len));
        this.pos += len;
        return out;
      }
    }
    this.pos = start;
    try {
      return textDecoder.decode(this.bytes());
    } catch (e) {
      if (e instanceof OnnxDecodeError) throw e;
      throw new OnnxDecodeError('string field is not valid UTF-8');
    }
  }

  /** A nested message's reader. */
  message(): ProtoReader {
    const payload = this.bytes();
    return new ProtoReader(payload);
  }

  /**
   * A repeated scalar field, which may be packed (one LEN record) or not (one record per value);
   * proto2 ONNX writers emit `dims`/`ints`/`floats` unpacked, others pack them: accept both.
   */
  repeated<T>(wire: number, one: (r: ProtoReader) => T, out: T[]): void {
    if (wire === WireType.LEN) {
      const inner = this.message();
      while (!inner.done) out.push(one(inner));
    } else {
      out.push(one(this));
    }
  }

  skip(wire: number): void {
    switch (wire) {
      case WireType.VARINT:
        this.varint64();
        return;
      case WireType.I64:
        this.advance(8);
        return;
      case WireType.LEN:
        this.bytes();
        return;
      case WireType.I32:
        this.advance(4);
        return;
      default:
        throw new OnnxDecodeError(`unsupported wire type ${wire} at byte ${this.pos}`);
    }
  }

  private advance(n: number): void {
    if (this.pos + n > this.end) throw new OnnxDecodeError('truncated fixed-width field');
    this.pos += n;
  }
}
