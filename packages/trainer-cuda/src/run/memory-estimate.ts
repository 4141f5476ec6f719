import type { DecoderConfig, LoraTargetModule } from '@flowgrpo/models';
import { EMBED_TOKENS, expectedTensorShapes, LM_HEAD } from '@flowgrpo/models';

// The peak resident memory of a process that opens a decoder's ONNX Runtime sessions and runs
// them, as a sum of named terms — what the memory preflight (memory-check.ts) compares with the
// memory the machine has before anything is built. Every size is float32 (4 bytes), except the
// projections of artifacts built with them in half precision (base_weights_dtype: 2 bytes).
//
// Where the factors come from: bench/train-step-child.ts reports a fresh process's resident set
// before a session is opened, right after, and its peak (VmHWM) over a train step. Measured on
// two Qwen2.5-0.5B layers (hidden 896) at vocabularies 8,192 (the head whole) and 32,768 (two
// chunks), with 2 and 4 layers, at 1–4 rows × 256–1,024 tokens (docs/performance.md, "The memory
// preflight"), then checked at shapes the factors were not fitted on (test/memory-preflight.test.ts).
// Refitted on 0.5B-shaped models at the real vocabulary (151,936), 2–24 layers, 1–2 rows × 256–1,024
// tokens: the tied head's mapped pages, ORT's arena and the load's transient are terms of their own.

const F32 = 4;
const HALF = 2;
const MiB = 2 ** 20;

/** Node with ONNX Runtime loaded, before any session: 150–168 MiB measured. */
export const RUNTIME_BYTES = 160 * MiB;

/**
 * Resident bytes per byte of a frozen weight once a session holds it, and a session's own
 * overhead, by graph: measured as the difference of the resident set across createSession, over
 * the projections (`linear`, layer counts 2 and 4 told apart) and the LM head matrix (`head`,
 * vocabularies told apart). ORT maps the initializers of weights.data; each Gemm / MatMul whose B
 * is a constant keeps a prepacked copy of its own, and the mapped original is dropped once every
 * user has packed it; constant subgraphs over weights (a vocabulary chunk's Slice, the sampling
 * graph's packed q/k/v and gate/up) are folded into copies at load.
 *   train_step: 2.0× the projections (the forward's layout and the backward's dX layout); the
 *     head whole 3×, in vocabulary chunks 1× (the chunks, folded at load).
 *   logprobs: forward only: the projections 1.0×, the head whole 2×.
 *   generate / decode: the projections 1.24×, the head (never chunked: sampling needs every
 *     logit) 2.1×; a larger overhead (the decode loop's buffers).
 * An untied input embedding is only gathered from: 1× in every graph.
 */
export const SESSION_FACTORS = {
  trainStep: { linear: 2.0, headWhole: 3, headChunked: 1, overhead: 24 * MiB },
  logprobs: { linear: 1.0, headWhole: 2, headChunked: 1, overhead: 25 * MiB },
  sampling: { linear: 1.24, headWhole: 2.1, headChunked: 2.1, overhead: 42 * MiB },
} as const;

/**
 * The same with `share_frozen_weights` (prepacking off): the train_step and logprobs sessions read
 * the projections and a whole head from the mapped weights file (one copy, the `frozen weights`
 * term), nothing of their own; a head in vocabulary chunks is still 1× in each, its chunks cut at
 * load. Measured by the same difference across createSession (two and four Qwen2.5-0.5B layers,
 * vocabularies 8,192 and 32,768, scratch runs), then checked against measured peaks at shapes
 * they were not fitted on: test/shared-weights.test.ts (within 25%) and `bench
 * train-memory-models` (Qwen2.5-0.5B and 1.5B shapes: 0.87× and 0.92×; docs/performance.md,
 * "Frozen weights held once").
 */
export const SHARED_SESSION_FACTORS = {
  trainStep: { linear: 0, headWhole: 0, headChunked: 1, overhead: 24 * MiB },
  logprobs: { linear: 0, headWhole: 0, headChunked: 1, overhead: 25 * MiB },
} as const;

/**
 * Float32 values per token per layer that the train step holds at its peak (the forward's tensors
 * kept for the backward, plus the backward's transients): fitted as 10 × hidden (the residual
 * stream, norms, q/k/v/o inputs and outputs), 5 × intermediate (gate, up, their activation and
 * product, the down projection's input gradient), 1.5 × heads × sequence length (the attention
 * probabilities, kept for the backward, and a transient of their gradient) and each LoRA
 * module's r-wide intermediate and its gradient.
 */
export const ACTIVATION_FACTORS = {
  hidden: 10,
  intermediate: 5,
  attention: 1.5,
  loraRank: 2,
  /**
   * [tokens × head width] float tensors live at the peak: measured 6.5 whole; in chunks 5, refitted
   * (2026-11-30) on 23 steps at the real vocabulary's chunks of 15,194 (scratch, docs/performance.md
   * "The memory preflight"); the 7.5 first fitted at two chunks of 16,384 over-read them.
   */
  headWhole: 6.5,
  headChunked: 5,
  /** What a step allocates whatever its size (measured: the intercept of peak against tokens). */
  fixed: 22 * MiB,
  /**
   * With `gradient_checkpointing`: float32 values per token per layer kept from the forward to
   * the backward (each layer's input, the residual stream, hidden wide); one layer's activations
   * (the factors above) are alive at a time, while it is recomputed and differentiated.
   */
  checkpointHidden: 1,
} as const;

/**
 * ORT's CPU arena above the step's live tensors, as a fraction of the step's terms (activations
 * and LM head): its regions double in size, and the pages a step touches in them depend on the
 * order of its allocations. Measured as the step's peak with the arena (the default) against its
 * live peak (the arena off and glibc returning every freed block: MALLOC_MMAP_THRESHOLD_=131072),
 * Qwen2.5-0.5B shape, real vocabulary, 1 × 512: 4–5% over the live peak at 16 layers, 18%
 * (float32) and 27% (bf16 projections) at 24 — a step, not a slope, as the regions double. 0.2
 * leaves those two whole models at 0.94–0.95× their peak and the tests' small shapes within 25%
 * (a fit to the worst case would put them over).
 */
export const ARENA_SLACK = 0.2;
/**
 * Copies of a chunked head held for a moment while a session loads, besides its chunks: the
 * weight read whole and the chunks being cut from it. Measured: a fresh process's peak while the
 * train_step session opens is 1,690–1,725 MiB for a 0.5B-shaped model at the real vocabulary
 * (the head 519 MiB) at 2, 8, 16 and 24 layers, bf16 projections — the runtime, the chunks and
 * two more heads.
 */
export const LOAD_HEAD_COPIES = 2;
/**
 * The sampling session's load, beside what it keeps: its projections once more in float32 (the
 * checkpoint's dtype or not: it casts half ones at load) and the head once more, while the graph's
 * packed q|k|v and gate|up are folded and prepacked. Measured (2026-11-30, scratch: the generate
 * graph, 8 rows, random weights at the real vocabulary; float32 projections): the open peak over
 * the settled resident set was 739 / 1,798 MiB for the Qwen2.5-0.5B shape at 4 / 24 layers and
 * 5,577 MiB for the 1.5B shape (these give 747 / 1,887 / 5,890); with bf16 projections 693 /
 * 1,325 / 5,324.
 */
export const SAMPLING_LOAD = { linear: 1, head: 1 } as const;
/**
 * Float32 bytes of the projections the sampling session holds beyond SESSION_FACTORS.sampling's
 * when the artifacts store them in half precision (it casts them at load). Measured the same
 * way, bf16 against float32 projections: the process's peak +40 / +304 / +526 MiB (0.5B shape at
 * 4 / 24 layers, 1.5B shape); 0.1 gives +23 / +137 / +500.
 */
export const SAMPLING_HALF_EXTRA = 0.1;
/**
 * The decode session's own bytes with share_sampling_weights (no weights of its own): its
 * buffers and a decode step's transients. Fitted on processes that only sample (2026-11-30,
 * scratch: the decode graph without prepacking, 8 rows × 64 + 64 tokens, random weights at the
 * real vocabulary, bf16 projections): peaks of 1,099 / 1,616–1,624 / 3,979 MiB for the
 * Qwen2.5-0.5B shape at 8 / 24 layers and the 1.5B shape, estimated 1.00× / 0.98× / 0.99×
 * (docs/performance.md, "Sampling weights held once").
 */
export const SHARED_SAMPLING_OVERHEAD = 100 * MiB;
/**
 * Copies of the sampling batch's KV cache: the chunk's `past` input and its `present` output
 * (docs/performance.md, "The KV cache": the cache crosses the binding once per chunk). Counted
 * from the graph, not measured.
 */
export const KV_CACHE_COPIES = 2;
/** [rows × vocabulary] float tensors of a decode step: logits, probabilities, the top-p sort. */
export const SAMPLING_LOGIT_COPIES = 3;
/**
 * Copies of each trained parameter: the train step's own, its gradient, AdamW's m and v, the
 * trainer's host copy (handed to the rollout engine) and the engine's.
 */
export const TRAINABLE_COPIES = 6;

export interface MemoryShape {
  config: DecoderConfig;
  /** The adapter trained; undefined with `full`, or when nothing is trained (generate, serve). */
  lora?: { r: number; targetModules: readonly LoraTargetModule[] } | undefined;
  /**
   * Every weight trained (SFT with use_peft: false): the graphs take the weights as inputs, so
   * nothing is prepacked, and each weight has the trainable copies instead.
   */
  full?: boolean;
  /** Columns of the train_step / logprobs LM head's widest chunk (the vocabulary when whole). */
  headChunk: number;
  /** The sessions the process opens: each holds its own copy of the frozen weights, unless shared. */
  sessions: { trainStep: boolean; logprobs: boolean; sampling: number };
  /**
   * `share_frozen_weights`: the train_step and logprobs sessions map weights.data once, without
   * prepacked copies (the sampling sessions keep theirs).
   */
  sharedWeights?: boolean;
  /**
   * `share_sampling_weights`: the sampling session is the decode graph over the mapped weights
   * file, prepacking off, half projections cast per product: nothing of its own but its overhead
   * and one layer's cast.
   */
  sharedSamplingWeights?: boolean;
  /**
   * `gradient_checkpointing`: the train step keeps each layer's input only and recomputes the
   * layer's activations in the backward, one layer at a time.
   */
  gradientCheckpointing?: boolean;
  /**
   * The artifacts hold the projections in half precision (base_weights_dtype): the train_step and
   * logprobs sessions read them from the mapped weights file, once, and cast each to float32 where
   * it is used (no prepacked copies); the sampling session casts them once, at load.
   */
  halfProjections?: boolean;
  /** The largest micro-batch of the train step: rows × padded tokens per row. */
  microBatch?: { rows: number; seqLen: number } | undefined;
  /** The batch sampled at once: rows decoded together and the longest sequence (prompt + new). */
  sampling?: { rows: number; seqLen: number } | undefined;
  /**
   * The process holds the model's weights itself too (float32, as loadDecoderModel reads them to
   * build the artifacts: `flowgrpo generate`).
   */
  hostWeights?: boolean;
}

/** One term of the estimate: its name, its size, and what it counts. */
export interface MemoryTerm {
  name: string;
  bytes: number;
  what: string;
}

export interface MemoryEstimate {
  terms: MemoryTerm[];
  /** The sum of the terms: the estimated peak resident set. */
  bytes: number;
  /** Set by the preflight when the estimate fits but within its margin of the memory available. */
  warning?: string | undefined;
}

/** The parameter counts of a decoder: the projections (and the vectors beside them), the head, an untied embedding. */
function weightCounts(config: DecoderConfig): { linear: number; head: number; embed: number } {
  let linear = 0;
  let head = 0;
  let embed = 0;
  for (const [name, shape] of expectedTensorShapes(config)) {
    const n = shape.reduce((a, b) => a * b, 1);
    if (name === LM_HEAD) head += n;
    else if (name === EMBED_TOKENS) {
      if (config.tieWordEmbeddings) head += n;
      else embed += n;
    } else linear += n;
  }
  return { linear, head, embed };
}

/** LoRA parameters: r × (in + out) per target module per layer. */
function loraCount(config: DecoderConfig, lora: NonNullable<MemoryShape['lora']>): number {
  const h = config.hiddenSize;
  const q = config.numAttentionHeads * config.headDim;
  const kv = config.numKeyValueHeads * config.headDim;
  const f = config.intermediateSize;
  const features: Record<LoraTargetModule, number> = {
    q_proj: h + q,
    k_proj: h + kv,
    v_proj: h + kv,
    o_proj: q + h,
    gate_proj: h + f,
    up_proj: h + f,
    down_proj: f + h,
  };
  const perLayer = lora.targetModules.reduce((s, m) => s + lora.r * features[m], 0);
  return perLayer * config.numHiddenLayers;
}

/** The estimated peak resident memory of `shape`, term by term. */
export function estimateMemory(shape: MemoryShape): MemoryEstimate {
  const c = shape.config;
  const w = weightCounts(c);
  const whole = shape.headChunk >= c.vocabSize;
  const terms: MemoryTerm[] = [
    { name: 'runtime', bytes: RUNTIME_BYTES, what: 'Node and ONNX Runtime loaded' },
  ];

  // Frozen weights, per session: each session reads its own copy and prepacks its own, unless
  // the train_step and logprobs sessions share the mapped file.
  const { trainStep, logprobs, sampling } = shape.sessions;
  const shared = shape.sharedWeights === true && !shape.full && (trainStep || logprobs);
  const half = shape.halfProjections === true && !shape.full && (trainStep || logprobs);
  // An untied embedding is gathered from where it lies: 1× per session, or nothing when mapped.
  const frozen = (f: {
    linear: number;
    headWhole: number;
    headChunked: number;
    overhead: number;
  }) =>
    shape.full
      ? f.overhead // the weights are inputs: held by the trainable term, never prepacked
      : F32 *
          ((half ? 0 : f.linear) * w.linear +
            (whole ? f.headWhole : f.headChunked) * w.head +
            (shared ? 0 : w.embed)) +
        f.overhead;
  const factors = shared ? SHARED_SESSION_FACTORS : SESSION_FACTORS;
  // What is resident while a session loads: the runtime and the weights the sessions (and the
  // process) hold of their own; the mapped file's pages, casts and run-time terms come later.
  let heldAtLoad = RUNTIME_BYTES;
  const heldTerm = (t: MemoryTerm) => {
    heldAtLoad += t.bytes;
    terms.push(t);
  };
  // A tied head cut into vocabulary chunks stays mapped whole besides its chunks: the input
  // embedding and the target rows are gathered from it, and a run's ids reach every page of it.
  const mappedHead =
    !shared && !shape.full && !whole && c.tieWordEmbeddings === true && (trainStep || logprobs);
  if (shared || half || mappedHead)
    terms.push({
      name: 'frozen weights',
      bytes:
        (half ? HALF * w.linear : shared ? F32 * w.linear : 0) +
        (shared ? F32 * (w.head + w.embed) : mappedHead ? F32 * w.head : 0),
      what: `weights.data mapped once, read by the train_step and logprobs sessions: ${[
        half ? 'the projections in half precision' : shared ? 'the projections' : undefined,
        shared ? 'the head and embeddings (float32)' : undefined,
        mappedHead ? 'the tied embedding, gathered from (float32)' : undefined,
      ]
        .filter(Boolean)
        .join(', ')}`,
    });
  if (half)
    terms.push({
      name: 'projection casts',
      bytes: (F32 * w.linear) / c.numHiddenLayers,
      what: "one layer's projections cast to float32 where they are used",
    });
  if (trainStep)
    heldTerm({
      name: 'train_step weights',
      bytes: frozen(factors.trainStep),
      what: shared
        ? `what the train_step session holds of its own${whole ? '' : ' (the head in vocabulary chunks)'}`
        : half
          ? 'the head and embeddings as the train_step session holds them (float32, prepacked)'
          : 'frozen weights as the train_step session holds them (float32, prepacked copies)',
    });
  if (logprobs)
    heldTerm({
      name: 'logprobs weights',
      bytes: frozen(factors.logprobs),
      what: shared
        ? `what the logprobs session holds of its own${whole ? '' : ' (the head in vocabulary chunks)'}`
        : half
          ? 'the head and embeddings as the logprobs session holds them'
          : 'frozen weights as the logprobs session holds them',
    });
  // The sampling session casts half-precision projections at load, whoever else opens them.
  const halfStored = shape.halfProjections === true && !shape.full;
  if (sampling > 0 && shape.sharedSamplingWeights) {
    // Its own mapping of weights.data: the resident set counts a file's pages once per mapping,
    // whoever else maps it (the page cache holds them once).
    heldTerm({
      name: 'sampling weights',
      bytes:
        (halfStored ? HALF : F32) * w.linear +
        F32 * (w.head + w.embed) +
        (halfStored ? (F32 * w.linear) / c.numHiddenLayers : 0) +
        SHARED_SAMPLING_OVERHEAD,
      what: `weights.data as the decode session maps it (share_sampling_weights: no copy of its own${halfStored ? "; one layer's projections cast to float32 at a time" : ''})`,
    });
  } else if (sampling > 0) {
    const f = SESSION_FACTORS.sampling;
    const linear = f.linear + (halfStored ? SAMPLING_HALF_EXTRA : 0);
    heldTerm({
      name: 'sampling weights',
      bytes: sampling * (F32 * (linear * w.linear + f.headWhole * w.head + w.embed) + f.overhead),
      what: `frozen weights as the sampling session${sampling > 1 ? `s (${sampling}) hold` : ' holds'} them${halfStored ? ' (cast to float32 at load)' : ''}`,
    });
  }

  if (shape.hostWeights)
    heldTerm({
      name: 'model weights',
      bytes: F32 * (w.linear + w.head + w.embed),
      what: 'the model as loaded to build the graphs (float32)',
    });

  // What is trained: the parameters, their gradients, AdamW's moments, the host copies.
  const trained = shape.full
    ? w.linear + w.head + w.embed
    : shape.lora && (trainStep || logprobs)
      ? loraCount(c, shape.lora)
      : 0;
  if (trained > 0)
    terms.push({
      name: shape.full ? 'trained weights' : 'LoRA',
      bytes: F32 * TRAINABLE_COPIES * trained,
      what: `${trained.toLocaleString('en-US')} parameters × ${TRAINABLE_COPIES} (weights, gradients, AdamW m and v, host copies)`,
    });

  // The sampling batch: every row's KV cache at the longest sequence, and a step's logits.
  if (sampling > 0 && shape.sampling) {
    const { rows, seqLen } = shape.sampling;
    const kv = rows * seqLen * c.numHiddenLayers * c.numKeyValueHeads * c.headDim * 2;
    terms.push({
      name: 'KV cache',
      bytes: F32 * KV_CACHE_COPIES * kv,
      what: `${rows} rows × ${seqLen} positions × ${c.numHiddenLayers} layers × ${c.numKeyValueHeads} kv heads × ${c.headDim} × (k, v), ${KV_CACHE_COPIES} copies`,
    });
    terms.push({
      name: 'sampling logits',
      bytes: F32 * SAMPLING_LOGIT_COPIES * rows * c.vocabSize,
      what: `${rows} rows × ${c.vocabSize} vocabulary, ${SAMPLING_LOGIT_COPIES} copies`,
    });
  }

  // The train step's largest micro-batch: per token per layer, then the LM head's chunk.
  if (trainStep && shape.microBatch) {
    const { rows, seqLen } = shape.microBatch;
    const tokens = rows * seqLen;
    const a = ACTIVATION_FACTORS;
    const modules = shape.lora?.targetModules.length ?? 0;
    const perTokenLayer =
      a.hidden * c.hiddenSize +
      a.intermediate * c.intermediateSize +
      a.attention * c.numAttentionHeads * seqLen +
      a.loraRank * (shape.lora?.r ?? 0) * modules;
    const L = c.numHiddenLayers;
    const activations: MemoryTerm = shape.gradientCheckpointing
      ? {
          name: 'activations',
          bytes: F32 * tokens * (L * a.checkpointHidden * c.hiddenSize + perTokenLayer) + a.fixed,
          what: `${rows} × ${seqLen} tokens × (${L} layers × ${a.checkpointHidden * c.hiddenSize} floats kept + one layer's ${Math.round(perTokenLayer)} recomputed)`,
        }
      : {
          name: 'activations',
          bytes: F32 * tokens * L * perTokenLayer + a.fixed,
          what: `${rows} × ${seqLen} tokens × ${L} layers × ${Math.round(perTokenLayer)} floats`,
        };
    const width = Math.min(shape.headChunk, c.vocabSize);
    const copies = whole ? a.headWhole : a.headChunked;
    const head: MemoryTerm = {
      name: 'LM head',
      bytes: F32 * copies * tokens * width,
      what: `${tokens} tokens × ${width} vocabulary columns${whole ? '' : ' (one chunk)'} × ${copies} tensors`,
    };
    // ORT's CPU arena reserves memory in regions that double in size, and which of their pages
    // a step touches depends on the order of its allocations: above the step's live tensors,
    // the arena kept 4–27% more than the live peak resident (ARENA_SLACK).
    terms.push(activations, head, {
      name: 'arena',
      bytes: ARENA_SLACK * (activations.bytes + head.bytes),
      what: `ORT's arena: pages of its doubling regions the step touches besides its live tensors (${ARENA_SLACK} × the two terms above)`,
    });
  }

  // Loading: sessions open one at a time, each holding for a moment more than it keeps — a
  // training session that cuts the head into vocabulary chunks LOAD_HEAD_COPIES more heads, the
  // sampling session its projections and a head in float32 (SAMPLING_LOAD). Counted as the largest
  // of them on top of everything held at load; a small model, or a process that only samples,
  // peaks there rather than in a step.
  const total = terms.reduce((s, t) => s + t.bytes, 0);
  const loads: { bytes: number; what: string }[] = [];
  if (!whole && !shape.full && (trainStep || logprobs))
    loads.push({
      bytes: LOAD_HEAD_COPIES * F32 * w.head,
      what: `cutting the head into vocabulary chunks holds ${LOAD_HEAD_COPIES} more copies of it`,
    });
  if (sampling > 0 && !shape.sharedSamplingWeights)
    loads.push({
      bytes: F32 * (SAMPLING_LOAD.linear * w.linear + SAMPLING_LOAD.head * w.head),
      what: 'the sampling session holds its projections and the head once more (float32) while it packs them',
    });
  const load = loads.sort((a, b) => b.bytes - a.bytes)[0];
  if (load && heldAtLoad + load.bytes > total)
    terms.push({
      name: 'session load',
      bytes: heldAtLoad + load.bytes - total,
      what: `the peak is at load, not in a step: ${load.what} (${formatBytes(load.bytes)}) beside the weights held`,
    });
  return { terms, bytes: terms.reduce((s, t) => s + t.bytes, 0) };
}

/** Bytes as a short figure: "412 MiB", "17.3 GiB". */
export function formatBytes(bytes: number): string {
  return bytes >= 2 ** 30
    ? `${(bytes / 2 ** 30).toFixed(1)} GiB`
    : `${Math.round(bytes / MiB).toLocaleString('en-US')} MiB`;
}

/**
 * The estimate as lines: the total, the preflight's warning when there is one, then (unless
 * `terms: false`) each term with its size and what it counts.
 */
export function describeEstimate(e: MemoryEstimate, o: { terms?: boolean } = {}): string[] {
  return [
    `estimated peak memory: ${formatBytes(e.bytes)}`,
    ...(e.warning ? [`warning: ${e.warning}`] : []),
    ...(o.terms === false
      ? []
      : e.terms.map((t) => `  ${t.name}: ${formatBytes(t.bytes)} (${t.what})`)),
  ];
}
