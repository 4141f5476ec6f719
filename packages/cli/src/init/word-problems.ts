import { createRng, type Rng } from '@flowgrpo/core';

// The templates' task: one-step math word problems in GSM8K's format ({question, answer}, the
// answer's worked step with its <<A op B=R>> note, then "#### R"), generated from a seed. Three
// kinds, each worded one way, with both numbers at the end of the question: a model of a few
// hundred thousand weights learns to copy numbers from a fixed place in a few hundred steps, and
// not from anywhere in a sentence (docs/guides/cli.md, "flowgrpo init"). The held-out rows share
// no (kind, A, B) with the training rows, so no held-out answer can be remembered from training.

export const PROBLEM_KINDS = ['add', 'sub', 'mul'] as const;
export type ProblemKind = (typeof PROBLEM_KINDS)[number];

export interface WordProblem {
  kind: ProblemKind;
  question: string;
  /** GSM8K's answer: the worked step with its <<A op B=R>> note, then "#### R". */
  answer: string;
}

const NAMES = ['Ana', 'Ben', 'Chen', 'Dara', 'Eli', 'Fay', 'Gus', 'Hana', 'Ivo', 'Jun', 'Kai'];
const ITEMS = ['apples', 'books', 'cards', 'coins', 'marbles', 'pencils', 'shells', 'stamps'];
const OPS: Record<ProblemKind, string> = { add: '+', sub: '-', mul: '*' };

const pick = <T>(rng: Rng, list: readonly T[]): T => list[rng.int(list.length)]!;
const int = (rng: Rng, lo: number, hi: number) => lo + rng.int(hi - lo + 1);

function problem(kind: ProblemKind, a: number, b: number, who: string, item: string): WordProblem {
  const op = OPS[kind];
  const result = kind === 'add' ? a + b : kind === 'sub' ? a - b : a * b;
  const step = `${a} ${op} ${b} = <<${a}${op}${b}=${result}>>${result}`;
  const question = {
    add: `How many ${item} does ${who} have if ${who} had ${a} and got ${b} more?`,
    sub: `How many ${item} does ${who} have left if ${who} had ${a} and gave ${b} away?`,
    mul: `How many ${item} does ${who} get in ${a} boxes of ${b} each?`,
  }[kind];
  return { kind, question, answer: `${who} has ${step} ${item}.\n#### ${result}` };
}

/**
 * Two-digit numbers everywhere, so every kind's numbers sit at the same places; results of three
 * digits (sums of 50–99 and 50–99, products of 10–19 boxes of 10–99) and of two (differences), so
 * copying a result is learnt for both lengths, on every kind that uses the calculator.
 */
function operands(rng: Rng, kind: ProblemKind): [number, number] {
  if (kind === 'add') return [int(rng, 50, 99), int(rng, 50, 99)];
  if (kind === 'sub') {
    const a = int(rng, 40, 99);
    return [a, int(rng, 10, a - 10)];
  }
  const boxes = int(rng, 10, 19);
  return [boxes, int(rng, 10, Math.floor(999 / boxes))];
}

/**
 * `train` and `eval` problems from `seed`, the kinds in turn (a third each), no (kind, A, B) twice
 * (there are 622 products, 2,500 sums and 2,100 differences to draw from).
 */
export function wordProblems(
  seed: number,
  sizes: { train: number; eval: number },
): { train: WordProblem[]; eval: WordProblem[] } {
  if (sizes.train + sizes.eval > 3 * 600)
    throw new RangeError(`at most 1,800 problems, got ${sizes.train + sizes.eval}`);
  const rng = createRng(`${seed}:word-problems`);
  const seen = new Set<string>();
  const draw = (n: number) => {
    const out: WordProblem[] = [];
    while (out.length < n) {
      const kind = PROBLEM_KINDS[out.length % PROBLEM_KINDS.length]!;
      const [a, b] = operands(rng, kind);
      const key = `${kind}:${a}:${b}`;
      if (seen.has(key)) continue;
      seen.add(key);
      out.push(problem(kind, a, b, pick(rng, NAMES), pick(rng, ITEMS)));
    }
    return out;
  };
  const held = draw(sizes.eval);
  return { train: draw(sizes.train), eval: held };
}
