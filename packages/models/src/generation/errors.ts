import { FlowGrpoError, type FlowGrpoErrorOptions } from '@flowgrpo/core';

// What generation refuses because of the user's config rather than a bug: a prompt that, with
// the tokens asked for, does not fit the positions the graphs were built with, and token ids the
// model has no embedding for (another model's tokenizer). Typed so that a run can count its
// failed rollouts by code and print the fix, and a server can answer 400.

/** A prompt plus its new tokens exceeds the positions (RoPE rows, KV cache) of the graphs. */
export class ContextLengthExceededError extends FlowGrpoError {
  static override readonly code = 'CONTEXT_LENGTH_EXCEEDED';
  readonly promptTokens: number;
  readonly newTokens: number;
  readonly maxPositions: number;
  constructor(
    fields: { promptTokens: number; newTokens: number; maxPositions: number; what?: string },
    options: FlowGrpoErrorOptions = {},
  ) {
    super(
      `${fields.what ?? 'the prompt'} (${fields.promptTokens} tokens) + ${fields.newTokens} new tokens exceeds the ${fields.maxPositions} positions the graphs support`,
      { hint: contextLengthHint(fields.maxPositions), ...options },
    );
    this.promptTokens = fields.promptTokens;
    this.newTokens = fields.newTokens;
    this.maxPositions = fields.maxPositions;
  }
}

/** The fix of a prompt that does not fit `maxPositions`. */
function contextLengthHint(maxPositions: number): string {
  return `raise max_positions above ${maxPositions} (the artifacts are rebuilt; positions past the model's max_position_embeddings were never trained), shorten the prompt, or lower max_completion_length`;
}

/** A prompt or stop token id is outside the model's vocabulary: tokenizer and model disagree. */
export class TokenOutOfVocabularyError extends FlowGrpoError {
  static override readonly code = 'TOKEN_OUT_OF_VOCABULARY';
  readonly tokenId: number;
  readonly vocabSize: number;
  constructor(
    fields: { what: string; tokenId: number; vocabSize: number },
    options: FlowGrpoErrorOptions = {},
  ) {
    super(`${fields.what} has token id ${fields.tokenId} outside [0, ${fields.vocabSize})`, {
      hint: "use the model's own tokenizer (tokenizer: the model folder, or the folder it was trained with)",
      ...options,
    });
    this.tokenId = fields.tokenId;
    this.vocabSize = fields.vocabSize;
  }
}
