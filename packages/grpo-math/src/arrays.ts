import { GrpoInputError } from './errors.js';

/** Real values, one per token (or per sequence); read as float64 whatever the storage. */
export type FloatArray = Float32Array | Float64Array | readonly number[];
/** Trainable-token mask: 1 = the token carries loss, 0 = it does not. */
export type MaskArray = Uint8Array | readonly number[];
/** Non-negative integer indices. */
export type IndexArray = Int32Array | Uint32Array | readonly number[];

export function checkLength(field: string, values: ArrayLike<unknown>, expected: number): void {
  if (values.length !== expected) {
    throw new GrpoInputError(`length ${values.length}, expected ${expected}`, { field });
  }
}

export function checkFinite(field: string, values: ArrayLike<number>): void {
  for (let i = 0; i < values.length; i++) {
    if (!Number.isFinite(values[i])) {
      throw new GrpoInputError(`value ${values[i]} at ${i} is not finite`, { field, index: i });
    }
  }
}

/** Throws unless `ok`; write `ok` so that NaN fails it (NaN compares false). */
export function checkOption(field: string, value: unknown, ok: boolean, what: string): void {
  if (!ok) {
    throw new GrpoInputError(`${String(value)} is not ${what}`, { field });
  }
}
