import { join } from 'node:path';
import { FlowGrpoError } from '@flowgrpo/core';
import { loadDecoderConfig } from '@flowgrpo/models';
import {
  claimOutputDir,
  GRPOTrainer,
  type MetricsRecord,
  type RunInput,
  type RunLock,
  SFTTrainer,
} from '@flowgrpo/trainer';
import { type CliIO, type Command, stringOption, UsageError } from '../command.js';
import { resolveRunSources } from '../hub-names.js';
import { ensureArtifacts, loraFromOptions, resolveTokenizer } from '../model-artifacts.js';
import { planInputs, preflight, trainPlan } from '../preflight.js';
import { agentFactory, rewardFunction, rolloutEngine } from '../run-agent.js';
import { DEVICES, type DeviceName, loadRunConfig, type RunConfig } from '../run-config.js';
import { readQueryRows, readSftExamples } from '../run-data.js';
import { cliProgress, interruptSignal, metricsLine } from '../run-progress.js';

const usage = `Usage:
  flowgrpo train --config run.json [--device D] [--resume | --overwrite] [--dry-run]

Trains a LoRA adapter on a local decoder (SFT with "use_peft": false: every weight of a HF
folder): SFT or (Flow-)GRPO, chosen by the config's "trainer".
The run directory (output_dir) receives config.json, metrics.jsonl, rollouts/*.parquet,
checkpoint-<step>/ (PEFT adapter + optimizer state + trainer_state.json) and report.html.
As in HF's Trainer, a new run into an output_dir that holds checkpoints is refused: --resume
continues that run, --overwrite replaces it (its files are deleted only once the new run has
written its first checkpoint). One run at a time per output_dir (output_dir/.flowgrpo.lock).

run.json holds the trainer's keys as TRL names them (learning_rate, max_steps, num_generations,
beta, epsilon, loss_type, lora: {r, lora_alpha, target_modules}, …) and the run's own:
  "trainer"      "sft" | "grpo"
  "model"        HF model folder (artifacts are built into output_dir/artifacts), an
                 artifacts directory (from flowgrpo export), or a Hugging Face Hub name
                 org/name[@revision] downloaded into $HF_HOME/hub (docs/guides/hub.md)
  "tokenizer"    folder with tokenizer.json or a hub name (default: the model folder)
  "base_model"   base_model_name_or_path in adapter_config.json (default: the model path)
  "train_file"   .jsonl or .parquet — GRPO: SampleRows, or plain rows: {"question", "answer"},
                 TRL's "prompt" + "completion" or "messages" (detected; "#### N" → N);
                 SFT: TRL formats, rows with "messages", "prompt" + "completion", or "text"
  "eval_file"    held-out rows in the same format (GRPO: accuracy; SFT: eval loss)
                 train_file / eval_file may name a hub data set org/name[@revision] (its
                 train / test split); or TRL's "dataset_name" with "dataset_config",
                 "dataset_train_split" (default train) and "dataset_test_split" (sets eval_file)
  "device"       cpu | auto | cuda | webgpu (default cpu); auto takes CUDA, then WebGPU on a GPU
                 (never a software Vulkan driver such as lavapipe), then the CPU
  "max_positions"  RoPE table rows when building artifacts (default min(max_position_embeddings,
                 32768))
GRPO only:
  "agent"        {"type": "flow", "tools": ["calculator", …], "max_turns": 5,
                  "analyze_query": false, "tool_timeout_s": 60, "planner_prompt": "default",
                  "engine": ENDPOINT}   fixed roles (executor, verifier, generator) on ENDPOINT;
                  without "engine" they run offline, rule-based (the demo's); "planner_prompt":
                  "compact" is a short text prompt for a small planner
                 or {"type": "tag", "tools": [...], "max_turns": 5, "search_tool": NAME,
                  "system_prompt": TEXT, "max_total_tokens": N, "tool_timeout_s": 60,
                  "engine": ENDPOINT}
  "reward"       "exact_match" | "f1" | "math" | "judge"
  "judge"        ENDPOINT (default: agent.engine)
  "data_format"  "sample_rows", "plain" or a dataset normaliser (gsm8k, nq, …: flowgrpo data);
                 absent: SampleRows or plain rows, detected from the first row
  "rollout"      {"engine": "local"} (default) or {"engine": "openai", "base_urls": [...],
                  "model": served name, "lora_routes": "vllm" | "sglang", "chat_template":
                  "server" | "local", "api_key_env", "max_concurrency", "timeout_s"} — rollouts
                  on vLLM / SGLang, the adapter hot-loaded after every update
  ENDPOINT       {"base_url", "model", "api_key_env" (the variable's name, never the key),
                  "structured_output": json_schema | json_object | prompt | auto,
                  "temperature": 0, "timeout_s": 120, "max_concurrency"}
The trainer's own keys (learning_rate, num_generations, lora, …) sit beside these:
packages/trainer-cuda/docs/trainers.md lists them.
Paths are relative to the working directory. See docs/recipes/ for complete configs.

Options:
  --config FILE   the run config (JSON)
  --device D      overrides "device"
  --resume        continue from the latest checkpoint in output_dir (resume_from_checkpoint: true)
  --overwrite     replace the run in output_dir (overwrite_output_dir: true)
  --dry-run       run the checks below, print the device and the memory estimate, and stop
                  (nothing built or written)

Before anything is built or written the run is checked (preflight): the model and tokenizer, the
data files (every row), the device (which one auto picked, and why), that the agent's first
prompts fit the model's positions with max_completion_length to spare, the tools' requirements,
output_dir (never the model, tokenizer or data folder, nor inside or around one; no symbolic
link where the run writes; a folder that is not a run must be empty, or --overwrite writes
beside its files), and that every server the run names (agent.engine, judge, rollout.base_urls)
answers GET /models within 5 s, and that the run's estimated peak memory (printed, term by term)
fits the memory available (skip_memory_check: true skips it). Every problem is reported at once,
each with its fix (docs/troubleshooting.md).

Ctrl-C stops after the current step and writes a checkpoint (exit code 130); --resume goes on.`;

async function train(
  rc: RunConfig,
  device: DeviceName,
  inputs: readonly RunInput[],
  io: CliIO,
): Promise<number> {
  const { config } = rc;
  // output_dir before the artifacts are built: a run that will be refused (locked by another
  // run, holding checkpoints without --resume / --overwrite, or over what it reads) is refused
  // at once.
  const lock = claimOutputDir({
    ...config,
    trainer: rc.kind,
    inputs,
    log: (line) => io.stderr(`${line}\n`),
  });
  try {
    return await trainLocked(rc, device, io, lock);
  } finally {
    lock.release();
  }
}

async function trainLocked(
  rc: RunConfig,
  device: DeviceName,
  io: CliIO,
  lock: RunLock,
): Promise<number> {
  const { run, config } = rc;
  const progress = cliProgress(io);
  const log = (line: string) => io.stderr(`${line}\n`);
  // SFT with use_peft: false trains every weight of the HF model itself (the trainer builds its
  // own graphs): no LoRA artifacts to build, and checkpoints are whole HF model folders.
  // (Preflight refused an artifacts directory for it.)
  const full = rc.kind === 'sft' && !rc.config.use_peft;
  const built = full
    ? undefined
    : await ensureArtifacts(run.model, join(config.output_dir, 'artifacts'), {
        lora: loraFromOptions(config.lora),
        ...(run.max_positions && { maxPositions: run.max_positions }),
        gradientCheckpointing: config.gradient_checkpointing,
        // Only where the trainer samples itself (rollouts on a server open no sampling session).
        decodeCastsPerUse:
          rc.kind === 'grpo' &&
          rc.config.share_sampling_weights &&
          rc.run.rollout.engine === 'local',
        baseWeightsDtype: config.base_weights_dtype,
        device,
        log,
      });
  const modelConfig = built ? built.manifest.config : await loadDecoderConfig(run.model);
  const tokenizer = await resolveTokenizer(run.model, run.tokenizer, modelConfig.vocabSize);
  const common = {
    tokenizer,
    device,
    progress,
    baseModel: run.base_model ?? run.model,
    lock,
    ...(!io.interactive && { onLog: (r: MetricsRecord) => io.stderr(metricsLine(r)) }),
  };
  const interrupt = interruptSignal(io);
  try {
    let result: { checkpoint: string | undefined; report: string; stopped: string };
    if (rc.kind === 'sft') {
      const trainDataset = await readSftExamples(rc.run.train_file);
      const evalDataset = rc.run.eval_file ? await readSftExamples(rc.run.eval_file) : undefined;
      const r = await new SFTTrainer({
        ...common,
        ...(built ? { artifacts: built.dir } : { model: run.model }),
        config: rc.config,
        trainDataset,
        ...(evalDataset && { evalDataset }),
        signal: interrupt.signal,
      }).train();
      result = r;
      if (r.bestEvalLoss !== undefined)
        io.stdout(
          `best checkpoint: ${r.bestCheckpoint} (eval loss ${r.bestEvalLoss.toFixed(4)})\n`,
        );
    } else {
      const g = rc.run;
      const trainDataset = await readQueryRows(g.train_file, g.data_format, 'train_file', log);
      const evalDataset = g.eval_file
        ? await readQueryRows(g.eval_file, g.data_format, 'eval_file', log)
        : undefined;
      const remote = rolloutEngine(g.rollout, tokenizer, io.env);
      const r = await new GRPOTrainer({
        ...common,
        artifacts: built!.dir, // only SFT skips the artifacts
        config: rc.config,
        agent: agentFactory(
          g.agent,
          {
            maxTurns: rc.config.max_turns,
            maxTokens: rc.config.max_completion_length,
            temperature: rc.config.temperature,
            topP: rc.config.top_p,
          },
          io.env,
        ),
        reward: rewardFunction(g.reward, g.judge ?? g.agent.engine, io.env),
        trainDataset,
        ...(evalDataset && { evalDataset }),
        ...(remote && { rolloutEngine: remote }),
        signal: interrupt.signal,
      }).train();
      result = r;
      if (r.eval)
        io.stdout(
          `eval accuracy: ${(100 * r.eval.accuracy).toFixed(1)}% (n=${r.eval.n}, 95% CI ${(100 * r.eval.accuracy_ci95[0]).toFixed(1)}–${(100 * r.eval.accuracy_ci95[1]).toFixed(1)})\n`,
        );
      if (r.bestCheckpoint !== undefined)
        io.stdout(
          `best checkpoint: ${r.bestCheckpoint} (${rc.config.metric_for_best_model} ${r.bestMetric!.toFixed(4)})\n`,
        );
    }
    io.stdout(`checkpoint: ${result.checkpoint ?? '(none)'}\nreport: ${result.report}\n`);
    if (result.stopped === 'aborted') {
      io.stderr(`interrupted: resume with --resume (${rc.file})\n`);
      return 130;
    }
    return 0;
  } catch (e) {
    // An abort that surfaced as an error (e.g. during the final evaluation) is still a Ctrl-C.
    if (!interrupt.signal.aborted || FlowGrpoError.isInstance(e)) throw e;
    io.stderr(`interrupted: ${(e as Error).message}; resume with --resume (${rc.file})\n`);
    return 130;
  } finally {
    interrupt.dispose();
  }
}

export const trainCommand: Command = {
  name: 'train',
  summary: 'train a LoRA adapter with SFT or Flow-GRPO from a run config (JSON, TRL keys)',
  usage,
  options: {
    config: { type: 'string' },
    device: { type: 'string' },
    resume: { type: 'boolean' },
    overwrite: { type: 'boolean' },
    'dry-run': { type: 'boolean' },
  },
  async run(args, io) {
    const file = stringOption(args, 'config') ?? args.positionals[0];
    if (!file) throw new UsageError('--config is required');
    const device = stringOption(args, 'device');
    if (device !== undefined && !(DEVICES as readonly string[]).includes(device))
      throw new UsageError(`--device must be ${DEVICES.join(', ')}, got '${device}'`);
    const given = loadRunConfig(file, io.cwd, {
      ...(args.values.resume === true && { resume: true }),
      ...(args.values.overwrite === true && { overwrite: true }),
      ...(device && { device: device as DeviceName }),
    });
    // Hub names (model, tokenizer, train_file, dataset_name…) fetched into the HF cache first.
    const rc = { ...given, run: await resolveRunSources(given.run, io) } as RunConfig;
    // Every check before anything is built or written; 'auto' resolved once, here.
    const plan = trainPlan(rc, rc.run.device);
    const { device: chosen } = await preflight(plan, io);
    if (args.values['dry-run'] === true) {
      io.stdout(
        `dry run: ${rc.file} passed every check (${rc.kind}, device ${chosen}); nothing was built or written\n`,
      );
      return 0;
    }
    return train(rc, chosen, planInputs(plan), io);
  },
};
