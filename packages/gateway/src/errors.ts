import { FlowGrpoError, type FlowGrpoErrorOptions } from '@flowgrpo/core';

// What the gateway answers when a request cannot be served: an HTTP status and the body OpenAI's
// API sends, `{"error": {"message", "type", "param", "code"}}`, which the `openai` SDK, the
// Vercel AI SDK and openai-agents-js all turn into their own typed errors.

export type GatewayErrorType =
  | 'invalid_request_error'
  | 'authentication_error'
  | 'not_found_error'
  | 'rate_limit_error'
  | 'server_error';

export interface OpenAIErrorBody {
  error: { message: string; type: GatewayErrorType; param: string | null; code: string | null };
}

/** A request the gateway refuses or fails, with the OpenAI-style body it answers with. */
export class GatewayError extends FlowGrpoError {
  static override readonly code = 'GATEWAY_ERROR';
  readonly status: number;
  readonly type: GatewayErrorType;
  readonly param: string | null;
  /** OpenAI's `error.code` (e.g. `model_not_found`), not the FlowGrpoError class code. */
  readonly errorCode: string | null;

  constructor(
    status: number,
    message: string,
    fields: { type?: GatewayErrorType; param?: string | null; code?: string | null } = {},
    options?: FlowGrpoErrorOptions,
  ) {
    super(message, options);
    this.status = status;
    this.type =
      fields.type ??
      (status === 401
        ? 'authentication_error'
        : status === 404
          ? 'not_found_error'
          : status === 429
            ? 'rate_limit_error'
            : status >= 500
              ? 'server_error'
              : 'invalid_request_error');
    this.param = fields.param ?? null;
    this.errorCode = fields.code ?? null;
  }

  toBody(): OpenAIErrorBody {
    return {
      error: { message: this.message, type: this.type, param: this.param, code: this.errorCode },
    };
  }
}

/** 400 for a field the request got wrong. */
export function badRequest(message: string, param: string | null = null, code?: string) {
  return new GatewayError(400, message, { param, code: code ?? 'invalid_value' });
}

/** The body of any error: a GatewayError as it is, anything else as a 500 without internals. */
export function errorBody(error: unknown): { status: number; body: OpenAIErrorBody } {
  if (GatewayError.isInstance(error)) return { status: error.status, body: error.toBody() };
  return {
    status: 500,
    body: {
      error: {
        message: `the gateway failed to serve the request: ${(error as Error)?.message ?? String(error)}`,
        type: 'server_error',
        param: null,
        code: 'internal_error',
      },
    },
  };
}
