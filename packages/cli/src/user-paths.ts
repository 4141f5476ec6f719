import { existsSync, readFileSync, statSync } from 'node:fs';
import {
  ConfigError,
  FileNotFoundError,
  IsADirectoryError,
  NotADirectoryError,
  systemError,
} from '@flowgrpo/core';

// Paths the user names (a config, a data file, a model folder, an adapter): checked for what they
// must be before anything reads them, so a missing path, a folder where a file belongs or a file
// where a folder belongs is one line that says which option or key it was and what to give.

/** `path` must be an existing file; `what` names the option or key ("--config", "train_file"). */
export function requireFile(path: string, what: string): void {
  if (!existsSync(path))
    throw new FileNotFoundError(path, {
      hint: `check ${what} (relative paths resolve against the working directory)`,
    });
  if (statSync(path).isDirectory())
    throw new IsADirectoryError(
      `${what}: ${path} is a folder, where a file belongs`,
      { path, errno: 'EISDIR' },
      { hint: `give ${what} the path of a file (inside that folder, perhaps)` },
    );
}

/** `path` must be an existing folder. */
export function requireFolder(path: string, what: string): void {
  if (!existsSync(path))
    throw new FileNotFoundError(path, {
      hint: `check ${what} (relative paths resolve against the working directory)`,
    });
  if (!statSync(path).isDirectory())
    throw new NotADirectoryError(
      `${what}: ${path} is a file, where a folder belongs`,
      { path, errno: 'ENOTDIR' },
      { hint: `give ${what} a folder (the one holding that file, perhaps)` },
    );
}

/** Line and column (1-based) of a character offset. */
function lineColumn(text: string, offset: number): { line: number; column: number } {
  const before = text.slice(0, offset);
  const line = before.split('\n').length;
  return { line, column: offset - before.lastIndexOf('\n') };
}

/**
 * The JSON in file `path`: invalid JSON is a ConfigError naming the file, line and column.
 * `what` names the option or key that gave the path.
 */
export function readJsonFile(path: string, what: string): unknown {
  requireFile(path, what);
  let text: string;
  try {
    text = readFileSync(path, 'utf8');
  } catch (cause) {
    throw systemError(cause, { what }) ?? cause;
  }
  try {
    return JSON.parse(text);
  } catch (cause) {
    const message = (cause as Error).message;
    // V8 names the character offset ("… in JSON at position 42"); people read lines.
    const at = /at position (\d+)/.exec(message);
    const where = at
      ? (({ line, column }) => `:${line}:${column}`)(lineColumn(text, Number(at[1])))
      : text.trim() === ''
        ? ' (the file is empty)'
        : '';
    throw new ConfigError(
      `${path}${where}: not valid JSON: ${message.replace(/ in JSON at position \d+.*$/, '')}`,
      { key: what },
      {
        cause,
        hint: 'fix the JSON there (no trailing commas or comments; keys in double quotes)',
      },
    );
  }
}
