import { mkdir, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import {
  float32ToTensor,
  openSafetensorsModel,
  type Tensor,
  tensorToFloat32,
  writeShardedSafetensors,
} from '@flowgrpo/core';
import { type DecoderConfig, loadDecoderConfig, toHfConfigJson } from '../config.js';
import {
  convertWeightTensor,
  type LoadDType,
  type ModelWeights,
  type WeightDType,
} from './model-weights.js';
import { checkTensorShapes } from './validate.js';

export interface LoadHfModelOptions {
  /** Storage dtype after loading (default F32). */
  dtype?: LoadDType;
}

/**
 * Loads a HF model folder: `config.json` plus `model.safetensors` or a sharded
 * `model.safetensors.index.json`. Every tensor's shape is checked against the config from the
 * headers alone, before any tensor data is read.
 */
export async function loadHfModel(
  dir: string,
  options: LoadHfModelOptions = {},
): Promise<ModelWeights> {
  const config = await loadDecoderConfig(dir);
  const reader = await openSafetensorsModel(dir);
  try {
    const shapes = new Map(reader.names().map((n) => [n, reader.info(n).shape]));
    const names = checkTensorShapes(config, shapes, dir);
    const tensors = new Map<string, Tensor<WeightDType>>();
    for (const name of names) {
      tensors.set(name, convertWeightTensor(await reader.read(name), options.dtype ?? 'F32'));
    }
    return { config, tensors };
  } finally {
    await reader.close();
  }
}

export interface SaveHfModelOptions {
  /** Dtype written to the safetensors file (default: each tensor's own). */
  dtype?: WeightDType;
  /** Largest shard in bytes; more than one shard writes `model.safetensors.index.json`. */
  maxShardSize?: number;
  /** Extra files (name → JSON value) written beside config.json, e.g. generation_config.json. */
  extraJson?: Record<string, unknown>;
}

const TORCH_DTYPE: Record<WeightDType, string> = {
  F32: 'float32',
  F16: 'float16',
  BF16: 'bfloat16',
};

/** Writes `config.json` and the safetensors weights of a model as transformers lays them out. */
export async function saveHfModel(
  dir: string,
  weights: ModelWeights,
  options: SaveHfModelOptions = {},
): Promise<void> {
  await mkdir(dir, { recursive: true });
  const names = checkTensorShapes(
    weights.config,
    new Map([...weights.tensors].map(([n, t]) => [n, t.shape])),
  );
  const first = weights.tensors.get(names[0]!)!;
  const dtype = options.dtype ?? first.dtype;
  const config: DecoderConfig = { ...weights.config, torchDtype: TORCH_DTYPE[dtype] };
  await writeFile(join(dir, 'config.json'), `${JSON.stringify(toHfConfigJson(config), null, 2)}\n`);
  for (const [file, value] of Object.entries(options.extraJson ?? {})) {
    await writeFile(join(dir, file), `${JSON.stringify(value, null, 2)}\n`);
  }
  const sources = names.map((name) => {
    const t = weights.tensors.get(name)!;
    const out = t.dtype === dtype ? t : float32ToTensor(tensorToFloat32(t), dtype, [...t.shape]);
    return [name, { dtype: out.dtype, shape: out.shape, data: out.data }] as const;
  });
  await writeShardedSafetensors(dir, sources, {
    ...(options.maxShardSize === undefined ? {} : { maxShardSize: options.maxShardSize }),
  });
}
