import { FlowGrpoError } from '@flowgrpo/core';

/** The trainable planner's reply is not a NextStep object (recorded, never thrown out of a rollout). */
export class PlannerParseError extends FlowGrpoError {
  static override readonly code = 'PLANNER_PARSE_ERROR';
}
