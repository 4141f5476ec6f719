import { compactPlannerPrompt, type PromptContext } from '@flowgrpo/agent';
import type { ChatMessage, Rng } from '@flowgrpo/core';
import { createCalculatorTool, ToolRegistry } from '@flowgrpo/tools';

// The SFT rows `flowgrpo init` writes beside the plain {question, answer} rows: the logs of an
// imperfect teacher, as a user's logs of an earlier agent would be. The teacher reads the worked
// step of each GSM8K answer (<<7*68=476>>) and solves it with the calculator — except on
// multiplications, which it answers from memory four times in five, and its memory is off (476 →
// 480). SFT imitates it, so the SFT model's greedy move on a multiplication is the teacher's
// majority move: answer from memory, wrongly. GRPO samples the SFT model, finds the calculator on
// the fifth of the samples that use it, and is paid for it (the demo's recipe: docs/demo.md).
//
// Each row holds exactly the text the template's agent shows the model in GRPO and the reply it
// wants back: TRL's conversational rows ({messages}) for the tag agent and the agent program,
// TRL's prompt-completion rows (one per planner turn) for the Flow planner, whose prompt is text.

export interface PlainRow {
  question: string;
  answer: string;
}

/** GSM8K's reference: the number after the last "####" (the whole answer when there is none). */
export function finalAnswer(answer: string): string {
  const at = answer.lastIndexOf('####');
  return (at < 0 ? answer : answer.slice(at + 4)).trim();
}

/** The worked step of a GSM8K answer: "7*68" and "*" from "… <<7*68=476>>476 …". */
export function workedStep(row: PlainRow): { expression: string; op: string; result: string } {
  const note = /<<([^=]+)=([^>]+)>>/.exec(row.answer);
  const expression = note?.[1]?.trim() ?? finalAnswer(row.answer);
  const op = /[-+*/]/.exec(expression.replace(/^-/, ''))?.[0] ?? '';
  return { expression, op, result: finalAnswer(row.answer) };
}

/** How often the teacher answers a multiplication from memory instead of with the calculator. */
export const MEMORY_RATE = 0.8;

/** A wrong answer from memory: the result rounded to tens, or 10 more when it is a multiple of 10. */
export function misremembered(result: string): string {
  const n = Number(result);
  if (!Number.isFinite(n)) return `${result}0`;
  const rounded = Math.round(n / 10) * 10;
  return String(rounded === n ? n + 10 : rounded);
}

/** The teacher's move on a row: the calculator on the worked step, or an answer from memory. */
export function teacherMove(
  row: PlainRow,
  rng: Rng,
):
  | { tool: true; expression: string; op: string; result: string }
  | { tool: false; answer: string } {
  const step = workedStep(row);
  if (step.op === '*' && rng.next() < MEMORY_RATE)
    return { tool: false, answer: misremembered(step.result) };
  return { tool: true, ...step };
}

/** The tag agent's prompt with the template's system prompt (run-agent.ts, tagPrompt). */
function tagMessages(question: string, systemPrompt: string): ChatMessage[] {
  return [
    { role: 'system', content: systemPrompt },
    { role: 'user', content: `Question: ${question}` },
  ];
}

/**
 * The tag agent's rollout as one assistant message: the tool call, the calculator's output as the
 * agent appends it, the answer. Rendered with the chat template it is token for token the
 * sequence the agent builds (the tool output is a real calculator result; it is in the loss, as
 * in any SFT row whose assistant text holds it, but never sampled: the agent stops at
 * </tool_call>).
 */
export function tagAgentRow(
  row: PlainRow,
  systemPrompt: string,
  rng: Rng,
): { messages: ChatMessage[] } {
  const move = teacherMove(row, rng);
  const reply = move.tool
    ? `<tool_call>{"name": "calculator", "arguments": {"expression": "${move.expression}"}}</tool_call>` +
      `\n<tool_response>\n${move.result}\n</tool_response>\n<answer>${move.result}</answer>`
    : `<answer>${move.answer}</answer>`;
  return {
    messages: [...tagMessages(row.question, systemPrompt), { role: 'assistant', content: reply }],
  };
}

/** The sub-goal the Flow planner writes for an operation (the offline executor grounds it). */
export const SUB_GOALS: Record<string, string> = {
  '+': 'add the numbers',
  '-': 'subtract the numbers',
  '*': 'multiply the numbers',
  '/': 'divide the numbers',
};

/**
 * The Flow planner's turns (FlowRollout with planner_prompt "compact" and the offline roles): the
 * calculator with the operation's sub-goal, then "Final Answer" (the generator answers with the
 * result); or at once "Final Answer" with the answer from memory in context.
 */
export function flowPlannerRows(
  row: PlainRow,
  maxTurns: number,
  rng: Rng,
): { prompt: string; completion: string }[] {
  const tools = new ToolRegistry([createCalculatorTool()]);
  const context = (actions: PromptContext['actions']): PromptContext => ({
    question: row.question,
    toolNames: tools.names(),
    toolMetadata: tools.metadataForPlanner(),
    actions,
  });
  const done = (answer?: string) =>
    JSON.stringify({
      ...(answer && { context: answer }),
      sub_goal: 'Final Answer',
      tool_name: 'None',
    });
  const move = teacherMove(row, rng);
  if (!move.tool)
    return [
      { prompt: compactPlannerPrompt(context({}), 1, maxTurns), completion: done(move.answer) },
    ];
  const subGoal = SUB_GOALS[move.op] ?? move.expression;
  const step = {
    tool_name: 'calculator',
    sub_goal: subGoal,
    command: { expression: move.expression },
    result: move.result,
  };
  return [
    {
      prompt: compactPlannerPrompt(context({}), 1, maxTurns),
      completion: JSON.stringify({ sub_goal: subGoal, tool_name: 'calculator' }),
    },
    {
      prompt: compactPlannerPrompt(context({ 'Action Step 1': step }), 2, maxTurns),
      completion: done(),
    },
  ];
}

/** The operation word the gateway template's agent program asks for (agent.ts). */
export const OPERATION_WORDS: Record<string, string> = {
  '+': 'add',
  '-': 'subtract',
  '*': 'multiply',
};

/**
 * The gateway template's agent program (agent.ts): its system prompt (prompt.txt), the question,
 * and the reply — the operation, which the program then applies to the question's numbers, or
 * "answer N" from memory. (A bare number would not do as the teacher's mistake: its first token
 * would be one of ten digits, each less likely than "multiply", and greedy decoding would pick
 * the operation the teacher chose only a third of the time.)
 */
export function agentProgramRow(
  row: PlainRow,
  systemPrompt: string,
  rng: Rng,
): { messages: ChatMessage[] } {
  const move = teacherMove(row, rng);
  const reply = move.tool ? (OPERATION_WORDS[move.op] ?? move.expression) : `answer ${move.answer}`;
  return {
    messages: [
      { role: 'system', content: systemPrompt },
      { role: 'user', content: row.question },
      { role: 'assistant', content: reply },
    ],
  };
}
