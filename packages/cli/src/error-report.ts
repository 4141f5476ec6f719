import { didYouMean, FlowGrpoError, systemError } from '@flowgrpo/core';
import { UsageError } from './command.js';
import { terminalSafe } from './terminal-text.js';

// How an error that ends a command is shown: one line `[CODE] message`, then the fix on its own
// line, exit 1; a usage mistake also prints the command's usage and exits 2. A user never sees a
// stack trace for their own mistake: Node's system errors (a file where a folder belongs, a full
// disk, a taken port) are mapped to typed errors naming the path, and anything else is an
// INTERNAL_ERROR whose stack is printed only with --debug or FLOWGRPO_DEBUG=1.

/** Exit status of a usage mistake (as getopt-style tools, and Python's argparse, use). */
export const USAGE_EXIT = 2;

/**
 * Fixes for codes thrown by the libraries without a hint of their own: what the user can do is
 * the same wherever these come from.
 */
const FALLBACK_FIXES: Record<string, string> = {
  FILE_NOT_FOUND: 'check the path (relative paths resolve against the working directory)',
  EXECUTION_PROVIDER_UNAVAILABLE:
    'use --device cpu (or "device": "cpu"), or install an onnxruntime-node build with that execution provider',
  DATA_FORMAT_ERROR:
    'fix the file at the line or row named (for a data set, check "data_format"), or write it again',
  SAFETENSORS_ERROR: 'the weights file is damaged or not safetensors: download or export it again',
  UNSUPPORTED_ARCHITECTURE:
    'use a supported decoder (Qwen2, Qwen3, Llama, Mistral: see packages/models/docs/models.md)',
  WEIGHTS_MISMATCH:
    'the adapter or weights were made for another model: use the model they were trained from',
  LLM_REQUEST_ERROR: 'check that the server at the base URL is running and serves that model',
  LLM_TIMEOUT: 'the server is slow or overloaded: raise the timeout, or check the server',
  SANDBOX_UNAVAILABLE: 'install bubblewrap (apt-get install bubblewrap) for the python tool',
};

/** Node's parseArgs errors are usage mistakes. */
function isParseArgsError(error: unknown): boolean {
  const code = (error as { code?: unknown } | null)?.code;
  return typeof code === 'string' && code.startsWith('ERR_PARSE_ARGS');
}

/** parseArgs' message, with the closest known option suggested for an unknown one. */
function parseArgsMessage(error: Error, options: readonly string[]): string {
  const unknown = /^Unknown option '(-[^']*)'/.exec(error.message);
  if (!unknown) return error.message;
  const given = unknown[1]!;
  return `unknown option '${given}'${didYouMean(given.replace(/^-+/, ''), options, '--')}`;
}

/** The stack and every cause below it, for --debug. */
function stackChain(error: unknown): string {
  const parts: string[] = [];
  const seen = new Set<unknown>();
  for (let e = error; e !== undefined && e !== null && !seen.has(e); ) {
    seen.add(e);
    parts.push(
      e instanceof Error ? (e.stack ?? `${e.name}: ${e.message}`) : `thrown: ${String(e)}`,
    );
    e = e instanceof Error ? e.cause : undefined;
    if (e !== undefined) parts.push('caused by:');
  }
  return `${parts.join('\n')}\n`;
}

/** `[CODE] message` and `fix: …` lines, terminal-safe (messages can quote servers and models). */
export function errorLines(code: string, message: string, fix: string | undefined): string {
  const safe = terminalSafe(message);
  return `[${code}] ${safe}\n${fix ? `fix: ${terminalSafe(fix)}\n` : ''}`;
}

/** What to print for `error` and the exit status. */
export function reportError(
  error: unknown,
  o: { debug: boolean; usage?: string; options?: readonly string[] },
): { text: string; exitCode: number } {
  const debug = o.debug ? stackChain(error) : '';
  if (UsageError.isInstance(error) || isParseArgsError(error)) {
    const message = UsageError.isInstance(error)
      ? error.message
      : parseArgsMessage(error as Error, o.options ?? []);
    const hint = UsageError.isInstance(error) ? error.hint : undefined;
    return {
      text: `${errorLines(UsageError.code, message, hint)}${o.usage ? `\n${o.usage}\n` : ''}${debug}`,
      exitCode: USAGE_EXIT,
    };
  }
  const typed = FlowGrpoError.isInstance(error) ? error : systemError(error);
  if (typed)
    return {
      text: errorLines(typed.code, typed.message, typed.hint ?? FALLBACK_FIXES[typed.code]) + debug,
      exitCode: 1,
    };
  const message = error instanceof Error ? error.message : String(error);
  return {
    text:
      errorLines(
        'INTERNAL_ERROR',
        message,
        o.debug
          ? 'this is a bug in flowgrpo: please report it with the trace below'
          : 'run again with --debug (or FLOWGRPO_DEBUG=1) for the stack trace, and report it as a bug',
      ) + debug,
    exitCode: 1,
  };
}

/** True when the stack should be printed: --debug on the command line or FLOWGRPO_DEBUG set. */
export function debugRequested(argv: readonly string[], env: NodeJS.ProcessEnv): boolean {
  const v = env.FLOWGRPO_DEBUG;
  const fromEnv = v !== undefined && v !== '' && v !== '0' && v.toLowerCase() !== 'false';
  const end = argv.indexOf('--');
  return fromEnv || (end === -1 ? argv : argv.slice(0, end)).includes('--debug');
}

/** `argv` without the global --debug flag (before a `--` terminator). */
export function withoutDebugFlag(argv: readonly string[]): string[] {
  const end = argv.indexOf('--');
  return argv.filter((a, i) => a !== '--debug' || (end !== -1 && i > end));
}
