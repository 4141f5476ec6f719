import { FlowGrpoError, type FlowGrpoErrorOptions } from '@flowgrpo/core';

/**
 * An input to the GRPO maths is malformed: arrays of different lengths, an index out of range,
 * a non-finite value where a number is needed, or an option outside its domain. `field` names
 * the offending input and `index` the first bad position, when there is one.
 */
export class GrpoInputError extends FlowGrpoError {
  static override readonly code = 'GRPO_INPUT_ERROR';
  readonly field: string;
  readonly index: number | undefined;
  constructor(
    message: string,
    fields: { field: string; index?: number },
    options?: FlowGrpoErrorOptions,
  ) {
    super(`${fields.field}: ${message}`, options);
    this.field = fields.field;
    this.index = fields.index;
  }
}
