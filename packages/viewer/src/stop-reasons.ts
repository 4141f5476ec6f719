import type { StopReason } from '@flowgrpo/core';

// What each stop reason of a rollout (core's StopReason) means and what to look at, for every
// place one is shown: the viewer's rollouts table and token view (a tooltip, and a legend of the
// reasons on the page) and report.html's trajectories. Keyed by StopReason, so a new reason in
// core fails to compile here until it is explained.

export interface StopReasonHelp {
  /** What ended the rollout. */
  meaning: string;
  /** Where to look when it is not what was expected. */
  look: string;
}

export const STOP_REASONS: Record<StopReason, StopReasonHelp> = {
  answer: {
    meaning: 'the policy gave its final answer (a tag agent: a complete <answer>…</answer> block)',
    look: 'the reward against the ground truth; a wrong answer that scores is a reward to tighten',
  },
  verifier_stop: {
    meaning:
      'the Flow verifier judged the memory enough to answer, and the answer generator wrote it',
    look: 'whether the tool results so far really answer the question (a verifier that stops early)',
  },
  max_turns: {
    meaning:
      'every turn allowed (max_turns) was used without an answer; a Flow rollout then answers from its memory, a tag agent has none',
    look: 'turns that repeat a tool call or never reach <answer>; raise max_turns, or reward answering sooner',
  },
  max_tokens: {
    meaning:
      'the token budget ran out (max_completion_length or the agent’s total); the completion was cut',
    look: 'the last action: a cut completion’s reward is noise; raise the limit or set mask_truncated_completions (the truncation alarm)',
  },
  parse_error: {
    meaning:
      'the policy’s reply could not be parsed: it ended without a complete <answer>, <tool_call> or <search> block (a tag agent), or its step was not valid JSON (a Flow planner)',
    look: 'the end of the last action, token by token: a misspelt or unclosed tag, or prose instead of JSON; completions/format_ratio and the format_collapse alarm track how often',
  },
  timeout: {
    meaning: 'the rollout ran out of time',
    look: 'the slow part in the metadata’s timings (a tool, the engine); raise tool_timeout_s or the engine’s timeout',
  },
  error: {
    meaning: 'a call failed (the engine, a tool, the agent program) and the rollout stopped',
    look: 'the error column and the metadata’s errors (code, message, fix)',
  },
};

/** The help of a stop reason, or undefined for one this version does not know. */
export function stopReasonHelp(reason: string): StopReasonHelp | undefined {
  return Object.hasOwn(STOP_REASONS, reason) ? STOP_REASONS[reason as StopReason] : undefined;
}

/** "meaning. Look at: …" — one line for a tooltip. */
export function stopReasonTitle(reason: string): string {
  const h = stopReasonHelp(reason);
  return h ? `${reason}: ${h.meaning}. Look at: ${h.look}.` : `${reason}: (no description)`;
}
