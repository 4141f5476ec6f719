import { existsSync, readdirSync, statSync } from 'node:fs';
import { mkdir, readFile, rename, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import {
  createRng,
  DataFormatError,
  FileNotFoundError,
  readSafetensors,
  tensorToFloat32,
  writeSafetensors,
} from '@flowgrpo/core';
import type { DecoderConfig } from '../models/config.js';
import {
  LORA_TARGET_MODULES,
  type LoraConfig,
  type LoraTargetModule,
  loraParamSpecs,
} from './lora-config.js';

/** Adapter matrices by PEFT tensor name (A: [r, in], B: [out, r], row-major float32). */
export type LoraParams = Map<string, Float32Array<ArrayBuffer>>;

export const ADAPTER_CONFIG = 'adapter_config.json';
export const ADAPTER_WEIGHTS = 'adapter_model.safetensors';

/**
 * PEFT's default init (`init_lora_weights=True`): A as nn.Linear's default, Kaiming-uniform with
 * a = √5 — gain √(2 / (1 + a²)) = √(1/3), bound = gain · √(3 / fan_in) = 1 / √fan_in, so
 * A ~ U(−1/√in, 1/√in) — and B = 0, so the adapted model starts equal to the base model. Each
 * matrix draws from its own stream `createRng(seed).fork(name)`.
 */
export function initLoraParams(
  config: DecoderConfig,
  lora: LoraConfig,
  seed: number | bigint | string,
): LoraParams {
  const root = createRng(seed);
  const params: LoraParams = new Map();
  for (const s of loraParamSpecs(config, lora)) {
    const [rows, cols] = s.shape;
    const data = new Float32Array(rows * cols);
    if (s.which === 'A') {
      const bound = 1 / Math.sqrt(cols);
      const rng = root.fork(s.name);
      for (let i = 0; i < data.length; i++) data[i] = (2 * rng.next() - 1) * bound;
    }
    params.set(s.name, data);
  }
  return params;
}

/** PEFT's adapter_config.json for a LoRA config. */
export function peftAdapterConfig(
  lora: LoraConfig,
  baseModel: string | undefined,
): Record<string, unknown> {
  return {
    peft_type: 'LORA',
    task_type: 'CAUSAL_LM',
    base_model_name_or_path: baseModel ?? null,
    r: lora.r,
    lora_alpha: lora.alpha,
    lora_dropout: 0,
    target_modules: [...lora.targetModules],
    bias: 'none',
    use_rslora: lora.useRslora ?? false,
    fan_in_fan_out: false,
    init_lora_weights: true,
    layers_to_transform: lora.layers ? [...lora.layers] : null,
    modules_to_save: null,
    inference_mode: true,
  };
}

/** Writes `adapter_config.json` + `adapter_model.safetensors` (PEFT names, float32) atomically. */
export async function saveLoraAdapter(
  dir: string,
  config: DecoderConfig,
  lora: LoraConfig,
  params: LoraParams,
  options: { baseModel?: string } = {},
): Promise<void> {
  await mkdir(dir, { recursive: true });
  const tensors = loraParamSpecs(config, lora).map((s) => {
    const data = params.get(s.name);
    if (!data || data.length !== s.shape[0] * s.shape[1])
      throw new RangeError(`LoRA tensor ${s.name} is missing or not of shape [${s.shape}]`);
    return [s.name, { dtype: 'F32' as const, shape: s.shape, data }] as const;
  });
  await writeSafetensors(join(dir, ADAPTER_WEIGHTS), tensors, { metadata: { format: 'pt' } });
  const tmp = join(dir, `${ADAPTER_CONFIG}.tmp-${process.pid}`);
  await writeFile(tmp, `${JSON.stringify(peftAdapterConfig(lora, options.baseModel), null, 2)}\n`);
  await rename(tmp, join(dir, ADAPTER_CONFIG));
}

/**
 * adapter_config.json of `dir`: a folder that is not a PEFT adapter (a run's output_dir, a model
 * folder, a file) is a typed error that says what to pass instead.
 */
async function readAdapterConfig(dir: string, cfgPath: string): Promise<Record<string, unknown>> {
  let text: string;
  try {
    text = await readFile(cfgPath, 'utf8');
  } catch (cause) {
    const code = (cause as { code?: unknown }).code;
    if (code !== 'ENOENT' && code !== 'ENOTDIR') throw cause;
    if (!existsSync(dir)) throw new FileNotFoundError(dir, { cause });
    const checkpoints = statSync(dir).isDirectory()
      ? readdirSync(dir).filter((n) => /^checkpoint-\d+$/.test(n))
      : [];
    throw new DataFormatError(
      `${dir} is not a PEFT adapter folder (no ${ADAPTER_CONFIG})`,
      { file: cfgPath },
      {
        cause,
        hint:
          checkpoints.length > 0
            ? `it is a run's output_dir: pass one of its checkpoints, e.g. ${join(dir, checkpoints.sort((a, b) => Number(a.slice(11)) - Number(b.slice(11))).at(-1)!)}`
            : 'pass a folder holding adapter_config.json and adapter_model.safetensors (a checkpoint-<step> folder of a run)',
      },
    );
  }
  try {
    const raw = JSON.parse(text) as unknown;
    if (typeof raw !== 'object' || raw === null || Array.isArray(raw))
      throw new Error('expected a JSON object');
    return raw as Record<string, unknown>;
  } catch (cause) {
    throw new DataFormatError(`not a valid adapter config: ${(cause as Error).message}`, {
      file: cfgPath,
    });
  }
}

/** Reads a PEFT LoRA adapter folder; shapes are checked against the decoder config. */
export async function loadLoraAdapter(
  dir: string,
  config: DecoderConfig,
): Promise<{ lora: LoraConfig; params: LoraParams }> {
  const cfgPath = join(dir, ADAPTER_CONFIG);
  const raw = await readAdapterConfig(dir, cfgPath);
  if (raw.peft_type !== 'LORA')
    throw new DataFormatError(`${cfgPath}: peft_type is ${String(raw.peft_type)}, not LORA`, {
      file: cfgPath,
    });
  const targets = raw.target_modules;
  const list = typeof targets === 'string' ? [targets] : (targets as string[]);
  const known = list.filter((m): m is LoraTargetModule =>
    (LORA_TARGET_MODULES as readonly string[]).includes(m),
  );
  if (known.length !== list.length)
    throw new DataFormatError(`${cfgPath}: unsupported target_modules ${JSON.stringify(targets)}`, {
      file: cfgPath,
    });
  const lora: LoraConfig = {
    r: Number(raw.r),
    alpha: Number(raw.lora_alpha),
    targetModules: known,
    useRslora: raw.use_rslora === true,
    ...(Array.isArray(raw.layers_to_transform) && { layers: raw.layers_to_transform as number[] }),
  };
  const { tensors } = await readSafetensors(join(dir, ADAPTER_WEIGHTS));
  const params: LoraParams = new Map();
  for (const s of loraParamSpecs(config, lora)) {
    // PEFT sometimes saves names with the adapter name (`.lora_A.default.weight`); accept both.
    const t = tensors.get(s.name) ?? tensors.get(s.name.replace(/\.weight$/, '.default.weight'));
    if (t?.shape.length !== 2 || t.shape[0] !== s.shape[0] || t.shape[1] !== s.shape[1])
      throw new DataFormatError(
        `${join(dir, ADAPTER_WEIGHTS)}: ${s.name} ${t ? `has shape [${t.shape}], not [${s.shape}]` : 'is missing'}: the adapter was trained for another model`,
        { file: join(dir, ADAPTER_WEIGHTS) },
        {
          hint: "use the base model the adapter was trained on (adapter_config.json's base_model_name_or_path)",
        },
      );
    params.set(s.name, Float32Array.from(tensorToFloat32(t)));
  }
  return { lora, params };
}
