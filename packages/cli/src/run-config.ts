import { resolve } from 'node:path';
import { ConfigError, DATASET_FORMATS, didYouMean, isHubName } from '@flowgrpo/core';
import { builtinToolAlias } from '@flowgrpo/tools';
import {
  checkSftConfig,
  type GRPOConfig,
  GRPOConfigSchema,
  parseConfig,
  type SFTConfig,
  SFTConfigSchema,
} from '@flowgrpo/trainer';
import { z } from 'zod';
import { readJsonFile } from './user-paths.js';

// The JSON file of `flowgrpo train --config run.json`: the trainer's config under TRL's key names
// (GRPOConfig / SFTConfig, validated by @flowgrpo/trainer) side by side with what the CLI needs
// to build the run — the model, the data files, the agent and its fixed roles, the reward, the
// rollout engine. The CLI's keys are taken out first; everything else must be a trainer key, so a
// typo anywhere is a ConfigError that names it. Relative paths resolve against the working
// directory, as they do for TRL's and HF's command lines.

const positiveInt = z.number().int().positive();

/** An OpenAI-compatible chat endpoint for the fixed roles or the judge. */
export const EndpointSchema = z
  .object({
    base_url: z.url(),
    model: z.string().min(1),
    /** Name of the environment variable holding the API key (never the key itself). */
    api_key_env: z.string().min(1).optional(),
    structured_output: z.enum(['json_schema', 'json_object', 'prompt', 'auto']).optional(),
    temperature: z.number().min(0).default(0),
    timeout_s: z.number().positive().default(120),
    max_concurrency: positiveInt.optional(),
  })
  .strict();
export type Endpoint = z.output<typeof EndpointSchema>;

const toolName = z.string().refine((n) => builtinToolAlias(n) !== undefined, {
  error: (issue) => `unknown tool '${String(issue.input)}'`,
});

export const AgentSchema = z.discriminatedUnion('type', [
  z
    .object({
      /**
       * The Flow solver: the policy plans; executor, verifier and generator are `engine`, or
       * rule-based offline stand-ins when it is absent (offline-roles.ts).
       */
      type: z.literal('flow'),
      tools: z.array(toolName).min(1).default(['calculator']),
      /** Planner turns per rollout (default: the trainer config's max_turns). */
      max_turns: positiveInt.optional(),
      engine: EndpointSchema.optional(),
      /**
       * The planner's prompt: 'default' (policyPlannerMessages: the AgentFlow instructions, the
       * tools' descriptions; ~2,500 bytes) or 'compact' (compactPlannerPrompt: a text prompt of
       * a few hundred bytes, for a small planner).
       */
      planner_prompt: z.enum(['default', 'compact']).default('default'),
      analyze_query: z.boolean().default(false),
      tool_timeout_s: z.number().positive().default(60),
    })
    .strict(),
  z
    .object({
      /** One policy writes <think>/<tool_call>/<answer> (Search-R1 / ARTIST style). */
      type: z.literal('tag'),
      tools: z.array(toolName).default([]),
      max_turns: positiveInt.optional(),
      /** A tool (input {query}) that answers <search>…</search>. */
      search_tool: z.string().optional(),
      max_total_tokens: positiveInt.optional(),
      /**
       * The system message the agent sends before the question (default: defaultTagPrompt's,
       * which describes the tags and every tool).
       */
      system_prompt: z.string().min(1).optional(),
      /** An engine for tools that call an LLM themselves (wikipedia, web_rag, generalist). */
      engine: EndpointSchema.optional(),
      tool_timeout_s: z.number().positive().default(60),
    })
    .strict(),
]);
export type AgentSpec = z.output<typeof AgentSchema>;

export const RolloutSchema = z.discriminatedUnion('engine', [
  /** The trainer's own decode graph on `device`. */
  z.object({ engine: z.literal('local') }).strict(),
  z
    .object({
      /** vLLM or SGLang over OpenAI's API; the adapter is hot-loaded after every update. */
      engine: z.literal('openai'),
      base_urls: z.union([z.url(), z.array(z.url()).min(1)]),
      /** The base model's served name. */
      model: z.string().min(1),
      api_key_env: z.string().min(1).optional(),
      lora_routes: z.enum(['vllm', 'sglang']).default('vllm'),
      /** 'server': the server applies its chat template; 'local': ours, sent to /completions. */
      chat_template: z.enum(['server', 'local']).default('server'),
      max_concurrency: positiveInt.optional(),
      timeout_s: z.number().positive().optional(),
    })
    .strict(),
]);
export type RolloutSpec = z.output<typeof RolloutSchema>;

export const REWARDS = ['exact_match', 'f1', 'math', 'judge'] as const;
export type RewardName = (typeof REWARDS)[number];
export const DEVICES = ['cpu', 'auto', 'cuda', 'webgpu'] as const;
export type DeviceName = (typeof DEVICES)[number];
const DATA_FORMATS = ['sample_rows', ...Object.keys(DATASET_FORMATS)] as [string, ...string[]];

const common = {
  /** A HF model folder (artifacts are built into output_dir/artifacts) or an artifacts directory. */
  model: z.string().min(1),
  /** A folder with tokenizer.json (default: the model folder). */
  tokenizer: z.string().min(1).optional(),
  /** base_model_name_or_path written into adapter_config.json (default: the model path). */
  base_model: z.string().min(1).optional(),
  /** A data file, or a hub data set `org/name[@revision]` (its train split; eval_file: test). */
  train_file: z.string().min(1),
  eval_file: z.string().min(1).optional(),
  /** TRL's names for a hub data set: train_file (and eval_file with a test split) from it. */
  dataset_name: z.string().min(1).optional(),
  dataset_config: z.string().min(1).optional(),
  dataset_train_split: z.string().min(1).optional(),
  dataset_test_split: z.string().min(1).optional(),
  device: z.enum(DEVICES).optional(),
  /** Rows of the RoPE tables when building artifacts (default min(max_position_embeddings, 32768)). */
  max_positions: positiveInt.optional(),
};

export const SftRunSchema = z.object({ trainer: z.literal('sft'), ...common }).strict();

export const GrpoRunSchema = z
  .object({
    trainer: z.literal('grpo'),
    ...common,
    /**
     * How train_file / eval_file are read: SampleRows, plain rows, or a raw layout @flowgrpo/core
     * normalises; absent: SampleRows or plain rows, told apart by the first row.
     */
    data_format: z.enum(DATA_FORMATS).optional(),
    agent: AgentSchema,
    reward: z.enum(REWARDS),
    /** The judge's endpoint for reward 'judge' (default: agent.engine). */
    judge: EndpointSchema.optional(),
    rollout: RolloutSchema.default({ engine: 'local' }),
  })
  .strict();

export type SftRun = z.output<typeof SftRunSchema>;
export type GrpoRun = z.output<typeof GrpoRunSchema>;

export type RunConfig =
  | { kind: 'sft'; run: SftRun; config: SFTConfig; file: string }
  | { kind: 'grpo'; run: GrpoRun; config: GRPOConfig; file: string };

/** Keys only training reads: a config written for `flowgrpo eval` alone may leave them out. */
const TRAINING_ONLY = { output_dir: true, learning_rate: true, max_steps: true } as const;
type TrainingOnly = keyof typeof TRAINING_ONLY;
type Lenient<T, K extends keyof T> = Omit<T, K> & Partial<Pick<T, K>>;

/** A run config as `flowgrpo eval` reads it: train_file and the training-only keys optional. */
export type EvalRunConfig =
  | {
      kind: 'sft';
      run: Lenient<SftRun, 'train_file'>;
      config: Lenient<SFTConfig, TrainingOnly>;
      file: string;
    }
  | {
      kind: 'grpo';
      run: Lenient<GrpoRun, 'train_file'>;
      config: Lenient<GRPOConfig, TrainingOnly>;
      file: string;
    };

const RUN_KEYS = {
  sft: Object.keys(SftRunSchema.shape),
  grpo: Object.keys(GrpoRunSchema.shape),
};

const KNOWN_KEYS = {
  sft: new Set([...Object.keys(SftRunSchema.shape), ...Object.keys(SFTConfigSchema.shape)]),
  grpo: new Set([...Object.keys(GrpoRunSchema.shape), ...Object.keys(GRPOConfigSchema.shape)]),
};

/** Keys neither the run nor the trainer knows: one error naming each, with the likely intent. */
function checkKeys(all: Record<string, unknown>, kind: 'sft' | 'grpo', file: string): void {
  const other = kind === 'sft' ? 'grpo' : 'sft';
  const unknown = Object.keys(all).filter((k) => !KNOWN_KEYS[kind].has(k));
  if (unknown.length === 0) return;
  const described = unknown.map((k) =>
    KNOWN_KEYS[other].has(k)
      ? `'${k}' (a ${other.toUpperCase()} key; this config's trainer is '${kind}')`
      : `'${k}'${didYouMean(k, KNOWN_KEYS[kind])}`,
  );
  throw new ConfigError(
    `${file}: unknown key${unknown.length > 1 ? 's' : ''} ${described.join(', ')}`,
    { key: unknown[0]! },
    {
      hint: 'fix the spelling or remove the key (flowgrpo train --help and packages/trainer-cuda/docs/trainers.md list the keys)',
    },
  );
}

interface SchemaDef {
  type: string;
  shape?: Record<string, unknown>;
  innerType?: unknown;
  options?: unknown[];
  element?: unknown;
}
const defOf = (schema: unknown) => (schema as { _zod: { def: SchemaDef } })._zod.def;

/** The shapes of the object schemas at `path` in `schema` (each option's, in a union). */
function shapesAt(schema: unknown, path: readonly PropertyKey[]): Record<string, unknown>[] {
  const def = defOf(schema);
  if (def.innerType) return shapesAt(def.innerType, path); // optional, default, nullable
  if (def.options) return def.options.flatMap((option) => shapesAt(option, path));
  if (path.length === 0) return def.shape ? [def.shape] : [];
  const [head, ...rest] = path;
  if (def.type === 'array' && def.element) return shapesAt(def.element, rest);
  const next = def.shape?.[String(head)];
  return next ? shapesAt(next, rest) : [];
}

/**
 * The trainer's parseConfig, its ConfigError given the fix (which key, in which file), and an
 * unknown key inside an object ("agent": {"tols": …}) the closest key that object takes.
 */
function withFix(file: string): typeof parseConfig {
  return (schema, input, what) => {
    try {
      return parseConfig(schema, input, what);
    } catch (e) {
      if (!ConfigError.isInstance(e) || e.hint) throw e;
      const issue = schema.safeParse(input).error?.issues[0];
      let message = e.message;
      if (issue?.code === 'unrecognized_keys' && issue.path.length > 0) {
        const known = shapesAt(schema, issue.path).flatMap((shape) => Object.keys(shape));
        const keys = issue.keys.map((k) => `'${k}'${didYouMean(k, known)}`).join(', ');
        message = `${what}: ${issue.path.join('.')}: unknown key${issue.keys.length > 1 ? 's' : ''} ${keys}`;
      }
      throw new ConfigError(
        message,
        { ...(e.key !== undefined && { key: e.key }) },
        {
          cause: e,
          hint: `correct ${e.key ? `"${e.key}"` : 'that key'} in ${file} (packages/trainer-cuda/docs/trainers.md describes each key)`,
        },
      );
    }
  };
}

/**
 * TRL's dataset_name (+ dataset_config, dataset_train_split, dataset_test_split) as the data
 * files: train_file is the data set (its train split), eval_file too when a test split is named.
 */
function datasetFiles(runPart: Record<string, unknown>, file: string): void {
  if (runPart.train_file !== undefined)
    throw new ConfigError(
      `${file}: dataset_name and train_file both name the training data`,
      { key: 'dataset_name' },
      { hint: 'keep one: dataset_name (a hub data set) or train_file (a file or a hub name)' },
    );
  runPart.train_file = runPart.dataset_name;
  if (runPart.dataset_test_split !== undefined && runPart.eval_file === undefined)
    runPart.eval_file = runPart.dataset_name;
}

function readRunConfig(
  path: string,
  cwd: string,
  overrides: { resume?: boolean; overwrite?: boolean; device?: DeviceName },
  forEval: boolean,
): RunConfig | EvalRunConfig {
  const file = resolve(cwd, path);
  const raw = readJsonFile(file, '--config');
  if (typeof raw !== 'object' || raw === null || Array.isArray(raw))
    throw new ConfigError(
      `${file}: expected a JSON object ({"trainer": …, "model": …}), got ${Array.isArray(raw) ? 'an array' : JSON.stringify(raw)}`,
      {},
      { hint: 'see docs/recipes/ for complete run configs' },
    );
  const all = raw as Record<string, unknown>;
  const kind = all.trainer;
  if (kind !== 'sft' && kind !== 'grpo')
    throw new ConfigError(
      `${file}: trainer: must be 'sft' or 'grpo'${kind === undefined ? ' (missing)' : `, got ${JSON.stringify(kind)}`}`,
      { key: 'trainer' },
      { hint: 'add "trainer": "grpo" (or "sft") to the config' },
    );
  checkKeys(all, kind, file);
  const runPart: Record<string, unknown> = {};
  const trainerPart: Record<string, unknown> = {};
  for (const [k, v] of Object.entries(all))
    (RUN_KEYS[kind].includes(k) ? runPart : trainerPart)[k] = v;
  if (overrides.resume) trainerPart.resume_from_checkpoint = true;
  if (overrides.overwrite) trainerPart.overwrite_output_dir = true;
  if (overrides.device) runPart.device = overrides.device;
  if (typeof runPart.dataset_name === 'string') datasetFiles(runPart, file);
  const abs = (p: string) => resolve(cwd, p);
  // The trainer resolves output_dir against process.cwd(); the CLI's cwd is what the user meant.
  if (typeof trainerPart.output_dir === 'string')
    trainerPart.output_dir = abs(trainerPart.output_dir);
  if (typeof trainerPart.resume_from_checkpoint === 'string')
    trainerPart.resume_from_checkpoint = abs(trainerPart.resume_from_checkpoint);
  // Eval-only configs: the same schemas with what only training reads made optional.
  const parse = withFix(file);
  const run =
    kind === 'sft'
      ? parse(forEval ? SftRunSchema.partial({ train_file: true }) : SftRunSchema, runPart, file)
      : parse(forEval ? GrpoRunSchema.partial({ train_file: true }) : GrpoRunSchema, runPart, file);
  const config =
    kind === 'sft'
      ? parse(forEval ? SFTConfigSchema.partial(TRAINING_ONLY) : SFTConfigSchema, trainerPart, file)
      : parse(
          forEval ? GRPOConfigSchema.partial(TRAINING_ONLY) : GRPOConfigSchema,
          trainerPart,
          file,
        );
  if (kind === 'sft' && !forEval) checkSftConfig(config as SFTConfig, `${file}: SFT config`);
  if ('reward' in run && run.reward === 'judge' && !run.judge && !run.agent?.engine)
    throw new ConfigError(
      `${file}: judge: reward 'judge' needs an endpoint (judge, or agent.engine)`,
      { key: 'judge' },
      { hint: 'add "judge": {"base_url": …, "model": …}, or an agent.engine' },
    );
  // Hub names (org/name that is no local path) stay as they are: resolveRunSources fetches them.
  const absOrHub = (p: string) => (isHubName(p, cwd) ? p : abs(p));
  return { kind, run: absolutePaths(run, absOrHub), config, file } as RunConfig | EvalRunConfig;
}

/** Reads run.json for training: JSON errors name the file, config errors the key; paths absolute. */
export function loadRunConfig(
  path: string,
  cwd: string,
  overrides: { resume?: boolean; overwrite?: boolean; device?: DeviceName } = {},
): RunConfig {
  return readRunConfig(path, cwd, overrides, false) as RunConfig;
}

/**
 * Reads run.json for evaluation: as loadRunConfig, but a config that only evaluates (no
 * train_file, output_dir, learning_rate or max_steps) is accepted.
 */
export function loadEvalConfig(path: string, cwd: string): EvalRunConfig {
  return readRunConfig(path, cwd, {}, true) as EvalRunConfig;
}

function absolutePaths<
  T extends {
    model: string;
    tokenizer?: string | undefined;
    train_file?: string | undefined;
    eval_file?: string | undefined;
  },
>(run: T, abs: (p: string) => string): T {
  return {
    ...run,
    model: abs(run.model),
    ...(run.tokenizer && { tokenizer: abs(run.tokenizer) }),
    ...(run.train_file && { train_file: abs(run.train_file) }),
    ...(run.eval_file && { eval_file: abs(run.eval_file) }),
  };
}

/** The API key of an endpoint: from the variable it names (a missing variable is an error). */
export function apiKeyOf(
  spec: { api_key_env?: string | undefined },
  env: NodeJS.ProcessEnv,
  key: string,
): string | undefined {
  if (!spec.api_key_env) return undefined;
  const value = env[spec.api_key_env];
  if (!value)
    throw new ConfigError(
      `${key}.api_key_env names $${spec.api_key_env}, which is not set in the environment`,
      { key: `${key}.api_key_env` },
      { hint: `export ${spec.api_key_env}=<the API key> before running, or fix the name` },
    );
  return value;
}
