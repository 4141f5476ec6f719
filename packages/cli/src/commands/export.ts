import { existsSync, readdirSync } from 'node:fs';
import { copyFile, mkdir, mkdtemp, rename, rm } from 'node:fs/promises';
import { basename, dirname, join, resolve } from 'node:path';
import { ConfigError, isWithin, realPathOf, systemError } from '@flowgrpo/core';
import {
  ALL_GRAPHS,
  ARTIFACTS_MANIFEST,
  type DecoderGraphKind,
  LORA_TARGET_MODULES,
  type LoraConfig,
  type LoraTargetModule,
  loadDecoderConfig,
  loadHfModel,
  loadLoraAdapter,
  mergeLora,
  saveHfModel,
  type WeightDType,
} from '@flowgrpo/models';
import {
  type BaseWeightsDtypeKey,
  buildTrainingArtifacts,
  resolveBaseWeightsDtype,
} from '@flowgrpo/trainer';
import {
  type CliIO,
  type Command,
  numberOption,
  type ParsedArgs,
  stringOption,
  UsageError,
} from '../command.js';
import { resolveModelArg } from '../hub-names.js';
import { modelKind } from '../model-artifacts.js';
import { requireFolder } from '../user-paths.js';

const usage = `Usage:
  flowgrpo export --model HF_FOLDER --out DIR [--adapter PATH] [LoRA options]
      Builds the ONNX artifacts directory (prefill, decode, logprobs and — with LoRA —
      train_step graphs, weights.data, artifacts.json) that train and eval reuse. The LoRA
      shape comes from --adapter's adapter_config.json, or from the LoRA options.
  flowgrpo export --model HF_FOLDER --adapter PATH --out DIR --merge [--dtype D]
      Writes a HF model folder with the adapter merged into the weights
      (W + alpha/r · B·A, as PEFT's merge_and_unload), plus the tokenizer and generation files:
      loadable by transformers, vLLM and flowgrpo without PEFT.
  HF_FOLDER may be a Hugging Face Hub name org/name[@revision] (docs/guides/hub.md).

  --adapter PATH         a PEFT adapter folder, or a checkpoint-<step> folder of a run
  --lora-r N             LoRA rank (without --adapter; default: no LoRA inputs)
  --lora-alpha A         lora_alpha (default 2·r)
  --lora-target-modules  comma-separated (default q_proj,k_proj,v_proj,o_proj,gate_proj,up_proj,down_proj)
  --use-rslora           alpha/√r scaling
  --graphs LIST          graphs to build (default: all that apply)
  --max-positions N      rows of the RoPE tables (default min(max_position_embeddings, 32768))
  --gradient-checkpointing
                         the train_step graph recomputes each layer in its backward (a run
                         config's gradient_checkpointing: true needs artifacts built with it)
  --share-sampling-weights
                         the prefill and decode graphs cast half-precision projections at each
                         product instead of once at load (a run config's
                         share_sampling_weights: true needs artifacts built with it)
  --base-weights-dtype D the layers' projection matrices in weights.data and in memory: auto |
                         float32 | bfloat16 | float16 (default auto: the model's torch_dtype;
                         a run config's base_weights_dtype, when not auto, must match)
  --dtype D              --merge: float32 | bfloat16 | float16 (default: the model's torch_dtype)
  --overwrite            replace an existing --out (never the --model or --adapter folder,
                         nor one that holds or lies in them)`;

const DTYPES: Record<string, WeightDType> = {
  float32: 'F32',
  bfloat16: 'BF16',
  float16: 'F16',
};

/** Files of a HF folder that are not weights but belong with them. */
const COMPANION_FILES = [
  'tokenizer.json',
  'tokenizer_config.json',
  'special_tokens_map.json',
  'added_tokens.json',
  'vocab.json',
  'merges.txt',
  'tokenizer.model',
  'chat_template.jinja',
  'chat_template.json',
  'generation_config.json',
];

function loraFromFlags(args: ParsedArgs): LoraConfig | undefined {
  const r = numberOption(args, 'lora-r');
  if (r === undefined) {
    for (const k of ['lora-alpha', 'lora-target-modules', 'use-rslora'])
      if (args.values[k] !== undefined) throw new UsageError(`--${k} needs --lora-r`);
    return undefined;
  }
  if (!Number.isInteger(r) || r < 1) throw new UsageError(`--lora-r must be a positive integer`);
  const targets = (stringOption(args, 'lora-target-modules') ?? LORA_TARGET_MODULES.join(','))
    .split(',')
    .map((s) => s.trim())
    .filter(Boolean);
  for (const t of targets)
    if (!(LORA_TARGET_MODULES as readonly string[]).includes(t))
      throw new UsageError(
        `unknown LoRA target module '${t}' (known: ${LORA_TARGET_MODULES.join(', ')})`,
      );
  return {
    r,
    alpha: numberOption(args, 'lora-alpha') ?? 2 * r,
    targetModules: targets as LoraTargetModule[],
    useRslora: args.values['use-rslora'] === true,
  };
}

/** --out must be new, empty, or (with --overwrite) replaceable. */
function checkOut(out: string, args: ParsedArgs): void {
  if (!existsSync(out)) return;
  requireFolder(out, '--out');
  if (readdirSync(out).length === 0) return;
  if (args.values.overwrite !== true)
    throw new UsageError(`--out ${out} exists and is not empty; pass --overwrite to replace it`, {
      hint: 'pass --overwrite to replace it, or choose another --out',
    });
}

/**
 * --out is written whole and, with --overwrite, replaces what is there: it must not be, hold or
 * lie inside a folder the export reads — the model (for a hub name, its snapshot in the HF
 * cache) or the adapter —, compared on real paths (links followed), so that no export deletes
 * or writes into its own input.
 */
async function checkOutApart(out: string, sources: [string, string | undefined][]): Promise<void> {
  const realOut = realPathOf(out);
  for (const [what, dir] of sources) {
    if (dir === undefined) continue;
    const real = realPathOf(dir);
    const relation =
      realOut === real
        ? 'is'
        : isWithin(realOut, real)
          ? 'is inside'
          : isWithin(real, realOut)
            ? 'holds'
            : undefined;
    if (relation)
      throw new ConfigError(
        `--out ${out}${realOut === out ? '' : ` (${realOut})`} ${relation} the ${what} folder ${real}: the export would write into, or replace, what it reads`,
        { key: 'out' },
        { hint: `choose an --out outside the ${what} folder` },
      );
  }
}

async function exportModel(args: ParsedArgs, io: CliIO): Promise<number> {
  const modelArg = stringOption(args, 'model');
  if (!modelArg) throw new UsageError('--model is required');
  const outArg = stringOption(args, 'out');
  if (!outArg) throw new UsageError('--out is required');
  const model = await resolveModelArg(modelArg, io, '--model');
  // --out may be a link the user made (to a folder on another disk): the export goes where it
  // points, not over the link — replacing the folder would swap the link for a folder of ours.
  const out = realPathOf(resolve(io.cwd, outArg));
  if (modelKind(model) !== 'hf')
    throw new ConfigError(`--model ${model} must be a HF model folder (it holds artifacts)`, {
      key: 'model',
    });
  const adapterArg = stringOption(args, 'adapter');
  const adapterDir = adapterArg ? resolve(io.cwd, adapterArg) : undefined;
  if (adapterDir) requireFolder(adapterDir, '--adapter');
  await checkOutApart(out, [
    ['model', model],
    ['adapter', adapterDir],
  ]);
  checkOut(out, args);

  if (args.values.merge === true) {
    if (!adapterDir) throw new UsageError('--merge needs --adapter');
    if (args.values['gradient-checkpointing'] === true)
      throw new UsageError('--gradient-checkpointing builds artifacts; --merge writes a HF folder');
    if (args.values['share-sampling-weights'] === true)
      throw new UsageError('--share-sampling-weights builds artifacts; --merge writes a HF folder');
    if (args.values['base-weights-dtype'] !== undefined)
      throw new UsageError(
        '--base-weights-dtype builds artifacts; --merge writes a HF folder (--dtype)',
      );
    const dtypeArg = stringOption(args, 'dtype');
    if (dtypeArg !== undefined && !DTYPES[dtypeArg])
      throw new UsageError(`--dtype must be ${Object.keys(DTYPES).join(', ')}, got '${dtypeArg}'`);
    // The adapter is checked against the model's shape before the weights are read.
    const { lora, params } = await loadLoraAdapter(adapterDir, await loadDecoderConfig(model));
    const weights = await loadHfModel(model);
    const merged = mergeLora(weights, lora, params);
    const dtype = DTYPES[dtypeArg ?? weights.config.torchDtype ?? 'float32'] ?? 'F32';
    // Written beside --out and renamed into place: a kill never leaves a half-written model.
    await mkdir(dirname(out), { recursive: true });
    const tmp = await mkdtemp(join(dirname(out), `.${basename(out)}.tmp-`));
    try {
      await saveHfModel(tmp, merged, { dtype });
      for (const f of COMPANION_FILES)
        if (existsSync(join(model, f))) await copyFile(join(model, f), join(tmp, f));
      await rm(out, { recursive: true, force: true });
      await rename(tmp, out);
    } catch (e) {
      await rm(tmp, { recursive: true, force: true });
      throw systemError(e, { what: '--out', path: dirname(out) }) ?? e;
    }
    io.stdout(
      `merged ${adapterDir} (r=${lora.r}, alpha=${lora.alpha}, ${lora.targetModules.join('/')}) into ${out} (${dtype})\n`,
    );
    return 0;
  }

  if (existsSync(out) && readdirSync(out).length > 0 && !existsSync(join(out, ARTIFACTS_MANIFEST)))
    throw new UsageError(
      `--out ${out} holds something other than artifacts; refusing to replace it`,
    );
  const config = await loadDecoderConfig(model);
  const lora = adapterDir ? (await loadLoraAdapter(adapterDir, config)).lora : loraFromFlags(args);
  if (adapterDir && numberOption(args, 'lora-r') !== undefined)
    throw new UsageError('--adapter gives the LoRA shape; drop --lora-r');
  const graphsArg = stringOption(args, 'graphs');
  const graphs = graphsArg?.split(',').map((g) => g.trim()) as DecoderGraphKind[] | undefined;
  for (const g of graphs ?? [])
    if (!ALL_GRAPHS.includes(g))
      throw new UsageError(`unknown graph '${g}' (known: ${ALL_GRAPHS.join(', ')})`);
  if (graphs?.includes('train_step') && !lora)
    throw new UsageError('the train_step graph needs LoRA (--adapter or --lora-r)');
  const gradientCheckpointing = args.values['gradient-checkpointing'] === true;
  if (gradientCheckpointing && (!lora || (graphs && !graphs.includes('train_step'))))
    throw new UsageError(
      '--gradient-checkpointing changes the train_step graph only: it needs LoRA (--adapter or --lora-r) and train_step among --graphs',
    );
  const decodeCastsPerUse = args.values['share-sampling-weights'] === true;
  if (decodeCastsPerUse && graphs && !graphs.includes('decode'))
    throw new UsageError(
      '--share-sampling-weights changes the decode graph (and prefill): it needs decode among --graphs',
    );
  const dtypeKey = stringOption(args, 'base-weights-dtype') ?? 'auto';
  if (!['auto', ...Object.keys(DTYPES)].includes(dtypeKey))
    throw new UsageError(
      `--base-weights-dtype must be auto, ${Object.keys(DTYPES).join(', ')}, got '${dtypeKey}'`,
    );
  const baseWeightsDtype = resolveBaseWeightsDtype(
    dtypeKey as BaseWeightsDtypeKey,
    config.torchDtype,
  );
  const maxPositions = numberOption(args, 'max-positions');
  const weights = await loadHfModel(model);
  const created = !existsSync(out);
  let manifest: ReturnType<typeof buildTrainingArtifacts>;
  try {
    manifest = buildTrainingArtifacts(weights, out, {
      ...(lora && { lora }),
      ...(graphs && { graphs }),
      maxPositions: maxPositions ?? Math.min(weights.config.maxPositionEmbeddings, 32768),
      gradientCheckpointing,
      baseWeightsDtype,
      decodeCastsPerUse,
    });
  } catch (e) {
    // A folder this call created holds only a partial build (a full disk, say): not left behind.
    if (created) await rm(out, { recursive: true, force: true });
    throw systemError(e, { what: '--out', path: out }) ?? e;
  }
  io.stdout(
    `artifacts: ${out} (${Object.keys(manifest.graphs).join(', ')}; ${lora ? `LoRA r=${lora.r}, alpha=${lora.alpha}, ${lora.targetModules.join('/')}` : 'no LoRA'}${manifest.gradientCheckpointing ? '; gradient checkpointing' : ''}${manifest.baseWeightsDtype ? `; projections in ${manifest.baseWeightsDtype}` : ''}${manifest.decodeCastsPerUse ? '; decode casts per product (share_sampling_weights)' : ''}; weights ${(manifest.weights.bytes / 2 ** 20).toFixed(1)} MiB)\n`,
  );
  return 0;
}

export const exportCommand: Command = {
  name: 'export',
  summary: 'build ONNX artifacts from a HF model, or merge a LoRA adapter into a HF model folder',
  usage,
  options: {
    model: { type: 'string' },
    out: { type: 'string' },
    adapter: { type: 'string' },
    merge: { type: 'boolean' },
    dtype: { type: 'string' },
    'lora-r': { type: 'string' },
    'lora-alpha': { type: 'string' },
    'lora-target-modules': { type: 'string' },
    'use-rslora': { type: 'boolean' },
    graphs: { type: 'string' },
    'max-positions': { type: 'string' },
    'gradient-checkpointing': { type: 'boolean' },
    'share-sampling-weights': { type: 'boolean' },
    'base-weights-dtype': { type: 'string' },
    overwrite: { type: 'boolean' },
  },
  run: (args, io) => exportModel(args, io),
};
