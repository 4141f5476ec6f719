import { readFileSync } from 'node:fs';
import { freemem, totalmem } from 'node:os';

// The memory a run can take, as the memory preflight compares its estimate with it: what the
// machine has free (os.freemem: MemAvailable on Linux — free pages plus the page cache the kernel
// can drop), and, where the process runs in a cgroup with a limit (a container, a systemd slice),
// what is left under that limit: past it the OOM killer stops the process whatever the machine
// has free.

export interface AvailableMemory {
  /** Bytes the run can take: the smaller of the machine's free memory and the cgroup's headroom. */
  bytes: number;
  /** Where the figure comes from, for the message: "free memory" or "the cgroup's limit". */
  source: string;
  /** The machine's memory (os.totalmem), or the cgroup's limit when it is the smaller. */
  total: number;
}

/** A cgroup file's number; undefined when absent, unreadable or "max" (no limit). */
function cgroupNumber(path: string): number | undefined {
  try {
    const text = readFileSync(path, 'utf8').trim();
    const n = Number(text);
    return text === 'max' || !Number.isFinite(n) ? undefined : n;
  } catch {
    return undefined;
  }
}

/**
 * The cgroup's limit and use: cgroup v2 (memory.max, memory.current), else v1
 * (memory.limit_in_bytes, whose "no limit" is a huge number, and memory.usage_in_bytes).
 */
function cgroupLimit(root: string): { limit: number; used: number } | undefined {
  const v2 = cgroupNumber(`${root}/memory.max`);
  if (v2 !== undefined) return { limit: v2, used: cgroupNumber(`${root}/memory.current`) ?? 0 };
  const v1 = cgroupNumber(`${root}/memory/memory.limit_in_bytes`);
  if (v1 !== undefined && v1 < 2 ** 60)
    return { limit: v1, used: cgroupNumber(`${root}/memory/memory.usage_in_bytes`) ?? 0 };
  return undefined;
}

/** What this process can take now. `cgroupRoot` is for tests (default /sys/fs/cgroup). */
export function availableMemory(cgroupRoot = '/sys/fs/cgroup'): AvailableMemory {
  const free = freemem();
  const cg = cgroupLimit(cgroupRoot);
  if (cg && cg.limit - cg.used < free)
    return {
      bytes: Math.max(0, cg.limit - cg.used),
      source: "the cgroup's limit (memory.max) less what it holds",
      total: Math.min(cg.limit, totalmem()),
    };
  return { bytes: free, source: 'free memory', total: totalmem() };
}
