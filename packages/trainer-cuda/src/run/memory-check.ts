import { availableParallelism } from 'node:os';
import { FlowGrpoError } from '@flowgrpo/core';
import type { DecoderConfig, LoraTargetModule } from '@flowgrpo/models';
import { expectedTensorShapes, ONE_THREAD_MAX_WEIGHT_BYTES } from '@flowgrpo/models';
import { type AvailableMemory, availableMemory } from './memory-available.js';
import {
  estimateMemory,
  formatBytes,
  type MemoryEstimate,
  type MemoryShape,
} from './memory-estimate.js';

// The memory preflight of a training run: before output_dir is touched or a session opened, the
// GRPO and SFT trainers estimate the run's peak (memory-estimate.ts) from its config and compare
// it with the memory available (memory-available.ts). A run that will not fit is refused with the
// estimate, the memory there is and the knob that would make it fit, where a smaller value of
// one does; `skip_memory_check: true` runs it anyway (an estimate can be wrong).

/** The estimated peak is above the memory available: refused before anything was built or written. */
export class InsufficientMemoryError extends FlowGrpoError {
  static override readonly code = 'INSUFFICIENT_MEMORY';
  readonly estimate: MemoryEstimate;
  readonly available: AvailableMemory;
  constructor(
    estimate: MemoryEstimate,
    available: AvailableMemory,
    fixes: readonly string[],
    /** How to run anyway: the config key, or a command's flag. */
    skip = 'set skip_memory_check: true',
  ) {
    const largest = [...estimate.terms]
      .sort((a, b) => b.bytes - a.bytes)
      .slice(0, 3)
      .map((t) => `${t.name} ${formatBytes(t.bytes)}`);
    super(
      `the run needs about ${formatBytes(estimate.bytes)} of memory at its peak (${largest.join(', ')}), ` +
        `more than the ${formatBytes(available.bytes)} available (${available.source}; ${formatBytes(available.total)} in all)`,
      {
        hint: `${[...fixes, `or ${skip} if the estimate is wrong`].join('; ')} (docs/performance.md, "The memory preflight")`,
      },
    );
    this.estimate = estimate;
    this.available = available;
  }
}

/** What the preflight needs to know of the model and its artifacts besides the run's config. */
export interface RunMemoryFacts {
  config: DecoderConfig;
  lora?: { r: number; targetModules: readonly LoraTargetModule[] } | undefined;
  /** Columns of the train_step head's widest vocabulary chunk (the vocabulary when whole). */
  headChunk: number;
  /** Positions the graphs have: no row is longer. */
  maxPositions: number;
  /** The artifacts hold the projections in half precision (base_weights_dtype). */
  halfProjections?: boolean | undefined;
}

/** The GRPO run's own facts: its longest prompt, and whether its rollouts run in this process. */
export interface GrpoMemoryFacts extends RunMemoryFacts {
  /** The longest prompt expected, in tokens (the trainer: the longest of the first questions). */
  promptTokens: number;
  /** false: rollouts on another engine (vLLM, SGLang): no sampling session, no KV cache here. */
  localRollouts: boolean;
}

/** The GRPO keys the estimate reads. */
export interface GrpoMemoryConfig {
  max_tokens_per_microbatch: number;
  max_completion_length: number;
  max_turns: number;
  num_generations: number;
  queries_per_step: number;
  rollout_concurrency: number;
  generate_workers?: number | undefined;
  intra_op_threads?: number | undefined;
  share_frozen_weights?: boolean | undefined;
  share_sampling_weights?: boolean | undefined;
  gradient_checkpointing?: boolean | undefined;
}

/** The SFT keys the estimate reads. */
export interface SftMemoryConfig {
  max_tokens_per_microbatch: number;
  max_length: number;
  per_device_train_batch_size: number;
  use_peft: boolean;
  share_frozen_weights?: boolean | undefined;
  gradient_checkpointing?: boolean | undefined;
}

/** The largest micro-batch: as many rows of `seqLen` as the token budget holds (one at least). */
function microBatch(budget: number, seqLen: number, rows: number) {
  return { rows: Math.max(1, Math.min(rows, Math.floor(budget / seqLen))), seqLen };
}

/** Worker batchers a local rollout engine opens, each its own session (DecoderGenerator's rule). */
function generateWorkers(c: GrpoMemoryConfig, config: DecoderConfig): number {
  if (c.generate_workers !== undefined) return c.generate_workers;
  if (c.intra_op_threads !== undefined) return 0;
  let params = 0;
  for (const shape of expectedTensorShapes(config).values())
    params += shape.reduce((a, b) => a * b, 1);
  if (4 * params > ONE_THREAD_MAX_WEIGHT_BYTES) return 0;
  const cores = availableParallelism();
  return cores > 1 ? Math.min(cores, 4) : 0;
}

/**
 * A GRPO run's shape: the train_step and logprobs sessions, the rollout engine's sessions (one,
 * plus its worker batchers); a row is the longest prompt and every turn's completion (the last
 * turn's prompt holds the earlier ones), at most the graphs' positions; the sampling batch is
 * what the local engine decodes at once (max(num_generations, rollout_concurrency) rows).
 */
export function grpoMemoryShape(c: GrpoMemoryConfig, f: GrpoMemoryFacts): MemoryShape {
  const sharedSampling = f.localRollouts && c.share_sampling_weights === true;
  const seqLen = Math.min(f.maxPositions, f.promptTokens + c.max_turns * c.max_completion_length);
  const rows = c.queries_per_step * c.num_generations * c.max_turns;
  return {
    config: f.config,
    lora: f.lora,
    headChunk: f.headChunk,
    sessions: {
      trainStep: true,
      logprobs: true,
      // The decode graph of share_sampling_weights has no worker batchers (the fused pool's).
      sampling: !f.localRollouts ? 0 : sharedSampling ? 1 : 1 + generateWorkers(c, f.config),
    },
    sharedWeights: c.share_frozen_weights === true,
    sharedSamplingWeights: sharedSampling,
    gradientCheckpointing: c.gradient_checkpointing === true,
    halfProjections: f.halfProjections === true,
    microBatch: microBatch(c.max_tokens_per_microbatch, seqLen, rows),
    ...(f.localRollouts && {
      sampling: { rows: Math.max(c.num_generations, c.rollout_concurrency), seqLen },
    }),
  };
}

/**
 * An SFT run's shape: the train_step and logprobs sessions; a row is max_length tokens (at most
 * the graphs' positions), a batch per_device_train_batch_size of them, cut into micro-batches of
 * max_tokens_per_microbatch.
 */
export function sftMemoryShape(c: SftMemoryConfig, f: RunMemoryFacts): MemoryShape {
  const seqLen = Math.min(f.maxPositions, c.max_length);
  return {
    config: f.config,
    lora: c.use_peft ? f.lora : undefined,
    full: !c.use_peft,
    headChunk: f.headChunk,
    sessions: { trainStep: true, logprobs: true, sampling: 0 },
    sharedWeights: c.share_frozen_weights === true,
    gradientCheckpointing: c.gradient_checkpointing === true,
    halfProjections: c.use_peft && f.halfProjections === true,
    microBatch: microBatch(c.max_tokens_per_microbatch, seqLen, c.per_device_train_batch_size),
  };
}

/** What a refused run's frozen weights are held in, for its last-resort hint. */
function frozenDtypes(half: boolean, sampling: boolean): string {
  if (!half)
    return "the frozen weights are float32: base_weights_dtype: bfloat16 halves the projections (a float32 checkpoint's are rounded)";
  return sampling
    ? 'the projections are held in half precision for training, the sampling session casts them to float32'
    : 'the projections are held in half precision already';
}

/** The first value of `values` (decreasing) at which `fits` holds, if any. */
function firstFitting(values: number[], fits: (v: number) => boolean): number | undefined {
  return values.find(fits);
}

/** Halvings of `from` down to `floor` (`from` itself excluded). */
function halvings(from: number, floor: number): number[] {
  const out: number[] = [];
  for (let v = Math.floor(from / 2); v >= Math.max(1, floor); v = Math.floor(v / 2)) out.push(v);
  return out;
}

/** The switches a refused run may turn on: keys that change what a step holds, not what it learns. */
interface MemorySwitches {
  share_frozen_weights?: boolean | undefined;
  gradient_checkpointing?: boolean | undefined;
  share_sampling_weights?: boolean | undefined;
}
type Switch = { key: keyof MemorySwitches; why: string };
/** The training sessions' switches (each costs the update some speed). */
const SWITCHES: readonly Switch[] = [
  { key: 'share_frozen_weights', why: 'one mapped copy of the frozen weights' },
  {
    key: 'gradient_checkpointing',
    why: "each layer's activations recomputed in the backward, one more forward per step; artifacts built without it are rebuilt with flowgrpo export --gradient-checkpointing",
  },
];
/** The local rollout engine's switch: it costs sampling more (0.29–0.40× as fast, measured), so it comes last. */
const SAMPLING_SWITCH: Switch = {
  key: 'share_sampling_weights',
  why: 'the sampling session reads the mapped weights, half-precision projections cast per product: sampling 0.29–0.40× as fast; half-precision artifacts built without it are rebuilt with flowgrpo export --share-sampling-weights',
};

/** A knob's fix; `learns`: it changes what the run learns (a shorter completion or example), not only its speed. */
interface KnobFix {
  fix: string;
  learns: boolean;
}

/**
 * The fixes of a refused run, cheapest first. What costs speed only comes before what changes
 * what the run learns: the switches that are off (share_frozen_weights, gradient_checkpointing:
 * no result changes beyond float32 rounding), each that alone makes the run fit, else all of
 * them when together they do; then the knobs that cost speed only (the micro-batch, the rollout
 * concurrency: gradients accumulate either way) alone; then, when no switch fits alone, those
 * knobs with the switches on together, else with each. The sampling switch
 * (share_sampling_weights, the costliest) is offered only when the others are not enough. Only
 * after all of these the knobs that change what is learnt (the completion, the example's
 * length), alone, and last with the switches; else `fallback`. `switches`: those the run may
 * take.
 */
function fixesWithSwitches<O extends MemorySwitches>(
  c: O,
  fits: (o: Partial<O>) => boolean,
  knobs: (fits: (o: Partial<O>) => boolean) => KnobFix[],
  fallback: string,
  switches = SWITCHES,
): string[] {
  const on = (ss: readonly Switch[]) =>
    Object.fromEntries(ss.map((s) => [s.key, true])) as Partial<O>;
  const setting = (ss: readonly Switch[]) => `set ${ss.map((s) => `${s.key}: true`).join(' and ')}`;
  const speedOnly = (ks: KnobFix[]) => ks.filter((k) => !k.learns).map((k) => k.fix);
  const learning = (ks: KnobFix[]) => ks.filter((k) => k.learns).map((k) => k.fix);
  const alone = knobs(fits);
  // A knob with switches: all of `offered` together first, then each; the first set that gives
  // a fix of the kind asked is named (with more on, the knob need move less). A knob's fix that
  // reads as it does alone (the same value: the switches buy nothing) is not repeated.
  const paired = (offered: Switch[], kind: (ks: KnobFix[]) => string[]) => {
    const alreadyNamed = new Set(kind(alone));
    for (const ss of [...(offered.length > 1 ? [offered] : []), ...offered.map((s) => [s])]) {
      const fixes = kind(knobs((o) => fits({ ...o, ...on(ss) }))).filter(
        (fix) => !alreadyNamed.has(fix),
      );
      if (fixes.length) return fixes.map((fix) => `${setting(ss)} and ${fix}`);
    }
    return [];
  };
  /** The fixes that cost speed only, with the switches `offered`. */
  const speedFixes = (offered: Switch[]) => {
    const single = offered.filter((s) => fits(on([s])));
    const named = single.length
      ? single.map((s) => `${setting([s])} (${s.why}: that fits)`)
      : offered.length > 1 && fits(on(offered))
        ? [`${setting(offered)}: together they fit`]
        : [];
    return [...named, ...speedOnly(alone), ...(named.length ? [] : paired(offered, speedOnly))];
  };
  const off = switches.filter((s) => !c[s.key]);
  const cheapOff = off.filter((s) => s !== SAMPLING_SWITCH);
  // The cheaper switches first; the sampling one only when they give nothing.
  const cheapestFirst = (fixesWith: (offered: Switch[]) => string[]) => {
    const cheap = fixesWith(cheapOff);
    return cheap.length ? cheap : fixesWith(off);
  };
  const fixes = [...cheapestFirst(speedFixes), ...learning(alone)];
  return orFallback(
    fixes.length ? fixes : cheapestFirst((offered) => paired(offered, learning)),
    fallback,
  );
}

/** `fixes`, or `fallback` alone when there are none. */
function orFallback(fixes: string[], fallback: string): string[] {
  return fixes.length ? fixes : [fallback];
}

/**
 * The share of the memory available that an estimate may come within before the run is warned:
 * estimates have read as much as 7% under a measured peak (0.93× at whole Qwen2.5-0.5B-shaped
 * models, docs/performance.md, "The memory preflight"), so a run estimated within this margin
 * may still run out. It is warned, not refused: most estimates read over their peak (to 1.17×).
 */
export const MEMORY_MARGIN = 0.1;

/**
 * Refuses `estimate` when it exceeds `available`, with the fixes `fixesFor` names for that budget;
 * within MEMORY_MARGIN of it, returns it with a warning naming the fixes that leave the margin;
 * returns it as it is otherwise.
 */
function refuseOver(
  estimate: MemoryEstimate,
  available: AvailableMemory,
  fixesFor: (budget: number) => string[],
  skip?: string,
): MemoryEstimate {
  if (estimate.bytes > available.bytes)
    throw new InsufficientMemoryError(estimate, available, fixesFor(available.bytes), skip);
  const room = (1 - MEMORY_MARGIN) * available.bytes;
  if (estimate.bytes <= room) return estimate;
  // Floored: a run that fits never reads as over 100%.
  const share = Math.floor((100 * estimate.bytes) / available.bytes);
  return {
    ...estimate,
    warning:
      `the estimate is ${share}% of the ${formatBytes(available.bytes)} available (${available.source}); ` +
      `estimates have read up to 7% under a measured peak, so the run may run out of memory. ` +
      `To leave ${MEMORY_MARGIN * 100}% free: ${fixesFor(room).join('; ')}`,
  };
}

/** `availableBytes` given: that figure (tests, callers who know better); else the machine's. */
function availableOf(availableBytes: number | undefined): AvailableMemory {
  return availableBytes === undefined
    ? availableMemory()
    : { bytes: availableBytes, source: 'as given', total: availableBytes };
}

/**
 * The GRPO run's estimate; throws InsufficientMemoryError when it exceeds the memory available,
 * naming the knobs (micro-batch budget, rollout concurrency, completion length) and the value of
 * each that would fit.
 */
export function checkGrpoMemory(
  c: GrpoMemoryConfig,
  f: GrpoMemoryFacts,
  availableBytes?: number,
): MemoryEstimate {
  const available = availableOf(availableBytes);
  const est = (o: Partial<GrpoMemoryConfig>) => estimateMemory(grpoMemoryShape({ ...c, ...o }, f));
  return refuseOver(est({}), available, (budget) =>
    fixesWithSwitches(
      c,
      (o) => est(o).bytes <= budget,
      (fitsAs) => grpoKnobFixes(c, f, fitsAs),
      `no smaller micro-batch, concurrency or length fits: use a smaller model or a machine with more memory (${frozenDtypes(f.halfProjections === true, f.localRollouts && c.share_sampling_weights !== true)})`,
      f.localRollouts ? [...SWITCHES, SAMPLING_SWITCH] : SWITCHES,
    ),
  );
}

/** The GRPO knobs that make the run fit under `fits`, each with the value that does. */
function grpoKnobFixes(
  c: GrpoMemoryConfig,
  f: GrpoMemoryFacts,
  fits: (o: Partial<GrpoMemoryConfig>) => boolean,
): KnobFix[] {
  const fixes: KnobFix[] = [];
  const seqLen = grpoMemoryShape(c, f).microBatch!.seqLen;
  const budget = firstFitting(halvings(c.max_tokens_per_microbatch, seqLen), (v) =>
    fits({ max_tokens_per_microbatch: v }),
  );
  if (budget !== undefined)
    fixes.push({
      fix: `lower max_tokens_per_microbatch (${c.max_tokens_per_microbatch}; ${budget} fits)`,
      learns: false,
    });
  if (f.localRollouts) {
    const concurrency = firstFitting(halvings(c.rollout_concurrency, 1), (v) =>
      fits({ rollout_concurrency: v, num_generations: Math.min(c.num_generations, v) }),
    );
    if (concurrency !== undefined && concurrency >= c.num_generations)
      fixes.push({
        fix: `lower rollout_concurrency (${c.rollout_concurrency}; ${concurrency} fits)`,
        learns: false,
      });
  }
  const completion = firstFitting(halvings(c.max_completion_length, 16), (v) =>
    fits({ max_completion_length: v }),
  );
  if (completion !== undefined)
    fixes.push({
      fix: `lower max_completion_length (${c.max_completion_length}; ${completion} fits) or max_turns`,
      learns: true,
    });
  if (fixes.length === 0) {
    // No one knob is enough: one row per micro-batch, and the completion length that then fits.
    const oneRow = (v: number) => ({
      max_completion_length: v,
      max_tokens_per_microbatch: Math.min(
        c.max_tokens_per_microbatch,
        grpoMemoryShape({ ...c, max_completion_length: v }, f).microBatch!.seqLen,
      ),
    });
    const both = firstFitting(
      [c.max_completion_length, ...halvings(c.max_completion_length, 16)],
      (v) => fits(oneRow(v)),
    );
    if (both !== undefined) {
      const o = oneRow(both);
      fixes.push({
        fix: `lower max_tokens_per_microbatch to ${o.max_tokens_per_microbatch} (one row per micro-batch)${both < c.max_completion_length ? ` and max_completion_length to ${both}` : ''}: that fits`,
        learns: both < c.max_completion_length,
      });
    }
  }
  return fixes;
}

/** The SFT run's estimate; throws InsufficientMemoryError when it exceeds the memory available. */
export function checkSftMemory(
  c: SftMemoryConfig,
  f: RunMemoryFacts,
  availableBytes?: number,
): MemoryEstimate {
  const available = availableOf(availableBytes);
  const est = (o: Partial<SftMemoryConfig>) => estimateMemory(sftMemoryShape({ ...c, ...o }, f));
  const fallback = `no smaller micro-batch or length fits: use a smaller model or a machine with more memory (${c.use_peft ? frozenDtypes(f.halfProjections === true, false) : 'every weight is float32'})`;
  // Full fine-tuning (use_peft: false) has no frozen weights to share (checkSftConfig refuses
  // the key there): only checkpointing is named.
  const switches = c.use_peft ? SWITCHES : SWITCHES.filter((s) => s.key !== 'share_frozen_weights');
  return refuseOver(est({}), available, (budget) =>
    fixesWithSwitches(
      c,
      (o) => est(o).bytes <= budget,
      (fitsAs) => sftKnobFixes(c, f, fitsAs),
      fallback,
      switches,
    ),
  );
}

/** The SFT knobs that make the run fit under `fits`, each with the value that does. */
function sftKnobFixes(
  c: SftMemoryConfig,
  f: RunMemoryFacts,
  fits: (o: Partial<SftMemoryConfig>) => boolean,
): KnobFix[] {
  const fixes: KnobFix[] = [];
  const { seqLen, rows } = sftMemoryShape(c, f).microBatch!;
  const budget = firstFitting(halvings(rows * seqLen, seqLen), (v) =>
    fits({ max_tokens_per_microbatch: v }),
  );
  if (budget !== undefined)
    fixes.push({
      fix: `lower max_tokens_per_microbatch (${c.max_tokens_per_microbatch}; ${budget} fits: gradients accumulate over micro-batches, the same update)`,
      learns: false,
    });
  const length = firstFitting(halvings(c.max_length, 16), (v) => fits({ max_length: v }));
  if (length !== undefined)
    fixes.push({
      fix: `lower max_length (${c.max_length}; ${length} fits: longer examples are cut)`,
      learns: true,
    });
  return fixes;
}

/**
 * Sampling alone (`flowgrpo generate`, `flowgrpo serve`): one sampling session (and with
 * `hostWeights` the model as loaded), `rows` prompts of `promptTokens` with `newTokens` to
 * generate. Throws InsufficientMemoryError naming `flags.newTokens` and the value that fits;
 * `flags.skip` runs anyway.
 */
export function checkSamplingMemory(
  o: {
    config: DecoderConfig;
    rows: number;
    promptTokens: number;
    newTokens: number;
    maxPositions: number;
    hostWeights: boolean;
    /** The artifacts store the projections in half precision: the session casts them at load. */
    halfProjections?: boolean | undefined;
    flags: { newTokens: string; skip: string };
  },
  availableBytes?: number,
): MemoryEstimate {
  const available = availableOf(availableBytes);
  const est = (newTokens: number) =>
    estimateMemory({
      config: o.config,
      headChunk: o.config.vocabSize,
      sessions: { trainStep: false, logprobs: false, sampling: 1 },
      sampling: {
        rows: o.rows,
        seqLen: Math.min(o.maxPositions, o.promptTokens + newTokens),
      },
      hostWeights: o.hostWeights,
      halfProjections: o.halfProjections,
    });
  return refuseOver(
    est(o.newTokens),
    available,
    (budget) => {
      const fits = firstFitting(halvings(o.newTokens, 1), (v) => est(v).bytes <= budget);
      return [
        fits !== undefined
          ? `lower ${o.flags.newTokens} (${o.newTokens}; ${fits} fits)`
          : 'use a smaller model or a machine with more memory (the weights alone do not fit: they are float32)',
      ];
    },
    `pass ${o.flags.skip}`,
  );
}
