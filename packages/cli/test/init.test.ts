import { execFile } from 'node:child_process';
import {
  cpSync,
  existsSync,
  mkdirSync,
  mkdtempSync,
  readdirSync,
  readFileSync,
  rmSync,
  symlinkSync,
  writeFileSync,
} from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join, resolve } from 'node:path';
import { fileURLToPath, pathToFileURL } from 'node:url';
import { afterAll, describe, expect, it } from 'vitest';
import { runCli } from '../src/main.js';
import { captureIO } from './support.js';

// `flowgrpo init` as a newcomer meets it: the real bin, run from a folder under the OS temp dir
// (outside the repository), then the first command it prints, run as printed, to its checkpoint;
// every template's configs through the trainer's preflight (`train --dry-run`); and a folder that
// holds the user's files, which init refuses without touching them.

const ROOT = resolve(dirname(fileURLToPath(import.meta.url)), '../../..');
const BIN = join(ROOT, 'packages/cli/src/bin.ts');
const TSX = pathToFileURL(join(ROOT, 'node_modules/tsx/dist/loader.mjs')).href;
const work = mkdtempSync(join(tmpdir(), 'flowgrpo-init-'));
afterAll(() => rmSync(work, { recursive: true, force: true }));

/** The `flowgrpo` bin (from the sources) in `cwd`; resolves with its exit code and output. */
function flowgrpo(
  args: string[],
  cwd: string,
): Promise<{ code: number; stdout: string; stderr: string }> {
  return new Promise((done) => {
    execFile(
      process.execPath,
      ['--conditions=@flowgrpo/source', '--import', TSX, BIN, ...args],
      { cwd, env: { ...process.env, FLOWGRPO_DEBUG: '' }, maxBuffer: 16 * 1024 * 1024 },
      (error, stdout, stderr) =>
        done({ code: error ? Number(error.code ?? 1) : 0, stdout, stderr }),
    );
  });
}

/** The commands init printed after "Next:", comments left out, in order. */
function printedCommands(stdout: string): string[] {
  return stdout
    .slice(stdout.indexOf('Next:'))
    .split('\n')
    .slice(1)
    .map((line) => line.trim())
    .filter((line) => line !== '' && !line.startsWith('#'));
}

/** A printed `flowgrpo …` command as the bin's arguments (init prints no quoted words here). */
function argsOf(command: string): string[] {
  const [head, ...rest] = command.split(/\s+/);
  expect(head).toBe('flowgrpo');
  return rest;
}

describe('flowgrpo init', () => {
  it('math-tags: init, then the first printed command runs to a checkpoint; GRPO passes preflight', async () => {
    const init = await flowgrpo(['init', 'my-run'], work);
    expect(init.code, init.stderr).toBe(0);
    const commands = printedCommands(init.stdout);
    expect(commands[0]).toBe('cd my-run');
    expect(commands.slice(1).map((c) => c.split(' ').slice(0, 2).join(' '))).toEqual([
      'flowgrpo train',
      'flowgrpo train',
      'flowgrpo eval',
      'flowgrpo export',
    ]);
    const dir = join(work, 'my-run');
    for (const file of ['README.md', 'sft.json', 'grpo.json', 'model/config.json'])
      expect(existsSync(join(dir, file)), file).toBe(true);
    // The data in the documented formats: plain rows, and TRL's conversational SFT rows whose
    // prompt is the tag agent's.
    const row = JSON.parse(readFileSync(join(dir, 'data/train.jsonl'), 'utf8').split('\n')[0]!);
    expect(Object.keys(row).sort()).toEqual(['answer', 'question']);
    expect(row.answer).toMatch(/\n#### \d+$/);
    const sft = JSON.parse(readFileSync(join(dir, 'data/sft.jsonl'), 'utf8').split('\n')[0]!);
    expect(sft.messages.map((m: { role: string }) => m.role)).toEqual([
      'system',
      'user',
      'assistant',
    ]);
    expect(sft.messages[1].content).toBe(`Question: ${row.question}`);
    expect(sft.messages[2].content).toMatch(/<answer>\d+<\/answer>$/);

    const first = await flowgrpo(argsOf(commands[1]!), dir);
    expect(first.code, first.stderr).toBe(0);
    expect(first.stdout).toContain('checkpoint-80');
    expect(existsSync(join(dir, 'runs/sft/checkpoint-80/model.safetensors'))).toBe(true);

    // The second command's config, with the first's checkpoint now there.
    const grpo = await flowgrpo(['train', '--config', 'grpo.json', '--dry-run'], dir);
    expect(grpo.code, grpo.stderr).toBe(0);
    expect(grpo.stdout).toMatch(/^dry run: .*grpo\.json passed every check/);
    expect(existsSync(join(dir, 'runs/grpo'))).toBe(false);

    // The other templates' configs, from the same SFT checkpoint (it is the same tiny model):
    // flow-planner's grpo.json checks that the planner's ~2,500-byte prompt fits the positions.
    for (const template of ['flow-planner', 'gateway-agent']) {
      const other = join(work, template);
      const r = await flowgrpo(['init', template, '--template', template], work);
      expect(r.code, r.stderr).toBe(0);
      const sftCheck = await flowgrpo(['train', '--config', 'sft.json', '--dry-run'], other);
      expect(sftCheck.code, `${template}: ${sftCheck.stderr}`).toBe(0);
      cpSync(join(dir, 'runs/sft'), join(other, 'runs/sft'), { recursive: true });
      if (template === 'flow-planner') {
        const check = await flowgrpo(['train', '--config', 'grpo.json', '--dry-run'], other);
        expect(check.code, check.stderr).toBe(0);
      }
    }
  }, 600_000);

  it("gateway-agent: the agent program typechecks with strict settings (the template's tsconfig)", async () => {
    const dir = join(work, 'gateway-agent');
    if (!existsSync(dir))
      expect((await flowgrpo(['init', dir, '--template', 'gateway-agent'], work)).code).toBe(0);
    expect(readFileSync(join(dir, 'agent.ts'), 'utf8')).toContain("from 'openai'");
    // What `npm install` would give it: the openai SDK and Node's types, linked from the repo's.
    mkdirSync(join(dir, 'node_modules/@types'), { recursive: true });
    symlinkSync(
      join(ROOT, 'packages/agent-solver/node_modules/openai'),
      join(dir, 'node_modules/openai'),
    );
    symlinkSync(join(ROOT, 'node_modules/@types/node'), join(dir, 'node_modules/@types/node'));
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
