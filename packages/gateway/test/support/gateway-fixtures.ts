// Fixtures of the policy gateway tests: a tiny byte-level Qwen2 with LoRA artifacts, adapters
// with non-zero B (so an adapter changes the samples), and a scripted PolicyEngine whose replies
// are chosen by the test (deterministic token continuity and tool calls without a trained model).
import { existsSync } from 'node:fs';
import { join } from 'node:path';
import type { PolicyEngine, PolicyGenerateRequest, PolicyGenerateResult } from '@flowgrpo/agent';
import { createRng } from '@flowgrpo/core';
import {
  type ArtifactGraphBuilders,
  buildDecoderArtifacts,
  createTinyQwen2,
  type DecoderGraphKind,
  initLoraParams,
  type LoraConfig,
  type LoraParams,
  saveLoraAdapter,
  type TinyModel,
  type Tokenizer,
} from '@flowgrpo/models';

export const GATEWAY_LORA: LoraConfig = { r: 2, alpha: 4, targetModules: ['q_proj', 'v_proj'] };

/**
 * A tiny byte-level Qwen2 (hidden 32, 1 layer) and its LoRA artifacts under `root`: decode and
 * logprobs, and the graphs `builders` adds (the trainer's tests pass its train_step).
 */
export async function tinyGatewayModel(
  root: string,
  builders: ArtifactGraphBuilders = {},
): Promise<{ model: TinyModel; artifacts: string }> {
  const model = await createTinyQwen2(join(root, 'model'), {
    seed: 'gateway',
    hiddenSize: 32,
    layers: 1,
    heads: 4,
    kvHeads: 2,
    intermediateSize: 64,
    ropeTheta: 10000,
    embeddingInitRange: 0.2,
  });
  const artifacts = join(root, 'artifacts');
  if (!existsSync(join(artifacts, 'artifacts.json')))
    buildDecoderArtifacts(model.weights, artifacts, {
      lora: GATEWAY_LORA,
      graphs: ['decode', 'logprobs', ...(Object.keys(builders) as DecoderGraphKind[])],
      builders,
      maxPositions: 1024,
    });
  return { model, artifacts };
}

/** An adapter whose B matrices are random too (PEFT's init has B = 0: the base model). */
export function randomAdapter(model: TinyModel, seed: string, scale = 0.5): LoraParams {
  const params = initLoraParams(model.weights.config, GATEWAY_LORA, seed);
  const rng = createRng(`${seed}:B`);
  for (const [name, data] of params)
    if (name.includes('lora_B'))
      for (let i = 0; i < data.length; i++) data[i] = rng.normal() * scale;
  return params;
}

export async function writeAdapter(dir: string, model: TinyModel, params: LoraParams) {
  await saveLoraAdapter(dir, model.weights.config, GATEWAY_LORA, params);
  return dir;
}

/**
 * A PolicyEngine that answers with scripted texts (in order, the last one repeated), as the
 * tokenizer encodes them plus EOS, each token with logprob −0.5. `seen` keeps every request.
 */
export class ScriptedEngine implements PolicyEngine {
  readonly model = 'scripted';
  readonly seen: PolicyGenerateRequest[] = [];
  #i = 0;
  /** While set, generate() waits for it (a test holds a generation slot with it). */
  gate: Promise<void> | undefined;

  constructor(
    readonly tok: Tokenizer,
    readonly replies: string[],
  ) {}

  async generate(request: PolicyGenerateRequest): Promise<PolicyGenerateResult> {
    this.seen.push(request);
    if (this.gate) await this.gate;
    const text = this.replies[Math.min(this.#i++, this.replies.length - 1)]!;
    const ids = [...this.tok.encode(text), this.tok.eosTokenId!];
    return {
      text,
      promptTokens: Int32Array.from(request.promptTokens as ArrayLike<number>),
      actionTokens: Int32Array.from(ids),
      actionLogprobs: new Float32Array(ids.length).fill(-0.5),
      finishReason: 'stop',
    };
  }
}
