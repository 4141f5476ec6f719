import {
  type AdapterRef,
  type PolicyEngine,
  type PolicyGenerateRequest,
  type PolicyGenerateResult,
  type PolicyTokenizer,
  promptKind,
} from '@flowgrpo/agent';
import { type ChatMessage, ConfigError } from '@flowgrpo/core';
import type { DecoderArtifacts } from '../artifacts/decoder-artifacts.js';
import { loraFitsBuilt } from '../lora/lora-config.js';
import { loadLoraAdapter } from '../lora/lora-weights.js';
import { eosTokenIds } from '../models/config.js';
import type { Tokenizer } from '../tokenizers/tokenizer.js';
import { DecoderGenerator } from './decoder-generator.js';
import type {
  DecoderGenerateOptions,
  GenerationOutput,
  GenerationRequest,
} from './generation-request.js';
import type { TokenListener } from './token-stream.js';

// The agent's PolicyEngine over the local ONNX graphs: text, chat messages (rendered with the
// tokenizer's chat template) or token ids in; the prompt ids, sampled ids and their logprobs out,
// the logprobs computed as the `logprobs` graph computes them (softmax(logits / T), T = 1 when
// greedy).

/**
 * A policy request that also streams: `onToken` hears each token as it is sampled (token-stream.ts).
 * Engines that cannot stream (an upstream server) ignore it and answer when they are done.
 */
export interface StreamingPolicyRequest extends PolicyGenerateRequest {
  onToken?: TokenListener;
}

export interface LocalPolicyEngineOptions {
  /** Opened artifacts (sessions on this thread), or a ready generator (e.g. inWorker). */
  artifacts?: DecoderArtifacts;
  generator?: DecoderGenerator;
  tokenizer: Tokenizer;
  /** Name reported as `model` (default 'local'). */
  model?: string;
  /** Prepend BOS to text prompts (when the tokenizer has one). Default true. */
  addBos?: boolean;
  /** End-of-generation ids (default: the tokenizer's EOS and the config's eos_token_id). */
  stopTokenIds?: readonly number[];
  /** Sampling defaults for requests that leave them out. */
  defaults?: Partial<Pick<DecoderGenerateOptions, 'temperature' | 'topP' | 'topK'>>;
  /**
   * Requests that arrive while the engine is busy (or in the same tick) run together as one batch
   * of at most this many rows (default 64; 1 = one request at a time). Concurrent rollouts —
   * a GRPO group — then share every decode step. With the artifacts' `generate` graph the batch
   * is continuous: finished rows leave and waiting requests join between chunks of a few tokens,
   * so the batch stays full while rollouts finish at different lengths. A request's tokens do
   * not depend on its batch-mates: each samples from its own seeded stream.
   */
  maxBatchSize?: number;
}

interface Pending {
  request: GenerationRequest;
  signal: AbortSignal | undefined;
  resolve: (r: GenerationOutput) => void;
  reject: (e: unknown) => void;
}

export class LocalPolicyEngine implements PolicyEngine {
  readonly model: string;
  readonly tokenizer: PolicyTokenizer;
  readonly generator: DecoderGenerator;
  readonly #tok: Tokenizer;
  readonly #options: LocalPolicyEngineOptions;
  /** The adapter generations use, once one was loaded. */
  adapter: AdapterRef | undefined;
  readonly #pending: Pending[] = [];
  #running = false;
  /** Batches run so far and their sizes (for metrics). */
  readonly batchStats = { batches: 0, requests: 0 };

  constructor(options: LocalPolicyEngineOptions) {
    this.#options = options;
    this.#tok = options.tokenizer;
    this.model = options.model ?? 'local';
    if (!options.generator && !options.artifacts)
      throw new ConfigError('LocalPolicyEngine needs artifacts or a generator', {
        key: 'artifacts',
      });
    this.generator = options.generator ?? new DecoderGenerator(options.artifacts!);
    this.generator.maxBatchSize = Math.max(1, options.maxBatchSize ?? 64);
    const tok = options.tokenizer;
    this.tokenizer = {
      encode: (text: string) => tok.encode(text),
      decode: (ids: ArrayLike<number>) => tok.decode(ids, { skipSpecialTokens: true }),
      ...(tok.applyChatTemplate && {
        applyChatTemplate: (messages: ChatMessage[], o: { addGenerationPrompt: boolean }) =>
          tok.applyChatTemplate!(messages, o),
      }),
      ...(tok.eosTokenId !== undefined && { eosTokenId: tok.eosTokenId }),
    };
  }

  /** Token ids of a request's prompt. */
  promptIds(request: PolicyGenerateRequest): number[] {
    return policyPromptIds(this.#tok, request, this.#options.addBos ?? true);
  }

  stopTokenIds(): number[] {
    if (this.#options.stopTokenIds) return [...this.#options.stopTokenIds];
    const ids = new Set(eosTokenIds(this.generator.config));
    if (this.#tok.eosTokenId !== undefined) ids.add(this.#tok.eosTokenId);
    return [...ids];
  }

  async generate(request: StreamingPolicyRequest): Promise<PolicyGenerateResult> {
    request.signal?.throwIfAborted();
    const prompt = this.promptIds(request);
    const d = this.#options.defaults ?? {};
    const r = await this.#enqueue(
      {
        prompt,
        maxNewTokens: request.maxTokens,
        temperature: request.temperature ?? d.temperature ?? 1,
        ...((request.topP ?? d.topP) !== undefined && { topP: request.topP ?? d.topP }),
        ...(d.topK !== undefined && { topK: d.topK }),
        stopTokenIds: this.stopTokenIds(),
        ...(request.stop && { stopStrings: request.stop }),
        ...(request.seed !== undefined && { seed: request.seed }),
        ...(request.onToken && { onToken: request.onToken }),
        ...(request.signal && { signal: request.signal }),
      },
      request.signal,
    );
    return {
      text: r.text ?? '',
      promptTokens: r.promptTokens,
      actionTokens: r.tokens,
      actionLogprobs: r.logprobs,
      finishReason: r.finishReason,
      usage: {
        promptTokens: r.promptTokens.length,
        completionTokens: r.tokens.length,
        totalTokens: r.promptTokens.length + r.tokens.length,
      },
      model: this.adapter?.name ?? this.model,
    };
  }

  #enqueue(request: GenerationRequest, signal?: AbortSignal): Promise<GenerationOutput> {
    return new Promise((resolve, reject) => {
      this.#pending.push({ request, signal, resolve, reject });
      // Flush after the current tick, so every rollout that asks in this tick joins the batch.
      if (!this.#running) setImmediate(() => void this.#drain());
    });
  }

  async #drain(): Promise<void> {
    if (this.#running) return;
    this.#running = true;
    try {
      if (await this.generator.usesFusedGraph()) {
        // The generator batches continuously: hand every request over now.
        const batch = this.#pending.splice(0).filter((p) => {
          if (!p.signal?.aborted) return true;
          p.reject(p.signal.reason);
          return false;
        });
        if (batch.length > 0) {
          this.batchStats.batches++;
          this.batchStats.requests += batch.length;
        }
        const decode = (ids: ArrayLike<number>) =>
          this.#tok.decode(ids, { skipSpecialTokens: true });
        for (const p of batch)
          this.generator.generateEach([p.request], { decode }).then(
            (out) => p.resolve(out[0]!),
            (e) => p.reject(e),
          );
        return;
      }
      while (this.#pending.length > 0) {
        const max = Math.max(1, this.#options.maxBatchSize ?? 64);
        const batch = this.#pending.splice(0, max).filter((p) => {
          if (!p.signal?.aborted) return true;
          p.reject(p.signal.reason);
          return false;
        });
        if (batch.length === 0) continue;
        this.batchStats.batches++;
        this.batchStats.requests += batch.length;
        try {
          // Each request its own outcome: one that fails (its decode throws, say) fails alone.
          const out = await this.generator.generateSettled(
            batch.map((p) => p.request),
            { decode: (ids) => this.#tok.decode(ids, { skipSpecialTokens: true }) },
          );
          batch.forEach((p, i) => {
            const r = out[i]!;
            if (r.status === 'fulfilled') p.resolve(r.value);
            else p.reject(r.reason);
          });
        } catch (e) {
          // The batch's graph run failed: every request in it has that error.
          for (const p of batch) p.reject(e);
        }
      }
    } finally {
      this.#running = false;
    }
  }

  /** Loads a PEFT adapter folder (local path) into the generator. */
  async updateAdapter(adapter: AdapterRef): Promise<void> {
    const built = this.generator.manifest.lora;
    if (!built)
      throw new ConfigError(
        'these artifacts were built without LoRA inputs; rebuild them with a LoRA config',
        { key: 'lora' },
      );
    const { lora, params } = await loadLoraAdapter(adapter.path, this.generator.config);
    // An adapter's layers must be the built ones too (the graphs take inputs for those only).
    const same =
      loraFitsBuilt(lora, built) &&
      JSON.stringify(lora.layers ?? null) === JSON.stringify(built.layers ?? null);
    if (!same)
      throw new ConfigError(
        `adapter ${adapter.path} (r=${lora.r}, alpha=${lora.alpha}, ${lora.targetModules.join('/')}) does not match the artifacts' LoRA (r=${built.r}, alpha=${built.alpha}, ${built.targetModules.join('/')})`,
        { key: 'lora' },
      );
    this.generator.setLora(params);
    this.adapter = adapter;
  }
}

/**
 * Token ids of a policy request's prompt as the local engine renders it: token ids as they are,
 * text encoded (with BOS when `addBos`), chat messages through the tokenizer's chat template.
 * Preflight renders an agent's first prompts with it to check they fit the graphs' positions.
 */
export function policyPromptIds(
  tok: Tokenizer,
  request: PolicyGenerateRequest,
  addBos = true,
): number[] {
  const kind = promptKind(request);
  if (kind === 'tokens') return Array.from(request.promptTokens!);
  if (kind === 'text') return Array.from(tok.encode(request.prompt!, { addBos }));
  if (!tok.applyChatTemplate)
    throw new ConfigError(
      'chat messages need a tokenizer with a chat template',
      {
        key: 'tokenizer',
      },
      {
        hint: 'name a tokenizer folder whose tokenizer_config.json has a chat_template, or send a text prompt',
      },
    );
  const text = tok.applyChatTemplate(request.messages!, { addGenerationPrompt: true });
  return Array.from(tok.encode(text));
}
