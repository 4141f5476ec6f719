import {
  type ChatMessage,
  ConfigError,
  type FinishReason,
  FlowGrpoError,
  type FlowGrpoErrorOptions,
  type LLMUsage,
} from '@flowgrpo/core';

// The trainable planner's engine. Unlike an LLMEngine it must hand back exactly which tokens it
// saw and sampled, with the sampling policy's log-probability of each sampled token: GRPO's
// importance ratio is computed against those numbers. The trainer implements this interface with
// its own ONNX decode graph; OpenAIPolicyEngine implements it over vLLM / SGLang.

export interface PolicyGenerateRequest {
  /** The prompt, exactly one of: token ids (sent as is), chat messages, or raw text. */
  promptTokens?: Int32Array | readonly number[];
  messages?: ChatMessage[];
  prompt?: string;
  maxTokens: number;
  temperature?: number;
  topP?: number;
  stop?: string[];
  seed?: number;
  signal?: AbortSignal;
  timeoutMs?: number;
}

export interface PolicyGenerateResult {
  text: string;
  // ArrayBuffer-backed (not SharedArrayBuffer) arrays, the type core's Turn schema produces.
  /** The prompt as the model saw it (chat template applied). */
  promptTokens: Int32Array<ArrayBuffer>;
  /** The sampled tokens, including a final EOS / stop token when the server reports one. */
  actionTokens: Int32Array<ArrayBuffer>;
  /** log π(token) of each action token under the sampling policy (same length). */
  actionLogprobs: Float32Array<ArrayBuffer>;
  finishReason: FinishReason;
  usage?: LLMUsage;
  /** Model or adapter name that produced the sample. */
  model?: string;
}

/** Optional tokenizer hooks, for engines or callers that render and count tokens locally. */
export interface PolicyTokenizer {
  encode(text: string): ArrayLike<number>;
  decode(ids: ArrayLike<number>): string;
  /** Renders chat messages as the model's prompt text (its chat template). */
  applyChatTemplate?(messages: ChatMessage[], options: { addGenerationPrompt: boolean }): string;
  eosTokenId?: number;
}

/** A LoRA adapter saved in PEFT format (adapter_config.json + adapter_model.safetensors). */
export interface AdapterRef {
  /** Name the server registers it under; generation then uses it as the model name. */
  name: string;
  /** Folder on the inference server's file system. */
  path: string;
}

export interface PolicyEngine {
  readonly model: string;
  readonly tokenizer?: PolicyTokenizer | undefined;
  generate(request: PolicyGenerateRequest): Promise<PolicyGenerateResult>;
  /** Makes later generations use `adapter` (the trainer calls it after each optimizer step). */
  updateAdapter?(adapter: AdapterRef): Promise<void>;
  // Several adapters served at once, each under its own name (GRPO's max_staleness ≥ 1 keeps one
  // per policy version a batch is sampled from): an engine offers all three or none.
  /** Registers `adapter` (a name new to the servers) beside the adapters already loaded. */
  loadAdapter?(adapter: AdapterRef, options: { mode: 'add' }): Promise<void>;
  /** Removes the adapter `name` from the servers. */
  unloadAdapter?(name: string): Promise<void>;
  /** This engine with every request naming the adapter `name`, whatever is loaded later. */
  withAdapter?(name: string): PolicyEngine;
}

/** The server's answer lacks what a policy sample needs (token ids, logprobs), or is inconsistent. */
export class PolicyResponseError extends FlowGrpoError {
  static override readonly code = 'POLICY_RESPONSE_ERROR';
  readonly baseURL: string | undefined;
  constructor(message: string, fields: { baseURL?: string } = {}, options?: FlowGrpoErrorOptions) {
    super(message, options);
    this.baseURL = fields.baseURL;
  }
}

/** Exactly one prompt form must be given. */
export function promptKind(request: PolicyGenerateRequest): 'tokens' | 'messages' | 'text' {
  const given = [
    request.promptTokens !== undefined ? 'tokens' : undefined,
    request.messages !== undefined ? 'messages' : undefined,
    request.prompt !== undefined ? 'text' : undefined,
  ].filter((k): k is 'tokens' | 'messages' | 'text' => k !== undefined);
  if (given.length !== 1) {
    throw new ConfigError(
      `a policy request needs exactly one of promptTokens, messages, prompt (got ${given.length === 0 ? 'none' : given.join(', ')})`,
      { key: 'prompt' },
    );
  }
  return given[0]!;
}
