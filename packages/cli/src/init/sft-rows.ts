import { defaultTagPrompt, type PromptContext, policyPlannerMessages } from '@flowgrpo/agent';
import type { ChatMessage } from '@flowgrpo/core';
import { createCalculatorTool, ToolRegistry } from '@flowgrpo/tools';

// The SFT rows `flowgrpo init` writes beside the plain {question, answer} rows: TRL's
// conversational format ({messages}), whose prompt messages are the very ones the template's
// agent sends in GRPO (the agents' public prompt functions, or the agent program's prompt.txt),
// so SFT teaches the model the replies GRPO will then reward. The SFT trainer renders them with
// the model's chat template, as the rollouts do.

export interface PlainRow {
  question: string;
  answer: string;
}

/** GSM8K's reference: the number after the last "####" (the whole answer when there is none). */
export function finalAnswer(answer: string): string {
  const at = answer.lastIndexOf('####');
  return (at < 0 ? answer : answer.slice(at + 4)).trim();
}

/** The worked step of a GSM8K answer, "12 + 7" from "… <<12+7=19>>19 …" (else the answer). */
function expression(answer: string): string {
  return /<<([^=]+)=/.exec(answer)?.[1] ?? finalAnswer(answer);
}

/** The tag agent (calculator only) answering at once: <think> with the sum, then <answer>. */
export function tagAgentRow(row: PlainRow): { messages: ChatMessage[] } {
  const prompt = defaultTagPrompt(row.question, {
    search: false,
    tools: [createCalculatorTool()],
  });
  const reply = `<think>${expression(row.answer)} = ${finalAnswer(row.answer)}</think>\n<answer>${finalAnswer(row.answer)}</answer>`;
  return { messages: [...prompt, { role: 'assistant', content: reply }] };
}

/** The Flow planner's first step (FlowRollout's prompt, calculator only): the JSON it replies. */
export function flowPlannerRow(row: PlainRow, maxTurns: number): { messages: ChatMessage[] } {
  const tools = new ToolRegistry([createCalculatorTool()]);
  const context: PromptContext = {
    question: row.question,
    toolNames: tools.names(),
    toolMetadata: tools.metadataForPlanner(),
    actions: {},
  };
  const reply = JSON.stringify({
    justification: 'the question needs one arithmetic step',
    context: row.question,
    sub_goal: `compute ${expression(row.answer)}`,
    tool_name: 'calculator',
  });
  return {
    messages: [
      ...policyPlannerMessages(context, 1, maxTurns),
      { role: 'assistant', content: reply },
    ],
  };
}

/** The gateway template's agent program: its system prompt (prompt.txt), the question, the number. */
export function agentProgramRow(row: PlainRow, systemPrompt: string): { messages: ChatMessage[] } {
  return {
    messages: [
      { role: 'system', content: systemPrompt },
      { role: 'user', content: row.question },
      { role: 'assistant', content: finalAnswer(row.answer) },
    ],
  };
}
