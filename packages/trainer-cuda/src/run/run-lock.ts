import { closeSync, openSync, readFileSync, rmSync, statSync, writeSync } from 'node:fs';
import { hostname } from 'node:os';
import { join } from 'node:path';
import { FlowGrpoError } from '@flowgrpo/core';

// One run per output_dir: a run holds output_dir/.flowgrpo.lock (JSON: pid, host, start, trainer,
// command line), created exclusively so that of two runs started together exactly one gets it.
// Without it, a second run into the same folder would take the first's checkpoints for an
// earlier run's and interleave its steps into the same metrics.jsonl.

export const LOCK_FILE = '.flowgrpo.lock';

export interface RunLockInfo {
  pid: number;
  host: string;
  started_at: string;
  trainer: string;
  command: string;
}

/** Another live run (or one on another host, which cannot be checked) holds the output_dir. */
export class RunLockedError extends FlowGrpoError {
  static override readonly code = 'RUN_LOCKED';
  readonly dir: string;
  /** undefined for a run that was writing its lock at that moment. */
  readonly holder: RunLockInfo | undefined;
  constructor(dir: string, holder: RunLockInfo | undefined, sameHost: boolean) {
    super(
      holder
        ? `${dir} is in use by another run: ${holder.trainer} pid ${holder.pid} on ${holder.host}, started ${holder.started_at} (${holder.command})`
        : `${dir} is being claimed by another run starting at this moment`,
      {
        hint: !holder
          ? 'wait for that run to finish, or use another output_dir'
          : sameHost
            ? `wait for it to finish or stop it (kill ${holder.pid}), or use another output_dir`
            : `flowgrpo cannot check a process on another host: if that run is dead, remove ${join(dir, LOCK_FILE)}; else use another output_dir`,
      },
    );
    this.dir = dir;
    this.holder = holder;
  }
}

function alive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch (e) {
    // EPERM: the process exists but belongs to someone else.
    return (e as NodeJS.ErrnoException).code === 'EPERM';
  }
}

/** Created in the last few seconds (a lock file is written right after it is created). */
function young(path: string): boolean {
  try {
    return Date.now() - statSync(path).mtimeMs < 5000;
  } catch {
    return false;
  }
}

function readLock(path: string): RunLockInfo | undefined {
  try {
    const info = JSON.parse(readFileSync(path, 'utf8')) as RunLockInfo;
    return typeof info.pid === 'number' && typeof info.host === 'string' ? info : undefined;
  } catch {
    // Gone meanwhile, or torn by a kill between create and write: no holder to respect.
    return undefined;
  }
}

export class RunLock {
  readonly path: string;
  readonly info: RunLockInfo;
  #released = false;
  readonly #onExit = () => this.release();

  private constructor(path: string, info: RunLockInfo) {
    this.path = path;
    this.info = info;
    // Best effort for a process that exits without reaching release (process.exit in a handler).
    process.once('exit', this.#onExit);
  }

  /**
   * Takes the lock of `dir` (which must exist) or throws RunLockedError. A lock left by a dead
   * process on this host is taken over, with `log` saying so.
   */
  static acquire(
    dir: string,
    o: { trainer: string; log?: (line: string) => void; command?: string },
  ): RunLock {
    const path = join(dir, LOCK_FILE);
    const info: RunLockInfo = {
      pid: process.pid,
      host: hostname(),
      started_at: new Date().toISOString(),
      trainer: o.trainer,
      command: o.command ?? process.argv.join(' '),
    };
    for (let attempt = 0; ; attempt++) {
      let fd: number;
      try {
        fd = openSync(path, 'wx');
      } catch (e) {
        if ((e as NodeJS.ErrnoException).code !== 'EEXIST') throw e;
        const holder = readLock(path);
        if (holder && (holder.host !== info.host || alive(holder.pid)))
          throw new RunLockedError(dir, holder, holder.host === info.host);
        // Unreadable and just created: a run writing its lock at this very moment (or, after a
        // few takeovers, others racing for it): theirs.
        if ((!holder && young(path)) || attempt >= 2)
          throw new RunLockedError(dir, undefined, true);
        o.log?.(
          holder
            ? `${path}: the run that held it (pid ${holder.pid}, started ${holder.started_at}) is no longer alive; taking it over`
            : `${path}: unreadable lock file (a run killed while creating it); taking it over`,
        );
        rmSync(path, { force: true });
        continue;
      }
      try {
        writeSync(fd, `${JSON.stringify(info, null, 2)}\n`);
      } catch (e) {
        // A full disk: no half-written lock left behind to be mistaken for a holder.
        closeSync(fd);
        rmSync(path, { force: true });
        throw e;
      }
      closeSync(fd);
      return new RunLock(path, info);
    }
  }

  /** Removes the lock file if it is still this run's. Idempotent. */
  release(): void {
    if (this.#released) return;
    this.#released = true;
    process.off('exit', this.#onExit);
    const holder = readLock(this.path);
    if (holder && holder.pid === this.info.pid && holder.started_at === this.info.started_at)
      rmSync(this.path, { force: true });
  }
}
