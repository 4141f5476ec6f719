import { randomUUID } from 'node:crypto';
import {
  closeSync,
  lstatSync,
  openSync,
  readFileSync,
  rmSync,
  utimesSync,
  writeSync,
} from 'node:fs';
import { hostname } from 'node:os';
import { setTimeout as sleep } from 'node:timers/promises';

// One download of a blob at a time per HF cache, across processes: two `flowgrpo` runs (or a
// run and `flowgrpo data fetch`) naming the same model would otherwise both append to
// blobs/<etag>.incomplete and download the bytes twice. huggingface_hub serialises the same way,
// with a lock file per blob under <cache>/.locks/; it takes an flock(2) on it, which Node cannot,
// so this lock is a file of its own beside Python's, created with O_EXCL ('wx'): of two processes
// exactly one creates it. Its holder writes its pid and host into it and touches it every few
// seconds while it works, so a lock left by a killed process is recognised — by its pid on this
// host, by its age otherwise (another host on a shared cache, a holder killed between creating
// and writing it) — and taken over instead of waited on forever.

export interface DownloadLockOptions {
  /** Said once when the lock is held by another process and this one waits for it. */
  log?: ((line: string) => void) | undefined;
  /** How often a waiter looks again (ms). */
  pollMs?: number | undefined;
  /** A lock not touched for this long (ms) whose holder cannot be checked is stale. */
  staleMs?: number | undefined;
}

interface LockHolder {
  pid: number;
  host: string;
  started_at: string;
  /** Tells this acquisition from another of the same process. */
  token: string;
}

/** The holder refreshes the lock's mtime this often; a waiter's staleMs must exceed it well. */
const HEARTBEAT_MS = 5_000;
const STALE_MS = 30_000;

function alive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch (e) {
    // EPERM: the process exists but belongs to someone else.
    return (e as NodeJS.ErrnoException).code === 'EPERM';
  }
}

function readHolder(path: string): LockHolder | undefined {
  try {
    const info = JSON.parse(readFileSync(path, 'utf8')) as LockHolder;
    return typeof info.pid === 'number' && typeof info.host === 'string' ? info : undefined;
  } catch {
    // Gone meanwhile, or created and not yet written (or never: its creator was killed).
    return undefined;
  }
}

/**
 * The lock file's identity and last touch; undefined when it is gone. The entry itself, not what
 * it may link to: a link left at the lock's name (dangling, even) is judged by its own age.
 */
function look(path: string): { ino: number; mtimeMs: number } | undefined {
  try {
    const { ino, mtimeMs } = lstatSync(path);
    return { ino, mtimeMs };
  } catch {
    return undefined;
  }
}

/** Creates the lock file; false when it exists. */
function tryCreate(path: string, me: LockHolder): boolean {
  let fd: number;
  try {
    fd = openSync(path, 'wx');
  } catch (e) {
    if ((e as NodeJS.ErrnoException).code === 'EEXIST') return false;
    throw e;
  }
  try {
    writeSync(fd, `${JSON.stringify(me)}\n`);
  } catch (e) {
    // A full disk: no empty lock left behind for others to wait on.
    closeSync(fd);
    rmSync(path, { force: true });
    throw e;
  } finally {
    closeSync(fd);
  }
  return true;
}

/**
 * Runs `work` while holding the lock file `path` (its folder must exist), waiting while another
 * live process holds it. `work` must look again at what it is about to produce: the process
 * that held the lock before may have produced it already.
 */
export async function withDownloadLock<T>(
  path: string,
  work: () => Promise<T>,
  options: DownloadLockOptions = {},
): Promise<T> {
  const me: LockHolder = {
    pid: process.pid,
    host: hostname(),
    started_at: new Date().toISOString(),
    token: randomUUID(),
  };
  const staleMs = options.staleMs ?? STALE_MS;
  let said = false;
  while (!tryCreate(path, me)) {
    const seen = look(path);
    const holder = readHolder(path);
    if (seen === undefined) continue; // released between the two looks: try again at once
    // A live holder touches the lock every few seconds: one untouched for staleMs is dead even
    // where its pid cannot be checked (another host) or now names another process.
    const dead =
      Date.now() - seen.mtimeMs > staleMs ||
      (holder !== undefined && holder.host === me.host && !alive(holder.pid));
    if (dead) {
      // Removed only if it is still the file judged dead: a waiter beside this one may have
      // taken it over already and created its own.
      const now = look(path);
      if (now?.ino === seen.ino && now.mtimeMs === seen.mtimeMs) {
        options.log?.(
          `${path}: left by ${holder ? `pid ${holder.pid} on ${holder.host}` : 'a process killed while creating it'}, which no longer holds it; taking it over`,
        );
        rmSync(path, { force: true });
      }
      continue;
    }
    if (!said) {
      said = true;
      options.log?.(
        `waiting for ${holder ? `pid ${holder.pid} on ${holder.host}` : 'another process'}, which is downloading the same file (lock ${path})`,
      );
    }
    await sleep(options.pollMs ?? 100);
  }
  // Touch the lock while working so that waiters elsewhere can tell a slow download from a dead one.
  const heartbeat = setInterval(() => {
    try {
      const now = new Date();
      utimesSync(path, now, now);
    } catch {
      // Taken over by a waiter that judged it stale: nothing to refresh.
    }
  }, HEARTBEAT_MS);
  heartbeat.unref();
  try {
    return await work();
  } finally {
    clearInterval(heartbeat);
    const holder = readHolder(path);
    if (holder?.token === me.token) rmSync(path, { force: true });
  }
}
