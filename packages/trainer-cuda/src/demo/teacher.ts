import type {
  PolicyEngine,
  PolicyGenerateRequest,
  PolicyGenerateResult,
  PolicyTokenizer,
} from '@flowgrpo/agent';
import { createRng } from '@flowgrpo/core';
import type { Tokenizer } from '@flowgrpo/models';
import { type DemoQuestion, type PlannerStep, SUB_GOALS } from './task.js';

// The demonstrator the SFT baseline learns from: a scripted planner standing in for what a user
// realistically has — logs of a cheaper agent that is right only part of the time. It knows each
// question's gold plan but answers too early on many multi-hop questions (a common failure of
// weak planners: stop at an intermediate result that looks like an answer). Its traces go
// through the real FlowRollout, so the demonstrations are ordinary recorded trajectories. It can
// also go one hop too far on some kinds (look up the event of a year the question asked for).

export interface TeacherOptions {
  /** Probability of stopping one hop early, by level (default L1 0, L2 0.3, L3 0.65). */
  prematureStop?: Partial<Record<1 | 2 | 3, number>>;
  /**
   * Probability, by question kind, of one step too many when it did not stop early: after the
   * plan it also asks for "event in the year" (default none).
   */
  overshoot?: Partial<Record<DemoQuestion['kind'], number>>;
  seed?: string | number;
}

/** The planner's JSON reply for a step, or for the final answer (NextStep's keys). */
export function plannerReply(step: PlannerStep | undefined): string {
  if (!step) return JSON.stringify({ sub_goal: 'Final Answer', tool_name: 'None' });
  return JSON.stringify({ sub_goal: step.sub_goal, tool_name: step.tool_name });
}

/** A PolicyEngine that plays the scripted teacher on known questions. */
export class TeacherPolicy implements PolicyEngine {
  readonly model = 'teacher';
  readonly tokenizer: PolicyTokenizer;
  readonly #tok: Tokenizer;
  readonly #questions: Map<string, DemoQuestion>;
  readonly #stop: Record<1 | 2 | 3, number>;
  readonly #overshoot: Partial<Record<DemoQuestion['kind'], number>>;
  readonly #seed: string;

  constructor(tokenizer: Tokenizer, questions: readonly DemoQuestion[], o: TeacherOptions = {}) {
    this.#tok = tokenizer;
    this.tokenizer = {
      encode: (t) => tokenizer.encode(t),
      decode: (ids) => tokenizer.decode(ids, { skipSpecialTokens: true }),
    };
    this.#questions = new Map(questions.map((q) => [q.question, q]));
    this.#stop = { 1: 0, 2: 0.3, 3: 0.65, ...o.prematureStop };
    this.#overshoot = o.overshoot ?? {};
    this.#seed = String(o.seed ?? 0);
  }

  /** How many of `q`'s steps the teacher takes before answering (fixed per question). */
  callsFor(q: DemoQuestion): number {
    const u = createRng(`teacher:${this.#seed}:${q.question}`).next();
    return u < this.#stop[q.level] ? q.steps.length - 1 : q.steps.length;
  }

  /** The steps the teacher takes on `q`: its plan, cut short or with one step too many. */
  stepsFor(q: DemoQuestion): PlannerStep[] {
    const calls = this.callsFor(q);
    if (calls < q.steps.length) return q.steps.slice(0, calls);
    // Its own draw: a preset without overshoot keeps every other draw as it was.
    const u = createRng(`teacher-overshoot:${this.#seed}:${q.question}`).next();
    if (u < (this.#overshoot[q.kind] ?? 0))
      return [...q.steps, { tool_name: 'almanac', sub_goal: SUB_GOALS.event }];
    return q.steps;
  }

  async generate(request: PolicyGenerateRequest): Promise<PolicyGenerateResult> {
    const prompt = request.prompt ?? '';
    const question = /^Q: (.*)$/m.exec(prompt)?.[1] ?? '';
    const q = this.#questions.get(question);
    const done = (prompt.match(/^\d+ /gm) ?? []).length;
    const step = q ? this.stepsFor(q)[done] : undefined;
    const text = plannerReply(step);
    const promptTokens = Int32Array.from(this.#tok.encode(prompt, { addBos: true }));
    const eos = this.#tok.eosTokenId;
    const actionTokens = Int32Array.from([
      ...this.#tok.encode(text),
      ...(eos === undefined ? [] : [eos]),
    ]);
    return {
      text,
      promptTokens,
      actionTokens,
      actionLogprobs: new Float32Array(actionTokens.length),
      finishReason: 'stop',
      model: this.model,
    };
  }
}
