// Check feeds against a session's declared inputs before ONNX Runtime sees them: its own messages
// for a wrong dtype or shape are terse and sometimes arrive only as a crash inside a kernel.

import { InvalidFeedError } from './errors.js';

/** A session input or output as declared by the model. */
export interface ValueSpec {
  name: string;
  /** ORT tensor type name ('float32', 'int64', ...); undefined for non-tensors. */
  type?: string;
  /** Fixed sizes, or symbolic names for free dimensions; undefined when the rank is unknown. */
  shape?: readonly (number | string)[];
}

/** What validation needs of a fed tensor. */
export interface FeedLike {
  type: string;
  dims: readonly number[];
}

export function describeSpec(s: ValueSpec): string {
  return `${s.type ?? '?'} ${s.shape ? `[${s.shape.join(', ')}]` : '[?]'}`;
}

export function describeFeed(f: FeedLike): string {
  return `${f.type} [${f.dims.join(', ')}]`;
}

// A session's input list never changes: its name index is built once (not per run).
const indexes = new WeakMap<readonly ValueSpec[], Map<string, ValueSpec>>();
function specsByName(inputs: readonly ValueSpec[]): Map<string, ValueSpec> {
  let m = indexes.get(inputs);
  if (!m) {
    m = new Map(inputs.map((s) => [s.name, s]));
    indexes.set(inputs, m);
  }
  return m;
}

/**
 * Throws InvalidFeedError for an unknown or missing input, a dtype mismatch, a rank mismatch, a
 * fixed dimension mismatch, or one symbolic dimension bound to two sizes across the feeds.
 */
export function validateFeeds(inputs: readonly ValueSpec[], feeds: Record<string, FeedLike>): void {
  const byName = specsByName(inputs);
  for (const name of Object.keys(feeds)) {
    if (!byName.has(name)) {
      throw new InvalidFeedError(
        `unknown input "${name}"; the model's inputs are: ${[...byName.keys()].join(', ')}`,
        { input: name, problem: 'unknown', expected: '', got: describeFeed(feeds[name]!) },
      );
    }
  }
  const bound = new Map<string, { size: number; by: string }>();
  for (const spec of inputs) {
    const feed = feeds[spec.name];
    const expected = describeSpec(spec);
    if (!feed) {
      throw new InvalidFeedError(`missing input "${spec.name}" (${expected})`, {
        input: spec.name,
        problem: 'missing',
        expected,
        got: '',
      });
    }
    const got = describeFeed(feed);
    const fail = (problem: 'dtype' | 'rank' | 'dims', why: string): never => {
      throw new InvalidFeedError(
        `input "${spec.name}": expected ${expected}, got ${got} (${why})`,
        { input: spec.name, problem, expected, got },
      );
    };
    if (spec.type !== undefined && feed.type !== spec.type) fail('dtype', 'wrong dtype');
    if (!spec.shape) continue;
    if (feed.dims.length !== spec.shape.length) fail('rank', 'wrong rank');
    spec.shape.forEach((want, axis) => {
      const size = feed.dims[axis]!;
      if (typeof want === 'number') {
        if (want >= 0 && size !== want) fail('dims', `axis ${axis} must be ${want}`);
        return;
      }
      if (want === '') return; // an unnamed free dimension
      const prev = bound.get(want);
      if (prev && prev.size !== size) {
        fail('dims', `"${want}" is ${prev.size} in input "${prev.by}" but ${size} here`);
      }
      if (!prev) bound.set(want, { size, by: spec.name });
    });
  }
}
