import { createHash } from 'node:crypto';
import { appendFileSync, existsSync, mkdirSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join, resolve } from 'node:path';
import { ConfigError, FileNotFoundError, trajectoryToJson } from '@flowgrpo/core';
import {
  createPolicyGateway,
  LocalPolicyHost,
  type PolicyHost,
  type RecordedRollout,
  RolloutRecorder,
  rolloutTrajectory,
  UpstreamPolicyHost,
} from '@flowgrpo/gateway';
import {
  ARTIFACTS_MANIFEST,
  LORA_TARGET_MODULES,
  type LoraConfig,
  type LoraTargetModule,
  loadDecoderConfig,
  loadTokenizer,
  readArtifactsManifest,
} from '@flowgrpo/models';
import {
  checkSamplingMemory,
  claimOutputDir,
  type GRPOConfig,
  GRPOConfigSchema,
  OnlineGRPOTrainer,
  type OnlineGRPOTrainerOptions,
  outputOverlaps,
  parseConfig,
  type RoleSpec,
  type RunInput,
  type RunLock,
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
import {
  ensureArtifacts,
  loraFromOptions,
  modelKind,
  resolveTokenizer,
} from '../model-artifacts.js';
import { metricsLine } from '../run-progress.js';
import { readJsonFile, requireFolder } from '../user-paths.js';

/** Requests one decode run batches (LocalPolicyEngine's default maxBatchSize). */
const DECODE_BATCH = 64;

const usage = `Usage:
  flowgrpo serve --model PATH [options]
      An OpenAI-compatible policy gateway over a local model (HF folder or artifacts directory):
      /v1/models, /v1/chat/completions (JSON and SSE; tools in the Qwen/Hermes <tool_call>
      format), /v1/responses, /v1/completions, vLLM's /v1/load_lora_adapter and
      /v1/unload_lora_adapter.
      Every call's prompt ids, sampled ids and logprobs are recorded under its rollout
      (header x-flowgrpo-rollout-id, base URL <url>/rollouts/<id>/v1, or metadata.rollout_id);
      GET /v1/rollouts/<id> returns them, POST /v1/rollouts/<id>/reward attaches a reward.
  flowgrpo serve --upstream URL [--upstream URL …] --served-model-name NAME --tokenizer PATH
      The same gateway in front of vLLM / SGLang servers: prompts are rendered here and sent as
      token ids to /v1/completions; token ids and logprobs come back and are recorded.
  Options:
    --model PATH              HF model folder, artifacts directory or hub name org/name
                              (local mode; docs/guides/hub.md)
    --tokenizer PATH          folder with tokenizer.json (default: the model folder)
    --served-model-name NAME  the base model's name in requests (default: the folder's name)
    --lora NAME=PATH          serve a PEFT adapter as model NAME (repeatable)
    --lora-r N --lora-alpha A --lora-targets q_proj,v_proj
                              the LoRA shape adapters loaded later must have (default: that of
                              the first --lora adapter; without either, no adapters can load)
    --upstream URL            a vLLM / SGLang base URL, e.g. http://10.0.0.5:8000/v1 (repeatable)
    --upstream-api-key-env V  environment variable holding the upstream's API key
    --max-model-len N         the upstream's context length (prompts are checked against it)
    --host H                  interface to listen on (default 127.0.0.1; 0.0.0.0 exposes it:
                              without an API key, serve warns that anyone can use it)
    --port N                  port (default 8000; 0 picks a free one)
    --api-key-env V           require "Authorization: Bearer $V" (default: FLOWGRPO_API_KEY
                              when set, else no key)
    --max-body-bytes N        largest request body (default 8388608)
    --max-concurrency N       generations at once (default 256); more wait, up to --max-queue
    --max-queue N             waiting requests before 429 (default 4096)
    --max-tokens N            max_tokens when a request leaves it out (default 1024)
    --skip-memory-check       serve even when the estimated peak memory exceeds what is free
                              (checked before the graphs are built: the weights as the decode
                              session holds them, and the KV cache of a full decode batch —
                              64 requests, or --max-concurrency if fewer — at --max-tokens each)
    --chat-template-kwargs J  JSON variables for the chat template, e.g. '{"enable_thinking": false}'
    --record FILE             append each rollout, when its reward is posted, as a JSON line
                              (the trainer's Trajectory: token ids, logprobs, reward); never a
                              file of the model, the tokenizer or an adapter
    --device D                cpu | auto | cuda | webgpu (default cpu)
    --threads N               CPU threads per op
    --artifacts-dir DIR       where artifacts built from a HF folder go (default: a folder under
                              the OS temp dir, reused while the model is unchanged); new, empty
                              or artifacts already (a build replaces it whole), and apart from
                              the model, the tokenizer and the adapters
  Training from the rewards agents post (local mode):
    --train FILE              a JSON of GRPOTrainer's keys: output_dir, num_generations (rollouts
                              per group), queries_per_step (complete groups per update), max_steps,
                              learning_rate, lora {r, lora_alpha, target_modules}, beta, …
                              Agents post {"reward": R, "group_id": TASK} to
                              /v1/rollouts/<id>/reward; each queries_per_step complete groups of
                              num_generations rollouts make one GRPO update of the trained roles,
                              which then serve their new adapters. metrics.jsonl (every
                              logging_steps updates), checkpoint-<step>/<role> (every save_steps,
                              on reaching max_steps and on stop; save_total_limit kept) and the PEFT
                              adapters (output_dir/adapters/<role>) are written as it goes; a
                              relative output_dir is taken from FILE's folder. A trained role's
                              calls in a named rollout sample at FILE's temperature and top_p,
                              capped at its max_completion_length. Refused: eval_steps (no
                              dataset here: run flowgrpo eval on a checkpoint's role folder) and
                              the agent's own keys (max_turns, top_k, generate_workers,
                              max_failed_rollout_steps).
    --train-role NAME         a served role (model name) to train (repeatable; default: policy);
                              it starts from --lora NAME=PATH when given, else from PEFT's init
    --resume                  continue the run in output_dir from its latest checkpoint
                              (resume_from_checkpoint: true); groups that were still filling when
                              it stopped are not in it: their agents post them again
    --overwrite               replace the run in output_dir (overwrite_output_dir: true; its files
                              are deleted once the new run has a checkpoint)
  As with flowgrpo train, a run into an output_dir holding checkpoints needs --resume or
  --overwrite; one run at a time per output_dir; output_dir is never the model, the tokenizer
  or an adapter folder (nor inside or around one), holds no symbolic link where the run writes,
  and, when it is not a run, is empty (or --overwrite writes beside its files).
  Prints "listening on http://HOST:PORT/v1" when ready; Ctrl-C (SIGINT) or SIGTERM stops it
  (after checkpointing the last update and saving the trained adapters); a failed update stops
  it with the error (exit 1), the checkpoints written so far kept.`;

function repeated(args: ParsedArgs, name: string): string[] {
  const v = args.values[name];
  if (v === undefined) return [];
  return (Array.isArray(v) ? v : [v]).map((x) => {
    if (typeof x !== 'string') throw new UsageError(`--${name} needs a value`);
    return x;
  });
}

function intOption(args: ParsedArgs, name: string, min = 0): number | undefined {
  const n = numberOption(args, name);
  if (n !== undefined && (!Number.isInteger(n) || n < min))
    throw new UsageError(`--${name} must be a whole number ≥ ${min}, got ${n}`);
  return n;
}

/** `--lora name=path` pairs. */
function loraPairs(args: ParsedArgs, cwd: string): Record<string, string> {
  const out: Record<string, string> = {};
  for (const spec of repeated(args, 'lora')) {
    const eq = spec.indexOf('=');
    if (eq <= 0) throw new UsageError(`--lora takes NAME=PATH, got '${spec}'`);
    const path = resolve(cwd, spec.slice(eq + 1));
    if (!existsSync(path)) throw new FileNotFoundError(path);
    out[spec.slice(0, eq)] = path;
  }
  return out;
}

/** The LoRA shape of the artifacts: flags, else the first adapter's adapter_config.json. */
function loraShape(args: ParsedArgs, adapters: Record<string, string>): LoraConfig | undefined {
  const r = intOption(args, 'lora-r', 1);
  if (r !== undefined) {
    const targets = (stringOption(args, 'lora-targets') ?? 'q_proj,v_proj').split(',');
    for (const t of targets)
      if (!(LORA_TARGET_MODULES as readonly string[]).includes(t))
        throw new UsageError(`--lora-targets: unknown module '${t}'`);
    return {
      r,
      alpha: numberOption(args, 'lora-alpha') ?? 2 * r,
      targetModules: targets as LoraTargetModule[],
    };
  }
  const first = Object.values(adapters)[0];
  if (!first) return undefined;
  const c = readJsonFile(join(first, 'adapter_config.json'), '--lora') as {
    r: number;
    lora_alpha: number;
    target_modules: LoraTargetModule[];
    use_rslora?: boolean;
  };
  return {
    r: c.r,
    alpha: c.lora_alpha,
    targetModules: c.target_modules,
    ...(c.use_rslora && { useRslora: true }),
  };
}

/** Whether `host` is a loopback interface: nothing beyond this machine can connect to it. */
export function isLoopback(host: string): boolean {
  const h = host.replace(/^\[(.*)\]$/, '$1').toLowerCase();
  return h === 'localhost' || h === '::1' || /^(::ffff:)?127\.\d{1,3}\.\d{1,3}\.\d{1,3}$/.test(h);
}

/** Resolves on the first SIGINT or SIGTERM. */
function untilSignal(log: (line: string) => void): Promise<void> {
  return new Promise<void>((done) => {
    const stop = (name: string) => {
      log(`${name}: closing the gateway`);
      process.off('SIGINT', onInt);
      process.off('SIGTERM', onTerm);
      done();
    };
    const onInt = () => stop('SIGINT');
    const onTerm = () => stop('SIGTERM');
    process.on('SIGINT', onInt);
    process.on('SIGTERM', onTerm);
  });
}

/** `serve --train`, with output_dir's lock held: build, serve, train until a signal or failure. */
async function serveAndTrain(
  args: ParsedArgs,
  io: CliIO,
  o: {
    config: GRPOConfig;
    /** The model folder (a hub name already fetched). */
    model: string;
    tokArg: string | undefined;
    adapters: Record<string, string>;
    device: string;
    serving: NonNullable<OnlineGRPOTrainerOptions['gateway']>;
    record: ((r: RecordedRollout) => void) | undefined;
    log: (line: string) => void;
    lock: RunLock;
  },
): Promise<number> {
  const { config, adapters, log, model } = o;
  const { dir: artifacts, manifest } = await ensureArtifacts(
    model,
    join(config.output_dir, 'artifacts'),
    {
      lora: loraFromOptions(config.lora),
      graphs: ['decode', 'logprobs', 'train_step'],
      gradientCheckpointing: config.gradient_checkpointing,
      decodeCastsPerUse: config.share_sampling_weights,
      baseWeightsDtype: config.base_weights_dtype,
      device: o.device,
      log,
    },
  );
  const tokenizer = await resolveTokenizer(
    model,
    o.tokArg ? resolve(io.cwd, o.tokArg) : undefined,
    manifest.config.vocabSize,
  );
  const trained = repeated(args, 'train-role');
  const roles: Record<string, RoleSpec> = {};
  for (const name of trained.length > 0 ? trained : ['policy'])
    roles[name] = { trainable: true, ...(adapters[name] && { adapter: adapters[name] }) };
  for (const [name, path] of Object.entries(adapters))
    roles[name] ??= { trainable: false, adapter: path };
  const trainer = await OnlineGRPOTrainer.start({
    config,
    artifacts,
    tokenizer,
    roles,
    baseModel:
      stringOption(args, 'served-model-name') ?? model.split(/[\\/]/).filter(Boolean).at(-1)!,
    device: o.device as 'cpu',
    gateway: o.serving,
    lock: o.lock,
    log,
    onLog: (m) => io.stderr(metricsLine(m)),
    ...(o.record && { onReward: o.record }),
  });
  const models = trainer.gateway.host.models().map((m) => m.id);
  // Listening for the signals before saying so: a SIGTERM sent on that line stops it cleanly.
  const signalled = untilSignal(log);
  io.stdout(`listening on ${trainer.gateway.baseURL} (models: ${models.join(', ')})\n`);
  log(
    `training ${Object.keys(roles)
      .filter((r) => roles[r]!.trainable)
      .join(', ')}: ` +
      `${config.queries_per_step} groups of ${config.num_generations} rewarded rollouts per update, ` +
      `${config.max_steps} updates${trainer.step > 0 ? ` (resumed at ${trainer.step})` : ''}; metrics in ${join(config.output_dir, 'metrics.jsonl')}`,
  );
  // Done: the gateway keeps serving the trained adapters until a signal. A failed update stops
  // the server: close() then throws its error (exit 1).
  const failed = trainer.finished
    .then(() => trainer.idle())
    .then(
      () => {
        log(
          `training done after ${trainer.step} updates; adapters in ${join(config.output_dir, 'adapters')} (still serving)`,
        );
        return new Promise<void>(() => {});
      },
      () => undefined,
    );
  await Promise.race([signalled, failed]);
  const saved = await trainer.close();
  log(
    `checkpoint: ${trainer.checkpoint ?? '(none: no update yet)'}; adapters saved: ${Object.values(saved).join(', ')}`,
  );
  return 0;
}

export const serveCommand: Command = {
  name: 'serve',
  summary: 'OpenAI-compatible policy gateway that records token-exact calls (one LoRA per role)',
  usage,
  options: {
    model: { type: 'string' },
    tokenizer: { type: 'string' },
    'served-model-name': { type: 'string' },
    lora: { type: 'string', multiple: true },
    'lora-r': { type: 'string' },
    'lora-alpha': { type: 'string' },
    'lora-targets': { type: 'string' },
    upstream: { type: 'string', multiple: true },
    'upstream-api-key-env': { type: 'string' },
    'max-model-len': { type: 'string' },
    host: { type: 'string' },
    port: { type: 'string' },
    'api-key-env': { type: 'string' },
    'max-body-bytes': { type: 'string' },
    'max-concurrency': { type: 'string' },
    'max-queue': { type: 'string' },
    'max-tokens': { type: 'string' },
    'skip-memory-check': { type: 'boolean' },
    'chat-template-kwargs': { type: 'string' },
    record: { type: 'string' },
    device: { type: 'string' },
    threads: { type: 'string' },
    'artifacts-dir': { type: 'string' },
    train: { type: 'string' },
    'train-role': { type: 'string', multiple: true },
    resume: { type: 'boolean' },
    overwrite: { type: 'boolean' },
  },
  async run(args, io) {
    const cwd = io.cwd;
    const modelArg = stringOption(args, 'model');
    const upstream = repeated(args, 'upstream');
    const tokArg = stringOption(args, 'tokenizer');
    const device = stringOption(args, 'device') ?? 'cpu';
    if (!['cpu', 'auto', 'cuda', 'webgpu'].includes(device))
      throw new UsageError(`--device must be cpu, auto, cuda or webgpu, got '${device}'`);
    let kwargs: Record<string, unknown> | undefined;
    const kw = stringOption(args, 'chat-template-kwargs');
    if (kw !== undefined) {
      try {
        kwargs = JSON.parse(kw) as Record<string, unknown>;
      } catch {
        throw new UsageError('--chat-template-kwargs must be a JSON object');
      }
    }
    const keyEnv = stringOption(args, 'api-key-env');
    const apiKey = keyEnv ? io.env[keyEnv] : io.env.FLOWGRPO_API_KEY;
    if (keyEnv && !apiKey) throw new UsageError(`--api-key-env ${keyEnv}: the variable is not set`);
    const adapters = loraPairs(args, cwd);
    const log = (line: string) => io.stderr(`${line}\n`);

    // What the server reads (the model once resolved, the tokenizer, the adapters): what it
    // writes — output_dir, --record, --artifacts-dir — is never one of them nor inside one.
    const readInputs = (model: string | undefined): RunInput[] => [
      ...(model
        ? [{ key: '--model', path: model, runProduct: existsSync(join(model, ARTIFACTS_MANIFEST)) }]
        : []),
      ...(tokArg ? [{ key: '--tokenizer', path: resolve(cwd, tokArg) }] : []),
      ...Object.entries(adapters).map(([name, path]) => ({
        key: `--lora ${name}`,
        path,
        runProduct: true,
      })),
    ];
    const refuseOverlap = (
      output: { key: string; path: string; file?: boolean },
      model: string | undefined,
    ) => {
      const overlap = outputOverlaps(output, readInputs(model))[0];
      if (overlap) throw overlap;
    };
    const recordArg = stringOption(args, 'record');
    const recordFile = recordArg === undefined ? undefined : resolve(cwd, recordArg);
    // Checked now: a folder that is not there would fail only when the first reward is posted.
    if (recordFile) requireFolder(dirname(recordFile), '--record (its folder)');
    const record = recordFile
      ? (r: RecordedRollout) => {
          const t = rolloutTrajectory(r, { queryId: r.id, groupId: r.groupId ?? r.id });
          appendFileSync(recordFile, `${JSON.stringify(trajectoryToJson(t))}\n`);
        }
      : undefined;
    const maxBody = intOption(args, 'max-body-bytes', 1);
    const maxConc = intOption(args, 'max-concurrency', 1);
    const maxQueue = intOption(args, 'max-queue', 0);
    const maxTokens = intOption(args, 'max-tokens', 1);
    const serving = {
      hostname: stringOption(args, 'host') ?? '127.0.0.1',
      port: intOption(args, 'port', 0) ?? 8000,
      ...(apiKey && { apiKey }),
      ...(maxBody !== undefined && { maxBodyBytes: maxBody }),
      ...(maxConc !== undefined && { maxConcurrency: maxConc }),
      ...(maxQueue !== undefined && { maxQueue }),
      ...(maxTokens !== undefined && { defaultMaxTokens: maxTokens }),
      ...(kwargs && { chatTemplateVariables: kwargs }),
    };
    const trainFile = stringOption(args, 'train');
    const threads = intOption(args, 'threads', 1);
    // Said before anything slow, so it is the first thing the user sees.
    if (!apiKey && !isLoopback(serving.hostname))
      log(
        `warning: --host ${serving.hostname} serves beyond this machine without an API key (anyone who can reach the port can generate, load adapters and read the recorded rollouts); set FLOWGRPO_API_KEY or --api-key-env VAR to require one`,
      );

    // ---- training from posted rewards -------------------------------------------------------
    if (trainFile) {
      if (upstream.length > 0)
        throw new UsageError('--train trains a local model; it cannot be combined with --upstream');
      if (!modelArg) throw new UsageError('--train needs --model');
      const file = resolve(cwd, trainFile);
      const config = parseConfig(GRPOConfigSchema, readJsonFile(file, '--train'), trainFile);
      config.output_dir = resolve(dirname(file), config.output_dir);
      if (typeof config.resume_from_checkpoint === 'string' && config.resume_from_checkpoint)
        config.resume_from_checkpoint = resolve(dirname(file), config.resume_from_checkpoint);
      if (args.values.resume === true) config.resume_from_checkpoint = true;
      if (args.values.overwrite === true) config.overwrite_output_dir = true;
      const model = await resolveModelArg(modelArg, io, '--model');
      if (recordFile) refuseOverlap({ key: '--record', path: recordFile, file: true }, model);
      // output_dir before the artifacts are built (as flowgrpo train): a run that will be refused
      // (locked by another run, holding checkpoints without --resume / --overwrite, or over what
      // it reads) is refused at once.
      const lock = claimOutputDir({
        ...config,
        trainer: 'online-grpo',
        inputs: readInputs(model),
        log,
      });
      try {
        return await serveAndTrain(args, io, {
          config,
          model,
          tokArg,
          adapters,
          device,
          serving,
          record,
          log,
          lock,
        });
      } finally {
        lock.release();
      }
    }
    if (args.values.resume === true || args.values.overwrite === true)
      throw new UsageError('--resume and --overwrite apply to a training run: add --train FILE');

    // ---- serving --------------------------------------------------------------------------------
    let host: PolicyHost;
    if (upstream.length > 0) {
      const name = stringOption(args, 'served-model-name');
      if (!name)
        throw new UsageError('--upstream needs --served-model-name (the upstream model name)');
      const tokPath = tokArg ?? modelArg;
      if (recordFile)
        refuseOverlap(
          { key: '--record', path: recordFile, file: true },
          modelArg && resolve(cwd, modelArg),
        );
      if (!tokPath)
        throw new UsageError("--upstream needs --tokenizer (the model's tokenizer folder)");
      const upKeyEnv = stringOption(args, 'upstream-api-key-env');
      const maxLen = intOption(args, 'max-model-len', 1);
      host = new UpstreamPolicyHost({
        baseURLs: upstream,
        model: name,
        tokenizer: await loadTokenizer(resolve(cwd, tokPath)),
        ...(upKeyEnv && io.env[upKeyEnv] && { apiKey: io.env[upKeyEnv] }),
        ...(maxLen !== undefined && { maxContext: maxLen }),
      });
      for (const [n, p] of Object.entries(adapters)) await host.loadAdapter(n, p);
    } else {
      if (!modelArg) throw new UsageError('--model is required (or --upstream)');
      const model = await resolveModelArg(modelArg, io, '--model');
      const lora = loraShape(args, adapters);
      const dir = resolve(
        cwd,
        stringOption(args, 'artifacts-dir') ??
          join(
            tmpdir(),
            'flowgrpo-serve',
            createHash('sha256').update(model).digest('hex').slice(0, 16),
          ),
      );
      if (recordFile) refuseOverlap({ key: '--record', path: recordFile, file: true }, model);
      if (modelKind(model) === 'hf') {
        // A build replaces its folder whole (never one that is not artifacts: models refuses it),
        // and never goes inside or around what the server reads.
        refuseOverlap({ key: '--artifacts-dir', path: dir }, model);
        mkdirSync(dirname(dir), { recursive: true });
      }
      if (args.values['skip-memory-check'] !== true) {
        // Before the build: the decode session's weights and one full decode batch's KV cache
        // (LocalPolicyEngine batches up to 64 requests; each at the default max_tokens — a
        // request's prompt is not known here).
        const built = modelKind(model) === 'artifacts' ? readArtifactsManifest(model) : undefined;
        const config = built?.config ?? (await loadDecoderConfig(model));
        const { warning } = checkSamplingMemory({
          config,
          rows: Math.min(DECODE_BATCH, maxConc ?? 256),
          promptTokens: 0,
          newTokens: maxTokens ?? 1024,
          maxPositions: built?.maxPositions ?? Math.min(config.maxPositionEmbeddings, 32768),
          hostWeights: false,
          // A model folder is built with float32 projections (ensureArtifacts' default).
          halfProjections: built?.baseWeightsDtype !== undefined,
          flags: { newTokens: '--max-tokens', skip: '--skip-memory-check' },
        });
        if (warning) log(`warning: ${warning}`);
      }
      const { dir: artifacts, manifest } = await ensureArtifacts(model, dir, {
        ...(lora && { lora }),
        graphs: ['decode'],
        log,
      });
      if (Object.keys(adapters).length > 0 && !manifest.lora)
        throw new ConfigError(
          `${model} is an artifacts directory built without LoRA; adapters cannot be served on it`,
          { key: 'lora' },
        );
      const tokenizer = await resolveTokenizer(
        model,
        tokArg ? resolve(cwd, tokArg) : undefined,
        manifest.config.vocabSize,
      );
      host = await LocalPolicyHost.open({
        artifacts,
        tokenizer,
        baseModel:
          stringOption(args, 'served-model-name') ?? model.split(/[\\/]/).filter(Boolean).at(-1)!,
        adapters,
        device: device as 'cpu',
        ...(threads !== undefined && { intraOpThreads: threads }),
      });
    }

    const gateway = await createPolicyGateway({
      host,
      recorder: new RolloutRecorder({ ...(record && { onReward: record }) }),
      ...serving,
    });
    const models = host.models().map((m) => m.id);
    const signalled = untilSignal(log);
    io.stdout(`listening on ${gateway.baseURL} (models: ${models.join(', ')})\n`);
    if (apiKey) log('API key required (Authorization: Bearer …)');
    await signalled;
    await gateway.close();
    await host.close();
    return 0;
  },
};
