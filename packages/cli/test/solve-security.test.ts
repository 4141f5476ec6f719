import { execFile } from 'node:child_process';
import { existsSync, readdirSync, readlinkSync } from 'node:fs';
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { promisify } from 'node:util';
import { OpenAITestServer, reply, schemaResponder } from '@flowgrpo/agent/testing';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';

// The attack of issue #12 end to end: the real `flowgrpo solve` bin, as a subprocess, with the
// python tool, against the scripted OpenAI-compatible server on 127.0.0.1. The "model" asks the
// python tool to run hostile code that reads every /proc entry it can (the CLI's environment and
// command line held the secrets), writes outside its workspace and leaves a setsid child and a
// double-forked daemon behind. Expected: the tool result — which the solver sends back to the
// server in later prompts — carries no secret; no process of the sandbox and no file outside it
// survive; the CLI exits on its own.

const ROOT = join(dirname(fileURLToPath(import.meta.url)), '../../..');
const run = promisify(execFile);
const PY = 'Python_Code_Generator_Tool';

let server: OpenAITestServer;
let dir: string;
beforeEach(async () => {
  server = await OpenAITestServer.start({ model: 'qwen' });
  dir = await mkdtemp(join(tmpdir(), 'flowgrpo-solve-sec-'));
});
afterEach(async () => {
  await server.close();
  await rm(dir, { recursive: true, force: true });
});

const marker = `flowgrpo-solve-pwned-${process.pid}`;
const ATTACK = [
  'import glob, os, subprocess, sys, time',
  "print(os.readlink('/proc/self/ns/pid'))",
  "print('shadow', os.path.exists('/etc/shadow'), 'root', os.path.exists('/root'))",
  'try:',
  `    open('/${marker}', 'w').write('x')`,
  'except OSError as e:',
  "    print('root fs', e.errno)",
  "subprocess.Popen([sys.executable, '-c', 'import time; time.sleep(300)'], start_new_session=True)",
  'if os.fork() == 0:',
  '    os.setsid()',
  '    if os.fork() == 0:',
  '        time.sleep(300)',
  '    os._exit(0)',
  "print('attack done')",
  // Last, as it is long: the solver's memory keeps the first 2000 characters of a result.
  'seen = []',
  "for f in glob.glob('/proc/*/environ') + glob.glob('/proc/*/cmdline'):",
  '    try:',
  "        seen.append(open(f, 'rb').read().decode('utf8', 'replace'))",
  '    except OSError:',
  '        pass',
  "print('PROC', ' | '.join(seen).replace(chr(0), ' '))",
].join('\n');

function processesInNamespace(ns: string): number[] {
  return readdirSync('/proc')
    .filter((p) => /^\d+$/.test(p))
    .filter((p) => {
      try {
        return readlinkSync(`/proc/${p}/ns/pid`) === ns;
      } catch {
        return false;
      }
    })
    .map(Number);
}

function solve(args: string[], env: Record<string, string>) {
  return run(
    process.execPath,
    [
      '--conditions=@flowgrpo/source',
      '--import',
      'tsx',
      'packages/cli/src/bin.ts',
      'solve',
      ...args,
    ],
    { cwd: ROOT, timeout: 90_000, env: { ...process.env, NO_COLOR: '1', ...env } },
  );
}

describe('flowgrpo solve with hostile python (subprocess)', () => {
  it('no secret reaches the tool result, nothing survives the run', async () => {
    const key = `sk-cmdline-${Math.random().toString(36).slice(2)}`;
    const envSecret = `env-secret-${Math.random().toString(36).slice(2)}`;
    server.setFallback(
      'chat',
      reply.text(
        schemaResponder({
          tools: [PY],
          values: { code: ATTACK, sub_goal: 'inspect the machine' },
          stopAtVerification: 1,
          answer: 'Answer: done',
        }),
      ),
    );
    const { stdout, stderr } = await solve(
      [
        'q',
        '--base-url',
        server.baseURL,
        '--model',
        'qwen',
        '--tools',
        'python',
        '--api-key',
        key,
        '--json',
      ],
      { FLOWGRPO_ATTACK_SECRET: envSecret },
    );
    // The key on the command line is warned about, and still used.
    expect(stderr).toMatch(/--api-key is visible to other processes/);
    expect(server.requests[0]!.headers.authorization).toBe(`Bearer ${key}`);
    const toolOut = JSON.stringify(JSON.parse(stdout).steps[0].result.output);
    expect(toolOut).toContain('attack done');
    // Everything the model was sent after the tool ran: the tool's output is in there (PROC …),
    // the secrets are not.
    const bodies = server.requests.map((r) => r.rawBody).join('\n');
    expect(bodies).toContain('attack done');
    expect(toolOut).toContain('PROC PATH=');
    expect(bodies).not.toContain(key);
    expect(bodies).not.toContain(envSecret);
    expect(bodies).toContain('shadow False root False');
    // Nothing of the sandbox survives the CLI (it has exited: execFile returned).
    const ns = /pid:\[\d+\]/.exec(toolOut)?.[0];
    expect(ns).toBeDefined();
    expect(processesInNamespace(ns!)).toEqual([]);
    expect(existsSync(`/${marker}`)).toBe(false);
  }, 120_000);

  it('--api-key-file: the key reaches the server, no warning', async () => {
    const keyFile = join(dir, 'key');
    await writeFile(keyFile, 'sk-from-file\n', { mode: 0o600 });
    server.setFallback(
      'chat',
      reply.text(schemaResponder({ tools: ['None'], stopAtVerification: 1, answer: 'Answer: 1' })),
    );
    const { stderr } = await solve(
      [
        'q',
        '--base-url',
        server.baseURL,
        '--model',
        'qwen',
        '--tools',
        'calculator',
        '--api-key-file',
        keyFile,
      ],
      {},
    );
    expect(stderr).not.toMatch(/warning/);
    expect(server.requests[0]!.headers.authorization).toBe('Bearer sk-from-file');
  }, 120_000);
});
