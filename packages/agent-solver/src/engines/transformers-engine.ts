import { existsSync, readdirSync, statSync } from 'node:fs';
import { basename, dirname, join, resolve } from 'node:path';
import {
  addUsage,
  type ChatMessage,
  ConfigError,
  emptyUsage,
  type FinishReason,
  type GenerateObjectOptions,
  type GenerateObjectResult,
  type GenerateOptions,
  type GenerateTextResult,
  type LLMEngine,
  type LLMUsage,
} from '@flowgrpo/core';
import type { PreTrainedModel, PreTrainedTokenizer, Tensor } from '@huggingface/transformers';
import type { z } from 'zod';
import { generateStructured } from '../structured/structured-output.js';
import { LLMAbortError } from './errors.js';
import { Semaphore } from './semaphore.js';

// An LLMEngine on the user's machine: a transformers.js (ONNX) causal LM loaded from a local
// folder, never from the network. Meant for the fixed roles (executor, verifier, judge) when no
// server is around. ONNX Runtime's session.run blocks the JS thread, so calls are serialised and
// a call cannot be interrupted mid-generation: the AbortSignal is checked before it starts, and
// timeoutMs is not enforced. Structured output uses the system-prompt fallback ('prompt' mode):
// there is no grammar-constrained decoding here.

export interface TransformersEngineOptions {
  /**
   * A transformers.js model folder: config.json, tokenizer.json, tokenizer_config.json (with the
   * chat template), generation_config.json (optional) and onnx/model*.onnx — the layout of the
   * onnx-community repositories on the Hugging Face Hub, downloaded beforehand.
   */
  modelPath: string;
  /** Name reported in results (default: the folder's name). */
  model?: string;
  /** Which ONNX weights file to use: fp32 → onnx/model.onnx, q8 → onnx/model_quantized.onnx, … */
  dtype?: 'auto' | 'fp32' | 'fp16' | 'q8' | 'int8' | 'uint8' | 'q4' | 'bnb4' | 'q4f16';
  /** ONNX Runtime execution provider (default 'cpu'). */
  device?: 'cpu' | 'cuda' | 'webgpu' | 'auto';
  defaults?: Omit<GenerateOptions, 'signal' | 'timeoutMs'>;
  /** Corrective calls after an invalid structured reply (default 1). */
  maxCorrections?: number;
}

// transformers.js reads env.localModelPath while it loads files, so loads of engines in
// different folders must not interleave.
let loadQueue: Promise<unknown> = Promise.resolve();

export class TransformersEngine implements LLMEngine {
  readonly model: string;
  readonly modelPath: string;
  readonly usage: LLMUsage = emptyUsage();
  readonly #options: TransformersEngineOptions;
  readonly #lock = new Semaphore(1);
  #loaded: Promise<{ tokenizer: PreTrainedTokenizer; model: PreTrainedModel }> | undefined;

  constructor(options: TransformersEngineOptions) {
    this.#options = options;
    this.modelPath = resolve(options.modelPath);
    this.model = options.model ?? basename(this.modelPath);
    checkModelFolder(this.modelPath);
  }

  /** Loads tokenizer and ONNX session (done by the first call otherwise). */
  async load(): Promise<void> {
    await this.#session();
  }

  // The transformers.js objects stay private: the public declarations must not name
  // @huggingface/transformers types (an optional peer, and its .d.ts do not check under NodeNext).
  #session(): Promise<{ tokenizer: PreTrainedTokenizer; model: PreTrainedModel }> {
    this.#loaded ??= (async () => {
      const previous = loadQueue;
      let done: () => void = () => {};
      loadQueue = new Promise<void>((r) => {
        done = r;
      });
      await previous.catch(() => undefined);
      try {
        return await this.#loadNow();
      } finally {
        done();
      }
    })();
    this.#loaded.catch(() => {
      this.#loaded = undefined;
    });
    return this.#loaded;
  }

  async #loadNow(): Promise<{ tokenizer: PreTrainedTokenizer; model: PreTrainedModel }> {
    const hf = await importTransformers();
    // Local files only: no request to the Hub, ever.
    hf.env.allowRemoteModels = false;
    hf.env.allowLocalModels = true;
    hf.env.localModelPath = dirname(this.modelPath);
    const id = basename(this.modelPath);
    const tokenizer = await hf.AutoTokenizer.from_pretrained(id, { local_files_only: true });
    const model = await hf.AutoModelForCausalLM.from_pretrained(id, {
      local_files_only: true,
      dtype: this.#options.dtype ?? 'fp32',
      device: this.#options.device ?? 'cpu',
    });
    return { tokenizer, model };
  }

  async dispose(): Promise<void> {
    const loaded = await this.#loaded?.catch(() => undefined);
    this.#loaded = undefined;
    await loaded?.model.dispose();
  }

  async generateText(
    messages: ChatMessage[],
    options: GenerateOptions = {},
  ): Promise<GenerateTextResult> {
    const release = await this.#lock.acquire(options.signal).catch((reason: unknown) => {
      throw new LLMAbortError('local generation aborted while waiting', { reason });
    });
    try {
      return await this.#generate(messages, options);
    } finally {
      release();
    }
  }

  generateObject<T>(
    messages: ChatMessage[],
    schema: z.ZodType<T>,
    options: GenerateObjectOptions = {},
  ): Promise<GenerateObjectResult<T>> {
    return generateStructured((msgs) => this.generateText(msgs, options), messages, schema, {
      mode: 'prompt',
      schemaName: options.schemaName,
      maxCorrections: this.#options.maxCorrections,
    });
  }

  async #generate(messages: ChatMessage[], options: GenerateOptions): Promise<GenerateTextResult> {
    if (options.signal?.aborted) {
      throw new LLMAbortError('local generation aborted', { reason: options.signal.reason });
    }
    const { tokenizer, model } = await this.#session();
    const d = this.#options.defaults ?? {};
    const temperature = options.temperature ?? d.temperature ?? 0;
    const maxNewTokens = options.maxTokens ?? d.maxTokens ?? 512;
    const stop = options.stop ?? d.stop ?? [];
    const seed = options.seed ?? d.seed;
    if (seed !== undefined) (await importTransformers()).random.seed(seed);

    const inputs = tokenizer.apply_chat_template(
      messages.map((m) => ({ role: m.role, content: m.content })),
      { add_generation_prompt: true, tokenize: true, return_dict: true, return_tensor: true },
    ) as { input_ids: Tensor; attention_mask: Tensor };
    const promptLength = Number(inputs.input_ids.dims.at(-1));
    const output = (await model.generate({
      ...inputs,
      max_new_tokens: maxNewTokens,
      do_sample: temperature > 0,
      ...(temperature > 0 ? { temperature } : {}),
      ...((options.topP ?? d.topP) !== undefined ? { top_p: options.topP ?? d.topP } : {}),
    })) as Tensor;
    const all = Array.from(output.tolist()[0] as Iterable<number | bigint>, Number);
    const newIds = all.slice(promptLength);
    let text = tokenizer.decode(newIds, { skip_special_tokens: true });
    const eos = eosIds(model);
    let finishReason: FinishReason =
      newIds.length > 0 && eos.has(newIds.at(-1)!)
        ? 'stop'
        : newIds.length >= maxNewTokens
          ? 'length'
          : 'stop';
    const cut = firstStop(text, stop);
    if (cut !== undefined) {
      text = text.slice(0, cut);
      finishReason = 'stop';
    }
    const usage = {
      promptTokens: promptLength,
      completionTokens: newIds.length,
      totalTokens: promptLength + newIds.length,
    };
    addUsage(this.usage, usage);
    return { text, usage, finishReason, model: this.model };
  }
}

function eosIds(model: PreTrainedModel): Set<number> {
  const config = model.generation_config as { eos_token_id?: number | number[] } | null | undefined;
  const eos = config?.eos_token_id;
  return new Set(eos === undefined ? [] : Array.isArray(eos) ? eos : [eos]);
}

function firstStop(text: string, stop: string[]): number | undefined {
  let best: number | undefined;
  for (const s of stop) {
    if (!s) continue;
    const i = text.indexOf(s);
    if (i >= 0 && (best === undefined || i < best)) best = i;
  }
  return best;
}

/**
 * transformers.js is an optional peer dependency (it brings ONNX Runtime for Node and the web,
 * hundreds of MB that an app talking to a server never uses): a missing install is a ConfigError
 * that says what to install.
 */
async function importTransformers(): Promise<typeof import('@huggingface/transformers')> {
  try {
    return await import('@huggingface/transformers');
  } catch (error) {
    const e = error as { code?: unknown; message?: unknown };
    if (
      e.code === 'ERR_MODULE_NOT_FOUND' &&
      String(e.message).includes('@huggingface/transformers')
    ) {
      throw new ConfigError(
        'TransformersEngine needs the optional peer dependency @huggingface/transformers ' +
          '(npm install @huggingface/transformers@^4.3.1)',
        { key: 'TransformersEngine' },
        { cause: error },
      );
    }
    throw error;
  }
}

/** Fails early, naming what is missing, rather than deep inside transformers.js. */
export function checkModelFolder(path: string): void {
  const hint =
    'Expected a transformers.js model folder (config.json, tokenizer.json, tokenizer_config.json, ' +
    'onnx/model.onnx), e.g. an onnx-community repository from the Hugging Face Hub downloaded beforehand; ' +
    'this engine never downloads.';
  if (!existsSync(path) || !statSync(path).isDirectory()) {
    throw new ConfigError(`model folder not found: ${path}. ${hint}`, { key: 'modelPath' });
  }
  const missing = ['config.json', 'tokenizer.json', 'tokenizer_config.json'].filter(
    (f) => !existsSync(join(path, f)),
  );
  const onnxDir = join(path, 'onnx');
  const hasOnnx = existsSync(onnxDir) && readdirSync(onnxDir).some((f) => f.endsWith('.onnx'));
  if (!hasOnnx) missing.push('onnx/*.onnx');
  if (missing.length > 0) {
    throw new ConfigError(`model folder ${path} lacks ${missing.join(', ')}. ${hint}`, {
      key: 'modelPath',
    });
  }
}
