import { accessSync, constants, existsSync, statSync } from 'node:fs';
import { dirname, join } from 'node:path';
import type {
  PolicyEngine,
  PolicyGenerateRequest,
  PolicyGenerateResult,
  RolloutAgent,
} from '@flowgrpo/agent';
import { ConfigError, checkOutputFile, FlowGrpoError, type SampleRow } from '@flowgrpo/core';
import {
  ARTIFACTS_MANIFEST,
  ContextLengthExceededError,
  chooseDevice,
  type DecoderConfig,
  type Device,
  ExecutionProviderUnavailableError,
  type LoraTargetModule,
  loadDecoderConfig,
  type ProjectionDtype,
  policyPromptIds,
  readArtifactsManifest,
  type Tokenizer,
  TokenOutOfVocabularyError,
  vocabChunks,
} from '@flowgrpo/models';
import { builtinToolAlias, SandboxUnavailableError, sandboxSupport } from '@flowgrpo/tools';
import {
  checkArtifactsBaseWeights,
  checkArtifactsCheckpointing,
  checkArtifactsSamplingWeights,
  checkGrpoMemory,
  checkSftMemory,
  describeEstimate,
  type GRPOConfig,
  type MemoryEstimate,
  outputDirProblems,
  outputOverlaps,
  type RunInput,
  resolveBaseWeightsDtype,
  type SFTConfig,
  type SFTExample,
  sftRows,
} from '@flowgrpo/trainer';
import type { CliIO } from './command.js';
import { checkEndpoints, type EndpointUse } from './endpoint-check.js';
import { modelKind, resolveTokenizer } from './model-artifacts.js';
import { type AgentSampling, agentFactory, policyTokenizer, rewardFunction } from './run-agent.js';
import {
  type AgentSpec,
  apiKeyOf,
  type DeviceName,
  type Endpoint,
  type RewardName,
  type RunConfig,
} from './run-config.js';
import { readQueryRows, readSftExamples, rowNames } from './run-data.js';

// The checks `flowgrpo train` and `flowgrpo eval` run before anything slow or destructive — before
// artifacts are built, output_dir is touched or a rollout starts: the model and tokenizer, the
// data files (each row validated, the error naming file, row and field), the device (and which
// one 'auto' picked and why), that the agent's first prompts fit the model's positions with the
// completion tokens to spare (SFT: the first examples as the trainer tokenizes them), the tools'
// requirements, and that output_dir can be written — never over what the run reads, through a
// link, or into a folder that holds someone else's files (the trainer's own rules,
// output-dir-checks.ts), and that the run's estimated peak memory fits the memory there is
// (@flowgrpo/trainer's memory preflight: the estimate is printed, term by term). Every problem is
// collected, so one run reports all of them at once, each with its code and its fix.

/** One thing preflight found wrong: its own code, what and where, and the fix. */
export interface PreflightProblem {
  code: string;
  message: string;
  hint?: string | undefined;
}

/**
 * Preflight found problems; nothing was built or written. `problems` lists each. One problem is
 * reported as itself — its own code, message and fix, as if it had been thrown where it was
 * found — so a user sees `[FILE_NOT_FOUND] train_file: …`; several are listed under
 * PREFLIGHT_FAILED, each with its code and fix.
 */
export class PreflightError extends FlowGrpoError {
  static override readonly code = 'PREFLIGHT_FAILED';
  readonly problems: readonly PreflightProblem[];
  constructor(problems: readonly PreflightProblem[]) {
    const n = problems.length;
    const only = n === 1 ? problems[0]! : undefined;
    const lines = problems.map(
      (p) => `  [${p.code}] ${p.message}${p.hint ? `\n      fix: ${p.hint}` : ''}`,
    );
    super(
      only
        ? only.message
        : `${n} problems found before anything was built or written:\n${lines.join('\n')}`,
      { hint: only ? only.hint : 'fix each problem listed, then run the command again' },
    );
    this.problems = problems;
    if (only) {
      // The problem's own code first; PREFLIGHT_FAILED stays in `codes` for isInstance.
      Object.defineProperty(this, 'code', { value: only.code });
      Object.defineProperty(this, 'codes', { value: [only.code, ...this.codes] });
    }
  }
}

/** The first rows of each file checked against the positions (rendered prompts, SFT examples). */
export const PROMPT_CHECK_ROWS = 16;

export interface PreflightPlan {
  /** A HF model folder or an artifacts directory. */
  model: string;
  tokenizer?: string | undefined;
  /** SFT with use_peft: false trains the HF model's own weights: an artifacts directory won't do. */
  hfModelOnly?: boolean;
  /** The run's max_positions: the positions a build from a HF folder gets. */
  maxPositions?: number | undefined;
  /**
   * The device asked for (--device, the config's "device"); absent, the default (cpu) is used
   * and no device line is printed: it would say nothing the user did not already know.
   */
  device?: DeviceName | undefined;
  /** Data files, each under the key that names it ('train_file', '--data'). */
  data: { key: string; path: string; kind: 'query' | 'sft'; format?: string | undefined }[];
  /** The rollout agent on the local graphs: its first prompts must fit the positions. */
  agent?: {
    spec: AgentSpec;
    sampling: AgentSampling;
    /** Rollouts on a remote server (vLLM / SGLang): its context, not ours, bounds the prompt. */
    remote?: boolean;
  };
  reward?: { name: RewardName; judge: Endpoint | undefined };
  /** SFT with LoRA: every example, as the trainer tokenizes it, must fit the positions. */
  sft?: { maxLength: number; assistantOnly: boolean };
  /**
   * The run's output folder: it must be (or become) a writable folder, apart from every input,
   * and pass the trainer's rules for output_dir (overwrite / resume as the run config sets them).
   */
  outputDir?: { path: string; overwrite: boolean; resume: boolean | string } | undefined;
  /**
   * A file written at the end (eval's --out): its folder must exist and be writable, and it must
   * not be an input or inside one.
   */
  outputFile?: { key: string; path: string } | undefined;
  /** Other paths the command reads (adapters, …): outputs keep apart from them too. */
  inputs?: readonly RunInput[] | undefined;
  /** Remote rollout servers (rollout.engine "openai"): each must answer, as the roles' must. */
  rolloutServers?: { base_urls: string[]; api_key_env?: string | undefined } | undefined;
  /** How long each server has to answer (default ENDPOINT_TIMEOUT_MS). */
  endpointTimeoutMs?: number;
  /**
   * The trainer's config, for the memory preflight (absent, or skip_memory_check: not checked).
   * GRPO: `localRollouts` false when a remote server samples (no KV cache in this process).
   */
  memory?:
    | { trainer: 'grpo'; config: GRPOConfig; localRollouts: boolean }
    | { trainer: 'sft'; config: SFTConfig }
    | undefined;
  /** Bytes the memory preflight compares with (default: what the machine has free); for tests. */
  availableMemory?: number | undefined;
}

export interface PreflightResult {
  /** The device the run uses ('auto' resolved). */
  device: Device;
}

/** Runs every check of `plan`; throws one PreflightError listing each problem found. */
export async function preflight(plan: PreflightPlan, io: CliIO): Promise<PreflightResult> {
  const problems: PreflightProblem[] = [];
  const problem = (e: unknown, where: string, fallbackHint?: string) => {
    if (!FlowGrpoError.isInstance(e)) throw e; // a bug, not the user's input: keep its stack
    const notFound = e.code === 'FILE_NOT_FOUND';
    problems.push({
      code: e.code,
      message: `${where}: ${e.message}`,
      hint:
        e.hint ??
        fixOf(e) ??
        (notFound
          ? `check the path (relative paths resolve against the working directory, ${io.cwd})`
          : fallbackHint),
    });
  };

  const device = await chooseDevice(plan.device ?? 'cpu').catch((e: unknown) => {
    if (!ExecutionProviderUnavailableError.isInstance(e)) return problem(e, 'device');
    // Its message ends with the fix, which is printed as the fix already.
    problems.push({
      code: e.code,
      message: `device: the ${e.device} execution provider is unavailable: ${e.reason}`,
      hint: e.fix,
    });
  });
  if (device && plan.device !== undefined) io.stderr(`device: ${device.device} (${device.why})\n`);

  const inputs = planInputs(plan);
  if (plan.outputDir) {
    const out = plan.outputDir;
    const p = outputDirProblem(out.path);
    if (p) problems.push(p);
    for (const e of outputDirProblems({
      output_dir: out.path,
      overwrite_output_dir: out.overwrite,
      resume_from_checkpoint: out.resume,
      inputs,
    }))
      problems.push({ code: e.code, message: e.message, hint: e.hint }); // each names output_dir
  }
  if (plan.outputFile) {
    const { key, path } = plan.outputFile;
    const p = outputFileProblem(key, path);
    if (p) problems.push(p);
    else
      for (const e of outputOverlaps({ key, path, file: true }, inputs))
        problems.push({ code: e.code, message: e.message, hint: e.hint });
  }

  // base_weights_dtype 'auto' depends on the device the run gets (float32 on WebGPU).
  const model = await modelFacts(plan, device?.device).catch((e: unknown) => problem(e, 'model'));
  // An artifacts folder's train_step is built with or without recomputation: a run that wants
  // the other is refused here, before output_dir is claimed (the trainer checks the same).
  if (model?.artifacts && plan.memory)
    try {
      checkArtifactsCheckpointing(
        plan.memory.config.gradient_checkpointing,
        model.artifacts.gradientCheckpointing,
      );
    } catch (e) {
      problem(e, 'model');
    }
  // The same for share_sampling_weights: half-precision artifacts need a decode graph built for it.
  if (model?.artifacts && plan.memory?.trainer === 'grpo' && plan.memory.localRollouts)
    try {
      checkArtifactsSamplingWeights(
        plan.memory.config.share_sampling_weights === true,
        model.artifacts,
      );
    } catch (e) {
      problem(e, 'model');
    }
  if (model?.artifacts && plan.memory)
    try {
      checkArtifactsBaseWeights(
        plan.memory.config.base_weights_dtype,
        model.artifacts.baseWeightsDtype,
        device?.device,
      );
    } catch (e) {
      problem(e, 'model');
    }
  const tokenizer = model
    ? await resolveTokenizer(plan.model, plan.tokenizer, model.vocabSize).catch((e: unknown) =>
        problem(e, 'tokenizer'),
      )
    : undefined;

  const rows = new Map<string, SampleRow[]>();
  const examples = new Map<string, SFTExample[]>();
  for (const file of plan.data) {
    try {
      if (existsSync(file.path) && statSync(file.path).isDirectory())
        problems.push({
          code: 'IS_A_DIRECTORY',
          message: `${file.key}: ${file.path} is a folder`,
          hint: 'name a .jsonl or .parquet file inside it',
        });
      else if (file.kind === 'sft') examples.set(file.key, await readSftExamples(file.path));
      else rows.set(file.key, await readQueryRows(file.path, file.format));
    } catch (e) {
      problem(
        e,
        file.key,
        file.kind === 'sft'
          ? "fix that row: SFT rows hold 'messages', 'prompt' + 'completion', or 'text'"
          : "fix that row, or name the file's layout (data_format / --data-format: gsm8k, nq, …; flowgrpo data lists them)",
      );
    }
  }

  let factory: ((policy: PolicyEngine) => RolloutAgent) | undefined;
  if (plan.agent) {
    try {
      factory = agentFactory(plan.agent.spec, plan.agent.sampling, io.env);
    } catch (e) {
      problem(e, 'agent');
    }
    const sandbox = toolsProblem(plan.agent.spec);
    if (sandbox) problems.push(sandbox);
  }
  if (plan.reward) {
    try {
      rewardFunction(plan.reward.name, plan.reward.judge, io.env);
    } catch (e) {
      problem(e, 'reward');
    }
  }

  for (const e of await checkEndpoints(endpointUses(plan, io.env), {
    ...(plan.endpointTimeoutMs !== undefined && { timeoutMs: plan.endpointTimeoutMs }),
  }))
    problem(e, e.keys.join(', '));

  if (factory && tokenizer && model && plan.agent && !plan.agent.remote) {
    if (plan.agent.spec.type === 'flow' && plan.agent.spec.analyze_query)
      io.stderr(
        'preflight: prompt length not checked (analyze_query: the first prompt holds the engine’s analysis)\n',
      );
    else
      for (const [key, list] of rows) {
        const names = await rowNames(pathOf(plan, key), PROMPT_CHECK_ROWS);
        problems.push(
          ...(await promptProblems(key, list, names, factory, tokenizer, {
            newTokens: plan.agent.sampling.maxTokens,
            maxPositions: model.maxPositions,
            vocabSize: model.vocabSize,
          })),
        );
      }
  }

  if (tokenizer && model && plan.sft)
    for (const [key, list] of examples) {
      try {
        const names = await rowNames(pathOf(plan, key), PROMPT_CHECK_ROWS);
        const p = sftFitProblem(key, list, names, tokenizer, { ...plan.sft, ...model });
        if (p) problems.push(p);
      } catch (e) {
        problem(e, key);
      }
    }

  if (model && plan.memory && !plan.memory.config.skip_memory_check) {
    try {
      const estimate = memoryEstimate(plan, plan.memory, model, rows, tokenizer || undefined);
      if (estimate) io.stderr(`${describeEstimate(estimate).join('\n')}\n`);
    } catch (e) {
      problem(e, 'memory');
    }
  }

  if (problems.length > 0 || !device) throw new PreflightError(problems);
  return { device: device.device };
}

/**
 * The run's estimated peak memory (throws InsufficientMemoryError when it exceeds the memory
 * available), from the model and the artifacts the run will open: an artifacts folder's own LoRA,
 * vocabulary chunks and positions, or what the build from a HF folder will give them. GRPO's
 * prompt: the longest of the first questions, as the trainer takes it; undefined (not checked)
 * when the tokenizer or the rows could not be read — those problems are reported already.
 */
function memoryEstimate(
  plan: PreflightPlan,
  memory: NonNullable<PreflightPlan['memory']>,
  model: ModelFacts,
  rows: ReadonlyMap<string, SampleRow[]>,
  tokenizer: Tokenizer | undefined,
): MemoryEstimate | undefined {
  const { config, artifacts } = model;
  const lora = (l: { r: number; target_modules: readonly LoraTargetModule[] }) => ({
    r: l.r,
    targetModules: l.target_modules,
  });
  const facts = {
    config,
    lora: artifacts ? artifacts.lora : lora(memory.config.lora),
    headChunk: artifacts ? artifacts.headChunk : vocabChunks(config.vocabSize).size,
    maxPositions: model.maxPositions,
    halfProjections: model.halfProjections,
  };
  if (memory.trainer === 'sft')
    return checkSftMemory(
      memory.config,
      // Full fine-tuning builds its graphs with max_length + 1 positions.
      memory.config.use_peft ? facts : { ...facts, maxPositions: memory.config.max_length + 1 },
      plan.availableMemory,
    );
  const questions = rows.get('train_file');
  if (!tokenizer || !questions) return undefined;
  const promptTokens = Math.max(
    0,
    ...questions.slice(0, PROMPT_CHECK_ROWS).map((r) => tokenizer.encode(r.question).length),
  );
  return checkGrpoMemory(
    memory.config,
    { ...facts, promptTokens, localRollouts: memory.localRollouts },
    plan.availableMemory,
  );
}

/** The preflight plan of a `flowgrpo train` run config. */
export function trainPlan(rc: RunConfig, device: DeviceName | undefined): PreflightPlan {
  const { run } = rc;
  const data: PreflightPlan['data'] = [];
  const kind = rc.kind === 'sft' ? 'sft' : 'query';
  const format = rc.kind === 'grpo' ? rc.run.data_format : undefined;
  data.push({ key: 'train_file', path: run.train_file, kind, format });
  if (run.eval_file) data.push({ key: 'eval_file', path: run.eval_file, kind, format });
  return {
    model: run.model,
    hfModelOnly: rc.kind === 'sft' && !rc.config.use_peft,
    tokenizer: run.tokenizer,
    maxPositions: run.max_positions,
    device,
    data,
    outputDir: {
      path: rc.config.output_dir,
      overwrite: rc.config.overwrite_output_dir,
      resume: rc.config.resume_from_checkpoint,
    },
    // Full fine-tuning builds its graphs with max_length + 1 positions: every example fits.
    ...(rc.kind === 'sft' &&
      rc.config.use_peft && {
        sft: { maxLength: rc.config.max_length, assistantOnly: rc.config.assistant_only_loss },
      }),
    memory:
      rc.kind === 'grpo'
        ? {
            trainer: 'grpo',
            config: rc.config,
            localRollouts: rc.run.rollout.engine === 'local',
          }
        : { trainer: 'sft', config: rc.config },
    ...(rc.kind === 'grpo' && {
      agent: {
        spec: rc.run.agent,
        sampling: {
          maxTurns: rc.config.max_turns,
          maxTokens: rc.config.max_completion_length,
          temperature: rc.config.temperature,
          topP: rc.config.top_p,
        },
        remote: rc.run.rollout.engine !== 'local',
      },
      reward: { name: rc.run.reward, judge: rc.run.judge ?? rc.run.agent.engine },
      ...(rc.run.rollout.engine === 'openai' && {
        rolloutServers: {
          base_urls: [rc.run.rollout.base_urls].flat(),
          api_key_env: rc.run.rollout.api_key_env,
        },
      }),
    }),
  };
}

/**
 * What the command reads, by key: the model (an artifacts folder may be a run's own, built into
 * output_dir/artifacts), the tokenizer, the data files and `inputs`.
 */
export function planInputs(plan: PreflightPlan): RunInput[] {
  return [
    {
      key: 'model',
      path: plan.model,
      runProduct: existsSync(join(plan.model, ARTIFACTS_MANIFEST)),
    },
    ...(plan.tokenizer ? [{ key: 'tokenizer', path: plan.tokenizer }] : []),
    ...plan.data.map((d) => ({ key: d.key, path: d.path })),
    ...(plan.inputs ?? []),
  ];
}

/**
 * The servers the plan's run will call: the agent's engine (the Flow roles, tools that call an
 * LLM), the judge, the remote rollout servers. One whose API key variable is unset is not asked:
 * the agent's or the reward's check reports the variable, the one thing to fix first.
 */
function endpointUses(plan: PreflightPlan, env: NodeJS.ProcessEnv): EndpointUse[] {
  const uses: EndpointUse[] = [];
  const add = (
    key: string,
    spec: { api_key_env?: string | undefined },
    baseUrl: string,
    alternative?: string,
  ) => {
    let apiKey: string | undefined;
    try {
      apiKey = apiKeyOf(spec, env, key);
    } catch {
      return;
    }
    uses.push({ key, baseUrl, apiKey, ...(alternative && { alternative }) });
  };
  const engine = plan.agent?.spec.engine;
  if (engine)
    add(
      'agent.engine',
      engine,
      engine.base_url,
      plan.agent?.spec.type === 'flow'
        ? 'remove agent.engine to run the executor, verifier and generator offline (rule-based)'
        : undefined,
    );
  const judge = plan.reward?.name === 'judge' ? plan.reward.judge : undefined;
  if (judge) add('judge', judge, judge.base_url);
  for (const url of plan.rolloutServers?.base_urls ?? [])
    add('rollout.base_urls', plan.rolloutServers!, url);
  return uses;
}

/** The fix of a typed error that carries its own (`fix`) rather than a hint. */
/** The path of the plan's data file under `key`. */
function pathOf(plan: PreflightPlan, key: string): string {
  return plan.data.find((f) => f.key === key)!.path;
}

function fixOf(e: FlowGrpoError): string | undefined {
  const fix = (e as { fix?: unknown }).fix;
  return typeof fix === 'string' ? fix : undefined;
}

/**
 * The model's config, vocabulary and the positions its graphs have (or a build would get); for
 * an artifacts folder, also its LoRA and its LM head's vocabulary chunk (the memory preflight's).
 */
interface ModelFacts {
  config: DecoderConfig;
  vocabSize: number;
  maxPositions: number;
  /** The projections are (or a build would put them) in half precision: base_weights_dtype. */
  halfProjections: boolean;
  artifacts?: {
    lora: { r: number; targetModules: readonly LoraTargetModule[] } | undefined;
    headChunk: number;
    gradientCheckpointing: boolean;
    baseWeightsDtype: ProjectionDtype | undefined;
    /** The graphs the folder holds, and whether its decode graph casts per product. */
    graphs: object;
    decodeCastsPerUse: boolean;
  };
}

async function modelFacts(plan: PreflightPlan, device: string | undefined): Promise<ModelFacts> {
  const kind = modelKind(plan.model);
  if (kind === 'artifacts' && plan.hfModelOnly)
    throw new ConfigError(
      `use_peft: false fine-tunes every weight of a HF model folder; ${plan.model} is an artifacts directory`,
      { key: 'model' },
      { hint: 'name the HF model folder (config.json + safetensors), or train a LoRA adapter' },
    );
  if (kind === 'artifacts') {
    const m = readArtifactsManifest(plan.model);
    return {
      config: m.config,
      vocabSize: m.config.vocabSize,
      maxPositions: m.maxPositions,
      artifacts: {
        lora: m.lora,
        headChunk: m.vocabChunks?.size ?? m.config.vocabSize,
        gradientCheckpointing: m.gradientCheckpointing === true,
        baseWeightsDtype: m.baseWeightsDtype,
        graphs: m.graphs,
        decodeCastsPerUse: m.decodeCastsPerUse === true,
      },
      halfProjections: m.baseWeightsDtype !== undefined,
    };
  }
  const config = await loadDecoderConfig(plan.model);
  return {
    config,
    vocabSize: config.vocabSize,
    // As ensureArtifacts builds them (model-artifacts.ts).
    maxPositions: plan.maxPositions ?? Math.min(config.maxPositionEmbeddings, 32768),
    halfProjections:
      plan.memory !== undefined &&
      resolveBaseWeightsDtype(plan.memory.config.base_weights_dtype, config.torchDtype, device) !==
        'float32',
  };
}

/**
 * output_dir must be a writable folder, or a path whose nearest existing parent is one (nothing is
 * created here: a failed preflight leaves the disk as it was).
 */
function outputDirProblem(dir: string): PreflightProblem | undefined {
  let at = dir;
  while (!existsSync(at) && dirname(at) !== at) at = dirname(at);
  if (!statSync(at).isDirectory())
    return {
      code: 'NOT_A_DIRECTORY',
      message: `output_dir: ${at} is a file${at === dir ? '' : ` (on the way to ${dir})`}`,
      hint: 'set output_dir to a folder path, or move the file away',
    };
  try {
    accessSync(at, constants.W_OK | constants.X_OK);
  } catch (e) {
    return {
      code: 'PERMISSION_DENIED',
      message: `output_dir: ${at} cannot be written (${(e as NodeJS.ErrnoException).code})`,
      hint: `choose an output_dir you can write, or give yourself write access to ${at}`,
    };
  }
  return undefined;
}

/** A file written once the work is done: finding out then that it cannot be would waste the work. */
function outputFileProblem(key: string, path: string): PreflightProblem | undefined {
  try {
    checkOutputFile(path, key);
  } catch (e) {
    if (!FlowGrpoError.isInstance(e)) throw e;
    return { code: e.code, message: e.message, hint: e.hint };
  }
  const dir = dirname(path);
  if (!existsSync(dir) || !statSync(dir).isDirectory())
    return {
      code: 'FILE_NOT_FOUND',
      message: `${key}: the folder ${dir} does not exist`,
      hint: `create it (mkdir -p ${dir}), or name a file in an existing folder`,
    };
  try {
    accessSync(dir, constants.W_OK | constants.X_OK);
  } catch (e) {
    return {
      code: 'PERMISSION_DENIED',
      message: `${key}: ${dir} cannot be written (${(e as NodeJS.ErrnoException).code})`,
      hint: 'name a file in a folder you can write',
    };
  }
  return undefined;
}

/** The python tool runs code in bubblewrap: without a working sandbox every call would fail. */
function toolsProblem(spec: AgentSpec): PreflightProblem | undefined {
  if (!spec.tools.some((t) => builtinToolAlias(t) === 'python')) return undefined;
  try {
    sandboxSupport();
    return undefined;
  } catch (e) {
    if (!SandboxUnavailableError.isInstance(e)) throw e;
    return {
      code: e.code,
      message: `agent.tools: python: the sandbox is unavailable: ${e.reason}`,
      hint: e.fix,
    };
  }
}

/**
 * Renders the agent's first prompt for each of the first rows — by running the agent against a
 * policy that records the request and stops — and reports the rows whose prompt plus the new
 * tokens do not fit the positions, and token ids the model has no embedding for.
 */
async function promptProblems(
  key: string,
  rows: readonly SampleRow[],
  names: readonly string[],
  factory: (policy: PolicyEngine) => RolloutAgent,
  tokenizer: Tokenizer,
  o: { newTokens: number; maxPositions: number; vocabSize: number },
): Promise<PreflightProblem[]> {
  // What the capturing policy recorded: the first prompt of the agent's current run.
  const captured: number[][] = [];
  const capture: PolicyEngine = {
    model: 'preflight',
    tokenizer: policyTokenizer(tokenizer),
    generate(request: PolicyGenerateRequest): Promise<PolicyGenerateResult> {
      captured.push(policyPromptIds(tokenizer, request));
      // The agent records a failed turn and ends its run: nothing else is asked of anyone.
      return Promise.reject(new Error('preflight: first prompt captured'));
    },
  };
  const agent = factory(capture);
  const over: { row: number; tokens: number }[] = [];
  let outside: { row: number; id: number } | undefined;
  const checked = rows.slice(0, PROMPT_CHECK_ROWS);
  for (const [i, row] of checked.entries()) {
    captured.length = 0;
    await agent.run(row.question, { groupId: 'preflight', seed: 0 });
    const prompt = captured[0];
    if (!prompt) continue;
    if (prompt.length + o.newTokens > o.maxPositions) over.push({ row: i, tokens: prompt.length });
    const id = prompt.find((t) => t >= o.vocabSize);
    if (id !== undefined) outside ??= { row: i, id };
  }
  const problems: PreflightProblem[] = [];
  if (outside) {
    const e = new TokenOutOfVocabularyError({
      what: `${key} ${names[outside.row]}: the agent's first prompt`,
      tokenId: outside.id,
      vocabSize: o.vocabSize,
    });
    problems.push({
      code: e.code,
      message: `${e.message} (the tokenizer is not the model's)`,
      hint: e.hint,
    });
  }
  if (over.length > 0) {
    const first = over[0]!;
    const longest = over.reduce((a, b) => (b.tokens > a.tokens ? b : a));
    const e = new ContextLengthExceededError({
      what: `${key} ${names[first.row]}: the agent's first prompt`,
      promptTokens: first.tokens,
      newTokens: o.newTokens,
      maxPositions: o.maxPositions,
    });
    const more =
      over.length === 1
        ? ''
        : ` (${over.length} of the first ${checked.length} rows do not fit; the longest, ${names[longest.row]}, is ${longest.tokens} tokens)`;
    problems.push({ code: e.code, message: `${e.message}${more}`, hint: e.hint });
  }
  return problems;
}

/**
 * The first SFT examples as the trainer tokenizes them (cut to max_length): one longer than the
 * artifacts' positions would fail its train step mid-run.
 */
function sftFitProblem(
  key: string,
  examples: readonly SFTExample[],
  names: readonly string[],
  tokenizer: Tokenizer,
  o: { maxLength: number; assistantOnly: boolean; maxPositions: number },
): PreflightProblem | undefined {
  const checked = examples.slice(0, PROMPT_CHECK_ROWS);
  const over = checked.flatMap((example, row) => {
    const tokens = Math.max(...sftRows(example, tokenizer, o).map((r) => r.tokens.length));
    return tokens > o.maxPositions ? [{ row, tokens }] : [];
  });
  if (over.length === 0) return undefined;
  const first = over[0]!;
  const more = over.length === 1 ? '' : ` (${over.length} of the first ${checked.length} rows)`;
  return {
    code: ContextLengthExceededError.code,
    message: `${key} ${names[first.row]}: ${first.tokens} tokens (max_length ${o.maxLength}) exceed the ${o.maxPositions} positions the graphs support${more}`,
    hint: `set max_length to at most ${o.maxPositions}, or raise max_positions (the artifacts are rebuilt)`,
  };
}
