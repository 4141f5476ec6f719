import { readFileSync } from 'node:fs';
import { parseArgs } from 'node:util';
import { FlowGrpoError } from '@flowgrpo/core';
import { type CliIO, type Command, UsageError } from './command.js';
import { dataCommand } from './commands/data.js';
import { demoCommand } from './commands/demo.js';
import { evalCommand } from './commands/eval.js';
import { exportCommand } from './commands/export.js';
import { generateCommand } from './commands/generate.js';
import { serveCommand } from './commands/serve.js';
import { solveCommand } from './commands/solve.js';
import { trainCommand } from './commands/train.js';

export const commands: Command[] = [
  demoCommand,
  dataCommand,
  solveCommand,
  generateCommand,
  trainCommand,
  evalCommand,
  exportCommand,
  serveCommand,
];

function help(): string {
  const rows = commands.map((c) => `  ${c.name.padEnd(10)} ${c.summary}`).join('\n');
  return `flowgrpo — tool-using agents and Flow-GRPO training in Node.js\n\nUsage: flowgrpo <command> [options]\n\nCommands:\n${rows}\n\nRun 'flowgrpo <command> --help' for a command's options; 'flowgrpo --version' for the version.\n`;
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
    ? { text: `unknown ${command.name} action '${action}'\n\n${command.usage}`, code: 2 }
    : { text, code: 0 };
}

/** Runs the CLI and returns its exit code (0 ok, 1 failure, 2 usage error). */
export async function runCli(argv: string[], io: CliIO): Promise<number> {
  const [name, ...rest] = argv;
  if (!name || name === '--help' || name === '-h' || name === 'help') {
    io.stdout(help());
    return name ? 0 : 2;
  }
  if (name === '--version' || name === '-v') {
    io.stdout(`${cliVersion()}\n`);
    return 0;
  }
  const command = commands.find((c) => c.name === name);
  if (!command) {
    io.stderr(`flowgrpo: unknown command '${name}'\n\n${help()}`);
    return 2;
  }
  if (rest.includes('--help') || rest.includes('-h')) {
    const { text, code } = commandHelp(command, rest);
    if (code === 0) io.stdout(`${text}\n`);
    else io.stderr(`flowgrpo ${name}: ${text}\n`);
    return code;
  }
  try {
    const parsed = parseArgs({ args: rest, options: command.options, allowPositionals: true });
    return await command.run(parsed, io);
  } catch (error) {
    if (
      error instanceof UsageError ||
      (error as { code?: string }).code?.startsWith('ERR_PARSE_ARGS')
    ) {
      io.stderr(`flowgrpo ${name}: ${(error as Error).message}\n\n${command.usage}\n`);
      return 2;
    }
    if (FlowGrpoError.isInstance(error)) {
      io.stderr(`flowgrpo ${name}: ${error.message} [${error.code}]\n`);
      return 1;
    }
    throw error;
  }
}
