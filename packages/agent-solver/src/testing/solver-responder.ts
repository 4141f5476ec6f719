import type { JsonObject, RecordedRequest } from './openai-server.js';

// A schema-driven stand-in for the fixed LLM roles, for the scripted OpenAI server: every
// structured request is answered with an object built from the json_schema it carried (so the
// reply is valid for whatever schema the solver sent), and free-text requests get `answer`.
// The script only fixes what a test needs to control: which enum value the planner picks per
// call, values of named properties, and at which verifier call stop_signal turns true.

export interface ResponderScript {
  /** tool_name for the 1st, 2nd, … NextStep request (must be in the schema's enum). */
  tools?: string[];
  /** Value of any property with this name, e.g. `{ expression: '12^2' }`. */
  values?: Record<string, unknown>;
  /** stop_signal is true from this MemoryVerification request on (1-based; default never). */
  stopAtVerification?: number;
  /** Reply to requests without response_format. */
  answer?: string;
}

export interface SchemaResponder {
  (request: RecordedRequest): string;
  /** Requests answered so far, per json_schema name ('text' for free text). */
  counts: Map<string, number>;
}

export function schemaResponder(script: ResponderScript = {}): SchemaResponder {
  const counts = new Map<string, number>();
  const responder = ((request: RecordedRequest) => {
    const format = request.body.response_format?.json_schema;
    const name = format?.name ?? 'text';
    const n = (counts.get(name) ?? 0) + 1;
    counts.set(name, n);
    if (!format) return script.answer ?? 'Answer: 42';
    const value = instance(format.schema, format.schema, undefined, {
      script,
      pickTool: (options) => {
        const wanted = script.tools?.[n - 1];
        if (wanted === undefined) return options[0];
        if (!options.includes(wanted)) {
          throw new Error(
            `scripted tool '${wanted}' is not in the enum ${JSON.stringify(options)}`,
          );
        }
        return wanted;
      },
      stop: script.stopAtVerification !== undefined && n >= script.stopAtVerification,
    });
    return JSON.stringify(value);
  }) as SchemaResponder;
  responder.counts = counts;
  return responder;
}

interface Ctx {
  script: ResponderScript;
  pickTool: (options: unknown[]) => unknown;
  stop: boolean;
}

function instance(
  schema: JsonObject,
  root: JsonObject,
  key: string | undefined,
  ctx: Ctx,
): unknown {
  if (typeof schema.$ref === 'string') {
    const defs = (root.$defs ?? {}) as Record<string, JsonObject>;
    const target = schema.$ref === '#' ? root : defs[schema.$ref.replace(/^#\/\$defs\//, '')];
    return target ? instance(target, root, key, ctx) : null;
  }
  if (key !== undefined && ctx.script.values && key in ctx.script.values) {
    return ctx.script.values[key];
  }
  if ('const' in schema) return schema.const;
  if (Array.isArray(schema.enum))
    return key === 'tool_name' ? ctx.pickTool(schema.enum) : schema.enum[0];
  const branches = (schema.anyOf ?? schema.oneOf) as JsonObject[] | undefined;
  if (Array.isArray(branches)) {
    // A nullable optional (strict mode): leave it null, as a model usually does.
    if (branches.some((b) => b.type === 'null')) return null;
    return instance(branches[0]!, root, key, ctx);
  }
  const type = Array.isArray(schema.type) ? (schema.type as string[])[0] : schema.type;
  switch (type) {
    case 'object': {
      const out: JsonObject = {};
      for (const [k, v] of Object.entries(
        (schema.properties ?? {}) as Record<string, JsonObject>,
      )) {
        out[k] = instance(v, root, k, ctx);
      }
      return out;
    }
    case 'array':
      return [instance((schema.items ?? {}) as JsonObject, root, undefined, ctx)];
    case 'string':
      return `${key ?? 'text'} (scripted)`;
    case 'integer':
    case 'number':
      return typeof schema.minimum === 'number' ? schema.minimum : 1;
    case 'boolean':
      return key === 'stop_signal' ? ctx.stop : true;
    default:
      return null;
  }
}
