/** JSON-compatible value, as memory entries hold them. */
export type SerializableValue =
  | string
  | number
  | boolean
  | null
  | SerializableValue[]
  | { [key: string]: SerializableValue };

/** The seeds' limit on one string in a memory entry (make_json_serializable_truncated). */
export const DEFAULT_MAX_VALUE_LENGTH = 2000;

/**
 * Turns any value into plain JSON data for a prompt: strings longer than `maxLength` keep their
 * first `maxLength − 3` characters plus "...", objects and arrays are converted member by member,
 * and anything else (functions, class instances, typed arrays, bigint) becomes its string form,
 * truncated the same way. Every string is cut separately, as in the seed, so a deep object can
 * still be long as a whole; the prompt builders rely on the per-string cap only.
 */
export function toSerializableTruncated(
  value: unknown,
  maxLength: number = DEFAULT_MAX_VALUE_LENGTH,
): SerializableValue {
  return convert(value, maxLength, new WeakSet());
}

function cut(text: string, maxLength: number): string {
  if (text.length <= maxLength) return text;
  return `${text.slice(0, Math.max(0, maxLength - 3))}...`;
}

function convert(value: unknown, maxLength: number, seen: WeakSet<object>): SerializableValue {
  if (value === null || value === undefined) return null;
  switch (typeof value) {
    case 'boolean':
      return value;
    case 'number':
      // JSON has no NaN/Infinity; their text keeps the information.
      return Number.isFinite(value) ? value : String(value);
    case 'string':
      return cut(value, maxLength);
    case 'bigint':
    case 'symbol':
    case 'function':
      return cut(String(value), maxLength);
  }
  const obj = value as object;
  if (seen.has(obj)) return '[circular]';
  if (Array.isArray(obj)) {
    seen.add(obj);
    const out = obj.map((v) => convert(v, maxLength, seen));
    seen.delete(obj);
    return out;
  }
  if (obj instanceof Error) return cut(`${obj.name}: ${obj.message}`, maxLength);
  const proto = Object.getPrototypeOf(obj);
  if (proto === Object.prototype || proto === null) {
    seen.add(obj);
    const out: Record<string, SerializableValue> = {};
    for (const [k, v] of Object.entries(obj)) out[k] = convert(v, maxLength, seen);
    seen.delete(obj);
    return out;
  }
  if (ArrayBuffer.isView(obj)) {
    return cut(
      `${proto?.constructor?.name ?? 'TypedArray'}(${Array.from(obj as unknown as ArrayLike<number>).join(', ')})`,
      maxLength,
    );
  }
  if (obj instanceof Map) {
    return cut(`Map(${JSON.stringify([...obj.entries()])})`, maxLength);
  }
  return cut(String(obj), maxLength);
}
