import { spawnSync } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { beforeAll, describe, expect, it } from 'vitest';
import { sharedPath, skipWithoutShared } from '../../../test-utils/shared.js';
import {
  exactMatch,
  exactMatchMax,
  exactMatchReward,
  setTokenF1,
  setTokenF1Max,
  splitGoldAnswers,
  squadF1,
  squadF1Max,
  squadNormalize,
  tokenF1Reward,
} from '../src/index.js';

describe('SQuAD v1.1 normalisation (hand-applied: lower → drop punctuation → drop a/an/the → collapse spaces)', () => {
  it.each([
    ['The Beatles!', 'beatles'],
    ['An apple a day', 'apple day'],
    ["rock'n'roll", 'rocknroll'],
    ['then there', 'then there'], // "the" only as a whole word
    ['  Mary   Rose\tFoster\n', 'mary rose foster'],
    ['the-end', 'theend'], // the hyphen goes first, so "the" is no longer a word
    ['a.b', 'ab'],
    ['54\u00a0Mbit/s', '54 mbits'], // Python's split() breaks on NBSP
    ['éthe', 'éthe'], // Python's \b sees "é" as a word character, so "the" is not a word here
    ['« the »', '« »'], // « » are not ASCII punctuation, so they stay
  ])('%j → %j', (input, expected) => {
    expect(squadNormalize(input)).toBe(expected);
  });
});

describe('token F1 (hand computations)', () => {
  it('SQuAD F1 counts overlap as a multiset; the set variant deduplicates', () => {
    // pred [cat, sat, on, mat] vs gold [cat, on, mat]: P = 3/4, R = 1 → F1 = 6/7.
    expect(squadF1('the cat sat on the mat', 'a cat on a mat')).toBeCloseTo(6 / 7, 15);
    // "paris paris" vs "paris": SQuAD common 1, P = 1/2, R = 1 → 2/3; set: {paris} vs {paris} → 1.
    expect(squadF1('paris paris', 'paris')).toBeCloseTo(2 / 3, 15);
    expect(setTokenF1('paris paris', 'paris')).toBe(1);
  });

  it('the AReaL seed set F1: its own printed examples (1.00 and 0.50)', () => {
    expect(setTokenF1('James Bond', 'James Bond')).toBe(1);
    // {james, smith} ∩ {james, bond} = {james}: P = R = 1/2 → 0.5.
    expect(setTokenF1('James Smith', 'James Bond')).toBe(0.5);
  });

  it('the set variant keeps punctuation and articles; SQuAD drops them', () => {
    expect(squadF1('Bond.', 'bond')).toBe(1);
    expect(setTokenF1('Bond.', 'bond')).toBe(0);
    // set: {the, beatles} vs {beatles}: P = 1/2, R = 1 → 2/3; SQuAD: both "beatles" → 1.
    expect(setTokenF1('The Beatles', 'Beatles')).toBeCloseTo(2 / 3, 15);
    expect(squadF1('The Beatles', 'Beatles')).toBe(1);
  });

  it('empty answers score 0 in both (v1.1 has no empty-equals-empty rule)', () => {
    expect(squadF1('', '')).toBe(0);
    expect(squadF1('the', 'a')).toBe(0); // both normalise to nothing
    expect(setTokenF1('  ', 'x')).toBe(0);
    expect(exactMatch('the', 'a')).toBe(1); // "" === "" in the script's EM
  });
});

describe('gold lists', () => {
  it("splits the seeds' '; '-joined result strings and keeps arrays", () => {
    expect(splitGoldAnswers('Cathy Dennis and Rob Davis; Rob Davis; Cathy Dennis')).toEqual([
      'Cathy Dennis and Rob Davis',
      'Rob Davis',
      'Cathy Dennis',
    ]);
    expect(splitGoldAnswers('a; b', { goldSeparator: null })).toEqual(['a; b']);
    expect(splitGoldAnswers(['x', ' ', 'y'])).toEqual(['x', 'y']);
  });
});

type NqRow = { question: string; answer: string[] };

describe.skipIf(skipWithoutShared('NQ-open EM/F1'))('EM / F1 on real NQ-open answers', () => {
  let rows: NqRow[] = [];
  beforeAll(() => {
    rows = readFileSync(sharedPath('data', 'nq-open', 'dev.jsonl'), 'utf8')
      .split('\n')
      .filter((l) => l.trim() !== '')
      .map((l) => JSON.parse(l) as NqRow);
  });

  it('hand-checked rows', () => {
    const byQ = (q: string) => rows.find((r) => r.question === q)!.answer;
    // ["one", "one season"]: "One season." → "one season".
    expect(
      exactMatchMax('One season.', byQ('how many seasons of the bastard executioner are there')),
    ).toBe(1);
    // "54\u00a0Mbit/s" → "54 mbits" = "54 Mbit/s" normalised.
    expect(
      exactMatchMax(
        '54 Mbit/s',
        byQ('what is the maximum data rate for the 802.11a standard select one'),
      ),
    ).toBe(1);
    // "R. H. Thomson" → [r, h, thomson]; "R.H. Thomson" → [rh, thomson]: common 1,
    // P = 1/2, R = 1/3 → F1 = 2·(1/6)/(5/6) = 0.4; EM 0.
    const thomson = byQ('who plays matthew on anne with an e');
    expect(exactMatchMax('R.H. Thomson', thomson)).toBe(0);
    expect(squadF1Max('R.H. Thomson', thomson)).toBeCloseTo(0.4, 15);
    // "a Scottish surname" vs "Scottish": SQuAD [scottish, surname] → P 1, R 1/2 → 2/3;
    // set F1 keeps "a": {a, scottish, surname} → P 1, R 1/3 → 1/2.
    const wallace = byQ('where did the last name wallace come from');
    expect(squadF1Max('Scottish', wallace)).toBeCloseTo(2 / 3, 15);
    expect(setTokenF1Max('Scottish', wallace)).toBeCloseTo(0.5, 15);
    // ["Vancouver", "Mission, British Columbia"] vs "Vancouver, BC": best gold "Vancouver",
    // [vancouver, bc] vs [vancouver]: P 1/2, R 1 → 2/3.
    expect(
      squadF1Max('Vancouver, BC', byQ('where was percy jackson and the olympians filmed')),
    ).toBeCloseTo(2 / 3, 15);
    // "8 December 1985" and "December 8, 1985" hold the same tokens → F1 1, EM 0.
    const saarc = byQ(
      'when was the south asian association for regional co-operation (saarc) formed',
    );
    expect(squadF1Max('December 8, 1985', saarc)).toBe(1);
    expect(exactMatchMax('December 8, 1985', saarc)).toBe(0);
  });

  it("reward functions split the seed's joined result and report the matching gold", async () => {
    const row = rows.find((r) => r.question === 'who wrote cant get you out of my head lyrics')!;
    const joined = row.answer.join('; ');
    const em = await exactMatchReward().score({
      question: row.question,
      groundTruth: joined,
      finalAnswer: 'rob davis',
    });
    expect(em.score).toBe(1);
    expect(em.details.matchedGold).toBe(1);
    const f1 = await tokenF1Reward({ variant: 'set' }).score({
      question: row.question,
      groundTruth: joined,
      finalAnswer: 'Cathy Dennis',
    });
    expect(f1.score).toBe(1);
    expect(f1.details.bestGold).toBe(2);
  });

  it('matches an independent Python implementation of the official script on every row', () => {
    // NQ-open rows plus HotpotQA's answers (more names with accents and punctuation).
    const hotpot = readFileSync(sharedPath('data', 'hotpotqa', 'dev-distractor-500.jsonl'), 'utf8')
      .split('\n')
      .filter((l) => l.trim() !== '')
      .map((l) => {
        const row = JSON.parse(l) as { question: string; answer: string };
        return { question: row.question, answer: [row.answer] };
      });
    // Predictions per row: its first gold decorated, its first word, and the next row's gold.
    const cases = [...rows, ...hotpot].flatMap((r, i, all) => {
      const next = all[(i + 1) % all.length]!.answer[0]!;
      const g = r.answer[0]!;
      return [`The ${g.toUpperCase()}!`, g.split(' ')[0]!, next, `${g} and ${next}`].map((p) => ({
        p,
        golds: r.answer,
      }));
    });
    const python = `
import json, re, string, sys
from collections import Counter
PUNCT = set(string.punctuation)
def norm(s):
    s = s.lower()
    s = ''.join(c for c in s if c not in PUNCT)
    s = re.sub(r'\\b(a|an|the)\\b', ' ', s)
    return ' '.join(s.split())
def f1(p, g):
    pt, gt = norm(p).split(), norm(g).split()
    same = sum((Counter(pt) & Counter(gt)).values())
    if same == 0: return 0.0
    pr, rc = same / len(pt), same / len(gt)
    return 2 * pr * rc / (pr + rc)
def setf1(p, g):
    pt, gt = set(p.strip().lower().split()), set(g.strip().lower().split())
    if not pt or not gt: return 0.0
    c = len(pt & gt)
    pr, rc = c / len(pt), c / len(gt)
    return 2 * pr * rc / (pr + rc) if pr + rc > 0 else 0.0
out = []
for c in json.load(sys.stdin):
    out.append([max(float(norm(c['p']) == norm(g)) for g in c['golds']),
                max(f1(c['p'], g) for g in c['golds']),
                max(setf1(c['p'], g) for g in c['golds'])])
print(json.dumps(out))
`;
    const run = spawnSync('python3', ['-c', python], {
      input: JSON.stringify(cases),
      encoding: 'utf8',
      maxBuffer: 64 << 20,
    });
    expect(run.status, run.stderr).toBe(0);
    const expected = JSON.parse(run.stdout) as [number, number, number][];
    expect(expected).toHaveLength(cases.length);
    let mismatches = 0;
    cases.forEach((c, i) => {
      const [em, f1, sf1] = expected[i]!;
      const ours = [
        exactMatchMax(c.p, c.golds),
        squadF1Max(c.p, c.golds),
        setTokenF1Max(c.p, c.golds),
      ];
      if (ours[0] !== em || Math.abs(ours[1]! - f1) > 1e-12 || Math.abs(ours[2]! - sf1) > 1e-12) {
        mismatches++;
        if (mismatches < 5) console.error('mismatch', c, ours, expected[i]);
      }
    });
    expect(mismatches).toBe(0);
    // The sample must exercise both outcomes, or agreement would mean little.
    expect(expected.filter((e) => e[0] === 1).length).toBeGreaterThan(1000);
    expect(expected.filter((e) => e[1] > 0 && e[1] < 1).length).toBeGreaterThan(1000);
  });
});
