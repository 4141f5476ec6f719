import { createRng, type Rng } from '@flowgrpo/core';

// The templates' task: one-step math word problems in GSM8K's format ({question, answer}, the
// answer's worked step with its <<A op B=R>> note, then "#### R"), generated from a seed. Three
// kinds, each worded one way, with both numbers at the end of the question: a model of a few
// hundred thousand weights learns to copy numbers from a fixed place in a few hundred steps, and
// not from anywhere in a sentence. Three splits share no (kind, A, B): the teacher's questions,
// GRPO's and the held-out ones, so no held-out answer can be remembered from training, and GRPO
// samples the SFT model on questions it did not learn by heart (as in the demo).

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
 * digits (sums of 50–99 and 50–99, products of 10–24 boxes of 10–99) and of two (differences), so
 * copying a result is learnt for both lengths, on every kind that uses the calculator.
 */
function operands(rng: Rng, kind: ProblemKind): [number, number] {
  if (kind === 'add') return [int(rng, 50, 99), int(rng, 50, 99)];
  if (kind === 'sub') {
    const a = int(rng, 40, 99);
    return [a, int(rng, 10, a - 10)];
  }
  const boxes = int(rng, 10, 24);
  return [boxes, int(rng, 10, Math.floor(999 / boxes))];
}

/** The splits init writes: the teacher's questions (its logs), GRPO's, and the held-out ones. */
export interface ProblemSplits<T> {
  /** Questions of the teacher's logs (data/sft.jsonl): SFT trains on these. */
  logs: T;
  /** GRPO's questions (data/train.jsonl), none of them in the logs, as the demo keeps them. */
  train: T;
  /** Held-out questions (data/eval.jsonl). */
  eval: T;
}

/**
 * The three splits from `seed`, each with the kinds in turn (a third each); no (kind, A, B) twice
 * anywhere (there are 822 products, 2,500 sums and 2,100 differences to draw from).
 */
export function wordProblems(
  seed: number,
  sizes: ProblemSplits<number>,
): ProblemSplits<WordProblem[]> {
  const total = sizes.logs + sizes.train + sizes.eval;
  if (total > 3 * 750) throw new RangeError(`at most 2,250 problems, got ${total}`);
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
  const train = draw(sizes.train);
  return { logs: draw(sizes.logs), train, eval: held };
}
