import { spawn, spawnSync } from 'node:child_process';
import { accessSync, constants } from 'node:fs';
import { delimiter, join } from 'node:path';
import { ToolAbortedError, ToolError } from './errors.js';
import { elapsedMs } from './tool.js';

export interface PythonLimits {
  /** Address-space limit (RLIMIT_AS) in bytes; default 1 GiB. */
  memoryBytes?: number;
  /** CPU-time limit (RLIMIT_CPU) in seconds; default: the wall timeout rounded up. */
  cpuSeconds?: number;
  /** Largest file the code may write (RLIMIT_FSIZE) in bytes; default 16 MiB. */
  fileSizeBytes?: number;
  /** Open file descriptors (RLIMIT_NOFILE); default 64. */
  openFiles?: number;
  /**
   * Processes of the sandbox's user (RLIMIT_NPROC), counted over all of that user's processes on
   * the machine, not just the sandbox's; default 512. Linux does not apply it to root
   * (CAP_SYS_RESOURCE), so it stops fork bombs only when the host process is not root.
   */
  processes?: number;
}

export interface RunPythonOptions {
  /** Working directory and HOME of the interpreter (a `Workspace`'s `dir`). */
  cwd: string;
  /** Wall-clock limit; the whole process group gets SIGKILL when it passes. Default 10 s. */
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
   * `deny` runs the interpreter in a fresh network namespace (`unshare --net`: no interfaces but
   * a downed loopback) and fails if that is impossible; `allow` shares the host's network; `auto`
   * (default) denies when `unshare --net` works on this machine and allows otherwise — check
   * `networkIsolated` in the result.
   */
  network?: 'auto' | 'deny' | 'allow';
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
 */
export function resolvePython(name = 'python3'): string {
  let path = interpreters.get(name);
  if (path === undefined) {
    const found = resolveExecutable(name);
    const probe = spawnSync(found, ['-c', 'import sys; print(sys.executable)'], {
      encoding: 'utf8',
      timeout: 10_000,
    });
    const exe = probe.status === 0 ? probe.stdout.trim() : '';
    path = exe.startsWith('/') ? exe : found;
    interpreters.set(name, path);
  }
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
 * sys.path) in its own process group under rlimits, and kills the whole group with SIGKILL on
 * timeout or abort. Never rejects for the code's own failures; rejects only if python3 cannot start.
 */
export function runPython(code: string, options: RunPythonOptions): Promise<PythonRunResult> {
  const timeoutMs = options.timeoutMs ?? 10_000;
  const maxOutput = options.maxOutputBytes ?? 16 * 1024;
  const killAfter = options.killAfterOutputBytes ?? 16 * 1024 * 1024;
  const l = options.limits ?? {};
  const cpu = l.cpuSeconds ?? Math.max(1, Math.ceil(timeoutMs / 1000));
  const rlimits = {
    RLIMIT_AS: l.memoryBytes ?? 1024 ** 3,
    RLIMIT_CPU: [cpu, cpu + 1],
    RLIMIT_FSIZE: l.fileSizeBytes ?? 16 * 1024 * 1024,
    RLIMIT_NOFILE: l.openFiles ?? 64,
    RLIMIT_NPROC: l.processes ?? 512,
    RLIMIT_CORE: 0,
  };
  const start = performance.now();

  return new Promise<PythonRunResult>((resolvePromise, rejectPromise) => {
    if (options.signal?.aborted) {
      rejectPromise(new ToolAbortedError(undefined, { cause: options.signal.reason }));
      return;
    }
    const mode = options.network ?? 'auto';
    const isolation = mode === 'allow' ? null : networkIsolationArgs();
    if (mode === 'deny' && !isolation) {
      rejectPromise(
        new ToolError(
          'Network isolation was required but `unshare --net` is not available on this machine',
        ),
      );
      return;
    }
    const pythonArgs = ['-I', '-c', PREAMBLE, JSON.stringify(rlimits)];
    const python = resolvePython(options.python ?? 'python3');
    // unshare execs python in place (no fork), so the pid and process group stay the child's.
    const child = spawn(
      isolation ? resolveExecutable('unshare') : python,
      isolation ? [...isolation, '--', python, ...pythonArgs] : pythonArgs,
      {
        cwd: options.cwd,
        env: sandboxEnv(options.cwd, options.env),
        detached: true,
        stdio: ['pipe', 'pipe', 'pipe'],
        windowsHide: true,
      },
    );
    const stdout = new CappedBuffer(maxOutput);
    const stderr = new CappedBuffer(maxOutput);
    let timedOut = false;
    let outputLimitExceeded = false;
    let settled = false;

    const killGroup = () => {
      if (child.pid === undefined) return;
      try {
        process.kill(-child.pid, 'SIGKILL');
      } catch {
        // ESRCH: the group is already gone.
      }
    };
    const timer = setTimeout(() => {
      timedOut = true;
      killGroup();
    }, timeoutMs);
    const onAbort = () => killGroup();
    options.signal?.addEventListener('abort', onAbort, { once: true });

    const onData = (buffer: CappedBuffer) => (chunk: Buffer) => {
      buffer.push(chunk);
      if (!outputLimitExceeded && stdout.total + stderr.total > killAfter) {
        outputLimitExceeded = true;
        killGroup();
      }
    };
    child.stdout.on('data', onData(stdout));
    child.stderr.on('data', onData(stderr));
    child.stdin.on('error', () => {});
    child.stdin.end(code);

    const finish = (exitCode: number | null, signal: NodeJS.Signals | null) => {
      if (settled) return;
      settled = true;
      clearTimeout(timer);
      options.signal?.removeEventListener('abort', onAbort);
      if (options.signal?.aborted && !timedOut) {
        rejectPromise(new ToolAbortedError(undefined, { cause: options.signal.reason }));
        return;
      }
      resolvePromise({
        stdout: stdout.text(),
        stderr: stderr.text(),
        exitCode,
        signal,
        timedOut,
        outputLimitExceeded,
        stdoutTruncated: stdout.truncated,
        stderrTruncated: stderr.truncated,
        networkIsolated: isolation !== null,
        durationMs: elapsedMs(start),
      });
    };
    child.on('error', (error) => {
      if (settled) return;
      settled = true;
      clearTimeout(timer);
      options.signal?.removeEventListener('abort', onAbort);
      rejectPromise(error);
    });
    // 'exit' fires when python itself ends; background children it left may still hold the pipes
    // open, so the group is killed then and 'close' (pipes drained) settles the result.
    let exitInfo: [number | null, NodeJS.Signals | null] = [null, null];
    child.on('exit', (exitCode, signal) => {
      exitInfo = [exitCode, signal];
      killGroup();
    });
    child.on('close', (exitCode, signal) => {
      finish(exitInfo[0] ?? exitCode, exitInfo[1] ?? signal);
    });
  });
}
