import { onnxTensor } from '@flowgrpo/graph';
import { D, F, type GenerateContext, I32, I64 } from './generate-context.js';
import type { OnnxEmitter } from './onnx-emitter.js';

// Sampling inside the `generate` graph, in float64, as sampling.ts does it on the host: greedy =
// the most likely token (first on ties) with the logprob at T = 1; otherwise the inverse CDF of
// softmax(logits / T) at a uniform the host draws from the row's own RNG. The logprob is
// log softmax(logits / T) of the chosen token over the full vocabulary. And the stop check: which
// rows drew one of their stop tokens.

/** The run's sampling inputs. */
export interface SamplingInputs {
  /** [B] float64, 0 = greedy. */
  temperature: string;
  /** [] bool: some row samples (false: every row is greedy, a shorter branch). */
  anySampled: string;
}

export interface Sample {
  /** [B] int32. */
  token: string;
  /** [B] float32. */
  logprob: string;
  /** [B, 1] int64: the token as an index (for the stop table). */
  index: string;
}

/** A token per row from logits [B, V] and this step's uniforms u [B]. */
export function sampleTokens(
  e: OnnxEmitter,
  ctx: GenerateContext,
  s: SamplingInputs,
  logits: string,
  u: string,
): Sample {
  const greedy = greedyBranch(e, ctx, logits);
  const sampled = sampledBranch(e, ctx, s, logits, u);
  const [token, logprob, index] = e.op(
    'If',
    [s.anySampled],
    {
      then_branch: { graph: sampled.graph('sample') },
      else_branch: { graph: greedy.graph('argmax') },
    },
    { outputs: 3 },
  );
  return { token: token!, logprob: logprob!, index: index! };
}

/** Greedy-only runs (the host knows): the most likely token and a float32 log-softmax. */
function greedyBranch(e: OnnxEmitter, ctx: GenerateContext, logits: string): OnnxEmitter {
  const b = e.body(`${e.name('greedy')}/`);
  const idx = best(b, logits);
  const lp = logprobAt(b, ctx, b.op1('LogSoftmax', [logits], { axis: 1 }), idx);
  b.output(b.op1('Cast', [b.op1('Squeeze', [idx, ctx.axisLast])], { to: I32 }), I32, ['batch']);
  b.output(lp, F, ['batch']);
  b.output(idx, I64, ['batch', 1]);
  return b;
}

/** Rows at T > 0 draw by inverse CDF in float64; greedy rows of the batch take the best. */
function sampledBranch(
  e: OnnxEmitter,
  ctx: GenerateContext,
  s: SamplingInputs,
  logits: string,
  u: string,
): OnnxEmitter {
  const { axis1, axisLast, V } = ctx;
  const b = e.body(`${e.name('sampled')}/`);
  const isGreedy = b.op1('Equal', [s.temperature, b.f64([0], [])]);
  const t = b.op1('Where', [isGreedy, b.f64([1], []), s.temperature]);
  const x = b.op1('Div', [b.op1('Cast', [logits], { to: D }), b.op1('Unsqueeze', [t, axisLast])]);
  const logp = b.op1('LogSoftmax', [x], { axis: 1 }); // float64 [B, V]
  const cdf = b.op1('CumSum', [b.op1('Exp', [logp]), b.i32([1], [])]);
  const below = b.op1('LessOrEqual', [cdf, b.op1('Unsqueeze', [u, axisLast])]);
  const drawn = b.op1('Min', [
    b.op1('ReduceSum', [b.op1('Cast', [below], { to: I64 }), axis1], { keepdims: 1 }),
    b.i64([V - 1], []),
  ]); // [B, 1]
  const idx = b.op1('Where', [b.op1('Unsqueeze', [isGreedy, axisLast]), best(b, logits), drawn]);
  const lp = b.op1('Cast', [logprobAt(b, ctx, logp, idx)], { to: F });
  b.output(b.op1('Cast', [b.op1('Squeeze', [idx, axisLast])], { to: I32 }), I32, ['batch']);
  b.output(lp, F, ['batch']);
  b.output(idx, I64, ['batch', 1]);
  return b;
}

/** The most likely token, [B, 1] int64: TopK with k = 1 (the first on ties, as ArgMax, and faster). */
function best(b: OnnxEmitter, logits: string): string {
  return b.op('TopK', [logits, b.i64([1])], { axis: 1 }, { outputs: 2 })[1]!;
}

/** logp[b, idx[b]] as [B]. */
function logprobAt(b: OnnxEmitter, ctx: GenerateContext, logp: string, idx: string): string {
  return b.op1('Squeeze', [b.op1('GatherElements', [logp, idx], { axis: 1 }), ctx.axisLast]);
}

/**
 * Per row, 1 at its stop tokens: [B, V + 1] int32, built once per run from stop_ids [B, N] (the
 * −1 padding lands in the extra column V, which no token reads).
 */
export function stopTable(ctx: GenerateContext, stopIds: string): string {
  const { g, V } = ctx;
  const stopIdx = g.op1(
    'Cast',
    [g.op1('Where', [g.op1('Less', [stopIds, g.i32([0], [])]), g.i32([V], []), stopIds])],
    { to: I64 },
  );
  return g.op1(
    'ScatterElements',
    [
      g.op1(
        'ConstantOfShape',
        [
          g.op1(
            'Concat',
            [g.op1('Gather', [g.op1('Shape', [stopIds]), g.i64([0])], { axis: 0 }), g.i64([V + 1])],
            {
              axis: 0,
            },
          ),
        ],
        { value: { tensor: onnxTensor('', Int32Array.of(0), [1]) } },
      ),
      stopIdx,
      g.op1('Expand', [g.i32([1], []), g.op1('Shape', [stopIdx])]),
    ],
    { axis: 1 },
  );
}

/** Rows that drew a stop token ([B, 1] int32), or-ed with `before`; and "some row is not done". */
export function stopCheck(
  e: OnnxEmitter,
  ctx: GenerateContext,
  table: string,
  index: string,
  before?: string,
): { done: string; more: string } {
  const hit = e.op1('GatherElements', [table, index], { axis: 1 });
  const done = before ? e.op1('Max', [hit, before]) : hit;
  const more = e.op1('Equal', [e.op1('ReduceMin', [done], { keepdims: 0 }), ctx.g.i32([0], [])]);
  return { done, more };
}
