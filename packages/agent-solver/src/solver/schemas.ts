import type { Tool } from '@flowgrpo/tools';
import { z } from 'zod';

// The roles' structured outputs, with the seeds' field names so prompts, logs and datasets line
// up with AgentFlow's. Only the executor departs from the seed: instead of a Python code string
// (which the seed exec()s), it returns `arguments` checked by the chosen tool's own input schema.

export const QueryAnalysisSchema = z.object({
  concise_summary: z.string(),
  required_skills: z.string(),
  relevant_tools: z.string(),
  additional_considerations: z.string(),
});
export type QueryAnalysis = z.infer<typeof QueryAnalysisSchema>;

/** The planner's tool name meaning "no tool: answer now". */
export const NO_TOOL = 'None';

export interface NextStep {
  justification: string;
  context: string;
  sub_goal: string;
  tool_name: string;
}

// The schemas below are built once per tool set and per tool input schema, not per call: zod
// compiles an object schema on its first parse, and a run asks for them on every planner and
// executor turn of every rollout. A process meets few tool sets.
const nextStepSchemas = new Map<string, z.ZodType<NextStep>>();
const toolCommandSchemas = new WeakMap<z.ZodType, z.ZodType<ToolCommand<never>>>();

/** NextStep with `tool_name` restricted to the run's enabled tools plus `None`. */
export function nextStepSchema(toolNames: readonly string[]): z.ZodType<NextStep> {
  const names = [...new Set([...toolNames, NO_TOOL])] as [string, ...string[]];
  const key = JSON.stringify(names);
  let schema = nextStepSchemas.get(key);
  if (!schema) {
    schema = z.object({
      justification: z.string(),
      context: z.string(),
      sub_goal: z.string(),
      tool_name: z.enum(names),
    });
    nextStepSchemas.set(key, schema);
  }
  return schema;
}

/** NextStep with any tool name: how a trainable planner's free text is read (unknown names are
 * then reported to it as a failed step rather than rejected as unparseable). */
export const LooseNextStepSchema = z.object({
  justification: z.string().default(''),
  context: z.string().default(''),
  sub_goal: z.string(),
  tool_name: z.string(),
});

/**
 * The planner wants to stop and answer: it chose no tool, or (the seed's rule) its sub-goal is the
 * final answer.
 */
export function isFinalAnswerStep(step: NextStep): boolean {
  const tool = step.tool_name.trim().toLowerCase();
  return tool === 'none' || tool === '' || step.sub_goal.toLowerCase().includes('final answer');
}

export const MemoryVerificationSchema = z.object({
  analysis: z.string(),
  stop_signal: z.boolean(),
});
export type MemoryVerification = z.infer<typeof MemoryVerificationSchema>;

export interface ToolCommand<I = unknown> {
  analysis: string;
  explanation: string;
  arguments: I;
}

/** The executor's output for one tool: its reasoning plus arguments valid for that tool. */
export function toolCommandSchema<I>(tool: Tool<I>): z.ZodType<ToolCommand<I>> {
  let schema = toolCommandSchemas.get(tool.inputSchema);
  if (!schema) {
    schema = z.object({
      analysis: z.string(),
      explanation: z.string(),
      arguments: tool.inputSchema,
    }) as unknown as z.ZodType<ToolCommand<never>>;
    toolCommandSchemas.set(tool.inputSchema, schema);
  }
  return schema as unknown as z.ZodType<ToolCommand<I>>;
}

/** The schema names sent as `json_schema.name`, one per role. */
export const SCHEMA_NAMES = {
  analyzer: 'QueryAnalysis',
  planner: 'NextStep',
  executor: 'ToolCommand',
  verifier: 'MemoryVerification',
} as const;
