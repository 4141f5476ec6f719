import { randomUUID } from 'node:crypto';
import { existsSync } from 'node:fs';
import { readFile, writeFile } from 'node:fs/promises';
import { createServer as createHttpServer } from 'node:http';
import { type AddressInfo, createServer, type Server } from 'node:net';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { calculate } from '../src/calculator.js';
import { createCalculatorTool } from '../src/calculator-tool.js';
import { SandboxUnavailableError, UrlPolicyError } from '../src/errors.js';
import { createGuardedFetch } from '../src/guarded-fetch.js';
import { htmlToText } from '../src/html-to-text.js';
import { type PythonRunResult, runPython } from '../src/python-sandbox.js';
import { createPythonTool } from '../src/python-tool.js';
import { checkUrl, embeddedIPv4, isPrivateAddress } from '../src/url-policy.js';
import { fetchWebPage } from '../src/web-page.js';
import { Workspace } from '../src/workspace.js';
import { namespaceOf, PRINT_NS, processesInNamespace } from './helpers/processes.js';

// The fault matrix of @flowgrpo/tools: hostile code in the python sandbox, hostile URLs and DNS
// answers for the web tools, hostile calculator input. Each case states the expected behaviour,
// then checks that nothing leaked (no secret in the output, no process or file left behind, no
// connection made) and that the next run still works. Every python case runs real bubblewrap
// sandboxes; network cases use loopback servers only, and every address that must be refused is
// refused before a connection is made (the servers count their connections).

// A real run decides whether this machine has the sandbox (bubblewrap + user namespaces).
const probe: PythonRunResult | Error = await runPython('print(6 * 7)', { timeoutMs: 20_000 }).catch(
  (e: Error) => e,
);
const noSandbox =
  probe instanceof Error
    ? `no sandbox here: ${probe.message}`
    : probe.stdout === '42\n'
      ? ''
      : 'probe failed';
if (noSandbox) console.warn(`[faults] python sandbox cases skipped: ${noSandbox}`);
const sandboxed = (name: string, fn: () => Promise<void>) =>
  it.skipIf(noSandbox !== '')(name, fn, 30_000);

/** Waits until nothing runs in the namespace (the kernel reaps a dying namespace asynchronously). */
async function expectNoProcessesIn(ns: string): Promise<void> {
  for (let i = 0; i < 100 && processesInNamespace(ns).length > 0; i++) {
    await new Promise((r) => setTimeout(r, 50));
  }
  expect(processesInNamespace(ns), `processes left in ${ns}`).toEqual([]);
}

/** The run after a fault: the sandbox still works. */
async function expectNextRunWorks(): Promise<void> {
  const next = await runPython('print(sum(range(10)))', {});
  expect(next).toMatchObject({ stdout: '45\n', exitCode: 0, isolation: 'sandbox' });
}

let tcp: Server;
let tcpConnections = 0;
let tcpPort = 0;
beforeAll(async () => {
  tcp = createServer((socket) => {
    tcpConnections++;
    socket.end('hello from the host\n');
  });
  await new Promise<void>((r) => tcp.listen(0, '127.0.0.1', r));
  tcpPort = (tcp.address() as AddressInfo).port;
});
afterAll(async () => {
  await new Promise<void>((r) => tcp.close(() => r()));
});

describe('python sandbox: hostile code', () => {
  sandboxed('an infinite loop is killed at the timeout; nothing of it survives', async () => {
    // Expected: timedOut, SIGKILL, a child it started is gone too.
    const code = `${PRINT_NS}import subprocess, sys\nsubprocess.Popen([sys.executable, '-c', 'while True: pass'])\nwhile True: pass`;
    // 5 s: time for python to start and print its namespace on a loaded machine.
    const run = await runPython(code, { timeoutMs: 5000, limits: { cpuSeconds: 60 } });
    expect(run).toMatchObject({ timedOut: true, signal: 'SIGKILL', exitCode: null });
    await expectNoProcessesIn(namespaceOf(run.stdout));
    await expectNextRunWorks();
  });

  sandboxed('a memory bomb over several processes stops at the run’s memory limit', async () => {
    // Three children of 300 MB each against a 512 MiB limit for the run. Per run (cgroup): the
    // kernel kills at least one (oomKilled). Per process only (rlimit fallback): one process
    // cannot allocate more than the limit at once.
    const code = [
      PRINT_NS,
      'import os, time',
      'pids = []',
      'for _ in range(3):',
      '    pid = os.fork()',
      '    if pid == 0:',
      "        block = b'x' * (300 << 20)",
      '        time.sleep(3)',
      '        os._exit(0)',
      '    pids.append(pid)',
      'ok = sum(1 for p in pids if os.waitpid(p, 0)[1] == 0)',
      "print('survivors', ok)",
    ].join('\n');
    const limits = { memoryBytes: 512 * 1024 * 1024, cpuSeconds: 30 };
    const run = await runPython(code, { timeoutMs: 15_000, limits });
    if (run.limits.memory === 'cgroup') {
      expect(run.oomKilled).toBe(true);
      // The launcher or the parent may be the OOM killer's pick; if the parent survived it
      // reports fewer than three survivors.
      const survivors = /survivors (\d)/.exec(run.stdout);
      if (survivors) expect(Number(survivors[1])).toBeLessThan(3);
    } else {
      expect(run.limits.memory).toBe('rlimit-per-process');
      const single = await runPython("b'x' * (600 << 20)", { limits });
      expect(single.stderr).toMatch(/MemoryError/);
    }
    await expectNoProcessesIn(namespaceOf(run.stdout));
    await expectNextRunWorks();
  });

  const forkBombLimit = probe instanceof Error ? 'none' : probe.limits.processes;
  it.skipIf(noSandbox !== '' || forkBombLimit === 'none')(
    'a fork bomb is bounded by the run’s own process limit and dies with the run',
    async () => {
      // Every process forks for 1.5 s, then sleeps; the sandbox's limit (16 processes for this
      // run) refuses the rest. The main program then exits, which ends the run and kills the
      // sleepers — no reliance on the timeout, however slow the machine.
      const code = [
        PRINT_NS,
        'import os, time',
        'deadline = time.monotonic() + 1.5',
        'main = os.getpid()',
        'while time.monotonic() < deadline:',
        '    try:',
        '        os.fork()',
        '    except OSError:',
        '        pass',
        'if os.getpid() == main:',
        "    print('main done', flush=True)",
        '    os._exit(0)',
        'time.sleep(300)',
      ].join('\n');
      const run = await runPython(code, {
        timeoutMs: 20_000,
        limits: { processes: 16, cpuSeconds: 60 },
      });
      expect(run).toMatchObject({ timedOut: false, exitCode: 0 });
      expect(run.stdout).toContain('main done');
      const ns = namespaceOf(run.stdout);
      if (run.limits.processes === 'cgroup') expect(run.processLimitHit).toBe(true);
      await expectNoProcessesIn(ns);
      await expectNextRunWorks();
    },
    30_000,
  );

  sandboxed(
    '100 MB on stdout: the run is killed at the output cap, the result stays small',
    async () => {
      const code = "import sys\nsys.stdout.write('x' * (100 << 20))\nprint('never')";
      const run = await runPython(code, {
        killAfterOutputBytes: 4 * 1024 * 1024,
        maxOutputBytes: 2000,
      });
      expect(run).toMatchObject({
        outputLimitExceeded: true,
        signal: 'SIGKILL',
        stdoutTruncated: true,
      });
      expect(run.stdout.length).toBeLessThan(2200);
      await expectNextRunWorks();
    },
  );

  sandboxed(
    'a setsid child holding the output pipe neither escapes nor holds the run',
    async () => {
      // The child starts its own session (leaving the process group) and keeps stdout open for
      // 300 s. Expected: the run returns when the main program ends, and the child is gone.
      const code = `${PRINT_NS}import subprocess, sys\nsubprocess.Popen([sys.executable, '-c', 'import time; time.sleep(300)'], start_new_session=True)\nprint('main done')`;
      const run = await runPython(code, { timeoutMs: 20_000 });
      expect(run).toMatchObject({ exitCode: 0, timedOut: false });
      expect(run.stdout).toContain('main done');
      await expectNoProcessesIn(namespaceOf(run.stdout));
    },
  );

  sandboxed('a double-forked daemon does not survive the run', async () => {
    const code = [
      PRINT_NS,
      'import os, time',
      'pid = os.fork()',
      'if pid == 0:',
      '    os.setsid()',
      '    if os.fork() == 0:',
      '        time.sleep(300)',
      '    os._exit(0)',
      'os.waitpid(pid, 0)',
      "print('parent done')",
    ].join('\n');
    const run = await runPython(code, { timeoutMs: 20_000 });
    expect(run).toMatchObject({ exitCode: 0, timedOut: false });
    await expectNoProcessesIn(namespaceOf(run.stdout));
  });

  sandboxed(
    '/proc shows nothing of the parent: no environment secret, no command line',
    async () => {
      // The secret is in this process's environment; the sandbox reads every /proc entry it can.
      const secret = `sk-fault-${Math.random().toString(36).slice(2)}`;
      process.env.FLOWGRPO_FAULT_SECRET = secret;
      try {
        const code = [
          'import glob',
          "for f in sorted(glob.glob('/proc/*/environ') + glob.glob('/proc/*/cmdline') + glob.glob('/proc/*/task/*/environ')):",
          '    try:',
          "        print(f, open(f, 'rb').read().decode('utf8', 'replace'))",
          '    except OSError as e:',
          "        print(f, 'denied', e.errno)",
          "print('pids', sorted(p for p in __import__('os').listdir('/proc') if p.isdigit()))",
        ].join('\n');
        const run = await runPython(code, { maxOutputBytes: 1 << 20 });
        expect(run.exitCode).toBe(0);
        expect(run.stdout).not.toContain(secret);
        expect(run.stdout).not.toContain('FLOWGRPO_FAULT_SECRET');
        // Only the sandbox's own processes exist in its /proc: the launcher (1) and the code (2).
        expect(run.stdout).toContain("pids ['1', '2']");
        expect(run.stdout).not.toContain(process.cwd());
      } finally {
        delete process.env.FLOWGRPO_FAULT_SECRET;
      }
    },
  );

  sandboxed(
    'the host filesystem is invisible, and nothing outside the workspace is writable',
    async () => {
      const marker = `flowgrpo-pwned-${randomUUID()}`;
      const code = [
        'import os',
        `for p in ['/etc/shadow', '/root', '/home', ${JSON.stringify(process.cwd())}, '/etc/passwd']:`,
        "    print('exists' if os.path.exists(p) else 'absent', p)",
        `for p in ['/${marker}', '/usr/${marker}', '/etc/${marker}', '/dev/${marker}', '/proc/${marker}', '/var/${marker}']:`,
        '    try:',
        "        open(p, 'w').write('x')",
        "        print('WROTE', p)",
        '    except OSError as e:',
        "        print('refused', p, e.errno)",
        `open('/tmp/${marker}', 'w').write('in the tmpfs workspace')`,
        `print('tmp is', os.path.realpath('/tmp'))`,
      ].join('\n');
      const run = await runPython(code, {});
      expect(run.exitCode).toBe(0);
      expect(run.stdout).not.toMatch(/^exists/m);
      expect(run.stdout).not.toContain('WROTE');
      expect(run.stdout).toContain('tmp is /workspace');
      // Nothing reached the host: not in /tmp, not at the root, not in the checkout.
      for (const dir of ['/tmp', '/', '/var', process.cwd()]) {
        expect(existsSync(join(dir, marker)), join(dir, marker)).toBe(false);
      }
    },
  );

  sandboxed(
    'setns into every visible network namespace does not reach the host’s loopback',
    async () => {
      const before = tcpConnections;
      const code = [
        'import ctypes, glob, os, socket',
        'libc = ctypes.CDLL(None, use_errno=True)',
        "for f in glob.glob('/proc/*/ns/net') + glob.glob('/proc/*/task/*/ns/net'):",
        '    try:',
        '        fd = os.open(f, os.O_RDONLY)',
        "        print('setns', f, libc.setns(fd, 0), ctypes.get_errno())",
        '    except OSError as e:',
        "        print('open', f, e.errno)",
        'try:',
        `    s = socket.create_connection(('127.0.0.1', ${tcpPort}), timeout=2)`,
        "    print('CONNECTED', s.recv(100))",
        'except OSError as e:',
        "    print('no connection', e.errno)",
      ].join('\n');
      const run = await runPython(code, {});
      expect(run.stdout).toContain('no connection');
      expect(run.stdout).not.toContain('hello from the host');
      expect(tcpConnections).toBe(before);
    },
  );

  sandboxed(
    'sockets: no route out, and the host’s abstract unix sockets are out of reach',
    async () => {
      // Abstract unix sockets belong to a network namespace; the host's is not the sandbox's.
      const name = `flowgrpo-fault-${process.pid}`;
      let unixConnections = 0;
      const unix = createServer((s) => {
        unixConnections++;
        s.end();
      });
      await new Promise<void>((r) => unix.listen(`\0${name}`, r));
      try {
        const code = [
          'import socket',
          'def attempt(family, addr):',
          '    s = socket.socket(family, socket.SOCK_STREAM)',
          '    s.settimeout(2)',
          '    try:',
          '        s.connect(addr)',
          "        return 'CONNECTED'",
          '    except OSError as e:',
          "        return 'refused %s' % e.errno",
          "print('v4', attempt(socket.AF_INET, ('192.0.2.1', 80)))",
          "print('v6', attempt(socket.AF_INET6, ('2001:db8::1', 80)))",
          `print('unix', attempt(socket.AF_UNIX, '\\0${name}'))`,
          "print('ifaces', [n for _, n in socket.if_nameindex()])",
        ].join('\n');
        const run = await runPython(code, {});
        expect(run.stdout).not.toContain('CONNECTED');
        expect(run.stdout).toMatch(/^unix refused/m);
        expect(run.stdout).toContain("ifaces ['lo']");
        expect(unixConnections).toBe(0);
      } finally {
        await new Promise<void>((r) => unix.close(() => r()));
      }
    },
  );

  sandboxed(
    'the workspace: carried in and out of a clean run, untouched by a killed one',
    async () => {
      const ws = await Workspace.create();
      try {
        await writeFile(join(ws.dir, 'input.txt'), 'seven');
        const tool = createPythonTool();
        const ok = await tool.execute(
          { code: "print(open('input.txt').read())\nopen('out.txt', 'w').write('8')" },
          { workspace: ws },
        );
        expect(ok).toMatchObject({ ok: true, output: { stdout: 'seven\n' } });
        expect(await ws.listFiles()).toEqual(['input.txt', 'out.txt']);
        // Killed by its timeout: whatever it wrote stays in the tmpfs that died with it.
        const killed = await tool.execute(
          { code: "open('out.txt', 'w').write('garbage')\nwhile True: pass", timeout: 1 },
          { workspace: ws },
        );
        expect(killed).toMatchObject({ ok: false, errorCode: 'TOOL_TIMEOUT' });
        expect(await readFile(join(ws.dir, 'out.txt'), 'utf8')).toBe('8');
        // A symlink the code leaves is not carried out (only regular files and directories).
        await tool.execute(
          { code: "import os\nos.symlink('/etc/passwd', 'link')" },
          { workspace: ws },
        );
        expect(await ws.listFiles()).toEqual(['input.txt', 'out.txt']);
      } finally {
        await ws.cleanup();
      }
      expect(existsSync(ws.dir)).toBe(false);
    },
  );

  it('fails closed when bubblewrap is missing, and runs unisolated only when asked', async () => {
    const error = await runPython('print(1)', { bwrap: '/nonexistent/bwrap' }).catch((e) => e);
    expect(SandboxUnavailableError.isInstance(error)).toBe(true);
    expect((error as SandboxUnavailableError).fix).toMatch(/apt-get install bubblewrap/);
    // A bwrap that cannot create the sandbox (here: /bin/false) fails closed too.
    const broken = await runPython('print(1)', { bwrap: '/bin/false' }).catch((e) => e);
    expect(SandboxUnavailableError.isInstance(broken)).toBe(true);
    expect((broken as SandboxUnavailableError).fix).toMatch(/user namespaces/);
    // Through the tool: a failed call, nothing ran.
    const tool = createPythonTool({ bwrap: '/nonexistent/bwrap' });
    const result = await tool.execute({ code: "open('/tmp/x', 'w')" }, {});
    expect(result).toMatchObject({ ok: false, errorCode: 'SANDBOX_UNAVAILABLE' });
    // The explicit opt-out says so in its output.
    const plain = await createPythonTool({ isolation: 'none' }).execute({ code: 'print(2)' }, {});
    expect(plain).toMatchObject({
      ok: true,
      output: {
        stdout: '2\n',
        sandbox: { isolation: 'none', limits: { disk: 'rlimit-per-process' } },
      },
    });
  });
});

describe('network policy: hostile URLs and DNS answers', () => {
  it.each([
    ['::127.0.0.1', '127.0.0.1'],
    ['::7f00:1', '127.0.0.1'],
    ['2002:7f00:1::', '127.0.0.1'],
    ['2002:a9fe:a9fe::1', '169.254.169.254'],
    ['64:ff9b::10.0.0.1', '10.0.0.1'],
    ['::ffff:0:192.168.1.1', '192.168.1.1'],
    ['::ffff:127.0.0.1', '127.0.0.1'],
  ])('%s embeds %s and is refused', (ip, v4) => {
    expect(embeddedIPv4(ip)).toBe(v4);
    expect(isPrivateAddress(ip)).toBe(true);
  });

  it.each([
    '2001:0:4136:e378:8000:63bf:3fff:fdd2', // Teredo
    '64:ff9b:1::a00:1', // local-use NAT64
    'fc00::1',
    'fd12:3456::1',
    'fe80::1%eth0',
    'ff02::1',
    '::',
    '::1',
    '0.0.0.0',
    '100.64.0.1',
    '255.255.255.255',
    'not-an-ip',
  ])('%s is refused', (ip) => {
    expect(isPrivateAddress(ip)).toBe(true);
  });

  it.each(['2606:4700:4700::1111', '2002:808:808::1', '64:ff9b::808:808', '8.8.8.8'])(
    '%s is public (a public IPv4 inside 6to4/NAT64 stays public)',
    (ip) => {
      expect(isPrivateAddress(ip)).toBe(false);
    },
  );

  it('literal forms of loopback in URLs are refused before any connection', async () => {
    const before = tcpConnections;
    for (const host of [
      `[::127.0.0.1]:${tcpPort}`,
      `[::ffff:7f00:1]:${tcpPort}`,
      `[2002:7f00:1::]:${tcpPort}`,
      `0x7f.1:${tcpPort}`,
      `2130706433:${tcpPort}`,
      `127.1:${tcpPort}`,
      // Octal, padded, percent-encoded, full-width and other Unicode digit forms all normalise
      // (WHATWG URL parsing) to an address the policy refuses; so do the metadata endpoint in
      // hex and IPv6's unspecified and expanded loopback forms.
      `0177.0.0.1:${tcpPort}`,
      `017700000001:${tcpPort}`,
      `127.000.000.001:${tcpPort}`,
      `127.0.0.1.:${tcpPort}`,
      `%31%32%37.0.0.1:${tcpPort}`,
      `\uff11\uff12\uff17.0.0.1:${tcpPort}`,
      `127\u30020\u30020\u30021:${tcpPort}`,
      `0xa9.0xfe.0xa9.0xfe:${tcpPort}`,
      `0:${tcpPort}`,
      `[::]:${tcpPort}`,
      `[0:0:0:0:0:0:0:1]:${tcpPort}`,
      `LOCALHOST:${tcpPort}`,
    ]) {
      await expect(fetchWebPage(`http://${host}/`)).rejects.toSatisfy(
        (e) => UrlPolicyError.isInstance(e),
        host,
      );
    }
    expect(tcpConnections).toBe(before);
  });

  it('DNS rebinding: the check sees a public address, the connection would get loopback — refused', async () => {
    // The test's resolver answers "public" to the first question (checkUrl) and 127.0.0.1 to
    // every later one. Expected: the guarded client resolves once more at connect time, sees
    // 127.0.0.1 and refuses; the loopback server never gets a connection.
    let calls = 0;
    const lookup = async () => {
      calls++;
      return [{ address: calls === 1 ? '93.184.215.14' : '127.0.0.1', family: 4 }];
    };
    const before = tcpConnections;
    const error = await fetchWebPage(`http://rebind.test:${tcpPort}/`, { lookup }).catch((e) => e);
    expect(UrlPolicyError.isInstance(error)).toBe(true);
    expect((error as UrlPolicyError).addresses).toEqual(['127.0.0.1']);
    expect(calls).toBe(2);
    expect(tcpConnections).toBe(before);
  });

  it('the guarded client connects to the address it checked, on every redirect hop', async () => {
    // A policy that allows 127.0.0.1 only stands in for "public" here, so that a real server can
    // answer. Hop 1 (allowed) redirects to a name resolving to 127.0.0.2, which is refused at
    // connect time — the redirect target is checked like the first URL.
    const hits: string[] = [];
    const http = createHttpServer((req, res) => {
      hits.push(req.url ?? '');
      if (req.url === '/start') {
        res.writeHead(302, { location: `http://second.test:${port}/secret` });
        res.end();
      } else {
        res.writeHead(200, { 'content-type': 'text/plain' });
        res.end('page');
      }
    });
    await new Promise<void>((r) => http.listen(0, '127.0.0.1', r));
    const port = (http.address() as AddressInfo).port;
    const lookup = async (host: string) => [
      { address: host === 'first.test' ? '127.0.0.1' : '127.0.0.2', family: 4 },
    ];
    const guarded = createGuardedFetch({ lookup, isBlocked: (ip) => ip !== '127.0.0.1' });
    try {
      const first = await guarded(`http://first.test:${port}/start`);
      expect(first.status).toBe(302);
      const target = first.headers.get('location')!;
      const error = await guarded(target).catch((e) => e);
      expect(String(error?.cause?.message ?? error)).toMatch(/127\.0\.0\.2/);
      expect(hits).toEqual(['/start']);
      // checkUrl with the same resolver refuses the hop before the client is even asked.
      await expect(checkUrl(target, { lookup })).rejects.toSatisfy((e) =>
        UrlPolicyError.isInstance(e),
      );
    } finally {
      await guarded.close();
      await new Promise<void>((r) => http.close(() => r()));
    }
  });
});

describe('calculator: hostile input', () => {
  // Expected: a typed failure (or a finite number) returned quickly; never a throw out of the
  // tool, a hang, or code execution.
  const tool = createCalculatorTool();
  it.each([
    ['a power tower', '9^9^9^9', /too large|overflow/],
    ['100 000 nested parentheses', `${'('.repeat(100_000)}1${')'.repeat(100_000)}`, /too long/],
    [
      '200 nested parentheses and more',
      `${'('.repeat(500)}1${')'.repeat(500)}`,
      /nested too deeply/,
    ],
    ['5 000 minus signs', `${'-'.repeat(5000)}1`, /nested too deeply/],
    ['max() of 3 000 arguments', `max(${Array(3000).fill('1').join(',')})`, /Too many arguments/],
    // Names inherited from Object.prototype are not functions or constants of the calculator.
    ['a JavaScript name', 'constructor', /Unknown name/],
    ['a JavaScript name called', 'constructor(1)', /Unknown name/],
    ['a prototype name', '__proto__', /Unknown name/],
    ['a prototype method', 'toString(1)', /Unknown name/],
    ['a JavaScript call', 'process.exit(1)', /Unknown name|Unexpected/],
    ['division by zero', '1/0', /Division by zero/],
    ['a square root of -1', 'sqrt(-1)', /not a real number/],
    ['a 400-digit number', '1'.repeat(400), /too large|overflow/],
    ['a NUL byte', '\u0000', /Unexpected character/],
    ['the largest allowed call', `max(${Array(1000).fill('1').join(',')})`, null],
  ] as const)('%s', async (_label, expression, message) => {
    const result = await tool.execute({ expression }, {});
    if (message === null) {
      expect(result).toMatchObject({ ok: true, output: '1' });
    } else {
      expect(result.ok).toBe(false);
      expect(result.errorCode).toBe('CALCULATOR_ERROR');
      expect(result.error).toMatch(message);
    }
    // And the calculator keeps working.
    expect(calculate('6*7').text).toBe('42');
  });
});

// A page is whatever the URL's owner wants it to be. Each case is 2 MiB (the page reader's default
// cap) of one unclosed construct: before the fix each made the text extraction quadratic — hours
// of a blocked event loop, where no timeout can fire — so the test's own time limit is what fails.
describe('hostile HTML', () => {
  const twoMiB = (unit: string) => unit.repeat(Math.floor((2 * 1024 * 1024) / unit.length));
  it.each([
    ['unclosed tags', '<a'],
    ['unclosed tags with a lone quote', "<a'"],
    ['unclosed CDATA sections', '<![CDATA['],
    ['unclosed titles', '<title>'],
    ['unclosed script tags', '<script'],
    ['unclosed doctypes', '<!doctype'],
  ])('%s: extracted in one pass, nothing of the markup kept', (_name, unit) => {
    const { title, text } = htmlToText(twoMiB(unit));
    expect(title).toBe('');
    expect(text).toBe('');
  });

  it('ordinary markup reads as before', () => {
    expect(
      htmlToText(
        '<head><title>T &amp; x</title></head><p>a <b>bold</b> 3 < 5 <a href="x>y">link</a></p>' +
          '<script>var a = "<p>";</script><![CDATA[zz]]><ul><li>one<li>two</ul>',
      ),
    ).toEqual({ title: 'T & x', text: 'a bold 3 < 5 link\n\n- one\n- two' });
  });
});
