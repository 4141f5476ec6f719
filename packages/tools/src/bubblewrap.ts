import { type SpawnSyncReturns, spawnSync } from 'node:child_process';
import { accessSync, constants, existsSync, lstatSync, readlinkSync } from 'node:fs';
import { delimiter, dirname, join } from 'node:path';
import { PythonStartTimeoutError, SandboxUnavailableError } from './errors.js';
import { HOST_WRAPPER } from './sandbox-launcher.js';

// How a run is isolated: bubblewrap (the sandbox tool Flatpak is built on) with every namespace
// new (user, PID, mount, network, IPC, UTS, cgroup), an unprivileged uid/gid inside and — when
// we are root — outside too, no capabilities, no further user namespaces, an empty environment,
// a read-only view of only what the interpreter needs, and size-capped tmpfs mounts as the only
// writable places. This file finds bwrap, checks once that it works here, and builds its
// arguments.

/** The unprivileged uid/gid the code runs as inside the sandbox (and on the host when root). */
export const SANDBOX_UID = 65534;
export const SANDBOX_GID = 65534;

/** Where the run's tmpfs workspace is mounted inside the sandbox (its cwd, HOME and TMPDIR). */
export const SANDBOX_WORKSPACE = '/workspace';

export const INSTALL_FIX =
  "install bubblewrap (Debian/Ubuntu: apt-get install bubblewrap; Fedora: dnf install bubblewrap; Alpine: apk add bubblewrap), or pass isolation: 'none' to run the code without isolation";

export const USERNS_FIX =
  "allow unprivileged user namespaces (sysctl user.max_user_namespaces=15000; Debian's older kernels: kernel.unprivileged_userns_clone=1; Ubuntu 24.04: an AppArmor profile for bwrap or kernel.apparmor_restrict_unprivileged_userns=0); in a container, run it with a seccomp profile that allows unshare/clone of namespaces (e.g. docker --security-opt seccomp=unconfined); or pass isolation: 'none' to run the code without isolation";

const SAFE_PATH = '/usr/local/bin:/usr/bin:/bin';

/**
 * How long the interpreter, and then the sandbox around it, each get to answer the one-off probe
 * of their first start, by default. A loaded machine can take seconds to start either: running
 * past this is a PythonStartTimeoutError, not a missing interpreter.
 */
export const DEFAULT_START_TIMEOUT_MS = 15_000;

export const INSTALL_PYTHON_FIX =
  'install python3 (Debian/Ubuntu: apt-get install python3), or pass the interpreter path as `python`';

/** `name` looked up on the parent's PATH plus the standard directories. */
export function findExecutable(name: string): string | undefined {
  if (name.includes('/')) return existsSync(name) ? name : undefined;
  const dirs = [...(process.env.PATH ?? '').split(delimiter), ...SAFE_PATH.split(':')];
  for (const dir of dirs) {
    if (!dir) continue;
    const full = join(dir, name);
    try {
      accessSync(full, constants.X_OK);
      return full;
    } catch {
      // not here
    }
  }
  return undefined;
}

interface PythonInstall {
  executable: string;
  /** Directories outside /usr the interpreter needs (a pyenv or venv prefix). */
  binds: string[];
}

const installs = new Map<string, PythonInstall | SandboxUnavailableError>();

/**
 * Why a probe of the interpreter `python` (at `found`) did not answer: not there or not
 * executable (install it), a timeout (a busy machine: PythonStartTimeoutError), or a start that
 * failed (its own words).
 */
function probeFailure(
  python: string,
  found: string,
  probe: SpawnSyncReturns<string>,
  timeoutMs: number,
): SandboxUnavailableError | PythonStartTimeoutError {
  const code = (probe.error as NodeJS.ErrnoException | undefined)?.code;
  if (code === 'ETIMEDOUT')
    return new PythonStartTimeoutError(`the interpreter '${python}'`, timeoutMs, {
      cause: probe.error,
    });
  // The file is there (findExecutable found it): ENOENT is its #! interpreter or its loader.
  if (code === 'ENOENT')
    return new SandboxUnavailableError(
      `the interpreter '${python}' (${found}) cannot be run: its #! interpreter or dynamic loader is missing`,
      INSTALL_PYTHON_FIX,
    );
  if (code === 'EACCES')
    return new SandboxUnavailableError(
      `the interpreter '${python}' (${found}) is not executable`,
      `make it executable (chmod +x ${found}), or ${INSTALL_PYTHON_FIX}`,
    );
  const said = probe.stderr?.trim().split('\n').at(-1);
  const how = probe.error
    ? probe.error.message
    : probe.signal
      ? `killed by ${probe.signal}`
      : probe.status !== 0
        ? `exit status ${probe.status}${said ? `: ${said}` : ''}`
        : `it printed ${JSON.stringify(probe.stdout.slice(0, 200))}, not its paths`;
  return new SandboxUnavailableError(
    `the interpreter '${python}' (${found}) failed to start (${how})`,
    `check that \`${found} -I -c "import sys"\` runs, or pass another interpreter as \`python\``,
  );
}

/**
 * Where `python` really lives: its binary and the prefixes it imports from. Throws
 * SandboxUnavailableError when it is missing or fails, and PythonStartTimeoutError when it does
 * not answer within `timeoutMs` (that one is not remembered: a later call probes again).
 */
export function pythonInstall(python: string, timeoutMs = DEFAULT_START_TIMEOUT_MS): PythonInstall {
  const cached = installs.get(python);
  if (cached instanceof SandboxUnavailableError) throw cached;
  if (cached) return cached;
  const found = findExecutable(python);
  if (!found) {
    const missing = new SandboxUnavailableError(
      `the interpreter '${python}' was not found${python.includes('/') ? '' : ' on PATH'}`,
      INSTALL_PYTHON_FIX,
    );
    installs.set(python, missing);
    throw missing;
  }
  const probe = spawnSync(
    found,
    [
      '-I',
      '-c',
      'import json, os, sys; print(json.dumps([sys.executable, sys.prefix, sys.base_prefix, os.path.realpath(sys.executable)]))',
    ],
    { encoding: 'utf8', timeout: timeoutMs, env: { PATH: SAFE_PATH } },
  );
  let paths: string[] | undefined;
  if (probe.status === 0 && !probe.error) {
    try {
      paths = JSON.parse(probe.stdout) as string[];
    } catch {
      // reported below as an interpreter that did not answer with its paths
    }
  }
  if (!paths) {
    const failure = probeFailure(python, found, probe, timeoutMs);
    if (failure instanceof SandboxUnavailableError) installs.set(python, failure);
    throw failure;
  }
  const [exe, prefix, basePrefix, real] = paths;
  const system = (p: string) =>
    p === '/usr' || /^\/(usr|bin|sbin|lib|lib32|lib64|libx32)(\/|$)/.test(p);
  const binds = [
    ...new Set([prefix!, basePrefix!, dirname(dirname(real!))].filter((p) => !system(p))),
  ].filter((p) => p !== '/' && existsSync(p));
  const install = { executable: exe!, binds };
  installs.set(python, install);
  return install;
}

export interface SandboxMountOptions {
  python: PythonInstall;
  /** Share the host's network (default: an empty network namespace with only a downed lo). */
  shareNetwork: boolean;
  workspaceBytes: number;
  env: Record<string, string>;
}

/** The bwrap arguments up to (not including) the command. */
export function bwrapArgs(o: SandboxMountOptions): string[] {
  const args = [
    '--unshare-all',
    '--unshare-user',
    '--disable-userns',
    ...(o.shareNetwork ? ['--share-net'] : []),
    '--die-with-parent',
    '--new-session',
    '--as-pid-1',
    '--cap-drop',
    'ALL',
    '--uid',
    String(SANDBOX_UID),
    '--gid',
    String(SANDBOX_GID),
    '--hostname',
    'sandbox',
    '--clearenv',
  ];
  const env: Record<string, string> = {
    PATH: SAFE_PATH,
    HOME: SANDBOX_WORKSPACE,
    TMPDIR: SANDBOX_WORKSPACE,
    LANG: 'C.UTF-8',
    LC_ALL: 'C.UTF-8',
    USER: 'sandbox',
    // Numeric libraries start a thread per core; each counts against the process limit.
    OMP_NUM_THREADS: '1',
    OPENBLAS_NUM_THREADS: '1',
    MKL_NUM_THREADS: '1',
    // glibc reserves 64 MiB of address space per thread arena, which under RLIMIT_AS caps a
    // program at a dozen threads; two arenas keep threads at their stack's cost.
    MALLOC_ARENA_MAX: '2',
    ...o.env,
  };
  for (const [key, value] of Object.entries(env)) args.push('--setenv', key, value);
  args.push('--ro-bind', '/usr', '/usr');
  for (const top of ['/bin', '/sbin', '/lib', '/lib32', '/lib64', '/libx32']) {
    let info: ReturnType<typeof lstatSync> | undefined;
    try {
      info = lstatSync(top);
    } catch {
      continue;
    }
    if (info.isSymbolicLink()) args.push('--symlink', readlinkSync(top), top);
    else if (info.isDirectory()) args.push('--ro-bind', top, top);
  }
  for (const etc of ['/etc/ld.so.cache', '/etc/alternatives', '/etc/localtime']) {
    args.push('--ro-bind-try', etc, etc);
  }
  if (o.shareNetwork) {
    for (const etc of [
      '/etc/resolv.conf',
      '/etc/hosts',
      '/etc/nsswitch.conf',
      '/etc/gai.conf',
      '/etc/ssl',
      '/etc/ca-certificates',
      '/etc/pki',
    ]) {
      args.push('--ro-bind-try', etc, etc);
    }
  }
  for (const dir of o.python.binds) args.push('--ro-bind', dir, dir);
  const shm = Math.min(o.workspaceBytes, 16 * 1024 * 1024);
  args.push(
    '--proc',
    '/proc',
    '--dev',
    '/dev',
    '--size',
    String(shm),
    '--tmpfs',
    '/dev/shm',
    '--size',
    String(o.workspaceBytes),
    '--tmpfs',
    SANDBOX_WORKSPACE,
    '--symlink',
    SANDBOX_WORKSPACE,
    '/tmp',
    '--chdir',
    SANDBOX_WORKSPACE,
    // Everything above was set up on a writable root; from here on only the tmpfs mounts
    // (/workspace, /dev/shm) can be written.
    '--remount-ro',
    '/dev',
    '--remount-ro',
    '/',
  );
  return args;
}

export interface SandboxSupport {
  bwrap: string;
  /** The interpreter run inside the sandbox. */
  python: PythonInstall;
  /** The interpreter that runs the host-side wrapper (the caller may reach more than nobody). */
  hostPython: string;
  /**
   * The host user bwrap runs as: `nobody` when we are root (so that even an escape from the
   * namespaces lands unprivileged, and the per-user process limit applies), else the caller.
   */
  hostUser: 'nobody' | 'caller';
}

/** The JSON config of the host wrapper (see HOST_WRAPPER). */
export function wrapperConfig(
  support: SandboxSupport,
  args: string[],
  procsFiles: string[],
): string {
  const drop = support.hostUser === 'nobody';
  return JSON.stringify({
    procs: procsFiles,
    uid: drop ? SANDBOX_UID : null,
    gid: drop ? SANDBOX_GID : null,
    ppid: process.pid,
    bwrap: support.bwrap,
    args,
  });
}

const supportCache = new Map<string, SandboxSupport | SandboxUnavailableError>();

/**
 * Checks (once per interpreter) that a bubblewrap sandbox runs here, trying the unprivileged
 * host user first when we are root. Throws SandboxUnavailableError with the fix otherwise, and
 * PythonStartTimeoutError when the interpreter or the sandbox does not answer within
 * `startTimeoutMs` each (not remembered: the next call checks again).
 */
export function sandboxSupport(
  python = 'python3',
  explicitPython = false,
  bwrapPath?: string,
  startTimeoutMs = DEFAULT_START_TIMEOUT_MS,
): SandboxSupport {
  const key = `${python}\0${bwrapPath ?? ''}`;
  const cached = supportCache.get(key);
  if (cached instanceof SandboxUnavailableError) throw cached;
  if (cached) return cached;
  let result: SandboxSupport | SandboxUnavailableError;
  try {
    result = probeSupport(python, explicitPython, bwrapPath, startTimeoutMs);
  } catch (e) {
    if (SandboxUnavailableError.isInstance(e)) result = e;
    else throw e;
  }
  supportCache.set(key, result);
  if (result instanceof SandboxUnavailableError) throw result;
  return result;
}

function probeSupport(
  python: string,
  explicitPython: boolean,
  bwrapPath: string | undefined,
  startTimeoutMs: number,
): SandboxSupport | SandboxUnavailableError {
  if (process.platform !== 'linux') {
    return new SandboxUnavailableError(
      `bubblewrap needs Linux (this is ${process.platform})`,
      "run on Linux, or pass isolation: 'none'",
    );
  }
  const bwrap = findExecutable(bwrapPath ?? 'bwrap');
  if (!bwrap) {
    return new SandboxUnavailableError(
      `bwrap (bubblewrap) is not installed${bwrapPath ? ` at ${bwrapPath}` : ''}`,
      INSTALL_FIX,
    );
  }
  const host = pythonInstall(python, startTimeoutMs);
  const root = process.getuid?.() === 0;
  const candidates: { install: PythonInstall; hostUser: SandboxSupport['hostUser'] }[] = [];
  if (root) {
    candidates.push({ install: host, hostUser: 'nobody' });
    // A default interpreter under /root (pyenv) is unreadable to nobody; the system one is not.
    const system = explicitPython ? null : systemPython(startTimeoutMs);
    if (system && system.executable !== host.executable) {
      candidates.push({ install: system, hostUser: 'nobody' });
    }
  }
  candidates.push({ install: host, hostUser: 'caller' });
  let lastError = '';
  for (const { install, hostUser } of candidates) {
    const support: SandboxSupport = {
      bwrap,
      python: install,
      hostPython: host.executable,
      hostUser,
    };
    const args = bwrapArgs({
      python: install,
      shareNetwork: false,
      workspaceBytes: 1 << 20,
      env: {},
    });
    const probe = spawnSync(
      host.executable,
      [
        '-I',
        '-S',
        '-c',
        HOST_WRAPPER,
        wrapperConfig(
          support,
          [...args, '--', install.executable, '-I', '-S', '-c', 'print(6 * 7)'],
          [],
        ),
      ],
      { encoding: 'utf8', timeout: startTimeoutMs, env: { PATH: SAFE_PATH }, cwd: '/' },
    );
    if (probe.status === 0 && probe.stdout === '42\n') return support;
    if ((probe.error as NodeJS.ErrnoException | undefined)?.code === 'ETIMEDOUT')
      throw new PythonStartTimeoutError(
        `the sandbox (bubblewrap around '${install.executable}')`,
        startTimeoutMs,
        { cause: probe.error },
      );
    lastError = (probe.stderr || probe.error?.message || `exit status ${probe.status}`).trim();
  }
  return new SandboxUnavailableError(
    `bwrap cannot create the sandbox here (${lastError})`,
    USERNS_FIX,
  );
}

/** The system interpreter, when there is one that starts (a fallback for root, not a need). */
function systemPython(startTimeoutMs: number): PythonInstall | null {
  try {
    return pythonInstall('/usr/bin/python3', startTimeoutMs);
  } catch (e) {
    if (SandboxUnavailableError.isInstance(e)) return null;
    throw e;
  }
}
