import { type ChildProcess, execFile, spawn } from 'node:child_process';
import {
  existsSync,
  mkdirSync,
  mkdtempSync,
  readdirSync,
  readFileSync,
  rmSync,
  symlinkSync,
  writeFileSync,
} from 'node:fs';
import { createServer } from 'node:http';
import type { AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import { dirname, join, resolve } from 'node:path';
import { fileURLToPath, pathToFileURL } from 'node:url';
import { afterAll, describe, expect, it } from 'vitest';
import { runCli } from '../src/main.js';
import { captureIO } from './support.js';

// `flowgrpo init` as a newcomer meets it: the real bin, run from a folder under the OS temp dir
// (outside the repository), then the commands it prints, as printed, from the folder it wrote.
// One template runs every command to the end, as each README promises of it: flow-planner (every
// command a flowgrpo one, about a minute on 2 cores) — on the 150 held-out questions the SFT model
// beats the untrained one and the GRPO adapter beats the SFT model it started from by at least 15
// points, the 95% intervals apart. The other two run what needs no training — math-tags (the
// default) its untrained eval, gateway-agent its untrained model served and evaluated by agent.ts
// — and every template's printed commands are those its README lists, with the checkpoints its
// configs write. The gateway's commands differ in two things only: `npm install` is the
// repository's openai and Node types linked in, and `flowgrpo serve` gets `--port 0` (agent.ts
// is told the port by GATEWAY_URL), so no test depends on port 8000 being free. Also: a folder
// that holds the user's files, or links, which init refuses without touching them.

const ROOT = resolve(dirname(fileURLToPath(import.meta.url)), '../../..');
const BIN = join(ROOT, 'packages/cli/src/bin.ts');
const TSX = pathToFileURL(join(ROOT, 'node_modules/tsx/dist/loader.mjs')).href;
const work = mkdtempSync(join(tmpdir(), 'flowgrpo-init-'));
afterAll(() => rmSync(work, { recursive: true, force: true }));

/** Node with the sources' condition and tsx, as `pnpm flowgrpo` runs the bin. */
const NODE_ARGS = ['--conditions=@flowgrpo/source', '--import', TSX];

/** `node ARGS` in `cwd`; resolves with its exit code and output. */
function node(
  args: string[],
  cwd: string,
  env: NodeJS.ProcessEnv = {},
): Promise<{ code: number; stdout: string; stderr: string }> {
  return new Promise((done) => {
    execFile(
      process.execPath,
      [...NODE_ARGS, ...args],
      { cwd, env: { ...process.env, FLOWGRPO_DEBUG: '', ...env }, maxBuffer: 64 * 1024 * 1024 },
      (error, stdout, stderr) =>
        done({ code: error ? Number(error.code ?? 1) : 0, stdout, stderr }),
    );
  });
}

/** The `flowgrpo` bin (from the sources) in `cwd`. */
const flowgrpo = (args: string[], cwd: string) => node([BIN, ...args], cwd);

/** The commands init printed after "Next:", comments left out, in order. */
function printedCommands(stdout: string): string[] {
  return stdout
    .slice(stdout.indexOf('Next:'))
    .split('\n')
    .slice(1)
    .map((l) => l.trim())
    .filter((l) => l !== '' && !l.startsWith('#'));
}

/** A printed `flowgrpo …` command's arguments. */
function argsOf(command: string): string[] {
  const [head, ...rest] = command.split(/\s+/);
  expect(head).toBe('flowgrpo');
  return rest;
}

/** The first printed command that starts with `prefix`. */
function find(commands: string[], prefix: string): string {
  const command = commands.find((c) => c.startsWith(prefix));
  expect(command, `a printed command starting '${prefix}'`).toBeDefined();
  return command!;
}

interface Accuracy {
  accuracy: number;
  lo: number;
  hi: number;
  n: number;
}

/** `flowgrpo eval --out`'s policies, by name. */
function evalFile(path: string): Record<string, Accuracy> {
  const { results } = JSON.parse(readFileSync(path, 'utf8')) as {
    results: { name: string; n: number; accuracy: number; accuracy_ci95: [number, number] }[];
  };
  return Object.fromEntries(
    results.map((r) => [
      r.name,
      { accuracy: r.accuracy, lo: r.accuracy_ci95[0], hi: r.accuracy_ci95[1], n: r.n },
    ]),
  );
}

/** init TEMPLATE into a new folder; its folder and printed commands (after the `cd`). */
async function init(template: string): Promise<{ dir: string; commands: string[] }> {
  const r = await flowgrpo(['init', template, '--template', template], work);
  expect(r.code, r.stderr).toBe(0);
  const commands = printedCommands(r.stdout);
  expect(commands[0]).toBe(`cd ${template}`);
  return { dir: join(work, template), commands: commands.slice(1) };
}

/** A JSON file of the folder. */
const json = (dir: string, file: string) =>
  JSON.parse(readFileSync(join(dir, file), 'utf8')) as Record<string, unknown>;

/**
 * What the printed commands and the README must agree on: each `flowgrpo` command is in the
 * README as printed, and the SFT checkpoint they name is the one sft.json writes (its
 * output_dir, its max_steps) — the one the GRPO config starts from.
 */
function expectCommandsMatch(dir: string, commands: string[]): string {
  const readme = readFileSync(join(dir, 'README.md'), 'utf8');
  for (const command of commands.filter((c) => c.startsWith('flowgrpo ')))
    expect(readme, `README.md lists '${command}'`).toContain(command);
  const sft = json(dir, 'sft.json');
  const checkpoint = `${sft.output_dir}/checkpoint-${sft.max_steps}`;
  expect(find(commands, 'flowgrpo export')).toContain(`--model ${checkpoint} `);
  return checkpoint;
}

describe('flowgrpo init: the printed commands, run as printed', () => {
  it('flow-planner: offline, every command to the end; SFT beats the untrained model, GRPO beats SFT by ≥ 15 points', async () => {
    const { dir, commands } = await init('flow-planner');
    expect(commands.map((c) => c.split(' ').slice(0, 2).join(' '))).toEqual([
      'flowgrpo train',
      'flowgrpo train',
      'flowgrpo eval',
      'flowgrpo eval',
      'flowgrpo export',
    ]);
    const grpoConfig = json(dir, 'grpo.json');
    expect(grpoConfig.model).toBe(expectCommandsMatch(dir, commands));
    // No server for the executor, verifier and generator: the roles run offline.
    expect(grpoConfig.agent).not.toHaveProperty('engine');
    const grpoCheckpoint = `${grpoConfig.output_dir}/checkpoint-${grpoConfig.max_steps}`;
    expect(commands[3]).toContain(`--adapter grpo=${grpoCheckpoint} `);

    for (const command of commands) {
      const r = await flowgrpo(argsOf(command), dir);
      expect(r.code, `${command}\n${r.stderr}`).toBe(0);
    }
    const { base: untrained } = evalFile(join(dir, 'eval-untrained.json'));
    const { base: sft, grpo } = evalFile(join(dir, 'eval.json'));
    for (const a of [untrained!, sft!, grpo!]) expect(a.n).toBe(150);
    expect(sft!.lo, 'SFT above the untrained model, the intervals apart').toBeGreaterThan(
      untrained!.hi,
    );
    expect(grpo!.accuracy - sft!.accuracy, 'GRPO − SFT').toBeGreaterThanOrEqual(0.15);
    expect(grpo!.lo, 'GRPO above SFT, the intervals apart').toBeGreaterThan(sft!.hi);
    expect(existsSync(join(dir, 'merged/model.safetensors'))).toBe(true);

    // As the README says: name a server for the roles and the run is refused, before anything
    // runs, while that server does not answer (here: a port nothing listens on).
    const port = await closedPort();
    const engine = { base_url: `http://127.0.0.1:${port}/v1`, model: 'some-model' };
    writeFileSync(
      join(dir, 'grpo-engine.json'),
      JSON.stringify({
        ...grpoConfig,
        output_dir: 'runs/grpo-engine',
        agent: { ...(grpoConfig.agent as object), engine },
      }),
    );
    const refused = await flowgrpo(['train', '--config', 'grpo-engine.json', '--dry-run'], dir);
    expect(refused.code).toBe(1);
    expect(refused.stderr).toContain('[ENDPOINT_UNREACHABLE]');
    expect(refused.stderr).toContain(engine.base_url);
    expect(existsSync(join(dir, 'runs/grpo-engine'))).toBe(false);
  }, 900_000);

  it('math-tags (the default): the data as documented; the untrained eval as printed; the SFT run passes preflight', async () => {
    const init = await flowgrpo(['init', 'my-run'], work);
    expect(init.code, init.stderr).toBe(0);
    expect(init.stdout).toContain('math-tags');
    const all = printedCommands(init.stdout);
    expect(all[0]).toBe('cd my-run');
    const commands = all.slice(1);
    const dir = join(work, 'my-run');
    expect(commands.map((c) => c.split(' ').slice(0, 2).join(' '))).toEqual([
      'flowgrpo train',
      'flowgrpo train',
      'flowgrpo eval',
      'flowgrpo eval',
      'flowgrpo export',
    ]);
    expect(json(dir, 'grpo.json').model).toBe(expectCommandsMatch(dir, commands));

    // The data in the documented formats: plain rows (500 for GRPO, 150 held out), and TRL's
    // conversational SFT rows whose system prompt is the GRPO agent's.
    const rows = (file: string) =>
      readFileSync(join(dir, file), 'utf8')
        .trimEnd()
        .split('\n')
        .map((l) => JSON.parse(l));
    const train = rows('data/train.jsonl');
    expect([train.length, rows('data/eval.jsonl').length]).toEqual([500, 150]);
    expect(Object.keys(train[0]).sort()).toEqual(['answer', 'question']);
    expect(train[0].answer).toMatch(/\n#### \d+$/);
    const sft = rows('data/sft.jsonl');
    expect(sft[0].messages.map((m: { role: string }) => m.role)).toEqual([
      'system',
      'user',
      'assistant',
    ]);
    expect(sft[0].messages[0].content).toBe(
      (json(dir, 'grpo.json').agent as { system_prompt: string }).system_prompt,
    );
    expect(sft[0].messages[1].content).toMatch(/^Question: /);
    expect(sft[0].messages.at(-1).content).toMatch(/<answer>\d+<\/answer>$/);

    const sftCheck = await flowgrpo(['train', '--config', 'sft.json', '--dry-run'], dir);
    expect(sftCheck.code, sftCheck.stderr).toBe(0);
    expect(sftCheck.stdout).toMatch(/^dry run: .*sft\.json passed every check/);
    expect(existsSync(join(dir, 'runs'))).toBe(false);

    // The untrained model's eval (GRPO's config: the tag agent with its prompt), as printed:
    // it needs no checkpoint, and the untrained model solves nothing.
    const untrainedEval = find(
      commands,
      'flowgrpo eval --config grpo.json --data data/eval.jsonl --model model',
    );
    const r = await flowgrpo(argsOf(untrainedEval), dir);
    expect(r.code, r.stderr).toBe(0);
    const { base: untrained } = evalFile(join(dir, 'eval-untrained.json'));
    expect(untrained!.n).toBe(150);
    expect(untrained!.accuracy).toBeLessThan(0.05);
  }, 300_000);

  it('gateway-agent: the untrained model served as printed, evaluated by agent.ts', async () => {
    const { dir, commands } = await init('gateway-agent');
    expect(commands.map((c) => c.split(' ').slice(0, 2).join(' '))).toEqual([
      'flowgrpo train',
      'npm install',
      'flowgrpo serve',
      'npx tsx',
      'flowgrpo serve',
      'npx tsx',
      'flowgrpo serve',
      'npx tsx',
      'flowgrpo export',
    ]);
    const checkpoint = expectCommandsMatch(dir, commands);
    const train = json(dir, 'serve-train.json');
    expect(commands[2]).toBe(
      `flowgrpo serve --model ${checkpoint} --tokenizer model --train serve-train.json`,
    );
    expect(commands.at(-1)).toContain(`--adapter ${train.output_dir}/adapters/policy `);

    // Step 4, as printed: the untrained model, and agent.ts --eval against it.
    const serve = commands.indexOf(
      'flowgrpo serve --model model --tokenizer model --served-model-name untrained',
    );
    expect(serve).toBeGreaterThan(0);
    expect(commands[serve + 1]).toBe('npx tsx agent.ts --eval');
    linkAgentPackages(dir);
    const server = spawn(
      process.execPath,
      [...NODE_ARGS, BIN, ...argsOf(commands[serve]!), '--port', '0'],
      // Its artifacts cache (under the OS temp dir) inside the test's folder.
      { cwd: dir, env: { ...process.env, TMPDIR: work }, stdio: ['ignore', 'pipe', 'pipe'] },
    );
    try {
      const gateway = (await listening(server)).replace(/\/v1$/, '');
      const r = await node(commands[serve + 1]!.split(/\s+/).slice(2), dir, {
        GATEWAY_URL: gateway,
      });
      expect(r.code, r.stderr).toBe(0);
      expect(r.stdout).toMatch(/untrained\s+0\.0% \[0\.0, 2\.5\]\s+\(0\/150\)/);
    } finally {
      await stop(server);
    }
    expect(server.exitCode).toBe(0);
    const results = json(dir, 'eval.json') as Record<string, { n: number; right: number }>;
    expect(Object.keys(results)).toEqual(['untrained']);
    expect(results.untrained!.n).toBe(150);
  }, 300_000);
});

/** A port nothing listens on: one the OS handed out, then closed. */
async function closedPort(): Promise<number> {
  const server = createServer();
  await new Promise<void>((done) => server.listen(0, '127.0.0.1', done));
  const { port } = server.address() as AddressInfo;
  await new Promise((done) => server.close(done));
  return port;
}

/** What `npm install` gives the agent program: the openai SDK and Node's types, linked. */
function linkAgentPackages(dir: string): void {
  if (existsSync(join(dir, 'node_modules/openai'))) return;
  mkdirSync(join(dir, 'node_modules/@types'), { recursive: true });
  symlinkSync(
    join(ROOT, 'packages/agent-solver/node_modules/openai'),
    join(dir, 'node_modules/openai'),
  );
  symlinkSync(join(ROOT, 'node_modules/@types/node'), join(dir, 'node_modules/@types/node'));
}

/** The gateway's base URL, once `flowgrpo serve` prints that it is listening. */
function listening(server: ChildProcess): Promise<string> {
  return new Promise((resolve, reject) => {
    let out = '';
    let err = '';
    server.stderr!.on('data', (d) => {
      err += d;
    });
    server.stdout!.on('data', (d) => {
      out += d;
      const m = /listening on (http:\/\/\S+\/v1)/.exec(out);
      if (m) resolve(m[1]!);
    });
    server.on('exit', (code) => reject(new Error(`flowgrpo serve exited ${code}: ${err}`)));
  });
}

/** Ctrl-C, then the server's exit. */
function stop(server: ChildProcess): Promise<void> {
  return new Promise((resolve) => {
    if (server.exitCode !== null || server.signalCode !== null) return resolve();
    server.once('exit', () => resolve());
    server.kill('SIGINT');
  });
}

describe('flowgrpo init', () => {
  it("gateway-agent: the agent program typechecks with strict settings (the template's tsconfig)", async () => {
    const dir = join(work, 'gateway-agent');
    if (!existsSync(dir))
      expect((await flowgrpo(['init', dir, '--template', 'gateway-agent'], work)).code).toBe(0);
    expect(readFileSync(join(dir, 'agent.ts'), 'utf8')).toContain("from 'openai'");
    linkAgentPackages(dir);
    const tsc = await new Promise<{ code: number; out: string }>((done) =>
      execFile(
        process.execPath,
        [join(ROOT, 'node_modules/typescript/bin/tsc'), '-p', '.'],
        { cwd: dir },
        (error, stdout, stderr) => done({ code: error ? 1 : 0, out: stdout + stderr }),
      ),
    );
    expect(tsc.out).toBe('');
    expect(tsc.code).toBe(0);
  }, 120_000);

  it('never writes through a symbolic link inside DIR, even with --force; DIR itself may be one', async () => {
    // The fault: `data` linked to a folder elsewhere, and init --force wrote train.jsonl,
    // eval.jsonl and sft.jsonl there. Each link below is refused before the first write, and
    // what it points to stays as it was.
    const elsewhere = join(work, 'elsewhere');
    mkdirSync(elsewhere);
    writeFileSync(join(elsewhere, 'mine.jsonl'), '{"mine": 1}\n');
    const outsideFile = join(work, 'outside-sft.json');
    writeFileSync(outsideFile, "not init's\n");
    const links: [string, string][] = [
      ['data', elsewhere], // a folder init writes into
      ['sft.json', outsideFile], // a file init writes
      ['model', join(work, 'no-such-model')], // a link to nothing: init would create it there
    ];
    for (const [name, target] of links) {
      const dir = join(work, `linked-${name.replace('.', '-')}`);
      mkdirSync(dir);
      symlinkSync(target, join(dir, name));
      const io = captureIO(work);
      expect(await runCli(['init', dir, '--force'], io), name).toBe(1);
      expect(io.err).toContain(
        `[SYMLINK_REFUSED] ${join(dir, name)} is a symbolic link (→ ${target}); flowgrpo init writes inside ${dir} and never through a link`,
      );
      expect(io.err).toContain(`fix: remove the link (rm ${join(dir, name)} removes the link only`);
      expect(readdirSync(dir), name).toEqual([name]); // nothing written beside it
    }
    expect(readdirSync(elsewhere)).toEqual(['mine.jsonl']);
    expect(readFileSync(join(elsewhere, 'mine.jsonl'), 'utf8')).toBe('{"mine": 1}\n');
    expect(readFileSync(outsideFile, 'utf8')).toBe("not init's\n");
    expect(existsSync(join(work, 'no-such-model'))).toBe(false);

    // DIR itself a link to an empty folder (a run folder on another disk): written there.
    const real = join(work, 'real-target');
    mkdirSync(real);
    symlinkSync(real, join(work, 'dir-link'));
    const ok = captureIO(work);
    expect(await runCli(['init', 'dir-link', '--model', '/models/qwen'], ok), ok.err).toBe(0);
    expect(existsSync(join(real, 'data', 'train.jsonl'))).toBe(true);
  });

  it('refuses a folder that holds files, and never replaces one, even with --force', async () => {
    const dir = join(work, 'mine');
    mkdirSync(dir);
    writeFileSync(join(dir, 'sft.json'), 'my own file\n');
    const io = captureIO(work);
    expect(await runCli(['init', dir], io)).toBe(1);
    expect(io.err).toMatch(/^\[FOLDER_NOT_EMPTY\] .*mine is not empty \(1 entry: sft\.json\)/);
    expect(io.err).toContain('--force');
    const forced = captureIO(work);
    expect(await runCli(['init', dir, '--force'], forced)).toBe(1);
    expect(forced.err).toMatch(
      /^\[FOLDER_NOT_EMPTY\] .*already holds sft\.json, which init would write/,
    );
    // Refused before the first write: the user's file as it was, nothing added.
    expect(readFileSync(join(dir, 'sft.json'), 'utf8')).toBe('my own file\n');
    expect(existsSync(join(dir, 'grpo.json'))).toBe(false);
    expect(existsSync(join(dir, 'model'))).toBe(false);

    // --force beside files that do not collide: written, the user's untouched.
    const beside = join(work, 'beside');
    mkdirSync(beside);
    writeFileSync(join(beside, 'notes.txt'), 'keep\n');
    const ok = captureIO(work);
    expect(await runCli(['init', beside, '--force', '--model', '/models/qwen'], ok), ok.err).toBe(
      0,
    );
    expect(readFileSync(join(beside, 'notes.txt'), 'utf8')).toBe('keep\n');
    // An absolute DIR is printed as given, never as a path relative to the working directory.
    expect(ok.out).toContain(`wrote ${beside}/:`);
    expect(printedCommands(ok.out)[0]).toBe(`cd ${beside}`);
    // --model: no tiny model; the configs name the user's model and tokenizer.
    expect(existsSync(join(beside, 'model'))).toBe(false);
    expect(JSON.parse(readFileSync(join(beside, 'sft.json'), 'utf8')).model).toBe('/models/qwen');
    expect(JSON.parse(readFileSync(join(beside, 'grpo.json'), 'utf8')).tokenizer).toBe(
      '/models/qwen',
    );

    const usage = captureIO(work);
    expect(await runCli(['init', join(work, 'x'), '--template', 'math'], usage)).toBe(2);
    expect(usage.err).toContain('--template must be math-tags, flow-planner, gateway-agent');
  });
});
