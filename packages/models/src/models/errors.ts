import { FlowGrpoError, type FlowGrpoErrorOptions } from '@flowgrpo/core';

/** A `config.json` names a `model_type` (or a feature of one) this package cannot build. */
export class UnsupportedArchitectureError extends FlowGrpoError {
  static override readonly code = 'UNSUPPORTED_ARCHITECTURE';
  readonly modelType: string;
  readonly supported: readonly string[];
  /** The unsupported feature when the model type itself is fine (e.g. `rope_scaling`). */
  readonly feature: string | undefined;
  constructor(
    fields: { modelType: string; supported: readonly string[]; feature?: string; detail?: string },
    options?: FlowGrpoErrorOptions,
  ) {
    super(
      fields.feature === undefined
        ? `model_type '${fields.modelType}' is not supported (supported: ${fields.supported.join(', ')})`
        : `model_type '${fields.modelType}': ${fields.feature} is not supported${fields.detail ? ` (${fields.detail})` : ''}`,
      options,
    );
    this.modelType = fields.modelType;
    this.supported = fields.supported;
    this.feature = fields.feature;
  }
}

/**
 * A checkpoint's tensors do not match its config: a tensor is missing (`actual` undefined), is
 * not one the config expects (`expected` undefined), or has another shape.
 */
export class WeightsMismatchError extends FlowGrpoError {
  static override readonly code = 'WEIGHTS_MISMATCH';
  readonly tensor: string;
  readonly expected: readonly number[] | undefined;
  readonly actual: readonly number[] | undefined;
  constructor(
    fields: {
      tensor: string;
      expected: readonly number[] | undefined;
      actual: readonly number[] | undefined;
      file?: string;
    },
    options?: FlowGrpoErrorOptions,
  ) {
    const shape = (s: readonly number[]) => `[${s.join(', ')}]`;
    const what =
      fields.actual === undefined
        ? `missing (the config expects ${shape(fields.expected ?? [])})`
        : fields.expected === undefined
          ? `is not a tensor of this architecture (shape ${shape(fields.actual)})`
          : `has shape ${shape(fields.actual)}, the config expects ${shape(fields.expected)}`;
    super(`${fields.file ? `${fields.file}: ` : ''}tensor '${fields.tensor}' ${what}`, options);
    this.tensor = fields.tensor;
    this.expected = fields.expected;
    this.actual = fields.actual;
  }
}
