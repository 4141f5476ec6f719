import { readFileSync } from 'node:fs';
import { parseArgs } from 'node:util';
import { didYouMean } from '@flowgrpo/core';
import { type CliIO, type Command, UsageError } from './command.js';
import { dataCommand } from './commands/data.js';
import { demoCommand } from './commands/demo.js';
import { evalCommand } from './commands/eval.js';
import { exportCommand } from './commands/export.js';
import { generateCommand } from './commands/generate.js';
import { initCommand } from './commands/init.js';
import { serveCommand } from './commands/serve.js';
import { solveCommand } from './commands/solve.js';
import { trainCommand } from './commands/train.js';
import { viewCommand } from './commands/view.js';
import { debugRequested, reportError, USAGE_EXIT, withoutDebugFlag } from './error-report.js';
import { terminalSafe } from './terminal-text.js';

export const commands: Command[] = [
  initCommand,
  demoCommand,
  dataCommand,
  solveCommand,
  generateCommand,
  trainCommand,
  evalCommand,
  exportCommand,
  serveCommand,
  viewCommand,
];

function help(): string {
  const rows = commands.map((c) => `  ${c.name.padEnd(10)} ${c.summary}`).join('\n');
  return `flowgrpo — tool-using agents and Flow-GRPO training in Node.js\n\nUsage: flowgrpo <command> [options]\n\nCommands:\n${rows}\n\nRun 'flowgrpo <command> --help' for a command's options; 'flowgrpo --version' for the version.\n--debug (any command; or FLOWGRPO_DEBUG=1) prints an error's stack trace.\nExit status: 0 done, 1 error ([CODE] message, then the fix), 2 usage error, 130 interrupted.\n`;
}

/**
 * This package's version, from its package.json (one folder up from src/ and from dist/ alike,
 * so the source run and the built bin read the same file).
 */
export function cliVersion(): string {
  const pkg = JSON.parse(readFileSync(new URL('../package.json', import.meta.url), 'utf8')) as {
    version: string;
  };
  return pkg.version;
}

/** `<command> <action> --help`: the action's own help when the command has actions. */
function commandHelp(command: Command, rest: string[]): { text: string; code: number } {
  if (!command.actionUsage) return { text: command.usage, code: 0 };
  const { positionals } = parseArgs({
    args: rest.filter((a) => a !== '--help' && a !== '-h'),
    options: command.options,
    allowPositionals: true,
    strict: false,
  });
  const action = positionals[0];
  if (action === undefined) return { text: command.usage, code: 0 };
  const text = command.actionUsage(action);
  return text === undefined
    ? {
        text: `unknown ${command.name} action '${terminalSafe(action)}'\n\n${command.usage}`,
        code: USAGE_EXIT,
      }
    : { text, code: 0 };
}

/**
 * Runs the CLI and returns its exit code: 0 ok, 1 failure, 2 usage error (130 after Ctrl-C).
 * Errors are printed by reportError: `[CODE] message`, the fix, and a stack trace only with
 * `--debug` (anywhere before a `--`) or FLOWGRPO_DEBUG=1.
 */
export async function runCli(argvWithFlags: string[], io: CliIO): Promise<number> {
  const debug = debugRequested(argvWithFlags, io.env);
  const [name, ...rest] = withoutDebugFlag(argvWithFlags);
  if (!name || name === '--help' || name === '-h' || name === 'help') {
    io.stdout(help());
    return name ? 0 : USAGE_EXIT;
  }
  if (name === '--version' || name === '-v') {
    io.stdout(`${cliVersion()}\n`);
    return 0;
  }
  const command = commands.find((c) => c.name === name);
  if (!command) {
    const names = commands.map((c) => c.name);
    const what = name.startsWith('-') ? 'option' : 'command';
    io.stderr(
      `[${UsageError.code}] unknown ${what} '${terminalSafe(name)}'${didYouMean(name, names)}\n\n${help()}`,
    );
    return USAGE_EXIT;
  }
  const optionNames = Object.keys(command.options);
  try {
    if (rest.includes('--help') || rest.includes('-h')) {
      const { text, code } = commandHelp(command, rest);
      if (code === 0) io.stdout(`${text}\n`);
      else io.stderr(`[${UsageError.code}] ${text}\n`);
      return code;
    }
    const parsed = parseArgs({ args: rest, options: command.options, allowPositionals: true });
    return await command.run(parsed, io);
  } catch (error) {
    const { text, exitCode } = reportError(error, {
      debug,
      usage: command.usage,
      options: optionNames,
    });
    io.stderr(text);
    return exitCode;
  }
}
