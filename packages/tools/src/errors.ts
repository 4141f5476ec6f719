import { FlowGrpoError, type FlowGrpoErrorOptions } from '@flowgrpo/core';

/** Base class of every error raised by @flowgrpo/tools. */
export class ToolError extends FlowGrpoError {
  static override readonly code: string = 'TOOL_ERROR';
  readonly toolName: string | undefined;
  constructor(message: string, fields: { toolName?: string } = {}, options?: FlowGrpoErrorOptions) {
    super(message, options);
    this.toolName = fields.toolName;
  }
}

/** The registry has no tool of that name (or it is disabled); `available` lists the ones it has. */
export class ToolNotFoundError extends ToolError {
  static override readonly code = 'TOOL_NOT_FOUND';
  readonly available: readonly string[];
  constructor(toolName: string, available: readonly string[]) {
    super(`Tool '${toolName}' not found. Available tools: ${available.join(', ') || '(none)'}`, {
      toolName,
    });
    this.available = available;
  }
}

export interface ToolInputIssue {
  path: string;
  message: string;
}

/** The input given to a tool does not match its schema; `issues` are zod's, flattened. */
export class ToolInputError extends ToolError {
  static override readonly code = 'TOOL_INPUT_INVALID';
  readonly issues: readonly ToolInputIssue[];
  readonly input: unknown;
  constructor(
    toolName: string,
    issues: readonly ToolInputIssue[],
    input: unknown,
    options?: FlowGrpoErrorOptions,
  ) {
    const detail = issues.map((i) => (i.path ? `${i.path}: ${i.message}` : i.message)).join('; ');
    super(`Invalid input for tool '${toolName}': ${detail}`, { toolName }, options);
    this.issues = issues;
    this.input = input;
  }
}

/** A tool ran past its time limit and was stopped. */
export class ToolTimeoutError extends ToolError {
  static override readonly code = 'TOOL_TIMEOUT';
  readonly timeoutMs: number;
  constructor(toolName: string, timeoutMs: number) {
    super(`Tool '${toolName}' timed out after ${timeoutMs} ms`, { toolName });
    this.timeoutMs = timeoutMs;
  }
}

/**
 * A tool returned something that is not a tool result (`undefined`, a bare string, no boolean
 * `ok`), or an output that is not JSON (a BigInt, a circular object): a bug of that tool, made a
 * failed result of the call instead of a TypeError later in the agent or the recorder.
 */
export class ToolResultError extends ToolError {
  static override readonly code = 'TOOL_INVALID_RESULT';
  constructor(toolName: string, problem: string) {
    super(`Tool '${toolName}' ${problem}`, { toolName });
  }
}

/** The caller aborted the tool call through its AbortSignal. */
export class ToolAbortedError extends ToolError {
  static override readonly code = 'TOOL_ABORTED';
  constructor(toolName: string | undefined, options?: FlowGrpoErrorOptions) {
    super(`Tool${toolName ? ` '${toolName}'` : ''} call was aborted`, { toolName }, options);
  }
}

/** An expression given to the calculator is malformed or cannot be evaluated. */
export class CalculatorError extends ToolError {
  static override readonly code = 'CALCULATOR_ERROR';
  /** Character offset in the expression where the problem was found, when known. */
  readonly position: number | undefined;
  constructor(message: string, position?: number) {
    super(position === undefined ? message : `${message} (at position ${position})`);
    this.position = position;
  }
}

/** A URL was refused before any request: bad scheme, or a private / loopback / link-local host. */
export class UrlPolicyError extends ToolError {
  static override readonly code = 'URL_POLICY_VIOLATION';
  readonly url: string;
  readonly addresses: readonly string[];
  constructor(message: string, fields: { url: string; addresses?: readonly string[] }) {
    super(message);
    this.url = fields.url;
    this.addresses = fields.addresses ?? [];
  }
}

/** An HTTP request made by a tool failed (network error, non-2xx status, body too large, bad JSON). */
export class HttpRequestError extends ToolError {
  static override readonly code = 'HTTP_REQUEST_FAILED';
  readonly url: string;
  readonly status: number | undefined;
  constructor(
    message: string,
    fields: { url: string; status?: number },
    options?: FlowGrpoErrorOptions,
  ) {
    super(message, {}, options);
    this.url = fields.url;
    this.status = fields.status;
  }
}

/**
 * The isolation the caller asked for cannot be had on this machine (bubblewrap missing, user
 * namespaces disabled, …). Nothing was run: the caller either fixes the machine (`fix` says how)
 * or opts out explicitly with `isolation: 'none'`.
 */
export class SandboxUnavailableError extends ToolError {
  static override readonly code = 'SANDBOX_UNAVAILABLE';
  /** What failed, e.g. the sandbox tool's own error message. */
  readonly reason: string;
  /** How to get the isolation on this machine. */
  readonly fix: string;
  constructor(reason: string, fix: string, options?: FlowGrpoErrorOptions) {
    super(`The python sandbox is unavailable: ${reason}. Fix: ${fix}`, {}, options);
    this.reason = reason;
    this.fix = fix;
  }
}

/**
 * The interpreter, or the sandbox around it, was started but did not answer within the start
 * timeout: the machine is busy, not broken (a missing interpreter is a SandboxUnavailableError, or
 * with `isolation: 'none'` a PythonUnavailableError). Never remembered: the next call tries again.
 */
export class PythonStartTimeoutError extends ToolError {
  static override readonly code = 'PYTHON_START_TIMEOUT';
  /** What did not answer: the interpreter, or the sandbox around it. */
  readonly what: string;
  readonly timeoutMs: number;
  constructor(what: string, timeoutMs: number, options?: FlowGrpoErrorOptions) {
    const fix =
      'try again when the machine is less busy, or raise the start timeout (createPythonTool({ startTimeoutSeconds }), runPython({ startTimeoutMs }))';
    super(
      `${what} did not answer within ${Number((timeoutMs / 1000).toFixed(3))} s of starting: the machine may be busy. Fix: ${fix}`,
      {},
      { ...options, hint: fix },
    );
    this.what = what;
    this.timeoutMs = timeoutMs;
  }
}

/**
 * With `isolation: 'none'`: the interpreter is missing or not executable (in the sandbox the same
 * is a SandboxUnavailableError). Nothing was run.
 */
export class PythonUnavailableError extends ToolError {
  static override readonly code = 'PYTHON_UNAVAILABLE';
  /** The interpreter as it was asked for. */
  readonly python: string;
  readonly fix: string;
  constructor(python: string, reason: string, fix: string, options?: FlowGrpoErrorOptions) {
    super(`The interpreter '${python}' ${reason}. Fix: ${fix}`, {}, { ...options, hint: fix });
    this.python = python;
    this.fix = fix;
  }
}

/**
 * A path named for a workspace (`Workspace.resolve`) would lead out of it: by `..` or an absolute
 * path, or through a link in the workspace that leads elsewhere or nowhere.
 */
export class WorkspacePathError extends ToolError {
  static override readonly code = 'WORKSPACE_PATH_OUTSIDE';
  /** The path as it was given. */
  readonly path: string;
  /** The workspace's directory. */
  readonly workspace: string;
  constructor(path: string, workspace: string, why: string) {
    super(`Path '${path}' ${why} (the workspace is ${workspace})`);
    this.path = path;
    this.workspace = workspace;
  }
}
