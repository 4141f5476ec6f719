import { FlowGrpoError, type FlowGrpoErrorOptions } from '@flowgrpo/core';

/** Bytes that are not a well-formed ONNX protobuf (truncated, bad wire type, bad UTF-8). */
export class OnnxDecodeError extends FlowGrpoError {
  static override readonly code = 'ONNX_DECODE_ERROR';
}

/** An `OnnxModel` description that cannot be encoded as given (e.g. a tensor without bytes). */
export class OnnxEncodeError extends FlowGrpoError {
  static override readonly code = 'ONNX_ENCODE_ERROR';
  /** What was being encoded, e.g. `initializer "w"`. */
  readonly where: string;
  constructor(message: string, fields: { where: string }, options?: FlowGrpoErrorOptions) {
    super(`${fields.where}: ${message}`, options);
    this.where = fields.where;
  }
}

/**
 * The protobuf would exceed protobuf's 2 GB message limit, which ONNX Runtime enforces on load.
 * Move initializers to external data (a lower `sizeThreshold`).
 */
export class OnnxModelTooLargeError extends FlowGrpoError {
  static override readonly code = 'ONNX_MODEL_TOO_LARGE';
  readonly bytes: number;
  readonly limit: number;
  constructor(fields: { bytes: number; limit: number }, options?: FlowGrpoErrorOptions) {
    super(
      `the ONNX protobuf would be ${fields.bytes} bytes, over the ${fields.limit}-byte protobuf limit; ` +
        'store large initializers as external data (lower sizeThreshold)',
      options,
    );
    this.bytes = fields.bytes;
    this.limit = fields.limit;
  }
}
