import { BOOL, F, type GenerateContext, I32, I64 } from './generate-context.js';
import { layerStack } from './generate-layer.js';
import { type Sample, type SamplingInputs, sampleTokens, stopCheck } from './generate-sampling.js';
import type { GenerateWeights } from './generate-weights.js';
import { MS_DOMAIN, type OnnxEmitter } from './onnx-emitter.js';

// The `generate` graph's decode loop: an ONNX Loop that feeds each row's last sample back in and
// samples the next, until the run's steps are spent or every row is done. Inside the loop the
// cache grows by one slot per token, in one of two forms (GenerateGraphOptions.attention):
// 'concat' carries the whole cache and appends to it; 'split' leaves the chunk's start cache
// where the prompt chunk put it and carries only the chunk's own slots (splitAttention).

/** What the loop starts from: the prompt chunk's cache, first sample, and the run's inputs. */
export interface LoopStart {
  /** Per layer, the cache after the prompt chunk: [B, kv, S + T, d]. */
  present: { key: string; value: string }[];
  /** [B, 1, 1, S + T]: 0 on slots that hold tokens, MASKED on empty ones. */
  rowBias: string;
  first: Sample;
  firstStop: { done: string; more: string };
  /** [B] int32: the position of each row's first sample. */
  nextPos: string;
  /** [B, V] logits of the first sample. */
  logits: string;
  /** [K, B] float64: one uniform per step. */
  uniformsByStep: string;
  sampling: SamplingInputs;
  stopTable: string;
  /** [1]: slots in the start cache (S + T). */
  startLen: string;
  /** [B, kv, 0, d]: the chunk's own cache before its first token ('split'). */
  empty: string;
  /** Loop trips: steps − 1 (the first sample came from the prompt chunk). */
  trips: string;
}

export interface ChunkResult {
  /** [K', B] int32 and float32: every sample of the run, the prompt chunk's first. */
  tokens: string;
  logprobs: string;
  /** Per layer, the cache after the run: [B, kv, S + T + K' − 1, d]. */
  present: { key: string; value: string }[];
  /** [B, V] logits of the last sample. */
  logits: string;
}

/** Emits the loop into `e` (the main graph or an If branch); returns the run's results. */
export function decodeLoop(
  e: OnnxEmitter,
  ctx: GenerateContext,
  w: GenerateWeights,
  start: LoopStart,
  split: boolean,
): ChunkResult {
  const { g, L, V, nkv, d, grp, nh, axis0 } = ctx;
  const body = e.body(split ? 'split/' : 'concat/');
  const iter = body.input(body.name('iter'), I64, []);
  body.input(body.name('cond'), BOOL, []);
  const tokIn = body.input(body.name('token'), I32, ['batch']);
  const doneIn = body.input(body.name('done'), I32, ['batch', 1]);
  const posIn = body.input(body.name('pos'), I32, ['batch']);
  body.input(body.name('logits'), F, ['batch', V]);
  const slots = split ? 'chunk' : 'total';
  const kvIn = Array.from({ length: L }, () => ({
    key: body.input(body.name('k'), F, ['batch', nkv, slots, d]),
    value: body.input(body.name('v'), F, ['batch', nkv, slots, d]),
  }));
  // 'concat': the row bias grows with the cache (one 0 column per token).
  const biasIn = split ? undefined : body.input(body.name('bias'), F, ['batch', 1, grp, slots]);
  const biasOut = biasIn
    ? body.op1('Pad', [biasIn, body.i64([0, 0, 0, 0, 0, 0, 0, 1])])
    : undefined;
  const kvOut: { key: string; value: string }[] = [];
  const xs = body.op1('Gather', [w.embed, tokIn], { axis: 0 });
  const hidden = layerStack(body, ctx, w, xs, w.ropeFactors(body, posIn), (l, q, k, v) => {
    // q [B, nh, 1, d], k, v [B, kv, 1, d]: the batch's one new token per row.
    const a = split
      ? splitAttention(body, ctx, start, l, q, k, v, kvIn[l]!)
      : concatAttention(body, ctx, q, k, v, biasOut!, kvIn[l]!);
    kvOut.push({ key: a.key, value: a.value });
    return body.op1('Reshape', [a.o, body.i64([0, nh * d])]);
  });
  const logits = body.op1('Gemm', [hidden, w.head], { transB: 1 });
  const u = body.op1('Gather', [start.uniformsByStep, body.op1('Add', [iter, body.i64([1], [])])], {
    axis: 0,
  });
  const s = sampleTokens(body, ctx, start.sampling, logits, u);
  const stop = stopCheck(body, ctx, start.stopTable, s.index, doneIn);
  body.output(stop.more, BOOL, []);
  body.output(s.token, I32, ['batch']);
  body.output(stop.done, I32, ['batch', 1]);
  body.output(body.op1('Add', [posIn, g.i32([1], [])]), I32, ['batch']);
  body.output(logits, F, ['batch', V]);
  for (const kv of kvOut) {
    body.output(kv.key, F, ['batch', nkv, `${slots}_out`, d]);
    body.output(kv.value, F, ['batch', nkv, `${slots}_out`, d]);
  }
  if (biasOut) body.output(biasOut, F, ['batch', 1, grp, `${slots}_out`]);
  body.output(body.op1('Identity', [s.token]), I32, ['batch']);
  body.output(s.logprob, F, ['batch']);

  const carried = start.present.flatMap((p) =>
    split ? [start.empty, start.empty] : [p.key, p.value],
  );
  const outs = e.op(
    'Loop',
    [
      start.trips,
      start.firstStop.more,
      start.first.token,
      start.firstStop.done,
      start.nextPos,
      start.logits,
      ...carried,
      // GQA as attention over the kv heads: a row's g query heads of one kv head are the g
      // "query positions" of that head, so the row bias repeats over them.
      ...(split ? [] : [e.op1('Expand', [start.rowBias, e.i64([1, 1, grp, 1])])]),
    ],
    { body: { graph: body.graph(split ? 'generate_step_split' : 'generate_step') } },
    { outputs: 4 + 2 * L + (split ? 0 : 1) + 2 },
  );
  const scanAt = 4 + 2 * L + (split ? 0 : 1);
  const present = start.present.map((p, l) => {
    const key = outs[4 + 2 * l]!;
    const value = outs[5 + 2 * l]!;
    return split
      ? {
          key: e.op1('Concat', [p.key, key], { axis: 2 }),
          value: e.op1('Concat', [p.value, value], { axis: 2 }),
        }
      : { key, value };
  });
  return {
    tokens: e.op1('Concat', [e.op1('Unsqueeze', [start.first.token, axis0]), outs[scanAt]!], {
      axis: 0,
    }),
    logprobs: e.op1(
      'Concat',
      [e.op1('Unsqueeze', [start.first.logprob, axis0]), outs[scanAt + 1]!],
      {
        axis: 0,
      },
    ),
    present,
    logits: outs[3]!,
  };
}

/** One token's attention output [B, kv, g, d] and the layer's cache after it. */
interface StepAttention {
  o: string;
  key: string;
  value: string;
}

/**
 * ai.onnx Attention: appends k, v to the carried cache and attends. GQA as attention over the kv
 * heads: the g query heads sharing a kv head are its g query "positions" (no causal mask, so each
 * sees the whole cache). ORT then runs one scores GEMM per row and kv head instead of one per
 * query head (docs/performance.md).
 */
function concatAttention(
  body: OnnxEmitter,
  ctx: GenerateContext,
  q: string,
  k: string,
  v: string,
  bias: string,
  cache: { key: string; value: string },
): StepAttention {
  const { nkv, grp, d } = ctx;
  const qg = body.op1('Reshape', [q, body.i64([0, nkv, grp, d])]); // [B, kv, g, d]
  const [y, K, Vv] = body.op(
    'Attention',
    [qg, k, v, bias, cache.key, cache.value],
    { q_num_heads: nkv, kv_num_heads: nkv, scale: { float: 1 } },
    { outputs: 3 },
  );
  return { o: y!, key: K!, value: Vv! };
}

/**
 * The chunk's own slots grow (Concat of the carried chunk cache and the new token), the start
 * cache stays an outer-scope value: one softmax over [start cache | chunk] scores, two weighted
 * sums — no per-token copy of the start cache, for 5 more nodes per layer.
 */
function splitAttention(
  body: OnnxEmitter,
  ctx: GenerateContext,
  start: LoopStart,
  l: number,
  q: string,
  k: string,
  v: string,
  chunk: { key: string; value: string },
): StepAttention {
  const { g, nkv, grp, d } = ctx;
  const K = body.op1('Concat', [chunk.key, k], { axis: 2 });
  const Vv = body.op1('Concat', [chunk.value, v], { axis: 2 });
  const qg = body.op1('Reshape', [q, body.i64([0, nkv, grp, d])]); // GQA: [B, kv, g, d]
  const sStart = body.op1('Add', [
    body.op1('FusedMatMul', [qg, start.present[l]!.key], { transB: 1 }, MS_DOMAIN),
    start.rowBias,
  ]);
  const sChunk = body.op1('FusedMatMul', [qg, K], { transB: 1 }, MS_DOMAIN);
  const p = body.op1('Softmax', [body.op1('Concat', [sStart, sChunk], { axis: 3 })], {
    axis: -1,
  });
  const pStart = body.op1('Slice', [p, g.i64([0]), start.startLen, g.i64([3])]);
  const pChunk = body.op1('Slice', [p, start.startLen, g.i64([2 ** 62]), g.i64([3])]);
  const o = body.op1('Add', [
    body.op1('MatMul', [pStart, start.present[l]!.value]),
    body.op1('MatMul', [pChunk, Vv]),
  ]);
  return { o, key: K, value: Vv };
}
