import { renderChat } from '../chat-render.js';
import type { GatewayContext, RolloutRef } from '../context.js';
import type { RecordedCall } from '../recorder.js';
import { restoreToolArguments } from '../restore-tool-arguments.js';
import { sample } from '../sample.js';
import { TextStream } from '../text-stream.js';
import { type ParsedToolCall, parseAssistantText } from '../tool-calls.js';
import type { ChatCompletionRequest } from '../wire.js';

// One chat call, shared by /v1/chat/completions and /v1/responses: messages → chat template
// (+ tools) → ids → policy → content and tool calls → recorded. The route says how to answer:
// `token` (streaming) hears each sampled token with the text it lets the client see, `done`
// the finished call — the call is recorded right after `done` returns, whether streamed or not,
// so the recorded trajectory is the same either way.

export interface ChatReply {
  /** Each sampled token as it is sampled, with the text now safe to show (streaming only). */
  token?: (t: SampledToken) => void;
  /**
   * When the engine does not stream (an upstream server answers when it is done): hear its
   * tokens through `token` all at once at the end (chat chunks: one per token, with its
   * logprob), rather than the whole text as `rest`.
   */
  replay?: boolean;
  /**
   * The finished call; `rest` is the content not yet streamed (all of it when not streaming).
   */
  done(call: RecordedCall, content: string | null, toolCalls: ParsedToolCall[], rest: string): void;
}

export interface SampledToken {
  id: number;
  logprob: number;
  /** Text the client may now see ('' while it is held back). */
  delta: string;
  /** The call's prompt. */
  promptIds: readonly number[];
}

export async function chatCall(
  ctx: GatewayContext,
  body: ChatCompletionRequest,
  { rolloutId, named }: RolloutRef,
  signal: AbortSignal,
  endpoint: RecordedCall['endpoint'],
  reply: ChatReply,
): Promise<void> {
  const { tokenizer, recorder } = ctx;
  const started = Date.now();
  const t0 = performance.now();
  const rendered = renderChat(tokenizer, restoreToolArguments(recorder, body.messages, rolloutId), {
    tools: body.tools ?? null,
    toolChoice: body.tool_choice ?? null,
    variables: { ...ctx.options.chatTemplateVariables, ...body.chat_template_kwargs },
  });
  const parseCalls = rendered.toolsInPrompt || rendered.prefill !== '';
  const promptIds = Array.from(tokenizer.encode(rendered.text));
  const stop = body.stop == null ? [] : typeof body.stop === 'string' ? [body.stop] : body.stop;
  const onToken = reply.token;
  const stream =
    onToken &&
    new TextStream({
      decode: (ids) => tokenizer.decode(ids, { skipSpecialTokens: true }),
      prefill: rendered.prefill,
      stop,
      toolCalls: parseCalls,
    });
  /** Whether the engine called onToken (the local one does; an upstream answers at the end). */
  let heard = false;
  const index = recorder.begin(rolloutId);
  let call: RecordedCall | undefined;
  try {
    const g = await sample(ctx, {
      model: body.model,
      promptIds,
      maxTokens: body.max_completion_tokens ?? body.max_tokens,
      temperature: body.temperature,
      topP: body.top_p,
      stop: body.stop,
      seed: body.seed,
      rolloutId,
      named,
      index,
      signal,
      ...(stream && {
        onToken: (id: number, lp: number) => {
          heard = true;
          onToken({ id, logprob: lp, delta: stream.push(id), promptIds });
        },
      }),
    });
    // A client that went away never saw this reply: it is not part of its trajectory.
    signal.throwIfAborted();
    const r = g.result;
    const text = rendered.prefill + r.text;
    const parsed = parseAssistantText(text, `${rolloutId}:${index}`, parseCalls);
    const finish =
      r.finishReason === 'length' ? 'length' : parsed.toolCalls.length > 0 ? 'tool_calls' : 'stop';
    call = {
      index,
      model: body.model,
      endpoint,
      promptTokens: Int32Array.from(r.promptTokens),
      completionTokens: Int32Array.from(r.actionTokens),
      logprobs: Float32Array.from(r.actionLogprobs),
      text,
      ...(rendered.prefill && { prefill: rendered.prefill }),
      ...(parsed.toolCalls.length > 0 && { toolCalls: parsed.toolCalls }),
      finishReason: finish,
      startedAt: started,
      timings: { queue_ms: g.queueMs, generate_ms: g.generateMs, total_ms: 0 },
    };
    call.timings.total_ms = performance.now() - t0;
    // An engine that does not stream: its tokens go through the same stream now, all at once.
    if (stream && !heard && reply.replay)
      r.actionTokens.forEach((id, i) => {
        onToken({ id, logprob: r.actionLogprobs[i]!, delta: stream.push(id), promptIds });
      });
    const rest = stream ? stream.rest(parsed.content) : (parsed.content ?? '');
    reply.done(call, parsed.content, parsed.toolCalls, rest);
  } finally {
    recorder.end(rolloutId, call);
    if (call) ctx.options.onCall?.(rolloutId, call);
  }
}
