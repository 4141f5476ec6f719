import { existsSync, mkdirSync, readdirSync, renameSync, rmSync, statSync } from 'node:fs';
import { join, resolve, sep } from 'node:path';
import {
  ConfigError,
  NotADirectoryError,
  PermissionDeniedError,
  ReadOnlyFileSystemError,
} from '@flowgrpo/core';
import type { DecoderConfig, LoraParams } from '@flowgrpo/models';
import {
  checkpointName,
  type LoadedCheckpoint,
  listCheckpoints,
  loadCheckpoint,
  rotateCheckpoints,
  saveCheckpoint,
  type TrainerState,
} from './checkpoint.js';
import { isRunFile, outputDirProblems, PREVIOUS_RUN, type RunInput } from './output-dir-checks.js';
import {
  type LoadedRolesCheckpoint,
  loadRolesCheckpoint,
  saveRolesCheckpoint,
} from './roles-checkpoint.js';
import { RunDirectory } from './run-dir.js';
import { RunLock } from './run-lock.js';
import { asRunWriteError } from './run-write-error.js';

// How every trainer opens its output_dir, before anything slow happens — HF Trainer's rules plus
// a lock, so that nothing a user had is ever lost:
//
//   - output_dir must be a folder this process can write (a typed error naming it, else), never
//     one the run reads, holding no link on what a run writes, and — when it is not a run —
//     empty unless overwrite_output_dir (output-dir-checks.ts: checked before it is created);
//   - one run at a time: output_dir/.flowgrpo.lock (run-lock.ts);
//   - a fresh run into an output_dir that holds checkpoints is refused: resume_from_checkpoint
//     continues that run, overwrite_output_dir replaces it;
//   - overwrite_output_dir moves the earlier run's files into a hidden folder and deletes them
//     only once the new run has written its first checkpoint. A run that ends (or is killed)
//     before that gets the earlier run put back — by itself when it fails, by the next open of
//     the folder when it was killed — so the folder always holds one complete run;
//   - resume_from_checkpoint: true continues from the latest checkpoint, a path from that one;
//     metrics.jsonl keeps the steps up to it (a fresh run starts it empty).

// The earlier run's files while an overwrite is under way, in three states (a rename between
// them is atomic): being moved aside, aside (the new run has no checkpoint yet), being deleted.
const { moving: MOVING, aside: ASIDE, deleting: DELETING } = PREVIOUS_RUN;

export interface RunLifecycleOptions {
  output_dir: string;
  resume_from_checkpoint: boolean | string;
  overwrite_output_dir: boolean;
  /** Written into the lock: 'grpo', 'sft', … */
  trainer: string;
  /** The model's config, to load a checkpoint to resume from. */
  modelConfig: DecoderConfig;
  /**
   * Paths the run reads (artifacts, adapter, model): output_dir never overlaps one (nor the
   * checkpoint resume_from_checkpoint names), and overwriting never moves one.
   */
  inputs?: readonly RunInput[];
  /** A lock on output_dir the caller already holds (the CLI takes it before building artifacts). */
  lock?: RunLock;
  /** The run trains an adapter per role: its checkpoints have a folder per role (roles-checkpoint.ts). */
  perRole?: boolean;
  log?: (line: string) => void;
}

/** The refusal of a fresh run into an output_dir holding checkpoints (HF's rule). */
function refuseFreshRun(dir: string, checkpoints: readonly string[]): ConfigError {
  return new ConfigError(
    `${dir} already holds a run's checkpoints (${checkpoints.join(', ')}); a new run would mix with them: set resume_from_checkpoint to continue that run or overwrite_output_dir to replace it`,
    { key: 'output_dir' },
    {
      hint: 'flowgrpo train (or serve --train): --resume continues the run, --overwrite replaces it (its files are deleted once the new run has a checkpoint); or choose another output_dir',
    },
  );
}

function entries(dir: string): string[] {
  try {
    return readdirSync(dir).sort();
  } catch {
    return [];
  }
}

/** Throws the first of outputDirProblems (output-dir-checks.ts): nothing is created before. */
function checkOutputDir(
  o: Pick<
    RunLifecycleOptions,
    'output_dir' | 'overwrite_output_dir' | 'inputs' | 'resume_from_checkpoint'
  >,
): void {
  const problem = outputDirProblems(o)[0];
  if (problem) throw problem;
}

/**
 * Creates output_dir, takes its lock and finishes an overwrite that a kill interrupted; then checks
 * HF's rules for this run. Every refusal is typed and happens before anything is changed. The
 * caller releases the lock.
 */
export function claimOutputDir(
  o: Pick<
    RunLifecycleOptions,
    'output_dir' | 'resume_from_checkpoint' | 'overwrite_output_dir' | 'trainer' | 'inputs' | 'log'
  >,
): RunLock {
  const dir = resolve(o.output_dir);
  if (existsSync(dir) && !statSync(dir).isDirectory())
    throw new NotADirectoryError(
      `output_dir ${dir} is a file, not a folder`,
      { path: dir },
      { hint: 'point output_dir at a folder (it is created if missing)' },
    );
  checkOutputDir(o);
  let lock: RunLock;
  try {
    mkdirSync(dir, { recursive: true });
    lock = RunLock.acquire(dir, { trainer: o.trainer, ...(o.log && { log: o.log }) });
  } catch (e) {
    const code = (e as { code?: unknown }).code;
    if (code === 'ENOTDIR' || code === 'EEXIST')
      throw new NotADirectoryError(
        `output_dir ${dir}: a part of the path is a file`,
        { path: dir, errno: code },
        { cause: e, hint: 'point output_dir at a folder whose parents are folders' },
      );
    if (code === 'EACCES' || code === 'EPERM' || code === 'EROFS')
      throw new (code === 'EROFS' ? ReadOnlyFileSystemError : PermissionDeniedError)(
        `output_dir ${dir} is not writable (${code})`,
        { path: dir, errno: code },
        { cause: e, hint: 'choose a folder you can write, or fix its permissions' },
      );
    throw asRunWriteError(e, dir, dir);
  }
  try {
    checkRules(dir, o, o.log ?? (() => {}));
  } catch (e) {
    lock.release();
    throw e;
  }
  return lock;
}

/** Moves every entry of `from` back into `dir`, then removes `from` if that emptied it. */
function moveBack(dir: string, from: string): void {
  for (const name of entries(from)) {
    // Never taken (the new run's files were removed first), but a file is never overwritten.
    if (!existsSync(join(dir, name))) renameSync(join(from, name), join(dir, name));
  }
  if (entries(from).length === 0) rmSync(from, { recursive: true, force: true });
}

/**
 * Finishes an overwrite of `dir` that stopped half way (a kill, or a run that failed before its
 * first checkpoint): the earlier run is deleted if the new one has a checkpoint, else put back.
 */
function recoverOverwrite(dir: string, log: (line: string) => void): void {
  rmSync(join(dir, DELETING), { recursive: true, force: true });
  if (existsSync(join(dir, ASIDE))) {
    if (listCheckpoints(dir).length > 0) {
      renameSync(join(dir, ASIDE), join(dir, DELETING));
      rmSync(join(dir, DELETING), { recursive: true, force: true });
      return;
    }
    log(
      `${dir}: the run that overwrote it stopped before its first checkpoint; putting the earlier run back`,
    );
    for (const name of entries(dir).filter(isRunFile))
      rmSync(join(dir, name), { recursive: true, force: true });
    renameSync(join(dir, ASIDE), join(dir, MOVING));
  }
  if (existsSync(join(dir, MOVING))) moveBack(dir, join(dir, MOVING));
}

export class RunLifecycle {
  readonly run: RunDirectory;
  /** The checkpoint this run continues from (resume_from_checkpoint). */
  readonly resumed: LoadedCheckpoint | undefined;
  /** The same, for a run with an adapter per role (`perRole`). */
  readonly resumedRoles: LoadedRolesCheckpoint | undefined;
  readonly #lock: RunLock;
  readonly #ownsLock: boolean;
  readonly #log: (line: string) => void;
  /** An earlier run moved aside, deleted at this run's first checkpoint. */
  #aside: boolean;

  private constructor(
    run: RunDirectory,
    lock: RunLock,
    o: {
      ownsLock: boolean;
      aside: boolean;
      resumed: LoadedCheckpoint | undefined;
      resumedRoles: LoadedRolesCheckpoint | undefined;
    },
    log: (line: string) => void,
  ) {
    this.run = run;
    this.#lock = lock;
    this.#ownsLock = o.ownsLock;
    this.#aside = o.aside;
    this.resumed = o.resumed;
    this.resumedRoles = o.resumedRoles;
    this.#log = log;
  }

  /** Opens output_dir for a run under HF's rules (see the top of this file). */
  static async open(o: RunLifecycleOptions): Promise<RunLifecycle> {
    const dir = resolve(o.output_dir);
    const log = o.log ?? (() => {});
    const lock = o.lock ?? claimOutputDir(o);
    try {
      // Claimed by the caller: the rules are checked again (cheap) for what may have changed,
      // and with this trainer's inputs (the caller may not have named them all).
      if (o.lock) {
        checkOutputDir(o);
        checkRules(dir, o, log);
      }
      const run = new RunDirectory(dir);
      const resumeFrom =
        o.resume_from_checkpoint === true
          ? listCheckpoints(dir).at(-1)?.dir
          : o.resume_from_checkpoint || undefined;
      if (o.resume_from_checkpoint === true && !resumeFrom)
        log(`no checkpoint in ${dir}; starting from step 0`);
      let resumed: LoadedCheckpoint | undefined;
      let resumedRoles: LoadedRolesCheckpoint | undefined;
      let aside = false;
      if (resumeFrom) {
        if (o.perRole) resumedRoles = await loadRolesCheckpoint(resumeFrom, o.modelConfig);
        else resumed = await loadCheckpoint(resumeFrom, o.modelConfig);
        const step = (resumed ?? resumedRoles)!.trainer.global_step;
        run.truncateMetrics(step);
        log(`resuming from ${resumeFrom} (step ${step})`);
      } else {
        if (o.overwrite_output_dir) aside = moveAside(dir, o.inputs ?? [], log);
        run.truncateMetrics(0);
      }
      return new RunLifecycle(run, lock, { ownsLock: !o.lock, aside, resumed, resumedRoles }, log);
    } catch (e) {
      if (!o.lock) lock.release();
      throw e;
    }
  }

  /**
   * Where this run starts: the checkpoint it resumes (its trainer state under this run's config,
   * its parameters and optimizer moments), else `fresh` and the parameters `init()` gives.
   */
  async start<P extends LoraParams | undefined>(
    fresh: TrainerState,
    init: () => P | Promise<P>,
  ): Promise<{
    state: TrainerState;
    params: LoraParams | P;
    optimizer?: LoadedCheckpoint['optimizer'];
    rolloutPolicies?: LoadedCheckpoint['rolloutPolicies'];
  }> {
    const ck = this.resumed;
    if (ck)
      return {
        state: { ...ck.trainer, config: fresh.config },
        params: ck.params,
        optimizer: ck.optimizer,
        rolloutPolicies: ck.rolloutPolicies,
      };
    return { state: fresh, params: await init() };
  }

  /**
   * Saves checkpoint-<step> (whole or not at all), then deletes an overwritten run's files (the
   * new run now has a checkpoint of its own) and rotates to `limit` checkpoints, never `keep`.
   */
  async saveCheckpoint(
    save: Parameters<typeof saveCheckpoint>[1],
    rotate: { limit: number; keep?: string | undefined },
  ): Promise<string> {
    return this.#saved(save.trainer.global_step, () => saveCheckpoint(this.run.dir, save), rotate);
  }

  /** saveCheckpoint for a run with an adapter per role (roles-checkpoint.ts). */
  async saveRolesCheckpoint(
    save: Parameters<typeof saveRolesCheckpoint>[1],
    rotate: { limit: number; keep?: string | undefined },
  ): Promise<string> {
    return this.#saved(
      save.trainer.global_step,
      () => saveRolesCheckpoint(this.run.dir, save),
      rotate,
    );
  }

  async #saved(
    step: number,
    write: () => Promise<string>,
    rotate: { limit: number; keep?: string | undefined },
  ): Promise<string> {
    const dir = this.run.dir;
    const path = await this.run.guard(join(dir, checkpointName(step)), write);
    if (this.#aside) {
      renameSync(join(dir, ASIDE), join(dir, DELETING));
      rmSync(join(dir, DELETING), { recursive: true, force: true });
      this.#aside = false;
      this.#log(`${dir}: the earlier run's files are deleted (this run has a checkpoint)`);
    }
    rotateCheckpoints(dir, rotate.limit, rotate.keep);
    return path;
  }

  /**
   * Ends the run: an earlier run that this one overwrote without reaching a checkpoint is put
   * back, and the lock is released (when this lifecycle took it).
   */
  close(): void {
    try {
      if (this.#aside) recoverOverwrite(this.run.dir, this.#log);
      this.#aside = false;
    } finally {
      if (this.#ownsLock) this.#lock.release();
    }
  }
}

/** Finishes an interrupted overwrite, then applies HF's rule for a fresh run. */
function checkRules(
  dir: string,
  o: Pick<RunLifecycleOptions, 'resume_from_checkpoint' | 'overwrite_output_dir'>,
  log: (line: string) => void,
): void {
  if (o.resume_from_checkpoint !== false && o.overwrite_output_dir)
    throw new ConfigError(
      'resume_from_checkpoint and overwrite_output_dir are both set: a run either continues the run in output_dir or replaces it',
      { key: 'overwrite_output_dir' },
      { hint: 'keep one of them (flowgrpo train: --resume or --overwrite)' },
    );
  recoverOverwrite(dir, log);
  const checkpoints = listCheckpoints(dir);
  // A path is checked here, before anything is built: a typo would otherwise surface as a raw
  // ENOENT from trainer_state.json once the artifacts are ready.
  const from = o.resume_from_checkpoint;
  if (typeof from === 'string' && from && !existsSync(join(from, 'trainer_state.json')))
    throw new ConfigError(
      `resume_from_checkpoint: ${resolve(from)} is not a checkpoint folder (${existsSync(from) ? 'no trainer_state.json in it' : 'it does not exist'})`,
      { key: 'resume_from_checkpoint' },
      {
        hint:
          checkpoints.length > 0
            ? `name one of ${dir}'s checkpoints (${checkpoints.map((c) => `checkpoint-${c.step}`).join(', ')}), or set it to true for the latest (--resume)`
            : 'name a checkpoint-<step> folder of a run, or set it to true to continue the latest in output_dir (--resume)',
      },
    );
  if (o.resume_from_checkpoint === false && !o.overwrite_output_dir && checkpoints.length > 0)
    throw refuseFreshRun(
      dir,
      checkpoints.map((c) => `checkpoint-${c.step}`),
    );
}

/**
 * overwrite_output_dir: moves the earlier run's files into ASIDE (via MOVING, so that a kill half
 * way is recognised). Returns whether there was anything to move.
 */
function moveAside(dir: string, inputs: readonly RunInput[], log: (line: string) => void): boolean {
  const names = entries(dir).filter(isRunFile);
  if (names.length === 0) return false;
  // What the new run reads must stay where it is; it cannot be both kept and replaced.
  for (const p of inputs.map((i) => resolve(i.path)))
    for (const name of names) {
      const e = join(dir, name);
      if (p === e || p.startsWith(`${e}${sep}`))
        throw new ConfigError(
          `overwrite_output_dir would replace ${e}, which this run starts from (${p})`,
          { key: 'overwrite_output_dir' },
          { hint: 'copy it out of output_dir first, or write the new run to another output_dir' },
        );
    }
  const moving = join(dir, MOVING);
  mkdirSync(moving);
  for (const name of names) renameSync(join(dir, name), join(moving, name));
  renameSync(moving, join(dir, ASIDE));
  log(
    `overwrite_output_dir: the earlier run in ${dir} (${names.join(', ')}) is set aside and deleted once this run writes its first checkpoint`,
  );
  return true;
}
