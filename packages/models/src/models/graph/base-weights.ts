import { ConfigError, float32ToTensor, type Tensor, tensorToFloat32 } from '@flowgrpo/core';
import type { ExternalRef, WeightsFileWriter } from '@flowgrpo/graph';
import type { DecoderConfig } from '../config.js';
import { type ModelWeights, weightAsFloat32 } from '../weights/model-weights.js';
import { expectedTensorShapes, layerTensorNames } from '../weights/tensor-names.js';

// The base model's weights, written once into the shared weights.data that every artifact graph
// references: HF names and HF layout (Linear [out, in]; the graphs use Gemm with transB, so no
// transposed copy is stored), plus the RoPE cos/sin tables. Float32, except the layers'
// projection matrices when they are asked for in half precision (`projections`).

export const ROPE_COS = 'rope.cos';
export const ROPE_SIN = 'rope.sin';

/**
 * The dtype the layers' projection matrices (q/k/v/o, gate/up/down: nearly all of a decoder's
 * weights but its embeddings) are stored in. Half precision halves them in weights.data and in
 * memory; the graphs cast them to float32 where they are used (half-weights.ts).
 */
export type ProjectionDtype = 'float32' | 'bfloat16' | 'float16';

/** Where one base tensor lives in weights.data. */
export interface WeightRef {
  shape: number[];
  external: ExternalRef;
  /** Stored in half precision (a projection matrix); absent: float32. */
  half?: 'bfloat16' | 'float16';
}

export interface BaseWeights {
  config: DecoderConfig;
  /** HF tensor names (and rope.cos / rope.sin) → location in the weights file. */
  refs: ReadonlyMap<string, WeightRef>;
  /** Rows of the RoPE tables: the largest position id + 1 the graphs accept. */
  maxPositions: number;
}

/**
 * RoPE tables [maxPositions, headDim / 2]: angle(p, j) = p · θ^(−2j / headDim), computed in
 * float64 and rounded once to float32 (HF's rotate-half layout: pair j rotates (j, j + d/2)).
 */
export function ropeTables(
  config: DecoderConfig,
  maxPositions: number,
): { cos: Float32Array; sin: Float32Array } {
  const half = config.headDim / 2;
  const cos = new Float32Array(maxPositions * half);
  const sin = new Float32Array(maxPositions * half);
  for (let j = 0; j < half; j++) {
    const invFreq = 1 / config.ropeTheta ** ((2 * j) / config.headDim);
    for (let p = 0; p < maxPositions; p++) {
      const angle = p * invFreq;
      cos[p * half + j] = Math.cos(angle);
      sin[p * half + j] = Math.sin(angle);
    }
  }
  return { cos, sin };
}

const bytesOf = (f: Float32Array | Uint16Array): Uint8Array =>
  new Uint8Array(f.buffer, f.byteOffset, f.byteLength);

/** The layers' projection matrices, by name (what `projections` applies to). */
export function projectionNames(config: DecoderConfig): Set<string> {
  const names = new Set<string>();
  for (let l = 0; l < config.numHiddenLayers; l++) {
    const n = layerTensorNames(l);
    for (const m of [n.qProj, n.kProj, n.vProj, n.oProj, n.gateProj, n.upProj, n.downProj])
      names.add(m);
  }
  return names;
}

/** Float16's largest finite value: beyond it a value would be stored as ±inf. */
const F16_MAX = 65504;

/**
 * A tensor's bits in a half dtype: as stored when it already is, else rounded to nearest even.
 * A value past float16's range is refused rather than stored as inf.
 */
function halfBits(name: string, t: Tensor, dtype: 'bfloat16' | 'float16'): Uint16Array {
  const code = dtype === 'bfloat16' ? 'BF16' : 'F16';
  if (t.dtype === code) return t.data as Uint16Array;
  const values = tensorToFloat32(t);
  if (code === 'F16') {
    let max = 0;
    for (const v of values) max = Math.max(max, Math.abs(v));
    if (!(max <= F16_MAX))
      throw new ConfigError(
        `base_weights_dtype float16: ${name} holds ${max} (float16 ends at ${F16_MAX})`,
        { key: 'base_weights_dtype' },
        { hint: "use bfloat16 (float32's range) or float32" },
      );
  }
  return float32ToTensor(values, code, [...t.shape]).data as Uint16Array;
}

/** Default RoPE table length: the config's context, capped so tables stay small. */
export const DEFAULT_MAX_POSITIONS_CAP = 32768;

/**
 * Appends every base tensor and the RoPE tables to `writer`: float32, the projection matrices in
 * `projections` (default float32).
 */
export function writeBaseWeights(
  weights: ModelWeights,
  writer: WeightsFileWriter,
  options: { maxPositions?: number | undefined; projections?: ProjectionDtype | undefined } = {},
): BaseWeights {
  const config = weights.config;
  const maxPositions =
    options.maxPositions ?? Math.min(config.maxPositionEmbeddings, DEFAULT_MAX_POSITIONS_CAP);
  const half = options.projections === 'float32' ? undefined : options.projections;
  const halves = half ? projectionNames(config) : new Set<string>();
  const refs = new Map<string, WeightRef>();
  for (const [name, shape] of expectedTensorShapes(config)) {
    const t = halves.has(name) && weights.tensors.get(name);
    refs.set(
      name,
      t && half
        ? { shape, external: writer.append(bytesOf(halfBits(name, t, half))), half }
        : { shape, external: writer.append(bytesOf(weightAsFloat32(weights, name))) },
    );
  }
  const { cos, sin } = ropeTables(config, maxPositions);
  const cols = config.headDim / 2;
  refs.set(ROPE_COS, { shape: [maxPositions, cols], external: writer.append(bytesOf(cos)) });
  refs.set(ROPE_SIN, { shape: [maxPositions, cols], external: writer.append(bytesOf(sin)) });
  return { config, refs, maxPositions };
}
