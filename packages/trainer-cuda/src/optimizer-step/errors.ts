import { FlowGrpoError, type FlowGrpoErrorOptions } from '@flowgrpo/core';

/** A train-step runner was set up or driven wrongly (missing gradient output, name clash, …). */
export class TrainLoopError extends FlowGrpoError {
  static override readonly code = 'TRAIN_LOOP_ERROR';
  constructor(message: string, options?: FlowGrpoErrorOptions) {
    super(message, options);
  }
}
