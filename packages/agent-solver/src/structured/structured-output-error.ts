import { FlowGrpoError, type FlowGrpoErrorOptions } from '@flowgrpo/core';
import type { z } from 'zod';

/** The model's reply could not be turned into a valid object, even after the corrective retry. */
export class StructuredOutputError extends FlowGrpoError {
  static override readonly code = 'STRUCTURED_OUTPUT_ERROR';
  /** The model's last reply, verbatim. */
  readonly rawText: string;
  /** Zod's issues for the last reply; empty when the reply was not JSON at all. */
  readonly issues: readonly z.core.$ZodIssue[];
  /** Why the JSON could not be read, when that was the failure. */
  readonly parseError: string | undefined;
  /** Model calls made (the first plus corrective retries). */
  readonly attempts: number;
  constructor(
    message: string,
    fields: {
      rawText: string;
      issues?: readonly z.core.$ZodIssue[];
      parseError?: string;
      attempts: number;
    },
    options?: FlowGrpoErrorOptions,
  ) {
    super(message, options);
    this.rawText = fields.rawText;
    this.issues = fields.issues ?? [];
    this.parseError = fields.parseError;
    this.attempts = fields.attempts;
  }
}
