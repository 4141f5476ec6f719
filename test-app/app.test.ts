import { type ChildProcess, execFile, spawn } from 'node:child_process';
import { once } from 'node:events';
import {
  cpSync,
  existsSync,
  mkdirSync,
  mkdtempSync,
  readdirSync,
  readFileSync,
  rmSync,
  writeFileSync,
} from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { afterAll, describe, expect, it } from 'vitest';

// Use from an app outside this repository (README "Use it in your app"): build the packages
// (dist + .d.ts), pack them with pnpm (workspace ranges rewritten), install the tarballs with npm
// into a fresh folder under the OS temp dir, typecheck that app with NodeNext and skipLibCheck
// off, and run it: it solves one question with FlowSolver + OpenAIEngine + the calculator against
// @flowgrpo/agent/testing's OpenAI-compatible server on 127.0.0.1, started from the installed
// package. Every step is a real process; the only network is the npm registry (for the
// packages' own dependencies: zod, openai, apache-arrow, …).
// The trainer and the CLI come too: the app trains a tiny planner for 2 GRPO steps with the
// installed @flowgrpo/trainer (onnxruntime-node from npm, its NuGet step skipped), and the
// installed `flowgrpo` bin answers --version.

const ROOT = resolve(dirname(fileURLToPath(import.meta.url)), '..');
const PACKAGES = [
  'core',
  'graph',
  'grpo-math',
  'reward-judge',
  'tools',
  'agent-solver',
  'models',
  'gateway',
  'viewer',
  'trainer-cuda',
  'cli',
];
const NAMES = [
  'core',
  'graph',
  'grpo',
  'reward',
  'tools',
  'agent',
  'models',
  'gateway',
  'viewer',
  'trainer',
  'cli',
].map((n) => `@flowgrpo/${n}`);
const TSC = join(ROOT, 'node_modules', 'typescript', 'bin', 'tsc');

const work = mkdtempSync(join(tmpdir(), 'flowgrpo-app-'));
const packs = join(work, 'packs');
const app = join(work, 'app');
const children: ChildProcess[] = [];
afterAll(() => {
  for (const child of children) if (child.exitCode === null) child.kill('SIGKILL');
  rmSync(work, { recursive: true, force: true });
});

/**
 * The environment for npm in the app: pnpm's own `npm_*` variables (the script that runs this
 * test, its package, pnpm's settings) would make npm think it runs a script of the monorepo;
 * registry, cache, proxy and certificate settings are kept.
 */
function npmEnv(): NodeJS.ProcessEnv {
  const keep =
    /^npm_config_(registry|cache|userconfig|globalconfig|(https_|no)?proxy|cafile|strict_ssl)$/i;
  const env: NodeJS.ProcessEnv = {};
  for (const [k, v] of Object.entries(process.env)) {
    if (/^(npm|pnpm)_/i.test(k) && !keep.test(k)) continue;
    env[k] = v;
  }
  // onnxruntime-node's install step downloads the CUDA EP from NuGet: not here (the CPU EP ships
  // in the npm package itself).
  env.ONNXRUNTIME_NODE_INSTALL ??= 'skip';
  return env;
}

/** Runs a command to completion; a failure shows its last lines of output (bounded). */
function run(
  command: string,
  args: string[],
  options: { cwd: string; env?: NodeJS.ProcessEnv },
): Promise<string> {
  return new Promise((done, fail) => {
    execFile(
      command,
      args,
      { ...options, maxBuffer: 64 * 1024 * 1024 },
      (error, stdout, stderr) => {
        if (!error) return done(stdout);
        const output = `${stdout}\n${stderr}`.trim();
        fail(
          new Error(
            `${command} ${args.join(' ')} (in ${options.cwd}) failed with exit code ` +
              `${error.code}:\n${output.length > 6000 ? `…${output.slice(-6000)}` : output}`,
          ),
        );
      },
    );
  });
}

/** Starts a long-running process and resolves with its first line of stdout. */
async function startAndReadLine(command: string, args: string[], cwd: string): Promise<string> {
  const child = spawn(command, args, { cwd, stdio: ['ignore', 'pipe', 'pipe'] });
  children.push(child);
  let out = '';
  let err = '';
  child.stderr!.on('data', (chunk: Buffer) => {
    err += chunk.toString();
  });
  for await (const chunk of child.stdout!) {
    out += (chunk as Buffer).toString();
    if (out.includes('\n')) return out.slice(0, out.indexOf('\n'));
  }
  await once(child, 'close').catch(() => undefined);
  throw new Error(
    `${args.join(' ')} ended without printing a line (exit ${child.exitCode}):\n${err}`,
  );
}

describe('an app outside the workspace', () => {
  it("the README's app is this app, word for word", () => {
    const readme = readFileSync(join(ROOT, 'README.md'), 'utf8');
    const section = readme.slice(readme.indexOf('## Use it in your app'));
    expect(section).toContain(
      `\`\`\`ts\n${readFileSync(join(ROOT, 'test-app/app/src/solve.ts'), 'utf8')}\`\`\``,
    );
  });

  it('pnpm builds dist and .d.ts for each package, /testing subpaths included', async () => {
    await run(
      'pnpm',
      [
        ...NAMES.flatMap((n) => ['--filter', `${n}...`]),
        '--workspace-concurrency=2',
        'run',
        'build',
      ],
      { cwd: ROOT },
    );
    for (const folder of PACKAGES) {
      for (const file of ['index.js', 'index.d.ts']) {
        expect(
          existsSync(join(ROOT, 'packages', folder, 'dist', file)),
          `${folder}/dist/${file}`,
        ).toBe(true);
      }
    }
    for (const folder of ['agent-solver', 'graph']) {
      expect(existsSync(join(ROOT, 'packages', folder, 'dist/testing/index.d.ts'))).toBe(true);
    }
  });

  it('pnpm packs each package with workspace ranges rewritten to versions', async () => {
    // `pnpm pack:all`'s second half (the build ran above): every public package, one folder.
    await run(process.execPath, [join(ROOT, 'scripts/pack-all.mjs'), '--out', packs], {
      cwd: ROOT,
    });
    const tarballs = readdirSync(packs).sort();
    // pnpm names a tarball after the package: @flowgrpo/core@0.1.0 → flowgrpo-core-0.1.0.tgz.
    expect(tarballs).toEqual(NAMES.map((n) => `${n.slice(1).replace('/', '-')}-0.1.0.tgz`).sort());
    const manifest = JSON.parse(
      await run('tar', ['-xzOf', join(packs, 'flowgrpo-agent-0.1.0.tgz'), 'package/package.json'], {
        cwd: work,
      }),
    );
    expect(manifest.dependencies['@flowgrpo/core']).toBe('^0.1.0');
    expect(JSON.stringify(manifest)).not.toContain('workspace:');
  });

  it('npm installs the tarballs into a fresh app folder', async () => {
    cpSync(join(ROOT, 'test-app', 'app'), app, {
      recursive: true,
      filter: (src) => !/[\\/](node_modules|dist)$/.test(src),
    });
    const tarballs = readdirSync(packs).map((f) => join(packs, f));
    await run(
      'npm',
      [
        'install',
        '--prefer-offline',
        '--no-audit',
        '--no-fund',
        '--loglevel=error',
        ...tarballs,
        // The app's own dev dependency (the typings of the Node.js it runs on).
        '@types/node@^20.19.0',
      ],
      { cwd: app, env: npmEnv() },
    );
    for (const name of NAMES)
      expect(existsSync(join(app, 'node_modules', name, 'package.json'))).toBe(true);
    // transformers.js (an optional peer of @flowgrpo/agent) is not pulled in.
    expect(existsSync(join(app, 'node_modules', '@huggingface', 'transformers'))).toBe(false);
  });

  it('a solver-only app (agent + tools) installs neither onnxruntime-node nor @huggingface/transformers', async () => {
    // docs/install.md's solver line: @flowgrpo/agent and @flowgrpo/tools (with core and reward,
    // their dependencies) — the local-model engines live in @flowgrpo/models and in the
    // optional peer @huggingface/transformers, which an app asks for only when it uses them.
    const solverApp = join(work, 'solver-app');
    mkdirSync(solverApp);
    writeFileSync(
      join(solverApp, 'package.json'),
      JSON.stringify({ name: 'solver-app', version: '0.0.0', private: true, type: 'module' }),
    );
    const light = ['core', 'reward', 'tools', 'agent'].map((n) =>
      join(packs, `flowgrpo-${n}-0.1.0.tgz`),
    );
    await run(
      'npm',
      ['install', '--prefer-offline', '--no-audit', '--no-fund', '--loglevel=error', ...light],
      { cwd: solverApp, env: npmEnv() },
    );
    const modules = join(solverApp, 'node_modules');
    expect(existsSync(join(modules, '@flowgrpo', 'agent', 'package.json'))).toBe(true);
    for (const heavy of ['onnxruntime-node', 'onnxruntime-common', '@huggingface/transformers'])
      expect(existsSync(join(modules, heavy)), heavy).toBe(false);
    // And it runs: the agent's public API loads without them.
    const out = await run(
      process.execPath,
      [
        '--input-type=module',
        '-e',
        "const a = await import('@flowgrpo/agent'); const t = await import('@flowgrpo/tools'); console.log(typeof a.FlowSolver, typeof t.createCalculatorTool);",
      ],
      { cwd: solverApp },
    );
    expect(out.trim()).toBe('function function');
  });

  it('the app typechecks against the packed .d.ts (NodeNext, skipLibCheck: false) and builds', async () => {
    // tsc prints every error; an empty output and exit code 0 mean the declarations all check.
    expect(await run(process.execPath, [TSC, '-p', '.'], { cwd: app })).toBe('');
    expect(existsSync(join(app, 'dist', 'solve.js'))).toBe(true);
  });

  it('every public entry point loads from the installed packages', async () => {
    const out = await run(process.execPath, ['dist/public-api.js'], { cwd: app });
    const counts = Object.fromEntries(
      out
        .trim()
        .split('\n')
        .map((line) => line.match(/^(\w+): (\d+) exports$/)!)
        .map((m) => [m[1], Number(m[2])]),
    );
    expect(Object.keys(counts).sort()).toEqual(
      [
        'agent',
        'agentTesting',
        'core',
        'graph',
        'graphTesting',
        'gateway',
        'grpo',
        'models',
        'modelsTesting',
        'reward',
        'tools',
        'trainer',
        'trainerDemo',
        'viewer',
      ].sort(),
    );
    for (const [name, n] of Object.entries(counts)) expect(n, name).toBeGreaterThan(0);
  });

  it('the app solves a question against the test server (calculator really runs: 12^2 = 144)', async () => {
    const baseURL = await startAndReadLine(process.execPath, ['dist/test-server.js'], app);
    expect(baseURL).toMatch(/^http:\/\/127\.0\.0\.1:\d+\/v1$/);
    const out = await run(process.execPath, ['dist/solve.js', 'What is 12 squared?'], {
      cwd: app,
      env: { ...process.env, OPENAI_BASE_URL: baseURL, MODEL: 'test-model' },
    });
    // The server scripted the planner's choice and the arguments "12^2"; 144 is the calculator's.
    expect(out).toBe(
      'step 1: calculator {"expression":"12^2"} → "144"\nanswer: 144 (stop: verifier_stop)\n',
    );
  });

  it('the app trains a tiny planner with the installed trainer (2 GRPO steps, a checkpoint)', async () => {
    const out = await run(process.execPath, ['dist/train.js', join(work, 'train')], { cwd: app });
    expect(out.trim().split('\n').at(-1)).toBe('steps: 2, checkpoint: yes');
    expect(
      existsSync(join(work, 'train', 'run', 'checkpoint-2', 'adapter_model.safetensors')),
    ).toBe(true);
  });

  it('the installed flowgrpo bin runs', async () => {
    const version = JSON.parse(
      readFileSync(join(ROOT, 'packages/cli/package.json'), 'utf8'),
    ).version;
    const out = await run(join(app, 'node_modules', '.bin', 'flowgrpo'), ['--version'], {
      cwd: app,
    });
    expect(out.trim()).toBe(version);
    // The templates ship in the package: init writes a starting point from the installed bin.
    const init = await run(
      join(app, 'node_modules', '.bin', 'flowgrpo'),
      ['init', join(work, 'init'), '--template', 'gateway-agent'],
      { cwd: work },
    );
    expect(init).toContain('flowgrpo train --config sft.json');
    for (const file of [
      'sft.json',
      'serve-train.json',
      'agent.ts',
      'data/sft.jsonl',
      'model/config.json',
    ])
      expect(existsSync(join(work, 'init', file)), file).toBe(true);
  });
});
