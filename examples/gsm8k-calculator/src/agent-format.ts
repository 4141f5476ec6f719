// The book chapter's agent format for GSM8K (seed 003), in our words:
//
//   <think>
//   reasoning, one step per line (GSM8K's solution with its <<48/2=24>> notes removed)
//   Final calculation needed: 18+16+12
//   </think>
//
//   <tool_call>
//   calculator(expression="18+16+12")
//   </tool_call>
//
// Unlike the chapter, the call is executed: the calculator's result comes back as
// <tool_response>46</tool_response> (an observation, never trained on) and the model then states
// the answer ("The final answer is **46**."). A solution without calculator notes is answered
// directly, as the chapter does.
import type { ChatMessage, SampleRow } from '@flowgrpo/core';

export const SYSTEM_PROMPT =
  'You are a careful math assistant. Reason step by step inside <think> </think>. For the ' +
  'final computation call the calculator as <tool_call>calculator(expression="...")</tool_call>; ' +
  'after its result, state the final answer.';

export function promptMessages(question: string): ChatMessage[] {
  return [
    { role: 'system', content: SYSTEM_PROMPT },
    { role: 'user', content: question },
  ];
}

/** The demonstration for one GSM8K row: what the policy should write before and after the tool. */
export interface AgentDemonstration {
  /** `<think>…</think>` and the tool call (or the direct answer when there is no calculation). */
  first: string;
  /** The calculator expression, when there is one. */
  expression?: string;
  /** The answer sentence written after the tool's result. */
  final: string;
}

export function answerSentence(answer: string): string {
  return `The final answer is **${answer}**.`;
}

/** A GSM8K row (normalised by @flowgrpo/core: chain without notes, notes in extra_info). */
export function toDemonstration(row: SampleRow): AgentDemonstration {
  const calculations = (row.extra_info.calculations as string[] | undefined) ?? [];
  const steps = row.chain
    .split('\n')
    .map((l) => l.trim())
    .filter(Boolean)
    .join('\n');
  const last = calculations.at(-1);
  // "18+16+12=46" → "18+16+12" (the chapter takes what stands before the last '=').
  const expression = last === undefined ? undefined : last.slice(0, last.lastIndexOf('='));
  if (!expression)
    return { first: `<think>\n${steps}\n</think>\n\n${answerSentence(row.result)}`, final: '' };
  return {
    first:
      `<think>\n${steps}\nFinal calculation needed: ${expression}\n</think>\n\n` +
      `<tool_call>\ncalculator(expression="${expression}")\n</tool_call>`,
    expression,
    final: answerSentence(row.result),
  };
}

/** `calculator(expression="…")` inside a `<tool_call>` block, if the text has one. */
export function parseCalculatorCall(text: string): string | undefined {
  const block = /<tool_call>([\s\S]*?)<\/tool_call>/.exec(text)?.[1];
  if (block === undefined) return undefined;
  const m = /calculator\(\s*expression\s*=\s*(["'])([\s\S]*?)\1\s*\)/.exec(block);
  return m?.[2];
}

export function toolResponse(result: string): string {
  return `\n<tool_response>\n${result}\n</tool_response>\n`;
}
