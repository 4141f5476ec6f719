import { existsSync, readdirSync, readFileSync, statSync, writeFileSync } from 'node:fs';
import { join, resolve } from 'node:path';
import { DataFormatError, writeDirAtomicallySync } from '@flowgrpo/core';
import { DEFAULT_OPSET, toOnnxModel, WeightsFileWriter, writeModel } from '@flowgrpo/graph';
import * as ort from 'onnxruntime-node';
import type { LoraConfig } from '../lora/lora-config.js';
import { loraScaling } from '../lora/lora-config.js';
import type { DecoderConfig } from '../models/config.js';
import {
  type BaseWeights,
  type ProjectionDtype,
  writeBaseWeights,
} from '../models/graph/base-weights.js';
import {
  buildDecoderGraph,
  type DecoderGraph,
  type DecoderGraphKind,
  type GraphIOSpec,
} from '../models/graph/decoder-graph.js';
import { buildGenerateGraph, type GenerateGraphOptions } from '../models/graph/inference-graph.js';
import { vocabChunks } from '../models/graph/vocab-chunks.js';
import type { ModelWeights } from '../models/weights/model-weights.js';
import type { DeviceRequest } from '../runtime/devices.js';
import { type CreateSessionOptions, createSession, type Session } from '../runtime/session.js';
import { ArtifactsDirNotEmptyError } from './errors.js';

// The artifacts directory: one .onnx per graph variant, every base weight once in weights.data
// (referenced by all graphs), and artifacts.json describing them. Built once, opened by training
// runs and policy engines. This package builds the inference graphs; a graph it does not know how
// to build (train_step) comes in as a builder, so the folder, its manifest and its single
// weights.data stay one format whoever adds graphs to it.

export const ARTIFACTS_FORMAT = 'flowgrpo-decoder-artifacts';
/**
 * Bumped whenever a graph's inputs or meaning change, so artifacts built before are rebuilt rather
 * than fed what they do not expect. 2: train_step takes `segment_ids` (packed rows). 3: train_step
 * takes `on_policy` (π_old from its own forward). 4: train_step weighs tokens by the importance
 * ratio itself (`sampler_logprobs`, `is_weighted`, `is_cap`, `is_mask`).
 */
export const ARTIFACTS_FORMAT_VERSION = 4;
export const ARTIFACTS_MANIFEST = 'artifacts.json';
export const WEIGHTS_FILE = 'weights.data';
/**
 * The standard ai.onnx graphs of the format (built from the differentiable IR): this package builds
 * prefill, decode and logprobs; `train_step` is a slot of the format whose graph a package above
 * passes in as a builder.
 */
export const ALL_GRAPHS: readonly DecoderGraphKind[] = [
  'prefill',
  'decode',
  'logprobs',
  'train_step',
];

/**
 * Every kind an artifacts directory can hold: the standard graphs, and `generate` — the fused
 * generation graph (com.microsoft ops, the decode loop inside the graph; inference-graph.ts)
 * that DecoderGenerator uses when it is there.
 */
export type ArtifactGraphKind = DecoderGraphKind | 'generate';

/** Built when `graphs` is left out: the standard graphs and `generate`. */
export const DEFAULT_GRAPHS: readonly ArtifactGraphKind[] = [...ALL_GRAPHS, 'generate'];

export interface GraphManifest {
  file: string;
  inputs: GraphIOSpec[];
  outputs: GraphIOSpec[];
  nodes: number;
}

export interface ArtifactsManifest {
  format: typeof ARTIFACTS_FORMAT;
  formatVersion: number;
  producer: { name: string; version: string };
  onnxruntime: string;
  opset: number;
  config: DecoderConfig;
  /** Present when the graphs take LoRA inputs; `scaling` is alpha/r (or alpha/√r). */
  lora?: LoraConfig & { scaling: number };
  /** Position ids must stay below this (rows of the RoPE tables). */
  maxPositions: number;
  weights: { file: string; bytes: number; tensors: number };
  /**
   * How the logprobs and train_step graphs split the LM head's vocabulary: `count` chunks of
   * `size` columns (the last may be narrower); count 1 is the unchunked head. Absent in
   * artifacts built before it was recorded (all unchunked).
   */
  vocabChunks?: { count: number; size: number };
  /**
   * True when the train_step graph recomputes each layer's activations in its backward
   * (`gradient_checkpointing`); absent when it keeps them (and in artifacts built before).
   */
  gradientCheckpointing?: true;
  /**
   * The dtype the layers' projection matrices are stored in, in weights.data and in memory
   * (`base_weights_dtype`); absent: float32, like every other tensor.
   */
  baseWeightsDtype?: 'bfloat16' | 'float16';
  /**
   * True when the prefill and decode graphs cast the half-precision projections at each product
   * rather than once at load (`share_sampling_weights`): a decode session opened without
   * prepacking then holds no copy of the weights of its own. Absent: cast at load (and with
   * float32 projections, where there is nothing to cast).
   */
  decodeCastsPerUse?: true;
  /** Log-probabilities are of softmax(logits / temperature) over the full vocabulary (sampling.ts). */
  graphs: Partial<Record<ArtifactGraphKind, GraphManifest>>;
  createdAt: string;
}

/**
 * Builds one graph of the artifacts over the base weights already written to weights.data: how a
 * package above this one adds a graph kind (`train_step`).
 */
export type ArtifactGraphBuilder = (
  base: BaseWeights,
  lora: LoraConfig | undefined,
  options: ArtifactGraphOptions,
) => DecoderGraph;

/** Build options every graph of the artifacts shares. */
export interface ArtifactGraphOptions {
  /** The most vocabulary columns one LM-head chunk holds (vocabChunks). */
  vocabChunkSize?: number | undefined;
  /** Differentiated graphs recompute each layer's activations in the backward (decoderForward). */
  gradientCheckpointing?: boolean | undefined;
  /** prefill/decode cast half-precision projections at each product (DecoderGraphOptions.castPerUse). */
  decodeCastsPerUse?: boolean | undefined;
}

/** Builders of the graph kinds this package does not build itself, by kind. */
export type ArtifactGraphBuilders = Partial<Record<DecoderGraphKind, ArtifactGraphBuilder>>;

export interface BuildArtifactsOptions {
  lora?: LoraConfig;
  /**
   * Graphs to build (default: DEFAULT_GRAPHS that can be built: those built here, and those
   * `builders` has a builder for).
   */
  graphs?: readonly ArtifactGraphKind[];
  /** Builders of further graph kinds, by kind (registered by the package that owns the graph). */
  builders?: ArtifactGraphBuilders;
  maxPositions?: number;
  /** Options of the `generate` graph (its decode loop's attention form). */
  generate?: Pick<GenerateGraphOptions, 'attention'>;
  /**
   * The most vocabulary columns one chunk of the LM head holds in the logprobs and train_step
   * graphs (default DEFAULT_VOCAB_CHUNK_SIZE): a wider vocabulary is never held as
   * [tokens × vocabulary] logits; a vocabulary within one chunk gives the unchunked graphs.
   */
  vocabChunkSize?: number | undefined;
  /**
   * The train_step graph recomputes each layer's activations in its backward instead of keeping
   * them from the forward (HF's `gradient_checkpointing`): less memory, one more forward.
   */
  gradientCheckpointing?: boolean | undefined;
  /**
   * The dtype of the layers' projection matrices (default float32): in half precision they are
   * held once, in half, and cast to float32 where each product needs them (half-weights.ts).
   */
  baseWeightsDtype?: ProjectionDtype | undefined;
  /**
   * The prefill and decode graphs cast half-precision projections at each product too, instead of
   * once at load (a float32 copy for the session's life): what `share_sampling_weights` opens.
   * Sampling then reads the weights file as the training sessions do, 0.29–0.40× as fast on the
   * CPU (docs/performance.md, "Sampling weights held once"). Nothing changes with float32
   * projections.
   */
  decodeCastsPerUse?: boolean | undefined;
}

const PRODUCER_VERSION = '0.1.0';

/** The graph kinds this package builds itself (every other kind comes in as a builder). */
const BUILT_HERE: readonly ArtifactGraphKind[] = ['prefill', 'decode', 'logprobs', 'generate'];
function isBuiltHere(kind: ArtifactGraphKind): kind is 'prefill' | 'decode' | 'logprobs' {
  return BUILT_HERE.includes(kind);
}

/** One graph of the artifacts: a builder's for its kind, else the decoder's forward variants. */
export function buildArtifactGraph(
  base: BaseWeights,
  kind: DecoderGraphKind,
  lora: LoraConfig | undefined,
  builders: ArtifactGraphBuilders = {},
  options: ArtifactGraphOptions = {},
): DecoderGraph {
  const build = builders[kind];
  if (build) return build(base, lora, options);
  if (!isBuiltHere(kind))
    throw new RangeError(`no builder for the '${kind}' graph: pass one in \`builders\``);
  return buildDecoderGraph(base, {
    kind,
    ...(lora && { lora }),
    vocabChunkSize: options.vocabChunkSize,
    castPerUse: options.decodeCastsPerUse === true,
  });
}

/**
 * Writes the graphs, weights.data and artifacts.json into `dir` (created, or replaced whole). A
 * `dir` that holds anything but artifacts is refused first (ArtifactsDirNotEmptyError): the swap
 * would delete it.
 */
export function buildDecoderArtifacts(
  weights: ModelWeights,
  dir: string,
  options: BuildArtifactsOptions = {},
): ArtifactsManifest {
  if (existsSync(dir) && statSync(dir).isDirectory()) {
    const entries = readdirSync(dir).sort();
    if (entries.length > 0 && !entries.includes(ARTIFACTS_MANIFEST))
      throw new ArtifactsDirNotEmptyError(dir, entries, ARTIFACTS_MANIFEST);
  }
  // Built in a temporary sibling and swapped in: a kill mid-build never truncates the
  // weights.data that a previous build's graphs (and running sessions) refer to.
  return writeDirAtomicallySync(dir, (out) => writeArtifacts(weights, out, options));
}

function writeArtifacts(
  weights: ModelWeights,
  out: string,
  options: BuildArtifactsOptions,
): ArtifactsManifest {
  const builders = options.builders ?? {};
  // Checked before anything is written: a bad size is a ConfigError, not a half-built folder.
  const chunks = vocabChunks(weights.config.vocabSize, options.vocabChunkSize);
  // By default: the graphs built here, and those a builder was given for.
  const kinds =
    options.graphs ??
    DEFAULT_GRAPHS.filter((k) => isBuiltHere(k) || builders[k as DecoderGraphKind]);
  const writer = new WeightsFileWriter(join(out, WEIGHTS_FILE));
  const graphs: Partial<Record<ArtifactGraphKind, GraphManifest>> = {};
  let base: ReturnType<typeof writeBaseWeights>;
  try {
    base = writeBaseWeights(weights, writer, {
      maxPositions: options.maxPositions,
      projections: options.baseWeightsDtype,
    });
    for (const kind of kinds) {
      if (kind === 'generate') {
        const g = buildGenerateGraph(base, {
          ...options.generate,
          ...(options.lora && { lora: options.lora }),
        });
        writeModel(g.model, { dir: out, fileName: 'generate.onnx', weights: writer });
        graphs.generate = {
          file: 'generate.onnx',
          inputs: g.inputs,
          outputs: g.outputs,
          nodes: g.model.graph.nodes.length,
        };
        continue;
      }
      const g = buildArtifactGraph(base, kind, options.lora, builders, {
        vocabChunkSize: options.vocabChunkSize,
        gradientCheckpointing: options.gradientCheckpointing,
        decodeCastsPerUse: options.decodeCastsPerUse,
      });
      const file = `${kind}.onnx`;
      const model = toOnnxModel(g.graph, {
        opset: DEFAULT_OPSET,
        docString: `flowgrpo ${kind} graph of a ${weights.config.modelType} decoder`,
      });
      writeModel(model, { dir: out, fileName: file, weights: writer });
      graphs[kind] = {
        file,
        inputs: g.inputs,
        outputs: g.outputs,
        nodes: model.graph.nodes.length,
      };
    }
  } finally {
    writer.close();
  }
  const manifest: ArtifactsManifest = {
    format: ARTIFACTS_FORMAT,
    formatVersion: ARTIFACTS_FORMAT_VERSION,
    producer: { name: '@flowgrpo/models', version: PRODUCER_VERSION },
    onnxruntime: ort.env.versions.node ?? ort.env.versions.common,
    opset: DEFAULT_OPSET,
    config: weights.config,
    ...(options.lora && { lora: { ...options.lora, scaling: loraScaling(options.lora) } }),
    maxPositions: base.maxPositions,
    weights: { file: WEIGHTS_FILE, bytes: writer.size, tensors: writer.count },
    vocabChunks: chunks,
    ...(options.gradientCheckpointing && graphs.train_step && { gradientCheckpointing: true }),
    ...(options.baseWeightsDtype &&
      options.baseWeightsDtype !== 'float32' && { baseWeightsDtype: options.baseWeightsDtype }),
    // Recorded only where it changes a graph: half projections, and a graph that samples.
    ...(options.decodeCastsPerUse &&
      options.baseWeightsDtype &&
      options.baseWeightsDtype !== 'float32' &&
      (graphs.decode || graphs.prefill) && { decodeCastsPerUse: true }),
    graphs,
    createdAt: new Date().toISOString(),
  };
  writeFileSync(join(out, ARTIFACTS_MANIFEST), `${JSON.stringify(manifest, null, 2)}\n`);
  return manifest;
}

export function readArtifactsManifest(dir: string): ArtifactsManifest {
  const path = join(dir, ARTIFACTS_MANIFEST);
  let m: ArtifactsManifest;
  try {
    m = JSON.parse(readFileSync(path, 'utf8')) as ArtifactsManifest;
  } catch (cause) {
    throw new DataFormatError(
      `${path}: cannot read the artifacts manifest: ${(cause as Error).message}`,
      { file: path },
      { cause },
    );
  }
  if (m.format !== ARTIFACTS_FORMAT || m.formatVersion !== ARTIFACTS_FORMAT_VERSION) {
    const stale = m.format === ARTIFACTS_FORMAT && typeof m.formatVersion === 'number';
    throw new DataFormatError(
      stale
        ? `${path}: artifacts of format v${m.formatVersion}, this version reads v${ARTIFACTS_FORMAT_VERSION}: rebuild them (buildDecoderArtifacts / flowgrpo export)`
        : `${path}: not a ${ARTIFACTS_FORMAT} v${ARTIFACTS_FORMAT_VERSION} manifest`,
      { file: path },
    );
  }
  const size = statSync(join(dir, m.weights.file), { throwIfNoEntry: false })?.size;
  if (size !== m.weights.bytes) {
    throw new DataFormatError(
      `${join(dir, m.weights.file)} has ${size ?? 'no'} bytes, the manifest says ${m.weights.bytes}`,
      { file: join(dir, m.weights.file) },
    );
  }
  return m;
}

export interface OpenArtifactsOptions extends Omit<CreateSessionOptions, 'device'> {
  /** Default 'cpu'; 'auto' | 'cuda' | 'webgpu' are passed through to createSession. */
  device?: DeviceRequest;
  /** Graphs to open (default: every graph in the manifest). */
  graphs?: readonly ArtifactGraphKind[];
}

/**
 * The graph to sample with on `device`: the fused `generate` graph when the artifacts have it
 * and it can run its decode loop there (a CPU Loop: the CPU EP, or 'auto' when it picks the CPU),
 * else the standard `decode` graph. The generator opens `decode` itself should 'auto' pick a GPU.
 */
export function samplingGraph(
  manifest: ArtifactsManifest,
  device: DeviceRequest = 'cpu',
): 'generate' | 'decode' {
  const fusedRuns = device === 'cpu' || device === 'auto';
  return manifest.graphs.generate && fusedRuns ? 'generate' : 'decode';
}

/** Open sessions over an artifacts directory. */
export class DecoderArtifacts {
  readonly #onRelease: (() => Promise<void>)[] = [];

  private constructor(
    readonly dir: string,
    readonly manifest: ArtifactsManifest,
    readonly sessions: Partial<Record<ArtifactGraphKind, Session>>,
    readonly options: OpenArtifactsOptions,
  ) {}

  static async open(dir: string, options: OpenArtifactsOptions = {}): Promise<DecoderArtifacts> {
    const manifest = readArtifactsManifest(dir);
    const kinds = options.graphs ?? (Object.keys(manifest.graphs) as ArtifactGraphKind[]);
    const sessions: Partial<Record<ArtifactGraphKind, Session>> = {};
    try {
      for (const kind of kinds) {
        const g = manifest.graphs[kind];
        if (!g)
          throw new DataFormatError(`${dir} has no ${kind} graph`, {
            file: join(dir, ARTIFACTS_MANIFEST),
          });
        sessions[kind] = await createSession(join(dir, g.file), {
          ...options,
          device: options.device ?? 'cpu',
        });
      }
    } catch (e) {
      for (const s of Object.values(sessions)) await s.release();
      throw e;
    }
    return new DecoderArtifacts(resolve(dir), manifest, sessions, options);
  }

  get config(): DecoderConfig {
    return this.manifest.config;
  }

  /** The session of one graph; throws when it was not opened. */
  session(kind: ArtifactGraphKind): Session {
    const s = this.sessions[kind];
    if (!s)
      throw new RangeError(
        `the ${kind} graph was not opened (graphs: ${Object.keys(this.sessions).join(', ')})`,
      );
    return s;
  }

  /**
   * The session of a graph the manifest has, opened now (with the options the artifacts were
   * opened with) if it was not; it is released with the others.
   */
  async openSession(
    kind: ArtifactGraphKind,
    overrides: Pick<OpenArtifactsOptions, 'intraOpThreads'> = {},
  ): Promise<Session> {
    const open = this.sessions[kind];
    if (open) return open;
    const g = this.manifest.graphs[kind];
    if (!g)
      throw new DataFormatError(`${this.dir} has no ${kind} graph`, {
        file: join(this.dir, ARTIFACTS_MANIFEST),
      });
    const s = await createSession(join(this.dir, g.file), {
      ...this.options,
      ...overrides,
      device: this.options.device ?? 'cpu',
    });
    this.sessions[kind] = s;
    return s;
  }

  /**
   * Runs `close` when these artifacts are released, before their sessions: what was opened over
   * them (a generator's worker threads) ends with them.
   */
  onRelease(close: () => Promise<void>): void {
    this.#onRelease.push(close);
  }

  async release(): Promise<void> {
    for (const close of this.#onRelease.splice(0)) await close();
    for (const s of Object.values(this.sessions)) await s.release();
  }
}
