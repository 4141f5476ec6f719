import { z } from 'zod';

// JSON Schemas for structured output. OpenAI's strict mode (and vLLM/SGLang's guided decoding
// through the same `response_format`) wants every object closed (`additionalProperties: false`)
// and every property listed in `required`; an optional field is expressed as "required but
// nullable". The model then sends `null` where a zod `.optional()` expects the key to be absent,
// so `dropNullOptionals` undoes that before validation.

export type JsonSchema = { [key: string]: unknown };

/** The zod schema's input-side JSON Schema (what the model must write), without `$schema`. */
export function zodToJsonSchema(schema: z.ZodType): JsonSchema {
  const json = z.toJSONSchema(schema, { io: 'input', unrepresentable: 'any' }) as JsonSchema;
  delete json.$schema;
  return json;
}

/** A strict-mode-compatible copy of `zodToJsonSchema(schema)`. */
export function toStrictJsonSchema(schema: z.ZodType): JsonSchema {
  return makeStrict(zodToJsonSchema(schema));
}

// Keywords left out of the strict schema. `default` is rejected by strict mode; value
// constraints (lengths, bounds, patterns, formats, item counts) are rejected by some models'
// strict mode and zod's patterns use regex features that grammar engines may not support. zod
// still enforces all of them after parsing, and the corrective retry shows the full schema.
const DROPPED_KEYWORDS = new Set([
  '$schema',
  'default',
  'minLength',
  'maxLength',
  'pattern',
  'format',
  'minimum',
  'maximum',
  'exclusiveMinimum',
  'exclusiveMaximum',
  'multipleOf',
  'minItems',
  'maxItems',
  'uniqueItems',
  'minProperties',
  'maxProperties',
  'patternProperties',
  'propertyNames',
  'contentEncoding',
  'contentMediaType',
]);

function makeStrict(node: unknown): JsonSchema {
  if (!isSchema(node)) return {};
  const out: JsonSchema = {};
  for (const [key, value] of Object.entries(node)) {
    if (DROPPED_KEYWORDS.has(key)) continue;
    if (key === 'properties' && isSchema(value)) {
      const required = new Set(Array.isArray(node.required) ? (node.required as string[]) : []);
      const props: JsonSchema = {};
      for (const [name, prop] of Object.entries(value)) {
        const strict = makeStrict(prop);
        props[name] = required.has(name) ? strict : nullable(strict);
      }
      out.properties = props;
      out.required = Object.keys(value);
      if (!isSchema(node.additionalProperties)) out.additionalProperties = false;
    } else if (key === 'required') {
      // Rewritten together with `properties`.
    } else if (key === 'items' || key === 'additionalProperties' || key === 'not') {
      out[key] = isSchema(value) ? makeStrict(value) : value;
    } else if (
      (key === 'anyOf' || key === 'oneOf' || key === 'allOf' || key === 'prefixItems') &&
      Array.isArray(value)
    ) {
      out[key] = value.map(makeStrict);
    } else if ((key === '$defs' || key === 'definitions') && isSchema(value)) {
      out[key] = Object.fromEntries(Object.entries(value).map(([k, v]) => [k, makeStrict(v)]));
    } else {
      out[key] = value;
    }
  }
  if (
    out.type === 'object' &&
    out.properties === undefined &&
    out.additionalProperties === undefined
  ) {
    out.properties = {};
    out.required = [];
    out.additionalProperties = false;
  }
  return out;
}

function nullable(schema: JsonSchema): JsonSchema {
  if (allowsNull(schema, schema)) return schema;
  return { anyOf: [schema, { type: 'null' }] };
}

function isSchema(value: unknown): value is JsonSchema {
  return typeof value === 'object' && value !== null && !Array.isArray(value);
}

function resolveRef(node: JsonSchema, root: JsonSchema): JsonSchema {
  const ref = node.$ref;
  if (typeof ref !== 'string') return node;
  if (ref === '#') return root;
  const m = /^#\/(\$defs|definitions)\/(.+)$/.exec(ref);
  if (!m) return node;
  const defs = root[m[1]!];
  const target = isSchema(defs) ? defs[decodeURIComponent(m[2]!)] : undefined;
  return isSchema(target) ? target : node;
}

function allowsNull(node: JsonSchema, root: JsonSchema, depth = 0): boolean {
  if (depth > 32) return false;
  const n = resolveRef(node, root);
  if (n.type === 'null') return true;
  if (Array.isArray(n.type) && n.type.includes('null')) return true;
  if (Array.isArray(n.enum) && n.enum.includes(null)) return true;
  if (n.const === null) return true;
  for (const key of ['anyOf', 'oneOf'] as const) {
    const branches = n[key];
    if (
      Array.isArray(branches) &&
      branches.some((b) => isSchema(b) && allowsNull(b, root, depth + 1))
    ) {
      return true;
    }
  }
  // `{}` (zod's unrepresentable / z.unknown()) accepts anything.
  return Object.keys(n).filter((k) => k !== 'description' && k !== 'title').length === 0;
}

/**
 * Removes `key: null` where `schema` (the non-strict one) has the key optional and not nullable:
 * the strict schema made the model write null there.
 */
export function dropNullOptionals(value: unknown, schema: JsonSchema): unknown {
  return walk(value, schema, schema, 0);
}

function walk(value: unknown, node: JsonSchema, root: JsonSchema, depth: number): unknown {
  if (depth > 64 || value === null || typeof value !== 'object') return value;
  const n = resolveRef(node, root);
  if (Array.isArray(value)) {
    const items = n.items;
    return isSchema(items) ? value.map((v) => walk(v, items, root, depth + 1)) : value;
  }
  const branches = (
    Array.isArray(n.anyOf) ? n.anyOf : Array.isArray(n.oneOf) ? n.oneOf : []
  ).filter((b): b is JsonSchema => isSchema(b) && b.type !== 'null');
  if (branches.length === 1) return walk(value, branches[0]!, root, depth + 1);
  const props = n.properties;
  if (!isSchema(props)) return value;
  const required = new Set(Array.isArray(n.required) ? (n.required as string[]) : []);
  const out: Record<string, unknown> = {};
  for (const [key, v] of Object.entries(value)) {
    const prop = props[key];
    if (!isSchema(prop)) {
      out[key] = v;
      continue;
    }
    if (v === null && !required.has(key) && !allowsNull(prop, root)) continue;
    out[key] = walk(v, prop, root, depth + 1);
  }
  return out;
}
