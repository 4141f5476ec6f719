import { constants } from 'node:os';
import type { SyncLimitReason } from './workspace-sync.js';

// The two small programs around a sandboxed run, and the byte protocol between them and us.
//
// HOST_WRAPPER runs on the host as the caller: it joins the run's control group (before any
// sandbox process exists, so every one of them is counted), drops to the unprivileged host user,
// asks for SIGKILL should its parent (this Node process) die, and execs bubblewrap.
//
// LAUNCHER runs inside the sandbox as its PID 1. The kernel does not deliver signals sent from
// inside a PID namespace to its init unless it handles them, so the code it runs cannot kill it;
// it makes itself non-dumpable, so that code cannot ptrace it or open its /proc/1/fd either. It
// reads the workspace files and the code from stdin, writes the files into the tmpfs workspace,
// runs the interpreter on the code as its child, reaps every orphan meanwhile, and when the child
// ends kills whatever the code left running, then writes the workspace back and the exit status
// to fd 3.

export const HOST_WRAPPER = `
import json, os, sys
cfg = json.loads(sys.argv[1])
try:
    for f in cfg['procs']:
        with open(f, 'w') as fh:
            fh.write(str(os.getpid()))
    if cfg.get('uid') is not None:
        os.setgroups([])
        os.setgid(cfg['gid'])
        os.setuid(cfg['uid'])
except Exception as e:
    sys.stderr.write('flowgrpo-sandbox-setup: %s\\n' % e)
    os._exit(125)
try:
    import ctypes
    ctypes.CDLL(None).prctl(1, 9, 0, 0, 0)  # PR_SET_PDEATHSIG, SIGKILL (after setuid, which clears it)
except Exception:
    pass
if os.getppid() != cfg['ppid']:
    os._exit(125)
os.execv(cfg['bwrap'], [cfg['bwrap']] + cfg['args'])
`;

export const LAUNCHER = `
import json, os, signal, stat, sys
cfg = json.loads(sys.argv[1])
try:
    import ctypes
    ctypes.CDLL(None).prctl(4, 0, 0, 0, 0)  # PR_SET_DUMPABLE 0
except Exception:
    pass
def emit(tag, obj, data=b''):
    buf = memoryview(tag + json.dumps(obj).encode() + b'\\n' + data)
    while buf:
        buf = buf[os.write(3, buf):]
emit(b'S', {})
raw = sys.stdin.buffer.read()
nl = raw.index(b'\\n')
head = json.loads(raw[:nl])
pos = nl + 1
code = raw[pos:pos + head['code']]
pos += head['code']
ws = cfg['workspace']
def inside(rel):
    parts = rel.split('/')
    return rel and not rel.startswith('/') and '\\0' not in rel and all(p not in ('', '.', '..') for p in parts)
def mkdirs(path):
    # os.makedirs recurses once per missing level and fails ~1,000 levels deep.
    missing = []
    while not os.path.isdir(path):
        missing.append(path)
        path = os.path.dirname(path)
    for p in reversed(missing):
        try:
            os.mkdir(p)
        except FileExistsError:
            pass
for rel, size, mode in head['files']:
    data = raw[pos:pos + size]
    pos += size
    if not inside(rel):
        continue
    full = os.path.join(ws, rel)
    try:
        mkdirs(os.path.dirname(full))
        fd = os.open(full, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_NOFOLLOW, 0o600 | (mode & 0o755))
        with os.fdopen(fd, 'wb') as fh:
            fh.write(data)
    except OSError:
        pass
for rel in head.get('dirs', []):
    if inside(rel):
        try:
            mkdirs(os.path.join(ws, rel))
        except OSError:
            pass
del raw
r, w = os.pipe()
pid = os.fork()
if pid == 0:
    try:
        os.dup2(r, 0)
        os.closerange(3, 65536)
        # -u: what the code printed before a timeout's SIGKILL is in the pipe, not in a buffer.
        os.execv(cfg['python'], [cfg['python'], '-I', '-u', '-c', cfg['preamble'], json.dumps(cfg['rlimits'])])
    finally:
        os._exit(127)
os.close(r)
try:
    view = memoryview(code)
    while view:
        view = view[os.write(w, view):]
except OSError:
    pass
os.close(w)
status = 0
while True:
    try:
        p, st = os.waitpid(-1, 0)
    except ChildProcessError:
        break
    except InterruptedError:
        continue
    if p == pid:
        status = st
        break
# What the code left running goes now, before the workspace is read: a process still at work
# could swap a directory for a link to the rest of the sandbox's files while the scan below walks
# it. kill(-1) from PID 1 reaches every other process of the namespace, and every orphan is our
# child: once none is left to reap, the namespace holds only us and the workspace is still.
while True:
    try:
        os.kill(-1, signal.SIGKILL)
    except OSError:
        pass
    try:
        os.waitpid(-1, 0)
    except ChildProcessError:
        break
    except InterruptedError:
        continue
if os.WIFSIGNALED(status):
    result = {'signal': signal.Signals(os.WTERMSIG(status)).name}
else:
    result = {'exit': os.waitstatus_to_exitcode(status)}
if cfg['sync']:
    # Within the copy-back budget (entries, bytes of names and contents, the call's deadline on
    # the shared wall clock); what is left out is counted, and why.
    import time
    left = {'entries': cfg['syncEntries'], 'bytes': cfg['syncBytes']}
    sync = {'skipped': 0, 'why': []}
    def skip(reason):
        sync['skipped'] += 1
        if reason not in sync['why']:
            sync['why'].append(reason)
    def take(record):
        if left['entries'] <= 0:
            skip('files')
            return False
        if len(record) > left['bytes']:
            skip('bytes')
            return False
        left['entries'] -= 1
        left['bytes'] -= len(record)
        return True
    # An explicit stack, not os.walk: its recursion fails on a tree ~1,000 directories deep,
    # which the code can make in a moment.
    late = False
    stack = ['']
    while stack and not late:
        rel_root = stack.pop()
        try:
            with os.scandir(os.path.join(ws, rel_root) if rel_root else ws) as it:
                entries = [(e.name, e.is_dir(follow_symlinks=False)) for e in it]
        except OSError:
            continue
        for name, is_dir in entries:
            if time.time() > cfg['syncDeadline']:
                late = True
                break
            rel = rel_root + '/' + name if rel_root else name
            if is_dir:
                stack.append(rel)
            if left['entries'] <= 0:
                skip('files')
                continue
            full = os.path.join(ws, rel)
            try:
                st = os.lstat(full)
            except OSError:
                continue
            if stat.S_ISDIR(st.st_mode):
                if take(json.dumps([rel]).encode() + b'  '):
                    emit(b'D', [rel])
                continue
            if not stat.S_ISREG(st.st_mode):
                continue
            head = json.dumps([rel, st.st_size, st.st_mode & 0o777]).encode()
            if st.st_size + len(head) + 2 > left['bytes']:
                skip('bytes')
                continue
            try:
                fd = os.open(full, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK)
                with os.fdopen(fd, 'rb') as fh:
                    if not stat.S_ISREG(os.fstat(fd).st_mode):
                        continue
                    data = fh.read(st.st_size + 1)
            except OSError:
                continue
            if len(data) != st.st_size or not take(head + b'  ' + data):
                continue
            emit(b'F', [rel, len(data), st.st_mode & 0o777], data)
    if late:
        sync['why'].append('time')
    result['sync'] = sync
emit(b'E', result)
os._exit(0)
`;

/** One file of the workspace carried into or out of the sandbox. */
export interface WorkspaceFile {
  path: string;
  data: Buffer;
  mode: number;
}

/** What the launcher reported on fd 3. */
export interface LauncherReport {
  /** The launcher started (the sandbox itself was set up). */
  started: boolean;
  /** The child's exit, when the launcher saw it end. */
  exit?: { exitCode: number | null; signal: NodeJS.Signals | null };
  /** The workspace as the run left it (regular files and directories only). */
  files: WorkspaceFile[];
  dirs: string[];
  /** The stream broke off or did not parse (the run was killed, or tampered with). */
  incomplete: boolean;
  /** Entries of the workspace the launcher left out of `files`/`dirs`, and why. */
  skipped: number;
  skippedWhy: SyncLimitReason[];
}

/** A workspace-relative path without `..`, empty, absolute or NUL parts. */
export function isSafeRelativePath(path: string): boolean {
  return (
    path.length > 0 &&
    !path.startsWith('/') &&
    !path.includes('\0') &&
    path.split('/').every((p) => p !== '' && p !== '.' && p !== '..')
  );
}

/** The launcher's stdin: a JSON header line, the code, then each file's bytes. */
export function encodeLauncherInput(code: string, files: WorkspaceFile[], dirs: string[]): Buffer {
  const codeBytes = Buffer.from(code, 'utf8');
  const head = {
    code: codeBytes.length,
    files: files.map((f) => [f.path, f.data.length, f.mode]),
    dirs,
  };
  return Buffer.concat([
    Buffer.from(`${JSON.stringify(head)}\n`),
    codeBytes,
    ...files.map((f) => f.data),
  ]);
}

/** Parses fd 3: records `S{}`, `D[path]`, `F[path,size,mode]`+bytes, `E{exit|signal}`. */
export function parseLauncherOutput(bytes: Buffer): LauncherReport {
  const report: LauncherReport = {
    started: false,
    files: [],
    dirs: [],
    incomplete: true,
    skipped: 0,
    skippedWhy: [],
  };
  let pos = 0;
  while (pos < bytes.length) {
    const nl = bytes.indexOf(10, pos);
    if (nl < 0) return report;
    const tag = String.fromCharCode(bytes[pos]!);
    let value: unknown;
    try {
      value = JSON.parse(bytes.subarray(pos + 1, nl).toString('utf8'));
    } catch {
      return report;
    }
    pos = nl + 1;
    if (tag === 'S') {
      report.started = true;
    } else if (tag === 'D' && Array.isArray(value) && typeof value[0] === 'string') {
      if (isSafeRelativePath(value[0])) report.dirs.push(value[0]);
    } else if (tag === 'F' && Array.isArray(value)) {
      const [path, size, mode] = value as [unknown, unknown, unknown];
      if (typeof path !== 'string' || typeof size !== 'number' || typeof mode !== 'number') {
        return report;
      }
      if (!Number.isSafeInteger(size) || size < 0 || pos + size > bytes.length) return report;
      const data = Buffer.from(bytes.subarray(pos, pos + size));
      pos += size;
      if (isSafeRelativePath(path)) report.files.push({ path, data, mode: mode & 0o755 });
    } else if (tag === 'E' && typeof value === 'object' && value !== null) {
      const v = value as { exit?: unknown; signal?: unknown; sync?: unknown };
      const signal = typeof v.signal === 'string' && v.signal in constants.signals;
      report.exit = {
        exitCode: typeof v.exit === 'number' ? v.exit : null,
        signal: signal ? (v.signal as NodeJS.Signals) : null,
      };
      const sync = v.sync as { skipped?: unknown; why?: unknown } | undefined;
      if (typeof sync?.skipped === 'number' && Number.isSafeInteger(sync.skipped)) {
        report.skipped = Math.max(0, sync.skipped);
      }
      if (Array.isArray(sync?.why)) {
        report.skippedWhy = sync.why.filter(
          (r): r is SyncLimitReason =>
            r === 'files' || r === 'bytes' || r === 'time' || r === 'paths',
        );
      }
      report.incomplete = pos !== bytes.length;
      return report;
    } else {
      return report;
    }
  }
  return report;
}
