// Core's Turn/TokenSegment hold typed arrays over a plain ArrayBuffer (what its zod schemas
// produce); a policy may hand back views over a SharedArrayBuffer (e.g. from a worker), which are
// copied.

export function int32(a: Int32Array): Int32Array<ArrayBuffer> {
  return a.buffer instanceof ArrayBuffer ? (a as Int32Array<ArrayBuffer>) : Int32Array.from(a);
}

export function float32(a: Float32Array): Float32Array<ArrayBuffer> {
  return a.buffer instanceof ArrayBuffer ? (a as Float32Array<ArrayBuffer>) : Float32Array.from(a);
}
