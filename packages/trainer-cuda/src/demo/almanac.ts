import { createRng, type Rng } from '@flowgrpo/core';

// The embedded demo's world: an offline almanac generated from a seed — landmarks with the year
// they were built and the town they stand in, and one event for every year — in the spirit of
// the seeds' "compute 12 squared, then look up what happened in that year". Two disjoint halves
// of it exist: the training half and the held-out half share no landmark, no town and no year,
// so a held-out question can only be answered by using the tools, never from memory.

export interface Landmark {
  name: string;
  year: number;
  town: string;
}

export interface AlmanacHalf {
  landmarks: Landmark[];
  /** The years this half owns; every one of them has an event. */
  years: number[];
  towns: string[];
}

export interface Almanac {
  seed: string;
  train: AlmanacHalf;
  test: AlmanacHalf;
  /** Every year of both halves → its event. */
  events: Map<number, string>;
  landmarksByName: Map<string, Landmark>;
}

const ONSETS = [
  'b',
  'br',
  'd',
  'dr',
  'f',
  'g',
  'gr',
  'h',
  'k',
  'l',
  'm',
  'n',
  'p',
  'r',
  's',
  't',
  'th',
  'v',
  'w',
  'z',
];
const VOWELS = ['a', 'e', 'i', 'o', 'u', 'ai', 'ea', 'ou'];
const CODAS = ['', 'n', 'r', 'l', 's', 'th', 'm', 'nd', 'rk', 'st'];
const KINDS = [
  'Bridge',
  'Tower',
  'Abbey',
  'Library',
  'Harbor',
  'Mill',
  'Castle',
  'Museum',
  'Gate',
  'Hall',
];
const EVENT_KINDS = [
  'Flood',
  'Treaty',
  'Fire',
  'Fair',
  'Famine',
  'Revolt',
  'Council',
  'Storm',
  'Plague',
  'Eclipse',
];
const EVENT_ADJ = [
  'Great',
  'Long',
  'Red',
  'Silent',
  'Second',
  'Last',
  'Cold',
  'Golden',
  'Black',
  'First',
];

const pick = <T>(rng: Rng, xs: readonly T[]): T => xs[rng.int(xs.length)]!;

function word(rng: Rng, syllables: number): string {
  let w = '';
  for (let i = 0; i < syllables; i++)
    w += pick(rng, ONSETS) + pick(rng, VOWELS) + (i === syllables - 1 ? pick(rng, CODAS) : '');
  return w[0]!.toUpperCase() + w.slice(1);
}

function unique(count: number, make: () => string, taken: Set<string>): string[] {
  const out: string[] = [];
  while (out.length < count) {
    const s = make();
    if (taken.has(s)) continue;
    taken.add(s);
    out.push(s);
  }
  return out;
}

export interface AlmanacOptions {
  seed: string | number;
  /** Landmarks in the training half (default 600) and the held-out half (default 300). */
  trainLandmarks?: number;
  testLandmarks?: number;
  /** Years [firstYear, lastYear] (default 1000–1999), split 2:1 between the halves. */
  firstYear?: number;
  lastYear?: number;
}

/** Generates the almanac; the same seed gives the same almanac. */
export function createAlmanac(o: AlmanacOptions): Almanac {
  const rng = createRng(`almanac:${o.seed}`);
  const first = o.firstYear ?? 1000;
  const last = o.lastYear ?? 1999;
  const years = rng.shuffle(Array.from({ length: last - first + 1 }, (_, i) => first + i));
  const cut = Math.round((years.length * 2) / 3);
  const yearSets = {
    train: years.slice(0, cut).sort((a, b) => a - b),
    test: years.slice(cut).sort((a, b) => a - b),
  };

  const taken = new Set<string>();
  const towns = {
    train: unique(40, () => word(rng, 2), taken),
    test: unique(20, () => word(rng, 2), taken),
  };
  const events = new Map<number, string>();
  const eventNames = new Set<string>();
  for (const half of ['train', 'test'] as const) {
    for (const y of yearSets[half]) {
      let e: string;
      do e = `the ${pick(rng, EVENT_ADJ)} ${pick(rng, EVENT_KINDS)} of ${pick(rng, towns[half])}`;
      while (eventNames.has(e) && eventNames.size < 5000);
      eventNames.add(e);
      events.set(y, e);
    }
  }
  const landmarksOf = (half: 'train' | 'test', count: number): Landmark[] =>
    unique(count, () => `${word(rng, 2)} ${pick(rng, KINDS)}`, taken).map((name) => ({
      name,
      year: pick(rng, yearSets[half]),
      town: pick(rng, towns[half]),
    }));
  const train = {
    landmarks: landmarksOf('train', o.trainLandmarks ?? 600),
    years: yearSets.train,
    towns: towns.train,
  };
  const test = {
    landmarks: landmarksOf('test', o.testLandmarks ?? 300),
    years: yearSets.test,
    towns: towns.test,
  };
  const landmarksByName = new Map(
    [...train.landmarks, ...test.landmarks].map((l) => [l.name.toLowerCase(), l]),
  );
  return { seed: String(o.seed), train, test, events, landmarksByName };
}

/**
 * The almanac tool's lookup: "year of <landmark>", "town of <landmark>" or "event in <year>"
 * (case and surrounding space ignored). Undefined when there is no such entry.
 */
export function lookupAlmanac(almanac: Almanac, query: string): string | undefined {
  const q = query.trim().replace(/\s+/g, ' ').toLowerCase();
  let m = /^(year|town) of (.+)$/.exec(q);
  if (m) {
    const l = almanac.landmarksByName.get(m[2]!);
    if (!l) return undefined;
    return m[1] === 'year' ? String(l.year) : l.town;
  }
  m = /^event in (\d{1,4})$/.exec(q);
  if (m) return almanac.events.get(Number(m[1]));
  return undefined;
}
