// Errors thrown anywhere in flowgrpo derive from FlowGrpoError. Each class has a stable `code`,
// and `isInstance` recognises errors across duplicated package copies (two versions of
// @flowgrpo/core in one node_modules tree), where `instanceof` would fail.

const MARKER = Symbol.for('flowgrpo.error');

export interface FlowGrpoErrorOptions {
  cause?: unknown;
  /** What the user can do about it, one line (the CLI prints it under the error). */
  hint?: string | undefined;
}

export class FlowGrpoError extends Error {
  /** Stable machine-readable code of this class; subclasses override it. */
  static readonly code: string = 'FLOWGRPO_ERROR';

  /** Stable code of the most specific class that made this error. */
  readonly code: string;
  /** Codes of every class in this error's chain, most specific first. */
  readonly codes: readonly string[];
  /** What to do about it, one line, when the thrower knows (printed by the CLI as the fix). */
  readonly hint: string | undefined;
  readonly [MARKER] = true;

  constructor(message: string, options: FlowGrpoErrorOptions = {}) {
    super(message, options.cause === undefined ? undefined : { cause: options.cause });
    const codes: string[] = [];
    for (let c = new.target as unknown; typeof c === 'function'; c = Object.getPrototypeOf(c)) {
      const code = (c as { code?: unknown }).code;
      if (typeof code === 'string' && !codes.includes(code)) codes.push(code);
      if (c === FlowGrpoError) break;
    }
    this.codes = codes;
    this.code = codes[0] ?? FlowGrpoError.code;
    this.hint = options.hint;
    this.name = new.target.name;
  }

  /** True when `error` is this class (or a subclass), from any copy of the package. */
  static isInstance<T extends abstract new (...args: never[]) => FlowGrpoError>(
    this: T & { code: string },
    error: unknown,
  ): error is InstanceType<T> {
    if (typeof error !== 'object' || error === null || !(MARKER in error)) return false;
    const codes = (error as { codes?: unknown }).codes;
    return Array.isArray(codes) && codes.includes(this.code);
  }
}

/** A value failed schema validation; `issues` lists where and why. */
export class ValidationError extends FlowGrpoError {
  static override readonly code = 'VALIDATION_ERROR';
  readonly issues: readonly { path: string; message: string }[];
  readonly value: unknown;
  constructor(
    message: string,
    fields: { issues: readonly { path: string; message: string }[]; value?: unknown },
    options?: FlowGrpoErrorOptions,
  ) {
    super(message, options);
    this.issues = fields.issues;
    this.value = fields.value;
  }
}

/**
 * A data file (JSONL, Parquet, Arrow) could not be read; names the file and where in it, in one
 * numbering per kind of file: a JSONL row by its 1-based `line` (what editors show; blank lines
 * count), a Parquet or Arrow row by its 0-based `row` (what `datasets`' `ds[i]` and pandas'
 * `df.iloc[i]` take). The message starts `file:line 18: …` or `file:row 17: …`.
 */
export class DataFormatError extends FlowGrpoError {
  static override readonly code = 'DATA_FORMAT_ERROR';
  readonly file: string | undefined;
  readonly line: number | undefined;
  readonly row: number | undefined;
  /** The message without the place (for an error raised again with the file named). */
  readonly reason: string;
  constructor(
    message: string,
    fields: { file?: string | undefined; line?: number | undefined; row?: number | undefined } = {},
    options?: FlowGrpoErrorOptions,
  ) {
    const at =
      fields.line !== undefined
        ? `line ${fields.line}`
        : fields.row !== undefined
          ? `row ${fields.row}`
          : undefined;
    const where = [fields.file, at].filter(Boolean).join(':');
    super(where ? `${where}: ${message}` : message, options);
    this.file = fields.file;
    this.line = fields.line;
    this.row = fields.row;
    this.reason = message;
  }
}

/**
 * A file (or folder) that was asked for does not exist. Distinct from DataFormatError: the fix
 * is the path, not the file's contents.
 */
export class FileNotFoundError extends FlowGrpoError {
  static override readonly code = 'FILE_NOT_FOUND';
  /** The path as it was looked up. */
  readonly path: string;
  constructor(path: string, options?: FlowGrpoErrorOptions) {
    super(`file not found: ${path}`, options);
    this.path = path;
  }
}

/** True for Node's "no such file or directory" error (`ENOENT`). */
export function isNotFoundError(error: unknown): boolean {
  return (error as { code?: unknown } | null)?.code === 'ENOENT';
}

/** A configuration value is missing, inconsistent or unsupported. */
export class ConfigError extends FlowGrpoError {
  static override readonly code = 'CONFIG_ERROR';
  readonly key: string | undefined;
  constructor(message: string, fields: { key?: string } = {}, options?: FlowGrpoErrorOptions) {
    super(message, options);
    this.key = fields.key;
  }
}
