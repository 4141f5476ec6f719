import { FlowGrpoError, type FlowGrpoErrorOptions } from '../errors.js';

/**
 * Why a safetensors file (or sharded index) was rejected.
 * - `truncated`: shorter than the 8-byte length prefix, or it ends inside the data its own header
 *   lays out contiguously (a cut-off download).
 * - `header_out_of_bounds`: the header length points past the end of the file.
 * - `header_too_large`: the header length exceeds the 100 MB limit HF's reader also enforces.
 * - `invalid_json`: the header (or index) is not UTF-8 JSON, or not a JSON object.
 * - `invalid_header`: valid JSON with the wrong structure (fields, shapes, offsets, metadata).
 * - `unknown_dtype`: a dtype name safetensors does not define.
 * - `size_mismatch`: a tensor's byte range does not equal its shape × dtype size.
 * - `overlapping_offsets`: two tensors' byte ranges overlap.
 * - `out_of_bounds`: a tensor's byte range lies beyond the data section.
 * - `missing_tensor`: a name that the file or index does not hold.
 * - `missing_shard`: an index names a shard file that cannot be opened.
 */
export type SafetensorsErrorReason =
  | 'truncated'
  | 'header_out_of_bounds'
  | 'header_too_large'
  | 'invalid_json'
  | 'invalid_header'
  | 'unknown_dtype'
  | 'size_mismatch'
  | 'overlapping_offsets'
  | 'out_of_bounds'
  | 'missing_tensor'
  | 'missing_shard';

/** A safetensors file or index is malformed, or a tensor is not in it. */
export class SafetensorsError extends FlowGrpoError {
  static override readonly code = 'SAFETENSORS_ERROR';
  /** Path of the file, or undefined for an in-memory buffer. */
  readonly file: string | undefined;
  readonly tensor: string | undefined;
  readonly reason: SafetensorsErrorReason;

  constructor(
    message: string,
    fields: { file?: string; tensor?: string; reason: SafetensorsErrorReason },
    options?: FlowGrpoErrorOptions,
  ) {
    const where = [
      fields.file,
      fields.tensor === undefined ? undefined : `tensor '${fields.tensor}'`,
    ]
      .filter(Boolean)
      .join(': ');
    super(where ? `${where}: ${message}` : message, options);
    this.file = fields.file;
    this.tensor = fields.tensor;
    this.reason = fields.reason;
  }
}
