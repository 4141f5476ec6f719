import type { Trajectory } from '@flowgrpo/core';

// mask_truncated_completions: a completion cut off at the length limit carries no loss (TRL's
// option; DAPO's overlong filtering). What a "completion" is depends on how the rollout recorded
// itself:
// - policy turns (FlowRollout): each turn is one policy call; a turn that used all
//   `max_completion_length` tokens was cut off, and only that turn is dropped (the others were
//   complete calls and keep their loss);
// - segments (TagAgent, one multi-turn completion): the whole trajectory is the completion; it
//   was cut off when the agent stopped on its token budget (stopReason 'max_tokens') or its last
//   generation used all `max_completion_length` tokens (it ended mid-generation), and then none
//   of it is trained. A generation cut earlier, after which the agent went on, does not make the
//   completion truncated (verl's multi-turn rollouts count only the whole response's length).
// TRL tells truncation by a missing EOS; turns record no finish reason, so the length decides (a
// call that ended on its stop token exactly at the limit counts as cut off, and an agent that
// asks for fewer tokens than `max_completion_length` has its cut calls kept). Dropped rows leave
// the loss's sequence count too, as masked rows do in verl ("active" sequences); TRL's `grpo` and
// `dr_grpo` count them.

/** `t` without the parts cut off at `maxTokens` (see above). */
export function withoutTruncated(t: Trajectory, maxTokens: number): Trajectory {
  if (t.turns) return { ...t, turns: t.turns.filter((u) => u.actionTokens.length < maxTokens) };
  if (!t.segments) return t;
  const last = t.segments.findLast((s) => s.trainable);
  const cut =
    t.stopReason === 'max_tokens' || (last !== undefined && last.tokens.length >= maxTokens);
  return cut ? { ...t, segments: t.segments.map((s) => ({ ...s, trainable: false })) } : t;
}

/**
 * Whether any part of `t` was cut off at `maxTokens` (the rule above): TRL's
 * `completions/clipped_ratio` counts these, and the truncation alarm reads that metric.
 */
export function isTruncated(t: Trajectory, maxTokens: number): boolean {
  if (t.turns) return t.turns.some((u) => u.actionTokens.length >= maxTokens);
  if (!t.segments) return false;
  const last = t.segments.findLast((s) => s.trainable);
  return t.stopReason === 'max_tokens' || (last !== undefined && last.tokens.length >= maxTokens);
}
