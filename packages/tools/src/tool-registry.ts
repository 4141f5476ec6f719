import type { z } from 'zod';
import {
  ToolAbortedError,
  ToolError,
  ToolInputError,
  ToolNotFoundError,
  ToolResultError,
  ToolTimeoutError,
} from './errors.js';
import {
  failureResult,
  type JsonValue,
  type Tool,
  type ToolContext,
  type ToolResult,
  thrownMessage,
} from './tool.js';
import { canonicalToolName } from './tool-names.js';

export interface ToolRegistryOptions {
  /** Time limit for a call whose context gives none. Default 60 s. */
  defaultTimeoutMs?: number;
}

/** The seeds' `get_metadata()` dict, as the planner sees it. */
export interface PlannerToolMetadata {
  tool_name: string;
  tool_description: string;
  tool_version: string;
  input_types: Record<string, string>;
  output_type: string;
  demo_commands: { input: Record<string, JsonValue>; description: string }[];
  user_metadata: { limitations: string[]; best_practices: string[] };
  require_llm_engine: boolean;
}

interface Entry {
  tool: Tool;
  enabled: boolean;
}

function issuePath(path: readonly PropertyKey[]): string {
  return path.map((p) => (typeof p === 'number' ? `[${p}]` : String(p))).join('.');
}

export class ToolRegistry {
  readonly defaultTimeoutMs: number;
  readonly #tools = new Map<string, Entry>();

  constructor(tools: Iterable<Tool> = [], options: ToolRegistryOptions = {}) {
    this.defaultTimeoutMs = options.defaultTimeoutMs ?? 60_000;
    for (const tool of tools) this.register(tool);
  }

  register<I>(tool: Tool<I>, options: { enabled?: boolean } = {}): this {
    if (this.#tools.has(tool.name)) {
      throw new ToolError(`A tool named '${tool.name}' is already registered`, {
        toolName: tool.name,
      });
    }
    this.#tools.set(tool.name, { tool: tool as Tool, enabled: options.enabled ?? true });
    return this;
  }

  /**
   * The entry registered under `name`, else under the canonical name of a built-in alias
   * (`'python'` → `'Python_Code_Generator_Tool'`, see BUILTIN_TOOL_ALIASES).
   */
  #entry(name: string): Entry | undefined {
    return this.#tools.get(name) ?? this.#tools.get(canonicalToolName(name));
  }

  setEnabled(name: string, enabled: boolean): this {
    const entry = this.#entry(name);
    if (!entry) throw new ToolNotFoundError(name, this.names());
    entry.enabled = enabled;
    return this;
  }

  /** Names of the enabled tools, in registration order. */
  names(): string[] {
    return [...this.#tools.values()].filter((e) => e.enabled).map((e) => e.tool.name);
  }

  /** True when an enabled tool has this name (or this built-in alias). */
  has(name: string): boolean {
    return this.#entry(name)?.enabled === true;
  }

  /**
   * The enabled tool of that name or built-in alias (its `name` is the canonical one); throws
   * `ToolNotFoundError` listing the enabled names.
   */
  get(name: string): Tool {
    const entry = this.#entry(name);
    if (!entry?.enabled) throw new ToolNotFoundError(name, this.names());
    return entry.tool;
  }

  /** Enabled tools, in registration order. */
  list(): Tool[] {
    return [...this.#tools.values()].filter((e) => e.enabled).map((e) => e.tool);
  }

  metadataForPlanner(): Record<string, PlannerToolMetadata> {
    const out: Record<string, PlannerToolMetadata> = {};
    for (const tool of this.list()) {
      out[tool.name] = {
        tool_name: tool.name,
        tool_description: tool.description,
        tool_version: tool.metadata.version,
        input_types: tool.metadata.inputTypes,
        output_type: tool.metadata.outputType,
        demo_commands: tool.metadata.examples,
        user_metadata: {
          limitations: tool.metadata.limitations,
          best_practices: tool.metadata.bestPractices,
        },
        require_llm_engine: tool.metadata.requiresLlm,
      };
    }
    return out;
  }

  /** Plain-text toolbox description for a planner prompt: one block per enabled tool. */
  describeForPlanner(): string {
    return this.list()
      .map((tool) => {
        const m = tool.metadata;
        const lines = [`Tool: ${tool.name}`, `Description: ${tool.description}`, 'Inputs:'];
        for (const [field, type] of Object.entries(m.inputTypes))
          lines.push(`  - ${field}: ${type}`);
        lines.push(`Output: ${m.outputType}`);
        if (m.limitations.length) {
          lines.push('Limitations:', ...m.limitations.map((l) => `  - ${l}`));
        }
        if (m.bestPractices.length) {
          lines.push('Best practices:', ...m.bestPractices.map((b) => `  - ${b}`));
        }
        if (m.examples.length) {
          lines.push('Examples:');
          for (const ex of m.examples) {
            lines.push(`  - ${JSON.stringify(ex.input)}  (${ex.description})`);
          }
        }
        return lines.join('\n');
      })
      .join('\n\n');
  }

  /** Parses `input` with the tool's schema; throws `ToolInputError` carrying zod's issues. */
  validate(name: string, input: unknown): unknown {
    const tool = this.get(name);
    return parseToolInput(tool, input);
  }

  /**
   * Validates and runs a tool under a time limit. Throws `ToolNotFoundError`, `ToolInputError`,
   * `ToolTimeoutError` or `ToolAbortedError`; a tool that reports its own failure returns it as a
   * result. A tool that ignores its abort signal is abandoned (not awaited) when the limit passes.
   */
  async invoke(
    nameOrAlias: string,
    input: unknown,
    context: ToolContext = {},
  ): Promise<ToolResult> {
    const tool = this.get(nameOrAlias);
    // Errors name the tool by its canonical name, as traces and memory do.
    const name = tool.name;
    const parsed = parseToolInput(tool, input);
    const timeoutMs = context.timeoutMs ?? this.defaultTimeoutMs;
    const outer = context.signal;
    if (outer?.aborted) throw new ToolAbortedError(name, { cause: outer.reason });

    const controller = new AbortController();
    let timer: NodeJS.Timeout | undefined;
    let onOuterAbort: (() => void) | undefined;
    const stopped = new Promise<never>((_, reject) => {
      timer = setTimeout(() => {
        const error = new ToolTimeoutError(name, timeoutMs);
        controller.abort(error);
        reject(error);
      }, timeoutMs);
      onOuterAbort = () => {
        const error = new ToolAbortedError(name, { cause: outer?.reason });
        controller.abort(error);
        reject(error);
      };
      outer?.addEventListener('abort', onOuterAbort, { once: true });
    });
    const start = performance.now();
    // Through a promise whatever `execute` does: a tool written without `async` may return its
    // result as is or throw synchronously, and what it returns is checked before anyone reads it.
    const running = Promise.resolve()
      .then(() => tool.execute(parsed, { ...context, signal: controller.signal, timeoutMs }))
      .then((value: unknown) => checkToolResult(name, value, start));
    // Whichever loses the race must not surface later as an unhandled rejection.
    running.catch(() => {});
    stopped.catch(() => {});
    try {
      return await Promise.race([running, stopped]);
    } finally {
      clearTimeout(timer);
      if (onOuterAbort) outer?.removeEventListener('abort', onOuterAbort);
    }
  }

  /** Like `invoke`, but every failure (unknown tool, bad input, timeout, crash) becomes a result. */
  async run(name: string, input: unknown, context: ToolContext = {}): Promise<ToolResult> {
    const start = performance.now();
    try {
      return await this.invoke(name, input, context);
    } catch (error) {
      return failureResult(error, start);
    }
  }
}

/**
 * What a tool returned, as a ToolResult the agents can read and record: not an object with a
 * boolean `ok`, or an output that JSON cannot hold, is a failed result (ToolResultError).
 */
function checkToolResult(name: string, value: unknown, start: number): ToolResult {
  const fail = (problem: string) => failureResult(new ToolResultError(name, problem), start);
  if (
    typeof value !== 'object' ||
    value === null ||
    typeof (value as ToolResult).ok !== 'boolean'
  ) {
    return fail(`returned ${describeValue(value)}, not a tool result ({ok, output})`);
  }
  const result = value as ToolResult;
  if (result.output === undefined) return { ...result, output: '' };
  if (typeof result.output === 'string') return result;
  try {
    JSON.stringify(result.output);
  } catch (error) {
    return fail(`returned an output that is not JSON (${thrownMessage(error)})`);
  }
  return result;
}

function describeValue(value: unknown): string {
  if (value === null || value === undefined) return String(value);
  if (Array.isArray(value)) return 'an array';
  return typeof value === 'object' ? 'an object without a boolean `ok`' : `a ${typeof value}`;
}

export function parseToolInput<I>(tool: Tool<I>, input: unknown): I {
  const parsed = (tool.inputSchema as z.ZodType<I>).safeParse(input);
  if (parsed.success) return parsed.data;
  throw new ToolInputError(
    tool.name,
    parsed.error.issues.map((i) => ({ path: issuePath(i.path), message: i.message })),
    input,
    { cause: parsed.error },
  );
}
