import { type ParseArgsConfig, parseArgs } from 'node:util';
import { didYouMean } from './closest-name.js';

// The command line of a script (the examples' entry points): node:util's parseArgs, with the
// script's usage. A mistake in the options — an unknown one, a missing value — is a usage error
// printed as one `[USAGE_ERROR]` line and the usage, exit 2, as `flowgrpo` prints it; never
// parseArgs' ERR_PARSE_ARGS_* and a stack trace.

/**
 * Parses `process.argv` (`config.args` is ignored) (after a leading `--`, which `npm start -- …` passes through). `--help`
 * or `-h` prints `usage` and exits 0; a usage mistake prints it to stderr and exits 2.
 */
export function parseCommandLine<T extends ParseArgsConfig>(
  usage: string,
  config: T,
  argv: readonly string[] = process.argv.slice(2),
): ReturnType<typeof parseArgs<T>> {
  const args = argv[0] === '--' ? argv.slice(1) : [...argv];
  const end = args.indexOf('--');
  const options = end === -1 ? args : args.slice(0, end);
  if (options.includes('--help') || options.includes('-h')) {
    process.stdout.write(`${usage}\n`);
    process.exit(0);
  }
  try {
    return parseArgs<T>({ ...config, args });
  } catch (error) {
    const code = (error as { code?: unknown }).code;
    if (typeof code !== 'string' || !code.startsWith('ERR_PARSE_ARGS')) throw error;
    const unknown = /^Unknown option '(-[^']*)'/.exec((error as Error).message);
    const message = unknown
      ? `unknown option '${unknown[1]}'${didYouMean(unknown[1]!.replace(/^-+/, ''), Object.keys(config.options ?? {}), '--')}`
      : (error as Error).message;
    process.stderr.write(`[USAGE_ERROR] ${message}\n\n${usage}\n`);
    process.exit(2);
  }
}
