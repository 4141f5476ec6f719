import type { ParseArgsConfig } from 'node:util';
import { FlowGrpoError } from '@flowgrpo/core';

// A subcommand of `flowgrpo`: its options are declared for node:util's parseArgs, and `run`
// receives the parsed values. Output goes through `io` so tests can capture it.

export interface CliIO {
  stdout: (text: string) => void;
  stderr: (text: string) => void;
  /** Working directory that relative paths resolve against. */
  cwd: string;
  env: NodeJS.ProcessEnv;
  /** True when stderr is a TTY: progress bars are drawn only then. */
  interactive: boolean;
}

export type OptionSpec = NonNullable<ParseArgsConfig['options']>;

export interface ParsedArgs {
  values: Record<string, string | boolean | (string | boolean)[] | undefined>;
  positionals: string[];
}

export interface Command {
  name: string;
  summary: string;
  usage: string;
  options: OptionSpec;
  /**
   * For commands with actions (`data prepare`, `data inspect`): the help of one action, asked
   * for by `flowgrpo <command> <action> --help`; undefined for an action that does not exist.
   */
  actionUsage?(action: string): string | undefined;
  run(args: ParsedArgs, io: CliIO): Promise<number>;
}

/** A usage mistake (a missing or malformed option): printed with the command's usage, exit 2. */
export class UsageError extends FlowGrpoError {
  static override readonly code = 'USAGE_ERROR';
}

export function stringOption(args: ParsedArgs, name: string): string | undefined {
  const v = args.values[name];
  if (v === undefined) return undefined;
  if (typeof v !== 'string') throw new UsageError(`--${name} needs a value`);
  return v;
}

export function numberOption(args: ParsedArgs, name: string): number | undefined {
  const s = stringOption(args, name);
  if (s === undefined) return undefined;
  const n = Number(s);
  if (!Number.isFinite(n)) throw new UsageError(`--${name} must be a number, got '${s}'`);
  return n;
}
