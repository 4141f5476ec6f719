import { createRng, type Rng, type SampleRow } from '@flowgrpo/core';
import type { Almanac, AlmanacHalf, Landmark } from './almanac.js';

// The demo's questions: 1 to 3 tool calls over the almanac and a calculator, by level.
//
//   level 1  "In which year was X built?"                 almanac(year of X)
//            "In which town is X?"                        almanac(town of X)
//            "What happened in Y?"                        almanac(event in Y)
//   level 2  "Which year was N years after X was built?"  almanac(year of X), calculator(Y+N)
//            "What happened in the year X was built?"     almanac(year of X), almanac(event in Y)
//   level 3  "What happened N years after X was built?"   almanac(year of X), calculator(Y+N),
//                                                         almanac(event in Y+N)
//
// The `explore` preset adds a level-2 kind that shows the last two steps of level 3 on their own:
//   level 2  "What happened N years after Y?"            calculator(Y+N), almanac(event in Y+N)
//
// A question carries its gold plan (the tool calls a perfect planner makes); rows follow the
// seeds' SampleRow schema (`result` is the ground truth).

export type ToolCall =
  | { tool: 'almanac'; query: string }
  | { tool: 'calculator'; expression: string };

/**
 * A planner step as the demo's planner writes it: a tool and a sub-goal that names what to find
 * ("year of the landmark", "event in the year", "add the offset"). The executor grounds it into
 * the tool's arguments from the question and the steps so far, as AgentFlow's executor turns a
 * sub-goal into a tool command: the planner decides what to do next, the executor how.
 */
export interface PlannerStep {
  tool_name: 'almanac' | 'calculator';
  sub_goal: string;
}

export interface DemoQuestion {
  question: string;
  answer: string;
  level: 1 | 2 | 3;
  kind:
    | 'year'
    | 'town'
    | 'event'
    | 'year_plus'
    | 'event_of_year'
    | 'event_plus'
    | 'event_after_year';
  /** The tool calls that answer it. */
  plan: ToolCall[];
  /** The planner steps that produce those calls through the demo's executor. */
  steps: PlannerStep[];
}

export const SUB_GOALS = {
  year: 'year of the landmark',
  town: 'town of the landmark',
  event: 'event in the year',
  add: 'add the offset',
} as const;

const pick = <T>(rng: Rng, xs: readonly T[]): T => xs[rng.int(xs.length)]!;

/** One question of `kind` about the half's landmarks and years. */
function makeQuestion(
  almanac: Almanac,
  half: AlmanacHalf,
  kind: DemoQuestion['kind'],
  rng: Rng,
): DemoQuestion {
  const yearOf = (l: Landmark): ToolCall => ({ tool: 'almanac', query: `year of ${l.name}` });
  const eventIn = (y: number): ToolCall => ({ tool: 'almanac', query: `event in ${y}` });
  const stepYear: PlannerStep = { tool_name: 'almanac', sub_goal: SUB_GOALS.year };
  const stepAdd: PlannerStep = { tool_name: 'calculator', sub_goal: SUB_GOALS.add };
  const stepEvent: PlannerStep = { tool_name: 'almanac', sub_goal: SUB_GOALS.event };
  const years = new Set(half.years);
  const l = pick(rng, half.landmarks);
  // An offset that lands on a year of the same half (so the event exists and stays held out).
  const offset = (): number => {
    for (let tries = 0; tries < 200; tries++) {
      const n = 2 + rng.int(58);
      if (years.has(l.year + n)) return n;
    }
    return 0;
  };
  switch (kind) {
    case 'year':
      return {
        question: `In which year was ${l.name} built?`,
        answer: String(l.year),
        level: 1,
        kind,
        plan: [yearOf(l)],
        steps: [stepYear],
      };
    case 'town':
      return {
        question: `In which town is ${l.name}?`,
        answer: l.town,
        level: 1,
        kind,
        plan: [{ tool: 'almanac', query: `town of ${l.name}` }],
        steps: [{ tool_name: 'almanac', sub_goal: SUB_GOALS.town }],
      };
    case 'event': {
      const y = pick(rng, half.years);
      return {
        question: `What happened in ${y}?`,
        answer: almanac.events.get(y)!,
        level: 1,
        kind,
        plan: [eventIn(y)],
        steps: [stepEvent],
      };
    }
    case 'year_plus': {
      // The answer stays a year of this half too: no held-out number is a training answer.
      const n = offset();
      if (n === 0) return makeQuestion(almanac, half, 'year', rng);
      return {
        question: `Which year was ${n} years after ${l.name} was built?`,
        answer: String(l.year + n),
        level: 2,
        kind,
        plan: [yearOf(l), { tool: 'calculator', expression: `${l.year}+${n}` }],
        steps: [stepYear, stepAdd],
      };
    }
    case 'event_of_year':
      return {
        question: `What happened in the year ${l.name} was built?`,
        answer: almanac.events.get(l.year)!,
        level: 2,
        kind,
        plan: [yearOf(l), eventIn(l.year)],
        steps: [stepYear, stepEvent],
      };
    case 'event_after_year': {
      // A year of the half and an offset that lands on another year of the same half.
      const y = pick(rng, half.years);
      const later = half.years.filter((z) => z - y >= 2 && z - y < 60);
      if (later.length === 0) return makeQuestion(almanac, half, 'event', rng);
      const n = pick(rng, later) - y;
      return {
        question: `What happened ${n} years after ${y}?`,
        answer: almanac.events.get(y + n)!,
        level: 2,
        kind,
        plan: [{ tool: 'calculator', expression: `${y}+${n}` }, eventIn(y + n)],
        steps: [stepAdd, stepEvent],
      };
    }
    case 'event_plus': {
      const n = offset();
      if (n === 0) return makeQuestion(almanac, half, 'event_of_year', rng);
      return {
        question: `What happened ${n} years after ${l.name} was built?`,
        answer: almanac.events.get(l.year + n)!,
        level: 3,
        kind,
        plan: [
          yearOf(l),
          { tool: 'calculator', expression: `${l.year}+${n}` },
          eventIn(l.year + n),
        ],
        steps: [stepYear, stepAdd, stepEvent],
      };
    }
  }
}

export const QUESTION_KINDS: readonly DemoQuestion['kind'][] = [
  'year',
  'town',
  'event',
  'year_plus',
  'event_of_year',
  'event_plus',
  // Last, with weight 0 by default: the default demo's question stream stays as it was.
  'event_after_year',
];

/** Question kinds drawn with these weights (level 1 : 2 : 3 ≈ 1 : 1 : 1 by default). */
export type KindWeights = Partial<Record<DemoQuestion['kind'], number>>;
const DEFAULT_WEIGHTS: Required<KindWeights> = {
  year: 1,
  town: 1,
  event: 1,
  year_plus: 1.5,
  event_of_year: 1.5,
  event_plus: 3,
  event_after_year: 0,
};

/** `count` distinct questions about one half of the almanac. */
export function makeQuestions(
  almanac: Almanac,
  half: 'train' | 'test',
  count: number,
  seed: string | number,
  weights: KindWeights = {},
): DemoQuestion[] {
  const rng = createRng(`questions:${almanac.seed}:${half}:${seed}`);
  const w = { ...DEFAULT_WEIGHTS, ...weights };
  const total = QUESTION_KINDS.reduce((s, k) => s + w[k], 0);
  const seen = new Set<string>();
  const out: DemoQuestion[] = [];
  for (let tries = 0; out.length < count && tries < count * 50; tries++) {
    const u = rng.next() * total;
    let acc = 0;
    const kind =
      QUESTION_KINDS.find((k) => {
        acc += w[k];
        return u < acc;
      }) ?? 'event_plus';
    const q = makeQuestion(almanac, almanac[half], kind, rng);
    if (seen.has(q.question)) continue;
    seen.add(q.question);
    out.push(q);
  }
  return out;
}

/** Questions as dataset rows (the seeds' schema); `source` is `almanac-L<level>`. */
export function questionRows(questions: readonly DemoQuestion[], firstId = 0): SampleRow[] {
  return questions.map((q, i) => ({
    id: firstId + i,
    question: q.question,
    chain: '',
    result: q.answer,
    source: `almanac-L${q.level}`,
    extra_info: {
      ground_truth: q.answer,
      idx: i,
      kind: q.kind,
      level: q.level,
      plan: q.plan,
      steps: q.steps,
    },
  }));
}
