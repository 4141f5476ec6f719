// Snippets of packages/grpo-math/README.md (compiled by the test command).
import {
  computeAdvantages,
  type FloatArray,
  grpoLoss,
  grpoMetrics,
  type IndexArray,
  type MaskArray,
  type PackedTokens as PublishedPackedTokens,
} from '@flowgrpo/grpo';

// #region packed-tokens
interface PackedTokens {
  mask: MaskArray; // Uint8Array | number[]: N tokens, 1 = trainable
  seqIndex: IndexArray; // Int32Array | Uint32Array | number[]: each token's sequence, in [0, numSeqs)
  turnIndex?: IndexArray; // turn within its trajectory (needed by 'flow')
  numSeqs?: number; // default max(seqIndex) + 1
}
// #endregion packed-tokens

// The README's declaration is the package's, member for member (a compile error otherwise).
type Equal<A, B> =
  (<T>() => T extends A ? 1 : 2) extends <T>() => T extends B ? 1 : 2 ? true : false;
export const samePackedTokens: Equal<PackedTokens, PublishedPackedTokens> = true;

export function example(
  rewards: FloatArray,
  layout: PackedTokens,
  logp: FloatArray,
  oldLogp: FloatArray,
  refLogp: FloatArray,
): number {
  // #region example
  // rewards: one per trajectory, G = 8 in a row per query; layout, logp, oldLogp, refLogp: per token
  const groupSize = 8;
  const A = computeAdvantages(rewards, groupSize, { scale: 'group' });
  const r = grpoLoss(
    { layout, logp, oldLogp, refLogp, seqAdvantages: A },
    { aggregation: 'flow', clipLow: 0.2, clipHigh: 0.28, beta: 0.001 },
  );
  const metrics = grpoMetrics({ rewards, groups: groupSize, loss: r }); // reward, kl, clip_ratio/…
  // r.loss, and r.weights to feed to the train graph
  // #endregion example
  return r.loss + metrics.reward!;
}
