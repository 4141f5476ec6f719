// Snippets of docs/guides/grpo.md and docs/grpo-maths.md (compiled by the test command).
import { computeAdvantages, grpoMetrics, klEstimate, tokenPolicyLoss } from '@flowgrpo/grpo';

export function groupAdvantages(): Float64Array {
  // #region advantages
  // Two queries, G = 4 trajectories each: rewards and the group of each trajectory.
  const rewards = Float64Array.of(1, 0, 0, 1, 0.5, 0.5, 0.5, 0.5);
  const groups = Int32Array.of(0, 0, 0, 0, 1, 1, 1, 1);
  const adv = computeAdvantages(rewards, groups, { scale: 'group' });
  // group 0: (r − 0.5) / (std + 1e-6) = ±0.866; group 1 has no variance → all 0
  const m = grpoMetrics({ rewards, groups });
  console.log(m.reward, m.reward_std, m.frac_reward_zero_std); // 0.5, …, 0.5
  // #endregion advantages
  return adv;
}

export function oneToken(): number[] {
  // #region token-loss
  // One token: PPO-clip with asymmetric bounds (DAPO's clip-higher) and the k3 KL estimator.
  const t = tokenPolicyLoss(-1.2, -1.5, 0.8, { clipLow: 0.2, clipHigh: 0.28 });
  // ρ = exp(−1.2 + 1.5) = 1.35 > 1.28 → clipped: loss = −1.28 · 0.8
  const kl = klEstimate(-1.2, -1.1, 'k3'); // exp(ref − logp) − (ref − logp) − 1
  // #endregion token-loss
  return [t.loss, kl];
}
