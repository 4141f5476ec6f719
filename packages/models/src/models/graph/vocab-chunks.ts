import { ConfigError } from '@flowgrpo/core';
import { type GraphBuilder, GraphError, type Value } from '@flowgrpo/graph';

// The target log-probs and entropy of the LM head over a vocabulary split into chunks, so that no
// [rows × V] tensor exists whole: at Qwen2.5's 151,936 tokens and 4,096 rows one such float tensor
// is 2.5 GB, and the unchunked step holds several (logits, their softmax, the gradients).
//
// Forward, chunk j of the head W_j [Vc, H]:  zᵀ_j = W_j·normedᵀ / T  [Vc, N], its log-sum-exp
// lse_j [1, N] and, for the entropy, the chunk's mean logit m_j = Σ softmax_j(z)·z. Then
// lse = LSE_j(lse_j), entropy = lse − Σ_j exp(lse_j − lse)·m_j, and the target's logit is the
// row dot product normed·W[id] / T (a Gather of head rows: no [N, V] one-hot). log p = z_id − lse.
//
// Backward (a hand-written VJP, b.customVjp): ∂ log p/∂z = onehot − softmax(z), so with
// ĝ = g / T per row, ∂L/∂normed = ĝ·(W[id] − Σ_j softmax_jᵀ·W_j), each chunk's logits computed
// again from normed and freed before the next chunk's: the backward never holds more than one
// chunk either. (Liger-Kernel's fused linear cross-entropy and TRL's chunked losses take row
// chunks and finish each row's gradient in the forward; a static ONNX graph has a run-time row
// count but a build-time vocabulary, so here the vocabulary is chunked, and the softmax needs the
// whole row's lse first, so the logits are recomputed, as Apple's Cut Cross-Entropy does.)
//
// Why this layout:
// - Chunks are unrolled, not an ONNX Loop/Scan: ORT's WebGPU EP has no Loop or Scan kernel (If
//   is its only control flow), and strict mode (no CPU fallback) must still load the graph.
// - W_j is every Gemm's A operand ([Vc, N] logits, transposed): ORT's CPU Gemm prepacks its B
//   operand when it is a constant, one packed copy of the head per Gemm; as A it is read in place.
// - Each chunk's Gemm takes a C of zeros made from the previous chunk's last value (its mean
//   logit or its lse; in the backward, the sum so far of ∂L/∂normed, or ĝ before the first
//   chunk): adding 0 changes no bit, and the data dependence
//   makes every topological order ORT may pick finish one chunk before it starts the next, and
//   keeps the backward's Gemm distinct from the forward's (ORT's common-subexpression elimination
//   would merge them back into one value kept alive from the forward to the backward).

/**
 * Vocabulary columns one chunk holds at most (default): a vocabulary this size or smaller is
 * one chunk, and its graph is the unchunked one. Chosen by measurement: at Qwen2.5's 151,936
 * tokens the step's peak stops falling below it (docs/performance.md, "Training memory at the
 * real vocabulary").
 */
export const DEFAULT_VOCAB_CHUNK_SIZE = 16384;

/** How `vocabSize` columns split: `count` chunks of `size` columns, the last possibly narrower. */
export function vocabChunks(
  vocabSize: number,
  maxChunkSize: number = DEFAULT_VOCAB_CHUNK_SIZE,
): { count: number; size: number } {
  if (!Number.isSafeInteger(maxChunkSize) || maxChunkSize < 1)
    throw new ConfigError(
      `vocabChunkSize must be a positive integer (vocabulary columns per chunk), got ${maxChunkSize}`,
      { key: 'vocabChunkSize' },
      {
        hint: `give a whole number of vocabulary columns, or leave it out (${DEFAULT_VOCAB_CHUNK_SIZE})`,
      },
    );
  const count = Math.ceil(vocabSize / maxChunkSize);
  return { count, size: Math.ceil(vocabSize / count) };
}

export interface ChunkedHeadInputs {
  /** The final-normed hidden states of the target rows, [N, H]. */
  normed: Value;
  /** The LM head [V, H] (the tied embedding or lm_head.weight). */
  head: Value;
  /** Target ids [B, K] int64, N = B·K. */
  ids: Value;
  /** [] float. */
  temperature: Value;
}

/**
 * log softmax(normed·headᵀ / T)[id] → [B, K], and with `entropy` the entropy of each row's
 * softmax → [B, K], over `count` vocabulary chunks (see above); differentiable w.r.t. `normed`
 * and `head` through a hand-written VJP. The entropy is a statistic: no gradient flows from it.
 */
export function chunkedTargetLogprobs(
  b: GraphBuilder,
  x: ChunkedHeadInputs,
  chunks: { count: number; size: number },
  o: { entropy: boolean },
): { logprobs: Value; entropy?: Value } {
  const { normed, head, ids, temperature: T } = x;
  const [V, H] = head.shape as [number, number];
  const heads = Array.from({ length: chunks.count }, (_, j) =>
    b.slice(head, [j * chunks.size], [Math.min(V, (j + 1) * chunks.size)], [0]),
  );
  /** zᵀ of chunk j, [Vc, N]; `after`: a [1, N] value of the previous chunk's. */
  const logitsT = (j: number, after: Value | undefined) =>
    b.div(b.gemm(heads[j]!, normed, after && b.zerosLike(after), { transB: true }), T);

  const lses: Value[] = [];
  const means: Value[] = [];
  let last: Value | undefined;
  heads.forEach((_, j) => {
    // log-sum-exp over the chunk's column, as max + log Σ exp(z − max): Max, Exp and Sum have
    // vectorised kernels along the first axis, ORT's ReduceLogSumExp a scalar loop.
    const zT = logitsT(j, last);
    const max = b.reduceMax(zT, [0], true); // [1, N]
    const e = b.exp(b.sub(zT, max));
    const sum = b.reduceSum(e, [0], true);
    const lse = b.add(max, b.log(sum));
    lses.push(lse);
    last = lse;
    if (o.entropy) {
      last = b.div(b.reduceSum(b.mul(e, zT), [0], true), sum); // E_softmax_j[z], [1, N]
      means.push(last);
    }
  });
  const chunkLse = b.concat(lses, 0); // [count, N]
  const lse = b.reduceLogSumExp(chunkLse, [0], true); // [1, N]
  const targetRows = b.gather(head, ids, 0); // [B, K, H]
  const rowsShape = b.shape(targetRows, 0, 2); // [B, K], from a float tensor (WebGPU: no int64 Shape)
  const targetRows2 = b.reshape(targetRows, [-1, H]);
  const zId = b.div(b.reduceSum(b.mul(normed, targetRows2), [1], true), T); // [N, 1]
  const logprobs = b.reshape(b.sub(b.reshape(zId, [1, -1]), lse), rowsShape);
  const entropy = o.entropy
    ? b.reshape(
        b.sub(lse, b.reduceSum(b.mul(b.exp(b.sub(chunkLse, lse)), b.concat(means, 0)), [0], true)),
        rowsShape,
      )
    : undefined;

  b.customVjp({
    name: 'lm_head_chunks',
    inputs: [normed, head],
    outputs: entropy ? [logprobs, entropy] : [logprobs],
    vjp: ({ b, gy, needs }) => {
      if (gy[1])
        throw new GraphError(
          'the chunked LM head gives no gradient of its entropy (a statistic, not a loss term)',
        );
      const g = gy[0];
      if (!g) return [undefined, undefined];
      const gT = b.div(b.reshape(g, [1, -1]), T); // ĝ as a row, [1, N]
      const gCol = b.reshape(gT, [-1, 1]); // [N, 1]
      // With the head trained (full fine-tuning): ∂L/∂W_j = −softmax_j·(ĝ ⊙ normed), and the
      // target rows get ĝ ⊙ normed added (the Gather's gradient).
      const gNormed = needs[1] ? b.mul(gCol, normed) : undefined; // [N, H]
      let accT: Value | undefined; // Σ_j W_jᵀ·softmax_j so far, [H, N]
      const dHeads: Value[] = [];
      heads.forEach((w, j) => {
        const after = accT ? b.slice(accT, [0], [1], [0]) : gT;
        const p = b.exp(b.sub(logitsT(j, after), lse)); // softmax of chunk j, transposed, [Vc, N]
        if (needs[0]) accT = b.gemm(w, p, accT, { transA: true });
        if (gNormed) dHeads.push(b.gemm(p, gNormed));
      });
      return [
        needs[0] ? b.mul(gCol, b.sub(targetRows2, b.transpose(accT!, [1, 0]))) : undefined,
        gNormed
          ? b.scatterND(
              b.neg(b.concat(dHeads, 0)),
              b.unsqueeze(ids, [2]),
              b.reshape(gNormed, b.shape(targetRows)),
              'add',
            )
          : undefined,
      ];
    },
  });
  return { logprobs, ...(entropy && { entropy }) };
}
