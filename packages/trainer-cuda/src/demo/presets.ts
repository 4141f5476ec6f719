import type { KindWeights } from './task.js';
import type { TeacherOptions } from './teacher.js';

// The demo's task presets: which questions the run asks (the teacher, GRPO, the held-out test),
// how the teacher fails, and what GRPO needs to find what the teacher never shows. The machinery
// (almanac, model, trainers, evaluation) is the same.
//
//   default  the teacher stops one hop early on 30% of two-hop and 65% of three-hop questions;
//            its logs hold every kind. RFT (its correct traces only) is a perfect teacher here.
//   explore  the teacher never completes a three-hop question: it always stops one hop early there
//            (the year plus the offset, not that year's event), so the judge rejects every such
//            trace and RFT (its correct traces only) has none to learn from. Each step is shown
//            correctly elsewhere: "year of the landmark → add the offset" on "which year was N
//            years after …", "add the offset → event in the year" on "what happened N years
//            after 1835?". The teacher stops early on 30% of two-hop questions and, on "which
//            year was N years after …", goes one hop too far on 30% of the rest (it also looks up
//            that year's event): the three steps in a row occur only where the judge rejects them.
//            GRPO samples the SFT model, which continues after the offset now and then, and the
//            outcome reward says on which questions to.

export type DemoTaskName = 'default' | 'explore';

export interface DemoTaskPreset {
  /** Question kinds of the teacher's logs, GRPO's questions and the held-out test questions. */
  questions: KindWeights;
  /** Question kinds of GRPO's questions, over `questions`; undefined = the same mix. */
  grpoQuestions?: KindWeights;
  /**
   * GRPO's curriculum over question kinds (the trainer's `curriculum`, column `kind`): stages in
   * order, each until a share of the GRPO steps (the last to the end), each asking the kinds it
   * weighs; undefined = GRPO's questions in one seeded order.
   */
  grpoCurriculum?: { untilShare?: number; weights: KindWeights }[];
  teacher: Pick<TeacherOptions, 'prematureStop' | 'overshoot'>;
  /** GRPO steps at the full budget (the other budgets keep theirs). */
  grpoMaxSteps?: number;
  /** GRPO's KL coefficient to the SFT model (the trainer's `beta`); undefined = 0. */
  grpoBeta?: number;
  /** GRPO's learning rate (every budget); undefined = the demo's 5e-4. */
  grpoLearningRate?: number;
  /** GRPO rollouts per question at the full budget (the other budgets keep theirs). */
  grpoGenerations?: number;
  /** GRPO's reward pays the judge's score only for a well-formed rollout (formatGatedReward). */
  formatGate?: boolean;
}

export const DEMO_TASKS: Record<DemoTaskName, DemoTaskPreset> = {
  // A malformed reply earns nothing: the final-answer generator still answers from the tools'
  // last result, and without the gate GRPO let one-hop replies decay into malformed JSON that the
  // judge paid all the same (seed 1 on an AVX-512 CPU: format 64.7%).
  default: { questions: {}, teacher: {}, formatGate: true },
  explore: {
    // A third of the questions at each level; event_after_year joins level 2.
    questions: { year_plus: 1, event_of_year: 1, event_after_year: 1, event_plus: 3 },
    teacher: { prematureStop: { 2: 0.3, 3: 1 }, overshoot: { year_plus: 0.3 } },
    // Finding a plan no demonstration shows takes more tries than sharpening one it shows: two
    // thirds of GRPO's questions are three-hop, 16 rollouts each, for 100 steps at twice the
    // default demo's learning rate. "Which year was N years after …" waits for the last 75% of
    // the steps: there the right move after the offset is to answer, and asked from the start
    // it pushed the policy away from the event step before any three-hop group was right. Once
    // the three-hop plan is found, "look up that year's event" spills onto it too, until every
    // such rollout is wrong and its groups carry no signal; a KL to the SFT model (which answers
    // there) is what brings it back when the curriculum asks it again, and the earlier it asks,
    // the more steps the recovery has (docs/demo.md).
    grpoQuestions: { event_plus: 12, year_plus: 4 },
    grpoBeta: 0.04,
    grpoCurriculum: [
      {
        untilShare: 0.25,
        weights: {
          year: 1,
          town: 1,
          event: 1,
          event_of_year: 1,
          event_after_year: 1,
          event_plus: 12,
        },
      },
      {
        weights: {
          year: 1,
          town: 1,
          event: 1,
          event_of_year: 1,
          event_after_year: 1,
          event_plus: 8,
          year_plus: 4,
        },
      },
    ],
    grpoGenerations: 16,
    grpoMaxSteps: 100,
    grpoLearningRate: 1e-3,
    // A malformed reply earns nothing, as in the default preset: with a format term of 0.1
    // instead, a kind's rollouts drifted out of format late in the run while still answering
    // right (seed 2: "What happened in the year X was built?" 0% well-formed at step 94).
    formatGate: true,
  },
};

export const DEMO_TASK_NAMES = Object.keys(DEMO_TASKS) as DemoTaskName[];
