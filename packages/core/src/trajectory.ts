import { z } from 'zod';

// Rollout records: a trajectory's turns, tool calls and rewards (docs/architecture.md, "The
// loop"). Token arrays are typed arrays in memory; the schemas accept typed arrays or plain number
// arrays (JSON) and always produce typed arrays.

const int32Array = z
  .union([z.instanceof(Int32Array), z.array(z.number().int())])
  .transform((v) => (v instanceof Int32Array ? v : Int32Array.from(v)));
const float32Array = z
  .union([z.instanceof(Float32Array), z.array(z.number())])
  .transform((v) => (v instanceof Float32Array ? v : Float32Array.from(v)));

export const SegmentKindSchema = z.enum(['prompt', 'action', 'observation']);
export type SegmentKind = z.infer<typeof SegmentKindSchema>;

/** A run of tokens in a single-policy trajectory; only `trainable` ones carry loss. */
export const TokenSegmentSchema = z.object({
  tokens: int32Array,
  logprobs: float32Array.optional(),
  trainable: z.boolean(),
  kind: SegmentKindSchema,
});
export type TokenSegment = z.infer<typeof TokenSegmentSchema>;
export type TokenSegmentInput = z.input<typeof TokenSegmentSchema>;

/** One policy call: the planner's prompt, its sampled action and what the action led to. */
export const TurnSchema = z.object({
  index: z.number().int().nonnegative(),
  promptTokens: int32Array,
  actionTokens: int32Array,
  /** Log-probabilities of actionTokens under the sampling policy (same length). */
  actionLogprobs: float32Array,
  /** Prompt as text (the chat messages rendered), for logs and re-tokenisation. */
  promptText: z.string().optional(),
  /** The action as text. */
  text: z.string(),
  toolName: z.string().optional(),
  toolInput: z.unknown().optional(),
  toolResult: z.string().optional(),
  /** False when the action could not be parsed; the turn still trains (the seed's choice). */
  parsed: z.boolean().default(true),
  /** Filled in by the trainer: the trajectory's advantage broadcast to this turn. */
  advantage: z.number().optional(),
});
export type Turn = z.infer<typeof TurnSchema>;
export type TurnInput = z.input<typeof TurnSchema>;

export const StopReasonSchema = z.enum([
  'answer',
  'verifier_stop',
  'max_turns',
  'max_tokens',
  'parse_error',
  'timeout',
  'error',
]);
export type StopReason = z.infer<typeof StopReasonSchema>;

export const TimingsSchema = z.record(z.string(), z.number());

export const TrajectorySchema = z.object({
  queryId: z.string(),
  groupId: z.string(),
  /** Flow rollouts record planner turns... */
  turns: z.array(TurnSchema).optional(),
  /** ...single-policy (tag agent) rollouts record token segments. */
  segments: z.array(TokenSegmentSchema).optional(),
  question: z.string().optional(),
  groundTruth: z.string().optional(),
  finalAnswer: z.string(),
  reward: z.number().optional(),
  advantage: z.number().optional(),
  stopReason: StopReasonSchema,
  /** Milliseconds spent per phase (e.g. planner, tools, verifier, judge). */
  timings: TimingsSchema.default({}),
  metadata: z.record(z.string(), z.unknown()).optional(),
});
export type Trajectory = z.infer<typeof TrajectorySchema>;
export type TrajectoryInput = z.input<typeof TrajectorySchema>;

/** The G trajectories sampled for one query. */
export const GroupSchema = z.object({
  groupId: z.string(),
  queryId: z.string(),
  trajectories: z.array(TrajectorySchema),
});
export type Group = z.infer<typeof GroupSchema>;
