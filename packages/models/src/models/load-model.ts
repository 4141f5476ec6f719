import { stat } from 'node:fs/promises';
import { isHubName, resolveModelSource } from '@flowgrpo/core';
import { type LoadHfModelOptions, loadHfModel } from './weights/hf-folder.js';
import { loadLlama2cCheckpoint } from './weights/llama2c-checkpoint.js';
import { convertWeightTensor, type ModelWeights } from './weights/model-weights.js';

/**
 * Loads decoder weights from either source the trainer accepts: a HF model folder
 * (config.json + safetensors) or a llama2.c `.bin` checkpoint file (converted to HF layout).
 * A hub name (`org/name[@revision]`, no local path of that name) is fetched into the HF cache
 * first (HF_ENDPOINT, HF_HOME, HF_TOKEN, HF_HUB_OFFLINE as huggingface_hub reads them).
 */
export async function loadDecoderModel(
  pathOrHubName: string,
  options: LoadHfModelOptions = {},
): Promise<ModelWeights> {
  const path = isHubName(pathOrHubName) ? await resolveModelSource(pathOrHubName) : pathOrHubName;
  if ((await stat(path)).isDirectory()) return loadHfModel(path, options);
  const w = await loadLlama2cCheckpoint(path);
  if (options.dtype === undefined || options.dtype === 'F32' || options.dtype === 'keep') return w;
  const dtype = options.dtype;
  return {
    config: w.config,
    tensors: new Map([...w.tensors].map(([n, t]) => [n, convertWeightTensor(t, dtype)])),
  };
}
