import type { ExternalRef, WeightsFileWriter } from '@flowgrpo/graph';
import type { DecoderConfig } from '../config.js';
import { type ModelWeights, weightAsFloat32 } from '../weights/model-weights.js';
import { expectedTensorShapes } from '../weights/tensor-names.js';

// The base model's weights, written once into the shared weights.data that every artifact graph
// references: float32, HF names and HF layout (Linear [out, in]; the graphs use Gemm with
// transB, so no transposed copy is stored), plus the RoPE cos/sin tables.

export const ROPE_COS = 'rope.cos';
export const ROPE_SIN = 'rope.sin';

/** Where one base tensor lives in weights.data. */
export interface WeightRef {
  shape: number[];
  external: ExternalRef;
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

const bytesOf = (f: Float32Array): Uint8Array =>
  new Uint8Array(f.buffer, f.byteOffset, f.byteLength);

/** Default RoPE table length: the config's context, capped so tables stay small. */
export const DEFAULT_MAX_POSITIONS_CAP = 32768;

/** Appends every base tensor (as float32) and the RoPE tables to `writer`. */
export function writeBaseWeights(
  weights: ModelWeights,
  writer: WeightsFileWriter,
  options: { maxPositions?: number } = {},
): BaseWeights {
  const config = weights.config;
  const maxPositions =
    options.maxPositions ?? Math.min(config.maxPositionEmbeddings, DEFAULT_MAX_POSITIONS_CAP);
  const refs = new Map<string, WeightRef>();
  for (const [name, shape] of expectedTensorShapes(config)) {
    refs.set(name, {
      shape,
      external: writer.append(bytesOf(weightAsFloat32(weights, name))),
    });
  }
  const { cos, sin } = ropeTables(config, maxPositions);
  const half = config.headDim / 2;
  refs.set(ROPE_COS, { shape: [maxPositions, half], external: writer.append(bytesOf(cos)) });
  refs.set(ROPE_SIN, { shape: [maxPositions, half], external: writer.append(bytesOf(sin)) });
  return { config, refs, maxPositions };
}
