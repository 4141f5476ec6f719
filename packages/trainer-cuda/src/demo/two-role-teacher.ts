import type {
  PolicyEngine,
  PolicyGenerateRequest,
  PolicyGenerateResult,
  PolicyTokenizer,
} from '@flowgrpo/agent';
import { createRng } from '@flowgrpo/core';
import type { Tokenizer } from '@flowgrpo/models';
import { type DemoQuestion, type PlannerStep, SUB_GOALS } from './task.js';
import { plannerReply } from './teacher.js';
import { verifierReply } from './verifier-role.js';

// The demonstrator of the two-role variant: a scripted planner and a scripted verifier, each
// imperfect in its own way, so that each trained role has something of its own to learn and the
// three-hop questions need both to improve:
//
//   planner   on "N years after" questions (year_plus, event_plus) it often looks up the event of
//             the year it found instead of adding the offset — it reads "after … built" as "in
//             the year … was built"
//   verifier  on questions that ask what happened (event_of_year, event_plus) it often accepts
//             the year found on the way as enough and stops one hop early
//
// Both decide once per question (seeded by the question), so a demonstration is one consistent
// trace. Their traces run through the real FlowRollout like the single-role teacher's.

/** How often each teacher errs, by question kind (defaults below). */
export interface TwoRoleTeacherOptions {
  /** Probability that the planner picks the event instead of the offset after the year. */
  plannerSlip?: Partial<Record<DemoQuestion['kind'], number>>;
  /** Probability that the verifier stops one hop early. */
  verifierEarlyStop?: Partial<Record<DemoQuestion['kind'], number>>;
  seed?: string | number;
}

const PLANNER_SLIP: Partial<Record<DemoQuestion['kind'], number>> = {
  year_plus: 0.6,
  event_plus: 0.6,
};
const VERIFIER_EARLY_STOP: Partial<Record<DemoQuestion['kind'], number>> = {
  year_plus: 0.2,
  event_of_year: 0.6,
  event_plus: 0.65,
};

/** The scripted planner and verifier on known questions, as two PolicyEngines. */
export class TwoRoleTeacher {
  readonly planner: PolicyEngine;
  readonly verifier: PolicyEngine;
  readonly #questions: Map<string, DemoQuestion>;
  readonly #slip: Partial<Record<DemoQuestion['kind'], number>>;
  readonly #early: Partial<Record<DemoQuestion['kind'], number>>;
  readonly #seed: string;

  constructor(
    tokenizer: Tokenizer,
    questions: readonly DemoQuestion[],
    o: TwoRoleTeacherOptions = {},
  ) {
    this.#questions = new Map(questions.map((q) => [q.question, q]));
    this.#slip = { ...PLANNER_SLIP, ...o.plannerSlip };
    this.#early = { ...VERIFIER_EARLY_STOP, ...o.verifierEarlyStop };
    this.#seed = String(o.seed ?? 0);
    this.planner = scriptedPolicy(tokenizer, 'teacher-planner', (prompt) => {
      const q = this.#question(prompt);
      return plannerReply(q && this.plannerSteps(q)[stepsDone(prompt)]);
    });
    this.verifier = scriptedPolicy(tokenizer, 'teacher-verifier', (prompt) => {
      const q = this.#question(prompt);
      return verifierReply(q === undefined || stepsDone(prompt) >= this.stopsAfter(q));
    });
  }

  /** The steps the teacher planner takes on `q` (fixed per question). */
  plannerSteps(q: DemoQuestion): PlannerStep[] {
    const u = createRng(`teacher-planner:${this.#seed}:${q.question}`).next();
    if (u >= (this.#slip[q.kind] ?? 0)) return q.steps;
    // The slip: after the year, the event of that year instead of the offset.
    return q.steps.map((s) =>
      s.sub_goal === SUB_GOALS.add ? { tool_name: 'almanac', sub_goal: SUB_GOALS.event } : s,
    );
  }

  /** After how many steps the teacher verifier stops on `q` (fixed per question). */
  stopsAfter(q: DemoQuestion): number {
    const u = createRng(`teacher-verifier:${this.#seed}:${q.question}`).next();
    return u < (this.#early[q.kind] ?? 0) ? q.steps.length - 1 : q.steps.length;
  }

  #question(prompt: string): DemoQuestion | undefined {
    return this.#questions.get(/^Q: (.*)$/m.exec(prompt)?.[1] ?? '');
  }
}

/** Steps so far in a demo prompt (one numbered line each). */
const stepsDone = (prompt: string) => (prompt.match(/^\d+ /gm) ?? []).length;

/** A PolicyEngine whose reply is a function of the text prompt, with the tokens it would sample. */
function scriptedPolicy(
  tok: Tokenizer,
  model: string,
  reply: (prompt: string) => string,
): PolicyEngine {
  const tokenizer: PolicyTokenizer = {
    encode: (t) => tok.encode(t),
    decode: (ids) => tok.decode(ids, { skipSpecialTokens: true }),
  };
  return {
    model,
    tokenizer,
    async generate(request: PolicyGenerateRequest): Promise<PolicyGenerateResult> {
      const prompt = request.prompt ?? '';
      const text = reply(prompt);
      const eos = tok.eosTokenId;
      const actionTokens = Int32Array.from([
        ...tok.encode(text),
        ...(eos === undefined ? [] : [eos]),
      ]);
      return {
        text,
        promptTokens: Int32Array.from(tok.encode(prompt, { addBos: true })),
        actionTokens,
        actionLogprobs: new Float32Array(actionTokens.length),
        finishReason: 'stop',
        model,
      };
    },
  };
}
