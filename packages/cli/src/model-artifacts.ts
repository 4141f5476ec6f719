import { existsSync, readdirSync, readFileSync, statSync, writeFileSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { ConfigError, FileNotFoundError, systemError } from '@flowgrpo/core';
import {
  ARTIFACTS_MANIFEST,
  type ArtifactsManifest,
  chooseDevice,
  type DecoderGraphKind,
  type LoraConfig,
  loadDecoderConfig,
  loadDecoderModel,
  loadTokenizer,
  type ProjectionDtype,
  readArtifactsManifest,
  type Tokenizer,
} from '@flowgrpo/models';
import {
  type BaseWeightsDtypeKey,
  buildTrainingArtifacts,
  type LoraOptionsSchema,
  resolveBaseWeightsDtype,
} from '@flowgrpo/trainer';
import type { z } from 'zod';

// What `--model` / `model` may name: an artifacts directory (used as it is) or a HF model folder
// (artifacts are built from it). A build is stamped with what it was built from, so the next run
// with the same model, LoRA and graphs (a resumed run, a second eval) reuses it instead of
// writing the weights again; anything different rebuilds.

const STAMP = 'built-from.json';

export type ModelKind = 'artifacts' | 'hf';

/** 'artifacts' for a folder with artifacts.json, 'hf' for one with config.json. */
export function modelKind(path: string): ModelKind {
  if (!existsSync(path))
    throw new FileNotFoundError(path, {
      hint: 'check the model path (model / --model): a HF model folder or an artifacts directory',
    });
  if (!statSync(path).isDirectory())
    throw new ConfigError(
      `${path} is a file; give a HF model folder (config.json + safetensors) or an artifacts directory`,
      { key: 'model' },
      { hint: `give the folder that holds it (${dirname(path)}), if that is the model folder` },
    );
  if (existsSync(join(path, ARTIFACTS_MANIFEST))) return 'artifacts';
  if (existsSync(join(path, 'config.json'))) return 'hf';
  throw new ConfigError(
    `${path} is neither a HF model folder (no config.json) nor an artifacts directory (no ${ARTIFACTS_MANIFEST})`,
    { key: 'model' },
    {
      hint: 'give a folder with config.json + *.safetensors (as from huggingface-cli download), or one that flowgrpo export wrote',
    },
  );
}

/** PEFT's LoraConfig keys (the trainer config's `lora`) as the trainer's LoraConfig. */
export function loraFromOptions(o: z.output<typeof LoraOptionsSchema>): LoraConfig {
  return { r: o.r, alpha: o.lora_alpha, targetModules: o.target_modules, useRslora: o.use_rslora };
}

function stampOf(
  modelDir: string,
  o: {
    lora?: LoraConfig;
    graphs?: readonly DecoderGraphKind[];
    maxPositions?: number;
    gradientCheckpointing?: boolean;
    baseWeightsDtype?: ProjectionDtype;
    decodeCastsPerUse?: boolean;
  },
) {
  const files = readdirSync(modelDir)
    .filter((n) => n === 'config.json' || n.includes('.safetensors'))
    .sort()
    .map((n) => {
      const s = statSync(join(modelDir, n));
      return [n, s.size, s.mtimeMs];
    });
  return {
    model: modelDir,
    files,
    lora: o.lora ?? null,
    graphs: o.graphs ?? null,
    maxPositions: o.maxPositions ?? null,
    // Only when on: folders built before the option keep their stamp.
    ...(o.gradientCheckpointing && { gradientCheckpointing: true }),
    // Only where it changes a graph (half projections): the key on float32 rebuilds nothing.
    ...(o.decodeCastsPerUse &&
      o.baseWeightsDtype &&
      o.baseWeightsDtype !== 'float32' && { decodeCastsPerUse: true }),
    ...(o.baseWeightsDtype &&
      o.baseWeightsDtype !== 'float32' && { baseWeightsDtype: o.baseWeightsDtype }),
  };
}

/**
 * Artifacts for `model`: the directory itself when it holds artifacts, else built from the HF
 * folder into `dir` (reused when `dir` was built from the same files with the same options).
 */
export async function ensureArtifacts(
  model: string,
  dir: string,
  o: {
    lora?: LoraConfig;
    graphs?: readonly DecoderGraphKind[];
    maxPositions?: number;
    /** The train_step graph recomputes each layer's activations (config gradient_checkpointing). */
    gradientCheckpointing?: boolean;
    /** prefill/decode cast half projections at each product (config share_sampling_weights). */
    decodeCastsPerUse?: boolean;
    /** The config's base_weights_dtype ('auto': the checkpoint's torch_dtype; see resolveBaseWeightsDtype). */
    baseWeightsDtype?: BaseWeightsDtypeKey;
    /** The device the run's sessions open on (base_weights_dtype 'auto' is float32 on WebGPU). */
    device?: string;
    log?: (line: string) => void;
  },
): Promise<{ dir: string; manifest: ArtifactsManifest; built: boolean }> {
  if (modelKind(model) === 'artifacts')
    return { dir: model, manifest: readArtifactsManifest(model), built: false };
  // 'auto' is float32 on WebGPU: a device left to choose is chosen here as the run will.
  const device = o.device === 'auto' ? (await chooseDevice('auto')).device : o.device;
  const baseWeightsDtype = resolveBaseWeightsDtype(
    o.baseWeightsDtype ?? 'float32',
    (await loadDecoderConfig(model)).torchDtype,
    device,
  );
  const stamp = JSON.stringify(stampOf(model, { ...o, baseWeightsDtype }));
  const stampFile = join(dir, STAMP);
  if (existsSync(stampFile) && readFileSync(stampFile, 'utf8') === stamp) {
    try {
      const manifest = readArtifactsManifest(dir);
      o.log?.(`artifacts: reusing ${dir}`);
      return { dir, manifest, built: false };
    } catch {
      // damaged: rebuild below
    }
  }
  o.log?.(`artifacts: building ${dir} from ${model}`);
  const weights = await loadDecoderModel(model);
  try {
    const manifest = buildTrainingArtifacts(weights, dir, {
      ...(o.lora && { lora: o.lora }),
      ...(o.graphs && { graphs: o.graphs }),
      maxPositions: o.maxPositions ?? Math.min(weights.config.maxPositionEmbeddings, 32768),
      gradientCheckpointing: o.gradientCheckpointing,
      baseWeightsDtype,
      decodeCastsPerUse: o.decodeCastsPerUse,
    });
    writeFileSync(stampFile, stamp);
    return { dir, manifest, built: true };
  } catch (e) {
    // A full disk, a file where the folder belongs: named as the artifacts folder it was for.
    throw systemError(e, { what: 'the artifacts folder', path: dir }) ?? e;
  }
}

/** The tokenizer: `tokenizer` when given, else the model folder's (artifacts have none). */
export async function resolveTokenizer(
  model: string,
  tokenizer: string | undefined,
  vocabSize: number,
): Promise<Tokenizer> {
  const path = tokenizer ?? model;
  if (!existsSync(path))
    throw new FileNotFoundError(path, {
      hint: 'check the tokenizer path (tokenizer / --tokenizer): a folder with tokenizer.json',
    });
  if (!tokenizer && modelKind(model) === 'artifacts')
    throw new ConfigError(
      `${model} is an artifacts directory, which holds no tokenizer`,
      { key: 'tokenizer' },
      {
        hint: 'name the folder with tokenizer.json (tokenizer / --tokenizer): the HF model folder it was built from',
      },
    );
  if (statSync(path).isDirectory() && !existsSync(join(path, 'tokenizer.json')))
    throw new ConfigError(
      `${path} has no tokenizer.json`,
      { key: 'tokenizer' },
      { hint: 'name the folder with tokenizer.json (tokenizer / --tokenizer)' },
    );
  return loadTokenizer(path, { vocabSize });
}
