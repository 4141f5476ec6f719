import type { KindWeights } from './task.js';
import type { TeacherOptions } from './teacher.js';

// The demo's task presets: which questions the run asks, which of them the teacher's logs hold,
// and how the teacher fails. The machinery (almanac, model, trainers, evaluation) is the same.
//
//   default  the teacher stops one hop early on 30% of two-hop and 65% of three-hop questions;
//            its logs hold every kind. RFT (its correct traces only) is a perfect teacher here.
//   explore  the teacher's logs hold no correct three-hop trace. They come from an agent deployed
//            on one- and two-hop questions (never asked a three-hop one; asked, it stops one hop
//            early), which stops early on 30% of two-hop questions and, on "which year was N
//            years after …" questions, goes one hop too far on 30% of the rest (it also looks up
//            that year's event). So "year of the landmark → add the offset → event in the year"
//            is in the logs only where the judge rejects it. RFT keeps the correct traces and
//            with them the rule "after adding the offset, answer"; SFT imitates the mix, whose
//            majority is to stop too. GRPO samples the SFT model, which continues after the
//            offset some of the time, and the outcome reward says on which questions to.

export type DemoTaskName = 'default' | 'explore';

export interface DemoTaskPreset {
  /** Question kinds of the GRPO questions and the held-out test questions. */
  questions: KindWeights;
  /** Question kinds of the teacher's logs (demonstrations), over `questions`; undefined = same. */
  demonstrations?: KindWeights;
  teacher: Pick<TeacherOptions, 'prematureStop' | 'overshoot'>;
  /** GRPO steps at the full budget (the other budgets keep theirs). */
  grpoMaxSteps?: number;
}

export const DEMO_TASKS: Record<DemoTaskName, DemoTaskPreset> = {
  default: { questions: {}, teacher: {} },
  explore: {
    // A third of the questions at each level; event_after_year joins level 2.
    questions: { year_plus: 1, event_of_year: 1, event_after_year: 1, event_plus: 3 },
    demonstrations: { event_plus: 0 },
    teacher: { prematureStop: { 2: 0.3, 3: 1 }, overshoot: { year_plus: 0.3 } },
    // Finding a plan no demonstration shows takes longer than sharpening one it shows.
    grpoMaxSteps: 100,
  },
};

export const DEMO_TASK_NAMES = Object.keys(DEMO_TASKS) as DemoTaskName[];
