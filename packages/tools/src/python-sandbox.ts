import { spawn, spawnSync } from 'node:child_process';
import { accessSync, constants } from 'node:fs';
import { delimiter, join } from 'node:path';
import {
  bwrapArgs,
  DEFAULT_START_TIMEOUT_MS,
  INSTALL_PYTHON_FIX,
  SANDBOX_WORKSPACE,
  sandboxSupport,
  USERNS_FIX,
  wrapperConfig,
} from './bubblewrap.js';
import {
  PythonUnavailableError,
  SandboxUnavailableError,
  ToolAbortedError,
  ToolError,
} from './errors.js';
import { createRunCgroup } from './run-cgroup.js';
import {
  encodeLauncherInput,
  HOST_WRAPPER,
  LAUNCHER,
  parseLauncherOutput,
} from './sandbox-launcher.js';
import { elapsedMs } from './tool.js';
import {
  addReason,
  type CarriedWorkspace,
  emptySyncReport,
  readWorkspaceFiles,
  type WorkspaceSyncReport,
  writeWorkspaceFiles,
} from './workspace-sync.js';

export interface PythonLimits {
  /**
   * Memory of the whole run in bytes (a control group's memory limit, tmpfs files included), and
   * the address space of each process (RLIMIT_AS); default 1 GiB.
   */
  memoryBytes?: number;
  /**
   * CPU time of each process (RLIMIT_CPU) in seconds; default: the wall timeout rounded up, plus
   * one second, so that a spin is ended by the wall-clock kill (a timeout) and never by a race
   * between that kill and SIGXCPU when both limits fall due at the same instant.
   */
  cpuSeconds?: number;
  /** CPU rate of the whole run in cores, where a control group enforces it; default 1. */
  cpus?: number;
  /** Largest file the code may write (RLIMIT_FSIZE) in bytes; default 16 MiB. */
  fileSizeBytes?: number;
  /** Open file descriptors per process (RLIMIT_NOFILE); default 64. */
  openFiles?: number;
  /**
   * Processes (and threads) of the whole run; default 64. Enforced by a control group's
   * `pids.max`, else by RLIMIT_NPROC counted in the run's own user namespace (per run, since
   * each run has its own); see `limits` in the result for which held.
   */
  processes?: number;
  /**
   * Size of the sandbox's tmpfs workspace, the only place it can write; default 64 MiB. Also the
   * byte budget of copying the workspace in and back (names and contents).
   */
  workspaceBytes?: number;
  /**
   * Files and directories copied into the workspace and back, at most (default 4096): with the
   * bytes and the call's timeout, what bounds the copy of a run that made many small files.
   */
  workspaceFiles?: number;
}

/**
 * `sandbox` (default): bubblewrap namespaces, unprivileged, read-only system, tmpfs workspace;
 * fails with SandboxUnavailableError where that cannot be had. `none`: a plain subprocess with
 * rlimits and a scrubbed environment — an explicit opt-in, reported in the result.
 */
export type PythonIsolation = 'sandbox' | 'none';

/** How a limit was enforced in a run (or `none`: it was not). */
export type LimitEnforcement =
  | 'cgroup'
  | 'rlimit-per-run'
  | 'rlimit-per-process'
  | 'rlimit-per-user'
  | 'tmpfs'
  | 'kill'
  | 'none';

export interface EnforcedLimits {
  /** Memory of the run: one cgroup for all its processes, or RLIMIT_AS of each process. */
  memory: LimitEnforcement;
  /** Process count of the run. */
  processes: LimitEnforcement;
  /** CPU seconds: RLIMIT_CPU per process (the wall-clock kill bounds the run's total). */
  cpuTime: LimitEnforcement;
  /** CPU cores the run may use at once. */
  cpuRate: LimitEnforcement;
  /** The wall-clock timeout: the run is killed when it passes. */
  wallClock: LimitEnforcement;
  /** The output cap: the run is killed past `killAfterOutputBytes`. */
  output: LimitEnforcement;
  /** Disk the run can fill: the tmpfs size, or only RLIMIT_FSIZE per file without isolation. */
  disk: LimitEnforcement;
}

export interface RunPythonOptions {
  /**
   * The host directory that holds the run's files. In the sandbox its regular files are copied
   * into the tmpfs workspace before the run, and the workspace is copied back after a run that
   * ended on its own (not one killed by a timeout, abort or output flood); without it the files
   * live only in the tmpfs and vanish with the run. With `isolation: 'none'` it is the working
   * directory and HOME, and required.
   */
  cwd?: string;
  /** Wall-clock limit; everything the run started is killed when it passes. Default 10 s. */
  timeoutMs?: number;
  /** Bytes of stdout and of stderr kept each; beyond it the middle is cut. Default 16 KiB. */
  maxOutputBytes?: number;
  /** Kill the run once it has written this many bytes in total. Default 16 MiB. */
  killAfterOutputBytes?: number;
  limits?: PythonLimits;
  /** Interpreter; default `python3`. */
  python?: string;
  /** Extra environment variables (the rest of the parent's environment never reaches the child). */
  env?: Record<string, string>;
  signal?: AbortSignal;
  /**
   * `deny`/`auto` (default): no network (the sandbox's own empty network namespace; without
   * isolation `unshare --net` where it works, see `networkIsolated`); `allow` shares the host's.
   */
  network?: 'auto' | 'deny' | 'allow';
  /** Default `sandbox`; see PythonIsolation. */
  isolation?: PythonIsolation;
  /** The bubblewrap binary; default `bwrap` on PATH or in /usr/bin. */
  bwrap?: string;
  /**
   * How long the interpreter, and the sandbox around it, each get to answer the one-off check
   * of their first start (default 15 s); past it the call fails with PythonStartTimeoutError and
   * the next one checks again. Raise it on a machine that is often busy.
   */
  startTimeoutMs?: number;
}

export interface PythonRunResult {
  stdout: string;
  stderr: string;
  /** Exit status; null when the process was ended by a signal. */
  exitCode: number | null;
  /** The signal that ended the process, if any (SIGKILL after a timeout, SIGXCPU past the CPU limit). */
  signal: NodeJS.Signals | null;
  timedOut: boolean;
  /** Killed because it wrote more than `killAfterOutputBytes`. */
  outputLimitExceeded: boolean;
  stdoutTruncated: boolean;
  stderrTruncated: boolean;
  /** True when the code ran without network access (its own empty network namespace). */
  networkIsolated: boolean;
  /** The isolation the code ran under. */
  isolation: PythonIsolation;
  /** Which limits held, and how. */
  limits: EnforcedLimits;
  /** The kernel killed a process of the run at the run's memory limit (cgroup only). */
  oomKilled: boolean;
  /** A fork was refused at the run's process limit (cgroup only). */
  processLimitHit: boolean;
  /**
   * The workspace was copied back to `cwd` (sandbox with `cwd`, run ended on its own), perhaps
   * only in part: see `workspaceSync`.
   */
  workspaceSynced: boolean;
  /**
   * What the copy back to `cwd` copied and left out, and why (over `workspaceFiles`, over
   * `workspaceBytes`, past the call's timeout, or where `cwd` kept an entry the run was never
   * given: `kept`); present when it ran.
   */
  workspaceSync?: WorkspaceSyncReport;
  durationMs: number;
}

/** `name` looked up on the parent's PATH (the sandbox's own PATH is minimal). */
function resolveExecutable(name: string): string {
  if (name.includes('/')) return name;
  for (const dir of (process.env.PATH ?? '').split(delimiter)) {
    if (!dir) continue;
    const full = join(dir, name);
    try {
      accessSync(full, constants.X_OK);
      return full;
    } catch {
      // not here
    }
  }
  return name;
}

const interpreters = new Map<string, string>();

/**
 * The real interpreter binary behind `name`. Version managers (pyenv, asdf) put shell shims on
 * PATH that add their own environment and processes; `sys.executable` names the binary itself.
 * Throws PythonUnavailableError when there is no such interpreter or it is not executable. When
 * the probe does not answer in time the name found on PATH is used, and probed again next time
 * (a busy machine is no reason to keep a shim for good).
 */
export function resolvePython(name = 'python3', timeoutMs = DEFAULT_START_TIMEOUT_MS): string {
  const cached = interpreters.get(name);
  if (cached !== undefined) return cached;
  const found = resolveExecutable(name);
  const probe = spawnSync(found, ['-c', 'import sys; print(sys.executable)'], {
    encoding: 'utf8',
    timeout: timeoutMs,
  });
  const code = (probe.error as NodeJS.ErrnoException | undefined)?.code;
  if (code === 'ENOENT' || code === 'EACCES')
    throw new PythonUnavailableError(
      name,
      code === 'ENOENT' ? 'was not found' : `(${found}) is not executable`,
      code === 'ENOENT'
        ? INSTALL_PYTHON_FIX
        : `make it executable (chmod +x ${found}), or ${INSTALL_PYTHON_FIX}`,
      { cause: probe.error },
    );
  const exe = probe.status === 0 ? probe.stdout.trim() : '';
  const path = exe.startsWith('/') ? exe : found;
  if (code !== 'ETIMEDOUT') interpreters.set(name, path);
  return path;
}

let unshareArgs: string[] | null | undefined;

/**
 * The `unshare` arguments that give a process an empty network namespace here, or null when this
 * machine does not allow it (no util-linux, or namespaces forbidden). Probed once.
 */
export function networkIsolationArgs(): string[] | null {
  if (unshareArgs !== undefined) return unshareArgs;
  unshareArgs = null;
  // Root can create a network namespace directly; other users need a user namespace for it.
  const candidates =
    process.getuid?.() === 0
      ? [['--net'], ['--net', '--map-root-user']]
      : [['--net', '--map-root-user']];
  for (const args of candidates) {
    const probe = spawnSync(resolveExecutable('unshare'), [...args, '--', 'true'], {
      stdio: 'ignore',
      timeout: 5000,
    });
    if (probe.status === 0) {
      unshareArgs = args;
      break;
    }
  }
  return unshareArgs;
}

const SAFE_PATH = '/usr/local/bin:/usr/bin:/bin';

// Runs before the user's code: applies rlimits, reads the code from stdin, runs it as __main__ and
// prints tracebacks that start at the user's code (the preamble's own frame is dropped).
const PREAMBLE = `
import json, linecache, os, resource, sys, traceback
def _limit(name, value):
    res = getattr(resource, name, None)
    if res is None or value is None:
        return
    soft, hard = resource.getrlimit(res)
    want_soft, want_hard = value if isinstance(value, list) else (value, value)
    if hard != resource.RLIM_INFINITY:
        want_soft, want_hard = min(want_soft, hard), min(want_hard, hard)
    try:
        resource.setrlimit(res, (want_soft, want_hard))
    except (ValueError, OSError):
        pass
_cfg = json.loads(sys.argv[1])
for _name, _value in _cfg.items():
    _limit(_name, _value)
_src = sys.stdin.read()
sys.stdin.close()
sys.stdin = open(os.devnull)
sys.argv = ['main.py']
linecache.cache['main.py'] = (len(_src), None, _src.splitlines(True), 'main.py')
try:
    _code = compile(_src, 'main.py', 'exec')
except (SyntaxError, ValueError) as _e:
    traceback.print_exception(type(_e), _e, None)
    sys.exit(1)
_globals = {'__name__': '__main__', '__file__': 'main.py', '__builtins__': __builtins__}
del _limit, _cfg, _name, _value, _src
try:
    exec(_code, _globals)
except SystemExit:
    raise
except BaseException as _e:
    traceback.print_exception(type(_e), _e, _e.__traceback__.tb_next)
    sys.stderr.flush()
    sys.exit(1)
`;

/** Keeps the first and last bytes of a stream and counts what was dropped between them. */
class CappedBuffer {
  readonly #headCap: number;
  readonly #tailCap: number;
  #head: Buffer[] = [];
  #headLen = 0;
  #tail: Buffer[] = [];
  #tailLen = 0;
  total = 0;

  constructor(cap: number) {
    this.#headCap = Math.ceil(cap * 0.75);
    this.#tailCap = cap - this.#headCap;
  }

  push(chunk: Buffer): void {
    this.total += chunk.length;
    if (this.#headLen < this.#headCap) {
      const take = Math.min(this.#headCap - this.#headLen, chunk.length);
      this.#head.push(chunk.subarray(0, take));
      this.#headLen += take;
      chunk = chunk.subarray(take);
    }
    if (chunk.length === 0 || this.#tailCap === 0) return;
    this.#tail.push(chunk);
    this.#tailLen += chunk.length;
    while (this.#tailLen - (this.#tail[0]?.length ?? 0) >= this.#tailCap) {
      this.#tailLen -= this.#tail.shift()!.length;
    }
  }

  get truncated(): boolean {
    return this.total > this.#headLen + Math.min(this.#tailLen, this.#tailCap);
  }

  text(): string {
    const head = Buffer.concat(this.#head).toString('utf8');
    let tail = Buffer.concat(this.#tail);
    if (tail.length > this.#tailCap) tail = tail.subarray(tail.length - this.#tailCap);
    const dropped = this.total - this.#headLen - tail.length;
    if (dropped <= 0) return head + tail.toString('utf8');
    return `${head}\n[... ${dropped} bytes truncated ...]\n${tail.toString('utf8')}`;
  }
}

/** The environment the interpreter gets: nothing from the parent but what is listed here. */
export function sandboxEnv(
  cwd: string,
  extra: Record<string, string> = {},
): Record<string, string> {
  return {
    PATH: SAFE_PATH,
    LANG: 'C.UTF-8',
    LC_ALL: 'C.UTF-8',
    HOME: cwd,
    TMPDIR: cwd,
    ...extra,
  };
}

/**
 * Runs `code` with `python3 -I` (isolated: no user site, no PYTHON* variables, script dir not on
 * sys.path) under the isolation asked for (see PythonIsolation), with per-run limits, and kills
 * everything the run started on timeout, abort or output flood. Never rejects for the code's own
 * failures; rejects when python cannot start, the sandbox is unavailable
 * (SandboxUnavailableError) or the caller aborts (ToolAbortedError).
 */
export async function runPython(code: string, options: RunPythonOptions): Promise<PythonRunResult> {
  if (options.signal?.aborted) {
    throw new ToolAbortedError(undefined, { cause: options.signal.reason });
  }
  if ((options.isolation ?? 'sandbox') === 'none') return runUnisolated(code, options);
  return runSandboxed(code, options);
}

interface ResolvedLimits {
  timeoutMs: number;
  maxOutput: number;
  killAfter: number;
  memoryBytes: number;
  processes: number;
  cpus: number;
  workspaceBytes: number;
  workspaceFiles: number;
  rlimits: Record<string, number | number[]>;
}

function resolveLimits(options: RunPythonOptions): ResolvedLimits {
  const timeoutMs = options.timeoutMs ?? 10_000;
  const l = options.limits ?? {};
  // One second above the wall timeout: with equal limits a busy-looping process reaches its CPU
  // limit as the wall timer fires, and which one ends it was a coin toss (a CI run saw SIGXCPU).
  const cpu = l.cpuSeconds ?? Math.ceil(timeoutMs / 1000) + 1;
  const memoryBytes = l.memoryBytes ?? 1024 ** 3;
  const processes = l.processes ?? 64;
  return {
    timeoutMs,
    maxOutput: options.maxOutputBytes ?? 16 * 1024,
    killAfter: options.killAfterOutputBytes ?? 16 * 1024 * 1024,
    memoryBytes,
    processes,
    cpus: l.cpus ?? 1,
    workspaceBytes: l.workspaceBytes ?? 64 * 1024 * 1024,
    workspaceFiles: l.workspaceFiles ?? 4096,
    rlimits: {
      RLIMIT_AS: memoryBytes,
      RLIMIT_CPU: [cpu, cpu + 1],
      RLIMIT_FSIZE: l.fileSizeBytes ?? 16 * 1024 * 1024,
      RLIMIT_NOFILE: l.openFiles ?? 64,
      // The sandbox's launcher (its PID 1) counts in the same user namespace: one more.
      RLIMIT_NPROC: processes + 1,
      RLIMIT_CORE: 0,
    },
  };
}

/** What one child process run produced, before it is turned into a PythonRunResult. */
interface ChildOutcome {
  stdout: CappedBuffer;
  stderr: CappedBuffer;
  fd3: Buffer;
  fd3Overflow: boolean;
  exitCode: number | null;
  signal: NodeJS.Signals | null;
  timedOut: boolean;
  outputLimitExceeded: boolean;
  aborted: boolean;
}

/**
 * Spawns `command`, feeds it `input`, caps and counts its output, and kills it (and, through
 * `killExtra`, everything it started) on timeout, abort or output flood. Settles when the process
 * has exited and its pipes closed — or shortly after the kill even if something still holds a
 * pipe open: the run returns at the hard timeout, not when the last pipe closes.
 */
function superviseChild(
  command: string,
  args: string[],
  spawnOptions: { cwd: string; env: Record<string, string>; fd3: boolean },
  input: Buffer | string,
  limits: ResolvedLimits,
  signal: AbortSignal | undefined,
  killExtra: () => void,
  fd3Cap: number,
): Promise<ChildOutcome> {
  return new Promise<ChildOutcome>((resolvePromise, rejectPromise) => {
    const child = spawn(command, args, {
      cwd: spawnOptions.cwd,
      env: spawnOptions.env,
      detached: true,
      stdio: spawnOptions.fd3 ? ['pipe', 'pipe', 'pipe', 'pipe'] : ['pipe', 'pipe', 'pipe'],
      windowsHide: true,
    });
    const out: ChildOutcome = {
      stdout: new CappedBuffer(limits.maxOutput),
      stderr: new CappedBuffer(limits.maxOutput),
      fd3: Buffer.alloc(0),
      fd3Overflow: false,
      exitCode: null,
      signal: null,
      timedOut: false,
      outputLimitExceeded: false,
      aborted: false,
    };
    const fd3Chunks: Buffer[] = [];
    let fd3Size = 0;
    let settled = false;
    let exited = false;
    let graceTimer: NodeJS.Timeout | undefined;

    const kill = () => {
      killExtra();
      if (child.pid === undefined) return;
      try {
        process.kill(-child.pid, 'SIGKILL');
      } catch {
        // ESRCH: the group is already gone.
      }
    };
    const finish = () => {
      if (settled) return;
      settled = true;
      clearTimeout(timer);
      clearTimeout(graceTimer);
      signal?.removeEventListener('abort', onAbort);
      for (const stream of child.stdio) stream?.destroy();
      out.fd3 = Buffer.concat(fd3Chunks);
      resolvePromise(out);
    };
    // After a kill, or once the process has exited, wait this long for the pipes, then stop
    // waiting: a process outside our reach holding a pipe must not hold the run.
    const settleSoon = (ms: number) => {
      clearTimeout(graceTimer);
      graceTimer = setTimeout(finish, ms);
    };
    const timer = setTimeout(() => {
      out.timedOut = true;
      kill();
      settleSoon(exited ? 250 : 2000);
    }, limits.timeoutMs);
    const onAbort = () => {
      out.aborted = true;
      kill();
      settleSoon(2000);
    };
    signal?.addEventListener('abort', onAbort, { once: true });
    // An abort that came while the run was being set up (reading the workspace, the cgroup) fired
    // before this listener existed: honour it now, or the run would go on to its timeout.
    if (signal?.aborted) onAbort();

    const onData = (buffer: CappedBuffer) => (chunk: Buffer) => {
      buffer.push(chunk);
      if (!out.outputLimitExceeded && out.stdout.total + out.stderr.total > limits.killAfter) {
        out.outputLimitExceeded = true;
        kill();
        settleSoon(2000);
      }
    };
    child.stdout!.on('data', onData(out.stdout));
    child.stderr!.on('data', onData(out.stderr));
    child.stdio[3]?.on('data', (chunk: Buffer) => {
      if (fd3Size + chunk.length > fd3Cap) {
        out.fd3Overflow = true;
        return;
      }
      fd3Chunks.push(chunk);
      fd3Size += chunk.length;
    });
    for (const stream of child.stdio) stream?.on('error', () => {});
    child.stdin!.end(input);

    child.on('error', (error) => {
      if (settled) return;
      settled = true;
      clearTimeout(timer);
      clearTimeout(graceTimer);
      signal?.removeEventListener('abort', onAbort);
      rejectPromise(error);
    });
    child.on('exit', (exitCode, exitSignal) => {
      exited = true;
      out.exitCode = exitCode;
      out.signal = exitSignal;
      // Anything the process left behind goes with it.
      kill();
      settleSoon(250);
    });
    child.on('close', () => {
      if (exited) finish();
    });
  });
}

const SAFE_ENV_PATH = '/usr/local/bin:/usr/bin:/bin';

async function runSandboxed(code: string, options: RunPythonOptions): Promise<PythonRunResult> {
  const limits = resolveLimits(options);
  // The first call checks the sandbox (under its own start timeout); the run's time starts after.
  const support = sandboxSupport(
    options.python ?? 'python3',
    options.python !== undefined,
    options.bwrap,
    options.startTimeoutMs,
  );
  const start = performance.now();
  const shareNetwork = options.network === 'allow';
  const group = createRunCgroup({
    memoryBytes: limits.memoryBytes,
    processes: limits.processes,
    cpus: limits.cpus,
  });
  // One deadline for the whole call: copying the workspace in, the run, and copying it back.
  const deadline = start + limits.timeoutMs;
  const syncBudget = {
    maxEntries: limits.workspaceFiles,
    maxBytes: limits.workspaceBytes,
    deadline,
    signal: options.signal,
  };
  let outcome: ChildOutcome;
  let carried: CarriedWorkspace = { files: [], dirs: [], report: emptySyncReport() };
  try {
    if (options.cwd) carried = await readWorkspaceFiles(options.cwd, syncBudget);
    const launcherConfig = JSON.stringify({
      python: support.python.executable,
      preamble: PREAMBLE,
      rlimits: limits.rlimits,
      workspace: SANDBOX_WORKSPACE,
      sync: options.cwd !== undefined,
      syncEntries: limits.workspaceFiles,
      syncBytes: limits.workspaceBytes,
      // The sandbox shares the host's wall clock (no time namespace): the same deadline, there.
      syncDeadline: (Date.now() + (deadline - performance.now())) / 1000,
    });
    const args = [
      ...bwrapArgs({
        python: support.python,
        shareNetwork,
        workspaceBytes: limits.workspaceBytes,
        env: options.env ?? {},
      }),
      '--',
      support.python.executable,
      '-I',
      '-S',
      '-c',
      LAUNCHER,
      launcherConfig,
    ];
    outcome = await superviseChild(
      support.hostPython,
      ['-I', '-S', '-c', HOST_WRAPPER, wrapperConfig(support, args, group?.procsFiles ?? [])],
      { cwd: '/', env: { PATH: SAFE_ENV_PATH }, fd3: true },
      encodeLauncherInput(code, carried.files, carried.dirs),
      { ...limits, timeoutMs: Math.max(1, deadline - performance.now()) },
      options.signal,
      () => group?.kill(),
      // The copy-back's byte budget counts its records' names as well as the contents.
      limits.workspaceBytes + 64 * 1024,
    );
  } catch (error) {
    group?.kill();
    await group?.remove();
    throw error;
  }
  const events = group?.events() ?? { oomKilled: false, processLimitHit: false };
  group?.kill();
  await group?.remove();
  if (outcome.aborted) {
    throw new ToolAbortedError(undefined, { cause: options.signal?.reason });
  }
  const report = parseLauncherOutput(outcome.fd3);
  if (!report.started && !outcome.timedOut && !outcome.outputLimitExceeded) {
    const stderr = outcome.stderr.text().trim();
    throw new SandboxUnavailableError(
      `the sandbox did not start (${stderr || `exit status ${outcome.exitCode}`})`,
      stderr.includes('flowgrpo-sandbox-setup') ? 'run as root for per-run cgroups' : USERNS_FIX,
    );
  }
  let exitCode: number | null = report.exit?.exitCode ?? null;
  let signal: NodeJS.Signals | null = report.exit?.signal ?? null;
  if (outcome.timedOut || outcome.outputLimitExceeded) {
    // Killed by us: whatever the launcher saw last, the run ended with our SIGKILL.
    exitCode = null;
    signal = 'SIGKILL';
  } else if (!report.exit) {
    // The launcher itself died (e.g. chosen by the OOM killer): everything went with it.
    exitCode = null;
    signal = outcome.signal ?? 'SIGKILL';
  }
  let workspaceSync: WorkspaceSyncReport | undefined;
  if (
    options.cwd !== undefined &&
    report.exit &&
    !report.incomplete &&
    !outcome.fd3Overflow &&
    !outcome.timedOut &&
    !outcome.outputLimitExceeded
  ) {
    const back = await writeWorkspaceFiles(
      options.cwd,
      {
        files: report.files,
        dirs: report.dirs,
        complete: report.skipped === 0 && report.skippedWhy.length === 0,
      },
      carried,
      syncBudget,
    );
    if (options.signal?.aborted) {
      throw new ToolAbortedError(undefined, { cause: options.signal.reason });
    }
    const reasons = [...report.skippedWhy];
    if (back.timedOut) addReason(reasons, 'time');
    if (back.tooLong > 0) addReason(reasons, 'paths');
    if (back.kept.length > 0) addReason(reasons, 'kept');
    workspaceSync = {
      copiedFiles: back.written,
      copiedBytes: back.writtenBytes,
      skippedFiles: report.skipped + back.notWritten,
      reasons,
      ...(back.kept.length > 0 && { kept: back.kept }),
    };
  }
  return {
    stdout: outcome.stdout.text(),
    stderr: outcome.stderr.text(),
    exitCode,
    signal,
    timedOut: outcome.timedOut,
    outputLimitExceeded: outcome.outputLimitExceeded,
    stdoutTruncated: outcome.stdout.truncated,
    stderrTruncated: outcome.stderr.truncated,
    networkIsolated: !shareNetwork,
    isolation: 'sandbox',
    limits: {
      memory: group?.memory ? 'cgroup' : 'rlimit-per-process',
      // RLIMIT_NPROC is counted per user namespace (one per run), but Linux exempts host root.
      processes: group?.processes
        ? 'cgroup'
        : support.hostUser === 'nobody' || process.getuid?.() !== 0
          ? 'rlimit-per-run'
          : 'none',
      cpuTime: 'rlimit-per-process',
      cpuRate: group?.cpu ? 'cgroup' : 'none',
      wallClock: 'kill',
      output: 'kill',
      disk: 'tmpfs',
    },
    oomKilled: events.oomKilled,
    processLimitHit: events.processLimitHit,
    workspaceSynced: workspaceSync !== undefined,
    ...(workspaceSync && { workspaceSync }),
    durationMs: elapsedMs(start),
  };
}

/** The explicit opt-out: a plain subprocess in its own process group under rlimits. */
async function runUnisolated(code: string, options: RunPythonOptions): Promise<PythonRunResult> {
  const start = performance.now();
  const limits = resolveLimits(options);
  if (options.cwd === undefined) {
    throw new ToolError("isolation: 'none' needs a working directory (cwd)");
  }
  const mode = options.network ?? 'auto';
  const isolation = mode === 'allow' ? null : networkIsolationArgs();
  if (mode === 'deny' && !isolation) {
    throw new ToolError(
      'Network isolation was required but `unshare --net` is not available on this machine',
    );
  }
  const rlimits = { ...limits.rlimits, RLIMIT_NPROC: limits.processes };
  // -u: what the code printed before a timeout's SIGKILL is in the pipe, not lost in a buffer.
  const pythonArgs = ['-I', '-u', '-c', PREAMBLE, JSON.stringify(rlimits)];
  const python = resolvePython(options.python ?? 'python3', options.startTimeoutMs);
  // unshare execs python in place (no fork), so the pid and process group stay the child's.
  const outcome = await superviseChild(
    isolation ? resolveExecutable('unshare') : python,
    isolation ? [...isolation, '--', python, ...pythonArgs] : pythonArgs,
    { cwd: options.cwd, env: sandboxEnv(options.cwd, options.env), fd3: false },
    code,
    limits,
    options.signal,
    () => {},
    0,
  );
  if (outcome.aborted) {
    throw new ToolAbortedError(undefined, { cause: options.signal?.reason });
  }
  const root = process.getuid?.() === 0;
  return {
    stdout: outcome.stdout.text(),
    stderr: outcome.stderr.text(),
    exitCode: outcome.exitCode,
    signal: outcome.signal,
    timedOut: outcome.timedOut,
    outputLimitExceeded: outcome.outputLimitExceeded,
    stdoutTruncated: outcome.stdout.truncated,
    stderrTruncated: outcome.stderr.truncated,
    networkIsolated: isolation !== null,
    isolation: 'none',
    limits: {
      memory: 'rlimit-per-process',
      // Counted over all of the user's processes on the machine; root is exempt.
      processes: root ? 'none' : 'rlimit-per-user',
      cpuTime: 'rlimit-per-process',
      cpuRate: 'none',
      wallClock: 'kill',
      output: 'kill',
      disk: 'rlimit-per-process',
    },
    oomKilled: false,
    processLimitHit: false,
    workspaceSynced: false,
    durationMs: elapsedMs(start),
  };
}
