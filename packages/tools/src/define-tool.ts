import { z } from 'zod';
import { ToolError } from './errors.js';
import {
  failureResult,
  type JsonValue,
  successResult,
  type Tool,
  type ToolContext,
  type ToolExample,
  type ToolResult,
} from './tool.js';

// `defineTool`: a user's own tool in a few lines, working everywhere a built-in tool does
// (ToolRegistry, FlowSolver, FlowRollout). The planner-facing metadata the seeds' tools spell out
// by hand is derived from the zod schema where it can be: the description from the schema's
// `.describe()`, each field's line of `inputTypes` from its type, optionality, default and
// `.describe()`. The executor sees the same descriptions in the JSON Schema of its arguments.

/** What a defined tool's `execute` returns: the output shown to the model (text or JSON). */
export type ToolOutput = string | JsonValue;

export interface DefineToolOptions<S extends z.ZodObject> {
  /** The name the planner picks and traces show: letters, digits, `_`, `-`, `.` (≤ 64). */
  name: string;
  /** What the tool does, for the planner. Default: the input schema's `.describe()` text. */
  description?: string;
  /** The tool's arguments, as a zod object; `.describe()` each field for the prompts. */
  input: S;
  /**
   * Runs the tool. Return the output (text or JSON); throw to fail — the error becomes an
   * `ok: false` result the model reads (a FlowGrpoError's `code` becomes its `errorCode`).
   * Pass `context.signal` on to anything slow: it fires on the time limit or the caller's abort.
   */
  execute: (input: z.output<S>, context: ToolContext) => ToolOutput | Promise<ToolOutput>;
  /** Default '1.0.0'. */
  version?: string;
  /** What the output is, e.g. "str - the forecast". Default "str or JSON - the tool's output". */
  outputType?: string;
  limitations?: string[];
  bestPractices?: string[];
  /** Example calls shown to the planner; each input is checked against `input` here. */
  examples?: ToolExample[];
  /** True when the tool calls an LLM itself (shown to the planner as `require_llm_engine`). */
  requiresLlm?: boolean;
  /** Overrides for the derived `field → "type - meaning"` lines. */
  inputTypes?: Record<string, string>;
}

const NAME = /^[A-Za-z0-9_.-]{1,64}$/;

/** A Tool from a name, a zod object schema and a function (see DefineToolOptions). */
export function defineTool<S extends z.ZodObject>(
  options: DefineToolOptions<S>,
): Tool<z.output<S>> {
  const { name, input } = options;
  if (!NAME.test(name)) {
    throw new ToolError(
      `tool name '${name}' must be 1-64 letters, digits, '_', '-' or '.' (it is shown to the planner as is)`,
      { toolName: name },
    );
  }
  // The planner's "no tool, answer now" choice is spelled None (see the agent's NO_TOOL).
  if (name.toLowerCase() === 'none') {
    throw new ToolError(`'${name}' is reserved for the planner's "no tool" choice`, {
      toolName: name,
    });
  }
  if (!isZodObject(input)) {
    throw new ToolError(
      `tool '${name}': input must be a zod object schema (z.object({...})), the tool's named arguments`,
      { toolName: name },
    );
  }
  const description = (options.description ?? input.description ?? '').trim();
  if (description === '') {
    throw new ToolError(
      `tool '${name}' needs a description: pass \`description\` or \`.describe()\` the input schema`,
      { toolName: name },
    );
  }
  const examples = options.examples ?? [];
  for (const [i, example] of examples.entries()) {
    const parsed = input.safeParse(example.input);
    if (!parsed.success) {
      throw new ToolError(
        `tool '${name}': examples[${i}].input does not match the input schema: ${parsed.error.issues
          .map((issue) => `${issue.path.join('.') || '(root)'}: ${issue.message}`)
          .join('; ')}`,
        { toolName: name },
      );
    }
  }
  const execute = options.execute;
  return {
    name,
    description,
    inputSchema: input as unknown as z.ZodType<z.output<S>>,
    metadata: {
      version: options.version ?? '1.0.0',
      inputTypes: { ...describeInputFields(input), ...options.inputTypes },
      outputType: options.outputType ?? "str or JSON - the tool's output",
      limitations: options.limitations ?? [],
      bestPractices: options.bestPractices ?? [],
      examples,
      requiresLlm: options.requiresLlm ?? false,
    },
    async execute(value: z.output<S>, context: ToolContext): Promise<ToolResult> {
      const start = performance.now();
      try {
        const output = await execute(value, context);
        // A function that returns nothing still ran; the model gets an empty output.
        return successResult(output === undefined ? '' : output, start);
      } catch (error) {
        return failureResult(error, start);
      }
    },
  };
}

function isZodObject(schema: unknown): schema is z.ZodObject {
  // Not `instanceof`: a schema built by another copy of zod is still a zod object.
  const def = (schema as { _zod?: { def?: { type?: unknown } } } | null)?._zod?.def;
  return def?.type === 'object';
}

type JsonSchemaNode = {
  type?: string | string[];
  items?: JsonSchemaNode;
  enum?: unknown[];
  const?: unknown;
  anyOf?: JsonSchemaNode[];
  oneOf?: JsonSchemaNode[];
  properties?: Record<string, JsonSchemaNode>;
  required?: string[];
  description?: string;
  default?: unknown;
};

/**
 * `field → "type - meaning"` lines in the seeds' style (`query: "str - the question"`), from the
 * input side of the schema: `int (default 3) - how many`, `float (optional)`,
 * `str, one of "fast" | "slow" - speed`, `list[str] - labels`.
 */
export function describeInputFields(schema: z.ZodObject): Record<string, string> {
  const json = z.toJSONSchema(schema, { io: 'input', unrepresentable: 'any' }) as JsonSchemaNode;
  const required = new Set(json.required ?? []);
  const out: Record<string, string> = {};
  for (const [field, node] of Object.entries(json.properties ?? {})) {
    let line = typeName(node);
    if (node.enum) line += `, one of ${node.enum.map((v) => JSON.stringify(v)).join(' | ')}`;
    if (node.default !== undefined) line += ` (default ${JSON.stringify(node.default)})`;
    else if (!required.has(field)) line += ' (optional)';
    if (node.description) line += ` - ${node.description}`;
    out[field] = line;
  }
  return out;
}

const PY_TYPES: Record<string, string> = {
  string: 'str',
  integer: 'int',
  number: 'float',
  boolean: 'bool',
  null: 'None',
  object: 'dict',
};

/** The Python-style type name the seeds' metadata uses (`str`, `list[int]`, `str | None`). */
function typeName(node: JsonSchemaNode): string {
  if ('const' in node) return JSON.stringify(node.const);
  const branches = node.anyOf ?? node.oneOf;
  if (branches) return [...new Set(branches.map(typeName))].join(' | ');
  const types = Array.isArray(node.type) ? node.type : node.type ? [node.type] : [];
  if (types.length === 0) return 'any';
  return types
    .map((t) =>
      t === 'array' ? `list[${node.items ? typeName(node.items) : 'any'}]` : (PY_TYPES[t] ?? t),
    )
    .join(' | ');
}
