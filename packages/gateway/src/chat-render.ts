import type { ChatMessage } from '@flowgrpo/core';
import type { Tokenizer } from '@flowgrpo/models';
import { badRequest } from './errors.js';
import { TOOL_CALL_OPEN } from './tool-calls.js';
import { contentText, type WireMessage, type WireTool, type WireToolChoice } from './wire.js';

// OpenAI chat messages → the model's prompt text, through the model's own chat template (as vLLM
// and transformers render them): `tools` go to the template as its `tools` variable, assistant
// `tool_calls` and `tool` messages as the template expects them. A template that knows nothing
// of tools (the tiny models' plain ChatML) gets them the way Qwen2.5's template writes them — a
// system block listing the functions, `<tool_call>` blocks in assistant turns, tool results as
// `<tool_response>` in a user turn — so a tool-using agent runs on any model.
//
// tool_choice: 'none' leaves the tools out of the prompt; 'required' and a named function
// cannot constrain decoding here, so the assistant turn is started for the model with the
// opening of a tool call (`<tool_call>\n{"name": "` or the whole name) — a prefill that is part of
// the prompt the model saw, and of the recorded prompt tokens.

/** The Qwen2.5 / Hermes tool block, as Qwen2.5's template writes it into the system turn. */
export function hermesToolSystemBlock(tools: readonly WireTool[]): string {
  return (
    '# Tools\n\nYou may call one or more functions to assist with the user query.\n\n' +
    'You are provided with function signatures within <tools></tools> XML tags:\n<tools>' +
    tools.map((t) => `\n${JSON.stringify(t)}`).join('') +
    '\n</tools>\n\nFor each function call, return a json object with function name and arguments within <tool_call></tool_call> XML tags:\n<tool_call>\n{"name": <function-name>, "arguments": <args-json-object>}\n</tool_call>'
  );
}

/** The text of one call as the Hermes format writes it (arguments kept as sent, byte for byte). */
export function hermesToolCallText(name: string, args: string): string {
  return `${TOOL_CALL_OPEN}\n{"name": "${name}", "arguments": ${args}}\n</tool_call>`;
}

export interface RenderedChat {
  /** The prompt text: template output plus any tool-call prefill. */
  text: string;
  /** Text the gateway wrote at the start of the assistant turn for the model (tool_choice). */
  prefill: string;
  /** Whether tools reached the prompt. */
  toolsInPrompt: boolean;
}

export interface RenderOptions {
  tools?: readonly WireTool[] | null;
  toolChoice?: WireToolChoice | null;
  /** Extra template variables (enable_thinking, …). */
  variables?: Record<string, unknown>;
}

type TemplateMessage = ChatMessage & Record<string, unknown>;

/** Whether the template source reads `tools` (else the Hermes fallback is used). */
function templateKnowsTools(tokenizer: Tokenizer): boolean {
  const source = (tokenizer as { chatTemplate?: unknown }).chatTemplate;
  return typeof source === 'string' && /\btools\b/.test(source);
}

/** Whether the template prints `arguments` strings as they are (Qwen's does). */
function templateTakesStringArguments(tokenizer: Tokenizer): boolean {
  const source = (tokenizer as { chatTemplate?: unknown }).chatTemplate;
  return typeof source === 'string' && /arguments is string/.test(source);
}

function parseArgs(args: string, where: string): unknown {
  try {
    return JSON.parse(args);
  } catch {
    throw badRequest(`${where}.function.arguments is not JSON`, where, 'invalid_tool_arguments');
  }
}

export function renderChat(
  tokenizer: Tokenizer,
  messages: readonly WireMessage[],
  o: RenderOptions = {},
): RenderedChat {
  if (!tokenizer.applyChatTemplate)
    throw badRequest(
      'this model has no chat template; use /v1/completions',
      'messages',
      'no_chat_template',
    );
  const choice = o.toolChoice ?? 'auto';
  const tools = choice === 'none' ? [] : [...(o.tools ?? [])];
  if (typeof choice === 'object' && !tools.some((t) => t.function.name === choice.function.name))
    throw badRequest(
      `tool_choice names '${choice.function.name}', which is not in tools`,
      'tool_choice',
    );
  if (choice === 'required' && tools.length === 0)
    throw badRequest("tool_choice 'required' needs tools", 'tool_choice');
  const native = templateKnowsTools(tokenizer);
  const stringArgs = templateTakesStringArguments(tokenizer);

  const out: TemplateMessage[] = [];
  messages.forEach((m, i) => {
    const where = `messages.${i}`;
    const text = contentText(m.content);
    if (m.role === 'system' || m.role === 'developer' || m.role === 'user') {
      out.push({ role: m.role === 'developer' ? 'system' : m.role, content: text });
      return;
    }
    if (m.role === 'assistant') {
      const calls = m.tool_calls ?? [];
      if (!native) {
        const blocks = calls.map((c) => hermesToolCallText(c.function.name, c.function.arguments));
        out.push({
          role: 'assistant',
          content: [text, ...blocks].filter((s) => s !== '').join('\n'),
        });
        return;
      }
      out.push({
        role: 'assistant',
        content: text,
        ...(m.reasoning_content && { reasoning_content: m.reasoning_content }),
        ...(calls.length > 0 && {
          tool_calls: calls.map((c, k) => ({
            ...(c.id && { id: c.id }),
            type: 'function',
            function: {
              name: c.function.name,
              arguments: stringArgs
                ? c.function.arguments
                : parseArgs(c.function.arguments, `${where}.tool_calls.${k}`),
            },
          })),
        }),
      });
      return;
    }
    // role 'tool'
    if (native) {
      out.push({
        role: 'tool',
        content: text,
        ...(m.tool_call_id && { tool_call_id: m.tool_call_id }),
      });
      return;
    }
    // Qwen2.5's rendering: consecutive tool results share one user turn.
    const block = `<tool_response>\n${text}\n</tool_response>`;
    const prev = out.at(-1);
    if (prev && prev.role === 'user' && prev.toolResults === true)
      prev.content = `${prev.content}\n${block}`;
    else out.push({ role: 'user', content: block, toolResults: true });
  });
  if (!native && tools.length > 0) {
    const block = hermesToolSystemBlock(tools);
    if (out[0]?.role === 'system') out[0].content = `${out[0].content}\n\n${block}`;
    else out.unshift({ role: 'system', content: block });
  }
  // The helper flag is ours, not the template's.
  for (const m of out) delete m.toolResults;

  let text: string;
  try {
    text = tokenizer.applyChatTemplate(out, {
      addGenerationPrompt: true,
      variables: { ...o.variables, ...(native && tools.length > 0 && { tools }) },
    });
  } catch (e) {
    throw badRequest(
      `the chat template failed on these messages: ${(e as Error).message}`,
      'messages',
      'chat_template_error',
    );
  }
  const prefill =
    typeof choice === 'object'
      ? `${TOOL_CALL_OPEN}\n{"name": "${choice.function.name}", "arguments": `
      : choice === 'required'
        ? `${TOOL_CALL_OPEN}\n{"name": "`
        : '';
  return { text: text + prefill, prefill, toolsInPrompt: tools.length > 0 };
}
