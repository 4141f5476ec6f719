import { existsSync, mkdirSync, readFileSync, rmdirSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';

// Limits per run, not per process: one control group per sandboxed run holds every process the
// run starts, so memory, process count and CPU rate are counted for the run as a whole (three
// children of 800 MB are 2.4 GB against one limit, a fork bomb stops at `pids.max`). cgroup v2
// where the machine delegates it to us, else the v1 controllers (memory, pids, cpu) where they
// are mounted writable; when neither works the caller falls back to rlimits and says so.

export interface RunCgroupLimits {
  memoryBytes: number;
  processes: number;
  /** CPU rate cap in cores (cpu.max / cfs quota). */
  cpus: number;
}

export interface RunCgroup {
  version: 1 | 2;
  /** Which limits the group enforces. */
  memory: boolean;
  processes: boolean;
  cpu: boolean;
  /** `cgroup.procs` files a process writes its pid to, to join the group (all of them). */
  procsFiles: string[];
  /** SIGKILL to every process in the group. */
  kill(): void;
  /** What the kernel counted: an OOM kill, or a fork refused at the process limit. */
  events(): { oomKilled: boolean; processLimitHit: boolean };
  /** Removes the group; retries while its last processes are exiting. True when gone. */
  remove(): Promise<boolean>;
}

const ROOT = '/sys/fs/cgroup';
let counter = 0;

function read(path: string): string {
  try {
    return readFileSync(path, 'utf8');
  } catch {
    return '';
  }
}

function tryWrite(path: string, value: string): boolean {
  try {
    writeFileSync(path, value);
    return true;
  } catch {
    return false;
  }
}

/** Lines of /proc/self/cgroup as [controllers, path]. */
function ownCgroups(): [string, string][] {
  return read('/proc/self/cgroup')
    .split('\n')
    .filter(Boolean)
    .map((line) => {
      const [, controllers = '', path = '/'] = line.split(':');
      return [controllers, path] as [string, string];
    });
}

function counterValue(text: string, key: string): number {
  const m = new RegExp(`^${key} (\\d+)$`, 'm').exec(text);
  return m ? Number(m[1]) : 0;
}

function killPids(procsFile: string): void {
  for (const pid of read(procsFile).split('\n').filter(Boolean)) {
    try {
      process.kill(Number(pid), 'SIGKILL');
    } catch {
      // already gone
    }
  }
}

async function removeDirs(dirs: string[]): Promise<boolean> {
  for (let attempt = 0; attempt < 50; attempt++) {
    for (const dir of dirs) {
      if (!existsSync(dir)) continue;
      try {
        rmdirSync(dir);
      } catch {
        // EBUSY while the last processes are being reaped
      }
    }
    if (dirs.every((d) => !existsSync(d))) return true;
    await new Promise((r) => setTimeout(r, 20 + attempt * 10));
  }
  return false;
}

function uniqueName(): string {
  return `flowgrpo-run-${process.pid}-${++counter}-${Math.random().toString(36).slice(2, 8)}`;
}

function createV2(limits: RunCgroupLimits): RunCgroup | null {
  if (!existsSync(join(ROOT, 'cgroup.controllers'))) return null;
  const own = ownCgroups().find(([controllers]) => controllers === '')?.[1] ?? '/';
  const parent = join(ROOT, own);
  const enabled = () => read(join(parent, 'cgroup.subtree_control')).split(/\s+/);
  for (const c of ['memory', 'pids', 'cpu']) {
    if (!enabled().includes(c)) tryWrite(join(parent, 'cgroup.subtree_control'), `+${c}`);
  }
  const on = enabled();
  if (!on.includes('memory') && !on.includes('pids')) return null;
  const dir = join(parent, uniqueName());
  try {
    mkdirSync(dir);
  } catch {
    return null;
  }
  const memory =
    on.includes('memory') && tryWrite(join(dir, 'memory.max'), String(limits.memoryBytes));
  if (memory) tryWrite(join(dir, 'memory.swap.max'), '0');
  const processes =
    on.includes('pids') && tryWrite(join(dir, 'pids.max'), String(limits.processes));
  const period = 100_000;
  const cpu =
    on.includes('cpu') &&
    tryWrite(join(dir, 'cpu.max'), `${Math.round(limits.cpus * period)} ${period}`);
  return {
    version: 2,
    memory,
    processes,
    cpu,
    procsFiles: [join(dir, 'cgroup.procs')],
    kill() {
      if (!tryWrite(join(dir, 'cgroup.kill'), '1')) killPids(join(dir, 'cgroup.procs'));
    },
    events() {
      return {
        oomKilled: counterValue(read(join(dir, 'memory.events')), 'oom_kill') > 0,
        processLimitHit: counterValue(read(join(dir, 'pids.events')), 'max') > 0,
      };
    },
    remove: () => removeDirs([dir]),
  };
}

function createV1(limits: RunCgroupLimits): RunCgroup | null {
  const own = ownCgroups();
  const hierarchy = (controller: string): string | undefined => {
    const entry = own.find(([controllers]) => controllers.split(',').includes(controller));
    if (!entry) return undefined;
    const mount = join(ROOT, entry[0]);
    const alt = join(ROOT, controller);
    const base = existsSync(join(mount, 'cgroup.procs'))
      ? mount
      : existsSync(join(alt, 'cgroup.procs'))
        ? alt
        : undefined;
    if (!base) return undefined;
    const dir = join(base, entry[1], uniqueName());
    try {
      mkdirSync(dir);
      return dir;
    } catch {
      return undefined;
    }
  };
  const dirs: string[] = [];
  const memDir = hierarchy('memory');
  const pidsDir = hierarchy('pids');
  const cpuDir = hierarchy('cpu');
  let memory = false;
  let processes = false;
  let cpu = false;
  if (memDir) {
    dirs.push(memDir);
    memory = tryWrite(join(memDir, 'memory.limit_in_bytes'), String(limits.memoryBytes));
    // With swap accounting the limit covers swap too; without it the file is absent.
    tryWrite(join(memDir, 'memory.memsw.limit_in_bytes'), String(limits.memoryBytes));
  }
  if (pidsDir) {
    dirs.push(pidsDir);
    processes = tryWrite(join(pidsDir, 'pids.max'), String(limits.processes));
  }
  if (cpuDir) {
    dirs.push(cpuDir);
    const period = 100_000;
    cpu =
      tryWrite(join(cpuDir, 'cpu.cfs_period_us'), String(period)) &&
      tryWrite(join(cpuDir, 'cpu.cfs_quota_us'), String(Math.round(limits.cpus * period)));
  }
  if (!memory && !processes) {
    void removeDirs(dirs);
    return null;
  }
  return {
    version: 1,
    memory,
    processes,
    cpu,
    procsFiles: dirs.map((d) => join(d, 'cgroup.procs')),
    kill() {
      for (const d of dirs) killPids(join(d, 'cgroup.procs'));
    },
    events() {
      const oom = memDir ? read(join(memDir, 'memory.oom_control')) : '';
      return {
        oomKilled: counterValue(oom, 'oom_kill') > 0,
        processLimitHit: pidsDir
          ? counterValue(read(join(pidsDir, 'pids.events')), 'max') > 0
          : false,
      };
    },
    remove: () => removeDirs(dirs),
  };
}

let unavailable = false;

/**
 * A fresh control group for one run with the given limits, or null where this process cannot
 * create one (not root, no delegated cgroup v2 subtree, no writable v1 controllers).
 */
export function createRunCgroup(limits: RunCgroupLimits): RunCgroup | null {
  if (unavailable || process.platform !== 'linux') return null;
  const group = createV2(limits) ?? createV1(limits);
  if (!group) unavailable = true;
  return group;
}
