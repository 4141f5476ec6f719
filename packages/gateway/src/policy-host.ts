import {
  OpenAIPolicyEngine,
  type OpenAIPolicyEngineOptions,
  type PolicyEngine,
} from '@flowgrpo/agent';
import type { DeviceRequest, Tokenizer } from '@flowgrpo/models';
import { DecoderArtifacts, DecoderGenerator, LocalPolicyEngine } from '@flowgrpo/models';
import { GatewayError } from './errors.js';

// What the gateway serves: named policies on one base model — the base itself and one LoRA
// adapter per role, as vLLM names LoRA models (the request's `model` picks one). The gateway
// renders every prompt to token ids itself (the tokenizer here is the model's), so a host only
// has to sample from token ids and hand back the sampled ids with their logprobs:
//
//   LocalPolicyHost     the local ONNX artifacts; one LocalPolicyEngine per adapter, all over the
//                       same opened artifacts (one copy of the base weights), each with its own
//                       LoRA matrices; any PolicyEngine can be served under a name (the trainer's
//                       engine, whose adapter it refreshes in place after every update)
//   UpstreamPolicyHost  vLLM / SGLang servers: token-id prompts to /v1/completions with token ids
//                       and logprobs asked back; adapters loaded on every server

export interface ServedModel {
  id: string;
  /** The base model for an adapter. */
  parent?: string;
  /** Where the adapter was loaded from. */
  path?: string;
}

export interface PolicyHost {
  readonly baseModel: string;
  /** The model's tokenizer (chat template, detokenization). */
  readonly tokenizer: Tokenizer;
  /** Most tokens of prompt + completion the model takes, when known. */
  readonly maxContext: number | undefined;
  models(): ServedModel[];
  /** The engine serving `model`, or undefined when no such model is served. */
  engine(model: string): PolicyEngine | undefined;
  /** Loads a PEFT adapter folder under `name` (`inplace`: replace one of the same name). */
  loadAdapter(name: string, path: string, options?: { inplace?: boolean }): Promise<void>;
  unloadAdapter(name: string): Promise<void>;
  close(): Promise<void>;
}

export interface LocalPolicyHostOptions {
  /** An artifacts directory (opened with its decode graph) or opened artifacts. */
  artifacts: string | DecoderArtifacts;
  tokenizer: Tokenizer;
  /** Name the base model is served under (default 'base'). */
  baseModel?: string;
  /** Adapters to load at start: name → PEFT folder. */
  adapters?: Record<string, string>;
  device?: DeviceRequest;
  intraOpThreads?: number;
  /** Concurrent requests batched into one decode run per model (LocalPolicyEngine). */
  maxBatchSize?: number;
  /**
   * false: every engine samples with the decode session, never the artifacts' fused generate
   * graph (which the generator otherwise opens of its own accord, with float32 copies of the
   * weights): `share_sampling_weights`.
   */
  useGenerateGraph?: boolean;
}

interface Entry {
  engine: PolicyEngine;
  path?: string;
  /** Engines the host made (and so may replace); others were handed in with serve(). */
  owned: boolean;
}

export class LocalPolicyHost implements PolicyHost {
  readonly baseModel: string;
  readonly tokenizer: Tokenizer;
  readonly artifacts: DecoderArtifacts;
  readonly #ownsArtifacts: boolean;
  readonly #entries = new Map<string, Entry>();
  readonly #maxBatchSize: number | undefined;
  readonly #useGenerateGraph: boolean;

  private constructor(o: LocalPolicyHostOptions, artifacts: DecoderArtifacts, owns: boolean) {
    this.baseModel = o.baseModel ?? 'base';
    this.tokenizer = o.tokenizer;
    this.artifacts = artifacts;
    this.#ownsArtifacts = owns;
    this.#maxBatchSize = o.maxBatchSize;
    this.#useGenerateGraph = o.useGenerateGraph ?? true;
    this.#entries.set(this.baseModel, { engine: this.#newEngine(this.baseModel), owned: true });
  }

  static async open(o: LocalPolicyHostOptions): Promise<LocalPolicyHost> {
    const owns = typeof o.artifacts === 'string';
    const artifacts =
      typeof o.artifacts === 'string'
        ? await DecoderArtifacts.open(o.artifacts, {
            graphs: ['decode'],
            device: o.device ?? 'cpu',
            ...(o.intraOpThreads !== undefined && { intraOpThreads: o.intraOpThreads }),
          })
        : o.artifacts;
    const host = new LocalPolicyHost(o, artifacts, owns);
    try {
      for (const [name, path] of Object.entries(o.adapters ?? {}))
        await host.loadAdapter(name, path);
    } catch (e) {
      await host.close();
      throw e;
    }
    return host;
  }

  get maxContext(): number {
    return this.artifacts.manifest.maxPositions;
  }

  #newEngine(name: string): LocalPolicyEngine {
    return new LocalPolicyEngine({
      ...(this.#useGenerateGraph
        ? { artifacts: this.artifacts }
        : { generator: new DecoderGenerator(this.artifacts, { useGenerateGraph: false }) }),
      tokenizer: this.tokenizer,
      model: name,
      ...(this.#maxBatchSize !== undefined && { maxBatchSize: this.#maxBatchSize }),
    });
  }

  models(): ServedModel[] {
    return [...this.#entries].map(([id, e]) =>
      id === this.baseModel
        ? { id }
        : { id, parent: this.baseModel, ...(e.path !== undefined && { path: e.path }) },
    );
  }

  engine(model: string): PolicyEngine | undefined {
    return this.#entries.get(model)?.engine;
  }

  /**
   * Serves `engine` under `name` (replacing what was there): e.g. the trainer's LocalPolicyEngine,
   * so every completion comes from the adapter the trainer has just refreshed.
   */
  serve(name: string, engine: PolicyEngine): void {
    this.#entries.set(name, { engine, owned: false });
  }

  async loadAdapter(name: string, path: string, o: { inplace?: boolean } = {}): Promise<void> {
    const existing = this.#entries.get(name);
    if (name === this.baseModel)
      throw new GatewayError(400, `'${name}' is the base model's name`, {
        param: 'lora_name',
        code: 'invalid_value',
      });
    if (existing && !o.inplace)
      throw new GatewayError(400, `The lora adapter '${name}' has already been loaded.`, {
        param: 'lora_name',
        code: 'adapter_exists',
      });
    const engine =
      existing?.owned && existing.engine instanceof LocalPolicyEngine
        ? existing.engine
        : this.#newEngine(name);
    try {
      await engine.updateAdapter({ name, path });
    } catch (e) {
      throw new GatewayError(
        400,
        `cannot load adapter '${name}' from ${path}: ${(e as Error).message}`,
        { param: 'lora_path', code: 'adapter_load_failed' },
        { cause: e },
      );
    }
    this.#entries.set(name, { engine, path, owned: true });
  }

  async unloadAdapter(name: string): Promise<void> {
    if (name === this.baseModel || !this.#entries.has(name))
      throw new GatewayError(404, `The lora adapter '${name}' cannot be found.`, {
        param: 'lora_name',
        code: 'adapter_not_found',
      });
    this.#entries.delete(name);
  }

  async close(): Promise<void> {
    this.#entries.clear();
    if (this.#ownsArtifacts) await this.artifacts.release();
  }
}

export interface UpstreamPolicyHostOptions
  extends Omit<OpenAIPolicyEngineOptions, 'model' | 'tokenizer' | 'chatTemplate'> {
  /** The base model as the upstream serves it (`--served-model-name`). */
  model: string;
  /** The model's tokenizer: the gateway renders prompts to ids and sends ids upstream. */
  tokenizer: Tokenizer;
  /** The upstream's max_model_len, when the gateway should check prompts against it. */
  maxContext?: number;
  /** Adapters already loaded upstream: name → path (listed by /v1/models). */
  adapters?: Record<string, string>;
}

/** vLLM / SGLang servers behind the gateway (one or several, balanced by OpenAIPolicyEngine). */
export class UpstreamPolicyHost implements PolicyHost {
  readonly baseModel: string;
  readonly tokenizer: Tokenizer;
  readonly maxContext: number | undefined;
  readonly #o: UpstreamPolicyHostOptions;
  readonly #engines = new Map<string, OpenAIPolicyEngine>();
  readonly #adapters = new Map<string, string>();
  /** Loads and unloads adapters on every server. */
  readonly #control: OpenAIPolicyEngine;

  constructor(o: UpstreamPolicyHostOptions) {
    this.#o = o;
    this.baseModel = o.model;
    this.tokenizer = o.tokenizer;
    this.maxContext = o.maxContext;
    for (const [name, path] of Object.entries(o.adapters ?? {})) this.#adapters.set(name, path);
    this.#control = this.#newEngine(o.model);
  }

  #newEngine(model: string): OpenAIPolicyEngine {
    const { tokenizer, maxContext: _m, adapters: _a, ...rest } = this.#o;
    return new OpenAIPolicyEngine({
      ...rest,
      model,
      tokenizer: {
        encode: (t) => tokenizer.encode(t),
        decode: (ids) => tokenizer.decode(ids, { skipSpecialTokens: true }),
      },
    });
  }

  models(): ServedModel[] {
    return [
      { id: this.baseModel },
      ...[...this.#adapters].map(([id, path]) => ({ id, parent: this.baseModel, path })),
    ];
  }

  engine(model: string): PolicyEngine | undefined {
    if (model !== this.baseModel && !this.#adapters.has(model)) return undefined;
    let e = this.#engines.get(model);
    if (!e) {
      e = this.#newEngine(model);
      this.#engines.set(model, e);
    }
    return e;
  }

  async loadAdapter(name: string, path: string, o: { inplace?: boolean } = {}): Promise<void> {
    if (this.#adapters.has(name) && !o.inplace)
      throw new GatewayError(400, `The lora adapter '${name}' has already been loaded.`, {
        param: 'lora_name',
        code: 'adapter_exists',
      });
    await this.#control.loadAdapter(
      { name, path },
      { mode: this.#adapters.has(name) ? 'inplace' : 'add' },
    );
    this.#adapters.set(name, path);
  }

  async unloadAdapter(name: string): Promise<void> {
    if (!this.#adapters.has(name))
      throw new GatewayError(404, `The lora adapter '${name}' cannot be found.`, {
        param: 'lora_name',
        code: 'adapter_not_found',
      });
    await this.#control.unloadAdapter(name);
    this.#adapters.delete(name);
    this.#engines.delete(name);
  }

  async close(): Promise<void> {
    this.#engines.clear();
  }
}

export interface EnginePolicyHostOptions {
  tokenizer: Tokenizer;
  /** Engines by served name; the first is the base unless `baseModel` says otherwise. */
  engines: Record<string, PolicyEngine>;
  baseModel?: string;
  maxContext?: number;
}

/**
 * Engines made elsewhere, served by name (the trainer's engine, a TeacherPolicy, a test double).
 * Adapters cannot be loaded through it.
 */
export class EnginePolicyHost implements PolicyHost {
  readonly baseModel: string;
  readonly tokenizer: Tokenizer;
  readonly maxContext: number | undefined;
  readonly #engines: Map<string, PolicyEngine>;

  constructor(o: EnginePolicyHostOptions) {
    this.#engines = new Map(Object.entries(o.engines));
    this.baseModel = o.baseModel ?? [...this.#engines.keys()][0] ?? 'policy';
    this.tokenizer = o.tokenizer;
    this.maxContext = o.maxContext;
  }

  models(): ServedModel[] {
    return [...this.#engines.keys()].map((id) => ({ id }));
  }

  engine(model: string): PolicyEngine | undefined {
    return this.#engines.get(model);
  }

  serve(name: string, engine: PolicyEngine): void {
    this.#engines.set(name, engine);
  }

  async loadAdapter(): Promise<void> {
    throw new GatewayError(400, 'this gateway serves fixed engines; adapters cannot be loaded', {
      code: 'lora_updates_unsupported',
    });
  }

  async unloadAdapter(name: string): Promise<void> {
    throw new GatewayError(404, `The lora adapter '${name}' cannot be found.`, {
      param: 'lora_name',
      code: 'adapter_not_found',
    });
  }

  async close(): Promise<void> {}
}
