// Snippets of docs/guides/agent.md "The prompts" (compiled by the test command). The docs test
// renders every prompt with renderedPrompts() and checks that the guide shows that very text.
import {
  analyzerMessages,
  defaultTagPrompt,
  executorMessages,
  generatorMessages,
  type PromptContext,
  plannerMessages,
  policyPlannerMessages,
  verifierMessages,
} from '@flowgrpo/agent';
import type { ChatMessage } from '@flowgrpo/core';
import { createCalculatorTool, ToolRegistry } from '@flowgrpo/tools';

/** A prompt's messages as the guide prints them: `[role]` then the content. */
export function messagesText(messages: readonly ChatMessage[]): string {
  return messages.map((m) => `[${m.role}]\n${m.content}`).join('\n\n');
}

/** Each public prompt, rendered for the guide's example question. */
export function renderedPrompts(): Record<string, string> {
  // #region prompts
  const tools = new ToolRegistry([createCalculatorTool()]);
  // What the Flow roles see at step 1: the question, the tools, no steps taken yet.
  const context: PromptContext = {
    question: 'What is 12 squared?',
    toolNames: tools.names(),
    toolMetadata: tools.metadataForPlanner(),
    actions: {},
  };
  const planner = policyPlannerMessages(context, 1, 3); // what Flow-GRPO trains (step 1 of 3)
  const tag = defaultTagPrompt('What is 12 squared?', { search: false, tools: tools.list() });
  // An SFT row that matches GRPO: the prompt rendered with the model's chat template, e.g.
  // { prompt: tokenizer.applyChatTemplate(planner, { addGenerationPrompt: true }),
  //   completion: '{"justification": …, "tool_name": "calculator"}' }
  // #endregion prompts
  const step = {
    justification: 'Squaring is arithmetic.',
    context: '12',
    sub_goal: 'Compute 12^2.',
    tool_name: 'calculator',
  };
  return {
    policyPlannerMessages: messagesText(planner),
    defaultTagPrompt: messagesText(tag),
    plannerMessages: messagesText(plannerMessages(context, 1, 3)),
    analyzerMessages: messagesText(analyzerMessages(context)),
    executorMessages: messagesText(
      executorMessages(context, step, tools.metadataForPlanner().calculator),
    ),
    verifierMessages: messagesText(verifierMessages(context)),
    generatorMessages: messagesText(generatorMessages(context)),
  };
}
