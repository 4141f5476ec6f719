import { existsSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import type { AddressInfo } from 'node:net';
import { createServer } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import {
  PythonStartTimeoutError,
  PythonUnavailableError,
  SandboxUnavailableError,
} from '../src/errors.js';
import { networkIsolationArgs, runPython } from '../src/python-sandbox.js';
import { createPythonTool, extractPythonCode } from '../src/python-tool.js';
import { Workspace } from '../src/workspace.js';
import { ScriptedEngine } from './helpers/local-server.js';
import { namespaceOf, processesInNamespace } from './helpers/processes.js';

// Every test runs a real `python3 -I` subprocess in a real bubblewrap sandbox (unless it says
// `isolation: 'none'`); expected values are what the Python code itself must print or how the OS
// reports the process's end. Hostile-code cases are in faults.test.ts.

let workspace: Workspace;
beforeEach(async () => {
  workspace = await Workspace.create();
});
afterEach(async () => {
  await workspace.cleanup();
});

describe('runPython', () => {
  it('returns stdout, stderr and the exit code', async () => {
    const run = await runPython(
      'import sys\nprint(sum(range(1, 101)))\nprint("warn", file=sys.stderr)\nsys.exit(3)',
      { cwd: workspace.dir },
    );
    expect(run).toMatchObject({ stdout: '5050\n', stderr: 'warn\n', exitCode: 3, timedOut: false });
  });

  it('kills an infinite loop, and the children it spawned, at the timeout', async () => {
    // The child prints its PID namespace, then the parent spins forever. The CPU limit is raised
    // so that the wall-clock timeout, not SIGXCPU, ends the spin.
    const code = [
      'import subprocess, sys',
      "p = subprocess.Popen([sys.executable, '-c', \"import os, time\\nprint(os.readlink('/proc/self/ns/pid'), flush=True)\\nwhile True: time.sleep(0.05)\"])",
      'while True: pass',
    ].join('\n');
    // 6 s leaves both interpreters time to start on a loaded machine.
    const run = await runPython(code, { timeoutMs: 6000, limits: { cpuSeconds: 60 } });
    expect(run.timedOut).toBe(true);
    expect(run.signal).toBe('SIGKILL');
    expect(run.exitCode).toBeNull();
    const ns = namespaceOf(run.stdout);
    for (let i = 0; i < 100 && processesInNamespace(ns).length > 0; i++) {
      await new Promise((r) => setTimeout(r, 50));
    }
    expect(processesInNamespace(ns)).toEqual([]);
  });

  it('truncates a huge print and marks it', async () => {
    const run = await runPython("print('a' * 3_000_000 + 'END')", {
      cwd: workspace.dir,
      maxOutputBytes: 4000,
    });
    expect(run.exitCode).toBe(0);
    expect(run.stdoutTruncated).toBe(true);
    // Head 3000 bytes, tail 1000 bytes; 3_000_004 bytes written in all.
    expect(run.stdout.startsWith('a'.repeat(3000))).toBe(true);
    expect(run.stdout).toContain(`[... ${3_000_004 - 4000} bytes truncated ...]`);
    expect(run.stdout.endsWith('END\n')).toBe(true);
    expect(run.stdout.length).toBeLessThan(4100);
  });

  it('kills a run that floods its output past the kill threshold', async () => {
    const run = await runPython("while True: print('x' * 10000)", {
      cwd: workspace.dir,
      timeoutMs: 10_000,
      killAfterOutputBytes: 1_000_000,
    });
    expect(run.outputLimitExceeded).toBe(true);
    expect(run.timedOut).toBe(false);
    expect(run.signal).toBe('SIGKILL');
  });

  it('scrubs the environment: API keys never reach the code', async () => {
    process.env.OPENAI_API_KEY = 'sk-should-not-leak';
    process.env.FLOWGRPO_TEST_SECRET = 'secret';
    try {
      const run = await runPython('import os, json\nprint(json.dumps(dict(os.environ)))', {
        cwd: workspace.dir,
      });
      const env = JSON.parse(run.stdout) as Record<string, string>;
      expect(env.OPENAI_API_KEY).toBeUndefined();
      expect(env.FLOWGRPO_TEST_SECRET).toBeUndefined();
      expect(run.stdout).not.toContain('sk-should-not-leak');
      // The sandbox's own variables (bubblewrap.ts) and what python/bwrap add (LC_CTYPE by
      // PEP 538 locale coercion, PWD); nothing else may appear.
      const allowed = new Set([
        'PATH',
        'LANG',
        'LC_ALL',
        'HOME',
        'TMPDIR',
        'USER',
        'OMP_NUM_THREADS',
        'OPENBLAS_NUM_THREADS',
        'MKL_NUM_THREADS',
        'MALLOC_ARENA_MAX',
        'LC_CTYPE',
        'PWD',
      ]);
      for (const key of Object.keys(env)) expect(allowed.has(key), key).toBe(true);
      expect(env.HOME).toBe('/workspace');
    } finally {
      delete process.env.OPENAI_API_KEY;
      delete process.env.FLOWGRPO_TEST_SECRET;
    }
  });

  it('keeps relative file writes in the workspace (copied back from the sandbox)', async () => {
    const code = [
      'import os',
      "open('result.txt', 'w').write('42')",
      "os.makedirs('sub', exist_ok=True)",
      "open(os.path.join('sub', 'x.txt'), 'w').write('x')",
      "open(os.path.expanduser('~/home.txt'), 'w').write('h')",
      'print(os.getcwd())',
    ].join('\n');
    const run = await runPython(code, { cwd: workspace.dir });
    // Inside, the code works in the sandbox's tmpfs; its files come back to the workspace.
    expect(run.stdout.trim()).toBe('/workspace');
    expect(run.workspaceSynced).toBe(true);
    expect(await workspace.listFiles()).toEqual(['home.txt', 'result.txt', 'sub/x.txt']);
    expect(existsSync(join(process.cwd(), 'result.txt'))).toBe(false);
    await workspace.cleanup();
    expect(existsSync(workspace.dir)).toBe(false);
  });

  it('enforces the address-space and file-size limits', async () => {
    const mem = await runPython('x = bytearray(600 * 1024 * 1024)', {
      cwd: workspace.dir,
      limits: { memoryBytes: 256 * 1024 * 1024 },
    });
    expect(mem.exitCode).toBe(1);
    expect(mem.stderr).toMatch(/MemoryError/);
    const big = await runPython("open('big.bin', 'wb').write(b'0' * 2_000_000)", {
      cwd: workspace.dir,
      limits: { fileSizeBytes: 1_000_000 },
    });
    // Past RLIMIT_FSIZE the kernel sends SIGXFSZ (Python ignores it, so write() fails with EFBIG).
    expect(big.exitCode === 1 || big.signal === 'SIGXFSZ').toBe(true);
  });

  it('starts 40 threads under the default limits (threads cost their stack, not 64 MiB arenas)', async () => {
    // 40 < the default 64 processes of a run; each thread sleeps so all are alive at once.
    const code = [
      'import threading, time',
      'ts = [threading.Thread(target=time.sleep, args=(0.5,)) for _ in range(40)]',
      'for t in ts: t.start()',
      'for t in ts: t.join()',
      "print('threads', len(ts))",
    ].join('\n');
    const run = await runPython(code, {});
    expect(run.stderr).toBe('');
    expect(run.stdout).toBe('threads 40\n');
  });

  it('reports a syntax error readably, pointing into the user code', async () => {
    const run = await runPython('x = 1\nprint(x +)\n', { cwd: workspace.dir });
    expect(run.exitCode).toBe(1);
    expect(run.stderr).toContain('File "main.py", line 2');
    expect(run.stderr).toMatch(/SyntaxError: invalid syntax/);
    expect(run.stderr).not.toContain('exec(');
  });

  it('keeps what the code printed before a SIGKILL, in the sandbox and without (python -u)', async () => {
    // The code kills itself at once: no timer, nothing to race. Buffered, the line was lost.
    const code =
      "import os, signal\nprint('printed before the kill')\nos.kill(os.getpid(), signal.SIGKILL)";
    for (const isolation of ['sandbox', 'none'] as const) {
      const run = await runPython(code, { cwd: workspace.dir, isolation });
      expect(run).toMatchObject({
        stdout: 'printed before the kill\n',
        signal: 'SIGKILL',
        exitCode: null,
        isolation,
      });
    }
  });

  it('rejects when aborted and kills the process group', async () => {
    const controller = new AbortController();
    const promise = runPython('while True: pass', {
      cwd: workspace.dir,
      timeoutMs: 10_000,
      signal: controller.signal,
    });
    setTimeout(() => controller.abort(), 200);
    await expect(promise).rejects.toThrow(/aborted/);
    // Aborted while the run is being set up (the workspace read, before the process exists):
    // rejected as well (before the fix it ran to its 10 s timeout and resolved).
    const early = new AbortController();
    const setup = runPython('while True: pass', {
      cwd: workspace.dir,
      timeoutMs: 10_000,
      signal: early.signal,
    });
    early.abort();
    await expect(setup).rejects.toThrow(/aborted/);
  });
});

describe('python tool', () => {
  it('strips a markdown fence and runs the code', async () => {
    expect(extractPythonCode('```python\nprint(1)\n```')).toBe('print(1)');
    const tool = createPythonTool();
    const result = await tool.execute(
      { code: 'Here:\n```python\nimport math\nprint(math.comb(10, 3))\n```' },
      { workspace },
    );
    expect(result).toMatchObject({
      ok: true,
      output: { stdout: '120\n', stderr: '', exit_code: 0, timed_out: false },
    });
  });

  it('turns a runtime error into a failed result with the traceback', async () => {
    const tool = createPythonTool();
    const result = await tool.execute({ code: 'def f():\n    return 1 / 0\nf()' }, { workspace });
    expect(result.ok).toBe(false);
    expect(result.error).toBe('Python exited with code 1: ZeroDivisionError: division by zero');
    const out = result.output as { stderr: string };
    expect(out.stderr).toContain('File "main.py", line 2, in f');
    expect(out.stderr).toContain('return 1 / 0');
  });

  it('honours the input timeout; without isolation its temporary directory is removed', async () => {
    const code = 'import os\nprint(os.getcwd(), flush=True)\nwhile True: pass';
    const sandboxed = await createPythonTool().execute({ code, timeout: 0.5 }, {});
    expect(sandboxed).toMatchObject({
      ok: false,
      errorCode: 'TOOL_TIMEOUT',
      output: { timed_out: true, sandbox: { isolation: 'sandbox' } },
    });
    // 3 s: python must have printed its directory before the kill, even on a loaded machine.
    const plain = await createPythonTool({ isolation: 'none' }).execute({ code, timeout: 3 }, {});
    expect(plain).toMatchObject({ ok: false, errorCode: 'TOOL_TIMEOUT' });
    const dir = (plain.output as { stdout: string }).stdout.trim();
    expect(dir).toMatch(/flowgrpo-ws-/);
    expect(existsSync(dir)).toBe(false);
  });

  it('returns what the code printed before its timeout (unbuffered output)', async () => {
    // No flush: with a block-buffered stdout (a pipe) the line stayed in python's buffer and died
    // with the SIGKILL. 6 s lets the sandbox start on a loaded machine, as above.
    const code = "import time\nprint('partial result: 42')\ntime.sleep(10 ** 6)";
    const result = await createPythonTool().execute({ code, timeout: 6 }, {});
    expect(result).toMatchObject({
      ok: false,
      errorCode: 'TOOL_TIMEOUT',
      output: { stdout: 'partial result: 42\n', timed_out: true },
    });
  });

  it('rejects timeouts above the maximum through its schema', () => {
    const tool = createPythonTool({ maxTimeoutSeconds: 5 });
    expect(tool.inputSchema.safeParse({ code: 'print(1)', timeout: 60 }).success).toBe(false);
    expect(tool.inputSchema.safeParse({ code: '' }).success).toBe(false);
    // Without an engine a query alone is not enough.
    expect(tool.inputSchema.safeParse({ query: 'add 2 and 2' }).success).toBe(false);
  });

  it("with an engine, writes the code for a query first (the seeds' generator mode)", async () => {
    const engine = new ScriptedEngine(
      () => 'Sure:\n```python\nprint(sum(i * i for i in range(1, 11)))\n```\nDone.',
    );
    const tool = createPythonTool({ engine });
    expect(tool.metadata.requiresLlm).toBe(true);
    const result = await tool.execute({ query: 'Sum of the squares of 1..10' }, { workspace });
    // 1 + 4 + 9 + … + 100 = 10·11·21/6 = 385.
    expect(result).toMatchObject({
      ok: true,
      output: { stdout: '385\n', code: 'print(sum(i * i for i in range(1, 11)))' },
    });
    expect(engine.calls[0]!.at(-1)).toEqual({
      role: 'user',
      content: 'Sum of the squares of 1..10',
    });
  });
});

describe('the first start: a missing interpreter is not a busy machine', () => {
  // Fake interpreters, real processes: a name on no PATH (ENOENT), a file without the execute
  // bit (EACCES), and a script that never answers (`exec sleep`), which runs past any start
  // timeout however fast the machine is — so the small timeout injected here is a certainty, not
  // a race. The fixes quoted are the ones each error must give.
  let dir: string;
  beforeEach(() => {
    dir = mkdtempSync(join(tmpdir(), 'flowgrpo-fake-python-'));
  });
  afterEach(() => rmSync(dir, { recursive: true, force: true }));

  it('a missing or non-executable interpreter fails with the install advice', async () => {
    const missing = await runPython('print(1)', { python: join(dir, 'python3') }).catch((e) => e);
    expect(SandboxUnavailableError.isInstance(missing)).toBe(true);
    expect((missing as SandboxUnavailableError).reason).toBe(
      `the interpreter '${join(dir, 'python3')}' was not found`,
    );
    expect((missing as SandboxUnavailableError).fix).toMatch(/^install python3/);
    const plain = join(dir, 'python3-not-executable');
    writeFileSync(plain, '#!/bin/sh\nexec python3 "$@"\n', { mode: 0o644 });
    const denied = await runPython('print(1)', { python: plain }).catch((e) => e);
    expect(SandboxUnavailableError.isInstance(denied)).toBe(true);
    expect((denied as SandboxUnavailableError).reason).toMatch(/is not executable$/);
    expect((denied as SandboxUnavailableError).fix).toMatch(/^make it executable \(chmod \+x /);
    // One that starts and fails says how, in its own words.
    const broken = join(dir, 'python3-broken');
    writeFileSync(broken, '#!/bin/sh\necho "no encodings module" >&2\nexit 3\n', { mode: 0o755 });
    const failed = await runPython('print(1)', { python: broken }).catch((e) => e);
    expect(SandboxUnavailableError.isInstance(failed)).toBe(true);
    expect((failed as SandboxUnavailableError).reason).toBe(
      `the interpreter '${broken}' (${broken}) failed to start (exit status 3: no encodings module)`,
    );
    // Without isolation: its own error, the same advice.
    const none = await runPython('print(1)', {
      python: join(dir, 'python3'),
      isolation: 'none',
      cwd: workspace.dir,
    }).catch((e) => e);
    expect(PythonUnavailableError.isInstance(none)).toBe(true);
    expect((none as PythonUnavailableError).hint).toMatch(/^install python3/);
  });

  it('an interpreter that does not answer in time is a start timeout, tried again next call', async () => {
    const python = join(dir, 'python3');
    writeFileSync(python, '#!/bin/sh\nexec sleep 1000\n', { mode: 0o755 });
    const tool = createPythonTool({ python, startTimeoutSeconds: 0.2 });
    const slow = await tool.execute({ code: 'print(1)' }, {});
    expect(slow).toMatchObject({ ok: false, errorCode: 'PYTHON_START_TIMEOUT' });
    expect(slow.error).toMatch(
      new RegExp(
        `^the interpreter '${python}' did not answer within 0\\.2 s of starting: the machine may be busy\\.`,
      ),
    );
    expect(slow.error).toContain('startTimeoutSeconds');
    expect(slow.error).not.toMatch(/install/);
    const thrown = await runPython('print(1)', { python, startTimeoutMs: 200 }).catch((e) => e);
    expect(PythonStartTimeoutError.isInstance(thrown)).toBe(true);
    expect((thrown as PythonStartTimeoutError).timeoutMs).toBe(200);
    // The machine is no longer "busy": the same path now starts python3, and a call with the
    // default start timeout runs (the timeout was not remembered as a broken interpreter).
    writeFileSync(python, '#!/bin/sh\nexec python3 "$@"\n', { mode: 0o755 });
    const ok = await createPythonTool({ python }).execute({ code: 'print(6 * 7)' }, {});
    expect(ok).toMatchObject({ ok: true, output: { stdout: '42\n' } });
  });
});

describe('network isolation', () => {
  // A real TCP listener on 127.0.0.1: reachable from the host's network namespace only.
  const probe = (port: number) =>
    [
      'import socket',
      'try:',
      `    socket.create_connection(('127.0.0.1', ${port}), timeout=2).close()`,
      "    print('connected')",
      'except OSError as e:',
      "    print('blocked', type(e).__name__)",
    ].join('\n');

  it('denies network access in the sandbox, shares the host network only when asked', async () => {
    const server = createServer((socket) => socket.end());
    await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
    const { port } = server.address() as AddressInfo;
    try {
      const denied = await runPython(probe(port), { network: 'deny' });
      expect(denied.networkIsolated).toBe(true);
      expect(denied.stdout).toMatch(/^blocked /);
      const allowed = await runPython(probe(port), { network: 'allow' });
      expect(allowed.networkIsolated).toBe(false);
      expect(allowed.stdout).toBe('connected\n');
    } finally {
      server.close();
    }
  });

  it.skipIf(networkIsolationArgs() === null)(
    "without isolation, 'deny' uses `unshare --net` and timeouts still kill the group",
    async () => {
      const server = createServer((socket) => socket.end());
      await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
      const { port } = server.address() as AddressInfo;
      try {
        const none = { cwd: workspace.dir, isolation: 'none' as const };
        const denied = await runPython(probe(port), { ...none, network: 'deny' });
        expect(denied).toMatchObject({ networkIsolated: true, isolation: 'none' });
        expect(denied.stdout).toMatch(/^blocked /);
        // unshare execs python in place, so the process group is still the child's.
        const loop = await runPython('while True: pass', {
          ...none,
          network: 'deny',
          timeoutMs: 500,
        });
        expect(loop.timedOut).toBe(true);
      } finally {
        server.close();
      }
    },
  );
});
