import { resolve } from 'node:path';
import {
  FlowGrpoError,
  type HubProgress,
  isHubName,
  resolveDataSource,
  resolveModelSource,
} from '@flowgrpo/core';
import type { CliIO } from './command.js';
import { PreflightError, type PreflightProblem } from './preflight.js';
import { cliProgress } from './run-progress.js';

// Hub names in the CLI's options and run configs: `--model Qwen/Qwen2.5-0.5B-Instruct`,
// `"model": "org/name@rev"`, `"train_file": "openai/gsm8k"` or TRL's dataset_name. Each is
// resolved to a folder or file in the HF cache before preflight checks it, so every later step
// (artifacts, tokenizer, data, adapter_config's base model) sees a local path. A path that exists
// locally always wins. Downloads draw a bar per file and print where the files went.

/** The hub settings come from the command's environment (HF_ENDPOINT, HF_HOME, HF_TOKEN, …). */
function hubOptions(io: CliIO, what: string) {
  const progress: HubProgress = cliProgress(io);
  // Waiting for another process that downloads the same file is said, not silent.
  return {
    cwd: io.cwd,
    env: io.env,
    what,
    progress,
    log: (line: string) => io.stderr(`${line}\n`),
  };
}

/** A model named by option `what` (`--model`, `--tokenizer`): a local path or a hub model's folder. */
export async function resolveModelArg(
  nameOrPath: string,
  io: CliIO,
  what: string,
): Promise<string> {
  // Not a hub name: the path as given, for the checks downstream to name what is wrong with it.
  if (!isHubName(nameOrPath, io.cwd)) return resolve(io.cwd, nameOrPath);
  // A tokenizer option needs the tokenizer files only, not the model's weights.
  const tokenizerOnly = what === 'tokenizer' || what === '--tokenizer';
  const dir = await resolveModelSource(nameOrPath, { ...hubOptions(io, what), tokenizerOnly });
  io.stderr(`${what}: ${nameOrPath} → ${dir}\n`);
  return dir;
}

/** A data file named by `what` (`--data`, `eval_file`): a local path or a hub data set's split. */
export async function resolveDataArg(
  nameOrPath: string,
  io: CliIO,
  what: string,
  dataset: { config?: string | undefined; split: string },
): Promise<string> {
  if (!isHubName(nameOrPath, io.cwd)) return resolve(io.cwd, nameOrPath);
  const file = await resolveDataSource(nameOrPath, { ...hubOptions(io, what), ...dataset });
  io.stderr(`${what}: ${nameOrPath} (split ${dataset.split}) → ${file}\n`);
  return file;
}

/** The run-config keys that may name the hub, as readRunConfig leaves them. */
interface RunSources {
  model: string;
  tokenizer?: string | undefined;
  base_model?: string | undefined;
  train_file?: string | undefined;
  eval_file?: string | undefined;
  dataset_config?: string | undefined;
  dataset_train_split?: string | undefined;
  dataset_test_split?: string | undefined;
}

/**
 * The run with every hub name replaced by its local path. A hub model also becomes the
 * adapter's base_model_name_or_path (unless base_model says otherwise), as PEFT writes it.
 * Every key is tried, and what failed is reported together as preflight reports its problems
 * (one problem as itself: `[HUB_GATED] model: …`), before anything is built or written.
 */
export async function resolveRunSources<T extends RunSources>(run: T, io: CliIO): Promise<T> {
  const out: T = { ...run };
  const problems: PreflightProblem[] = [];
  const attempt = async (key: string, resolveKey: () => Promise<void>) => {
    try {
      await resolveKey();
    } catch (e) {
      if (!FlowGrpoError.isInstance(e)) throw e;
      problems.push({ code: e.code, message: `${key}: ${e.message}`, hint: e.hint });
    }
  };
  if (isHubName(run.model, io.cwd)) out.base_model ??= run.model;
  await attempt('model', async () => {
    out.model = await resolveModelArg(run.model, io, 'model');
  });
  const { tokenizer, train_file, eval_file, dataset_config: config } = run;
  if (tokenizer)
    await attempt('tokenizer', async () => {
      out.tokenizer = await resolveModelArg(tokenizer, io, 'tokenizer');
    });
  if (train_file)
    await attempt('train_file', async () => {
      const split = run.dataset_train_split ?? 'train';
      out.train_file = await resolveDataArg(train_file, io, 'train_file', { config, split });
    });
  if (eval_file)
    await attempt('eval_file', async () => {
      const split = run.dataset_test_split ?? 'test';
      out.eval_file = await resolveDataArg(eval_file, io, 'eval_file', { config, split });
    });
  if (problems.length > 0) throw new PreflightError(problems);
  return out;
}
