import type { ChatMessage } from '@flowgrpo/core';
import type { MemoryAction } from '../memory/memory.js';
import { type NextStep, NO_TOOL, type QueryAnalysis } from './schemas.js';

// Our prompts for the Flow roles. They carry the same inputs as the seeds' (query, tool names,
// tool metadata, the memory as JSON, the analysis) and ask for the same fields; the wording is
// ours. Each builder returns chat messages so any engine can render them. They are public so
// that SFT data can be built with exactly the text GRPO's rollouts will show the model
// (docs/guides/agent.md shows each one rendered for an example question).

/** What every role prompt may show about the run. */
export interface PromptContext {
  question: string;
  toolNames: readonly string[];
  /** Per-tool metadata in the seeds' get_metadata() shape. */
  toolMetadata: Record<string, unknown>;
  analysis?: QueryAnalysis;
  actions: Record<string, MemoryAction>;
}

const SYSTEM =
  'You are one role in a team of agents that solves a question step by step with tools. ' +
  'Be precise and brief.';

function json(value: unknown, indent?: number): string {
  return JSON.stringify(value, null, indent);
}

function analysisText(analysis: QueryAnalysis | undefined): string {
  if (!analysis) return '(no analysis available)';
  return [
    `Summary: ${analysis.concise_summary}`,
    `Required skills: ${analysis.required_skills}`,
    `Relevant tools: ${analysis.relevant_tools}`,
    `Additional considerations: ${analysis.additional_considerations}`,
  ].join('\n');
}

function historyText(actions: Record<string, MemoryAction>): string {
  return Object.keys(actions).length === 0 ? '(none yet)' : json(actions);
}

/**
 * The query analyst's prompt (FlowSolver's optional first call): asks for the QueryAnalysis
 * fields (concise_summary, required_skills, relevant_tools, additional_considerations).
 */
export function analyzerMessages(c: PromptContext): ChatMessage[] {
  return [
    { role: 'system', content: SYSTEM },
    {
      role: 'user',
      content: [
        'Role: query analyst. Study the question before any tool is used.',
        '',
        `Question: ${c.question}`,
        `Tools that can be used: ${json(c.toolNames)}`,
        `What each tool does:\n${json(c.toolMetadata, 2)}`,
        '',
        'Write:',
        '- concise_summary: what is being asked, in one or two sentences;',
        '- required_skills: the skills the answer needs and why each one matters;',
        '- relevant_tools: the tools that could help, each with how it helps;',
        '- additional_considerations: pitfalls, units, ambiguities or answer format to watch.',
      ].join('\n'),
    },
  ];
}

function plannerInstructions(c: PromptContext, step: number, maxSteps: number): string {
  return [
    'Role: planner. Decide the single next action.',
    '',
    `Question: ${c.question}`,
    `Analysis of the question:\n${analysisText(c.analysis)}`,
    `Tools that can be used: ${json(c.toolNames)}`,
    `What each tool does:\n${json(c.toolMetadata, 2)}`,
    `Steps taken so far: ${historyText(c.actions)}`,
    `This is step ${step} of at most ${maxSteps}.`,
    '',
    'Pick exactly one tool for the next step and give it one concrete, reachable sub-goal.',
    'Write:',
    '- justification: why this tool and this sub-goal now;',
    '- context: every fact, number or earlier result the tool needs, written out in full;',
    '- sub_goal: what this one tool call must achieve;',
    `- tool_name: the exact name of one tool above, or "${NO_TOOL}" when the steps so far already ` +
      'answer the question (then put the answer in context and write "Final Answer" as sub_goal).',
  ].join('\n');
}

/**
 * The planner's prompt for an engine with structured output (FlowSolver): the question, the
 * analysis, the tools, the steps so far, and the NextStep fields to write. `step` counts from 1.
 */
export function plannerMessages(c: PromptContext, step: number, maxSteps: number): ChatMessage[] {
  return [
    { role: 'system', content: SYSTEM },
    { role: 'user', content: plannerInstructions(c, step, maxSteps) },
  ];
}

/**
 * The trainable planner's prompt (FlowRollout's default `plannerPrompt`, the one Flow-GRPO
 * trains): the planner's instructions plus the JSON object to reply with, spelled out because no
 * response_format reaches a policy server. The rollouts record it rendered (`Turn.promptText`).
 */
export function policyPlannerMessages(
  c: PromptContext,
  step: number,
  maxSteps: number,
): ChatMessage[] {
  const example = {
    justification: 'why this tool and this sub-goal',
    context: 'the facts the tool needs',
    sub_goal: 'what the tool call must achieve',
    tool_name: c.toolNames[0] ?? NO_TOOL,
  };
  return [
    { role: 'system', content: SYSTEM },
    {
      role: 'user',
      content: [
        plannerInstructions(c, step, maxSteps),
        '',
        'Reply with one JSON object and nothing else, with exactly these keys:',
        json(example),
      ].join('\n'),
    },
  ];
}

/**
 * The executor's prompt. As in the seeds it shows the sub-goal and the planner's data; with
 * `showMemory` it also shows the steps so far, so a sub-goal may refer to an earlier result
 * ("the year found") instead of the planner copying it out (useful for small planners).
 */
export function executorMessages(
  c: PromptContext,
  next: NextStep,
  toolMetadata: unknown,
  options: { showMemory?: boolean } = {},
): ChatMessage[] {
  return [
    { role: 'system', content: SYSTEM },
    {
      role: 'user',
      content: [
        'Role: executor. Turn the planned step into the arguments of one tool call.',
        '',
        `Question: ${c.question}`,
        `Sub-goal: ${next.sub_goal}`,
        `Tool: ${next.tool_name}`,
        `Tool description and inputs:\n${json(toolMetadata, 2)}`,
        `Data from the planner: ${next.context}`,
        ...(options.showMemory ? [`Steps taken and their results: ${historyText(c.actions)}`] : []),
        '',
        'Write:',
        '- analysis: which inputs the tool needs and where their values come from;',
        '- explanation: how these arguments achieve the sub-goal;',
        '- arguments: the tool input object, with every value written out exactly (no ' +
          'placeholders, no references to earlier steps).',
      ].join('\n'),
    },
  ];
}

/** The verifier's prompt: is the work so far enough to answer? (`analysis`, `stop_signal`). */
export function verifierMessages(c: PromptContext): ChatMessage[] {
  return [
    { role: 'system', content: SYSTEM },
    {
      role: 'user',
      content: [
        'Role: verifier. Judge whether the work so far is enough to answer the question.',
        '',
        `Question: ${c.question}`,
        `Tools that can be used: ${json(c.toolNames)}`,
        `What each tool does:\n${json(c.toolMetadata, 2)}`,
        `Analysis of the question:\n${analysisText(c.analysis)}`,
        `Steps taken and their results: ${historyText(c.actions)}`,
        '',
        'Check that every part of the question is covered by a result, that the results are ' +
          'consistent, and whether an unused tool could still supply something missing.',
        'Write:',
        '- analysis: what is covered, what is missing or doubtful;',
        '- stop_signal: true when the results are sufficient to answer, false when more steps are needed.',
      ].join('\n'),
    },
  ];
}

/** The final writer's prompt: a step-by-step summary, then a last line `Answer: …`. */
export function generatorMessages(c: PromptContext): ChatMessage[] {
  return [
    { role: 'system', content: SYSTEM },
    {
      role: 'user',
      content: [
        'Role: final writer. Answer the question from the work done.',
        '',
        `Question: ${c.question}`,
        `Analysis of the question:\n${analysisText(c.analysis)}`,
        `Steps taken and their results: ${historyText(c.actions)}`,
        '',
        'First summarise, step by step, how the results lead to the answer. Then give the answer ' +
          'itself, short and exact, on a last line starting with "Answer:".',
      ].join('\n'),
    },
  ];
}

/**
 * A short text prompt for a small trainable planner (the shape of the seed's training prompt:
 * query, tool names, previous steps, the four fields), to be continued with the JSON object.
 */
export function compactPlannerPrompt(c: PromptContext, step: number, maxSteps: number): string {
  return [
    'Task: choose the next step to answer the query, as one JSON object with the keys',
    `justification, context, sub_goal, tool_name (one of ${json([...c.toolNames, NO_TOOL])}; ` +
      `"${NO_TOOL}" with sub_goal "Final Answer" and the answer in context to finish).`,
    `Query: ${c.question}`,
    `Previous steps: ${json(c.actions)}`,
    `Step ${step} of ${maxSteps}.`,
    'Response:',
  ].join('\n');
}
