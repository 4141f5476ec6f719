import { randomUUID } from 'node:crypto';
import { type GatewayContext, ROLLOUT_HEADER, type RouteRequest, rolloutOf } from '../context.js';
import { readJson, sendJson, startSse } from '../http-util.js';
import type { RecordedCall } from '../recorder.js';
import { ChatCompletionRequestSchema, parseBody } from '../wire.js';
import { chatCall } from './chat-call.js';

// POST /v1/chat/completions: a chat.completion, or with `stream: true` chat.completion.chunk
// events as the tokens are sampled — the first with the role, one per token with its text
// (and its logprob / id when asked), tool calls when the reply is done (parsed from the whole
// reply: each call as one chunk with its id and name, then one with all its arguments), the
// finish_reason, the usage when stream_options.include_usage, then [DONE].

export async function chatCompletions(ctx: GatewayContext, r: RouteRequest): Promise<void> {
  const body = parseBody(ChatCompletionRequestSchema, await readJson(r, ctx.maxBody));
  const rollout = rolloutOf(r, body);
  const id = `chatcmpl-${randomUUID().replaceAll('-', '')}`;
  const headers = { [ROLLOUT_HEADER]: rollout.rolloutId };
  const asIds = body.return_tokens_as_token_ids === true;
  const tokenIds = body.return_token_ids === true;
  const lp = (token: number, logprob: number) => {
    const text = tokenText(ctx, token, asIds);
    return { token: text, logprob, bytes: Array.from(Buffer.from(text, 'utf8')), top_logprobs: [] };
  };
  const usageOf = (call: RecordedCall) => ({
    prompt_tokens: call.promptTokens.length,
    completion_tokens: call.completionTokens.length,
    total_tokens: call.promptTokens.length + call.completionTokens.length,
  });

  if (!body.stream) {
    await chatCall(ctx, body, rollout, r.signal, 'chat.completions', {
      done(call, content, toolCalls) {
        const ids = Array.from(call.completionTokens);
        sendJson(
          r.res,
          200,
          {
            id,
            object: 'chat.completion',
            created: Math.floor(call.startedAt / 1000),
            model: body.model,
            choices: [
              {
                index: 0,
                message: {
                  role: 'assistant',
                  content,
                  ...(toolCalls.length > 0 && { tool_calls: toolCalls }),
                },
                logprobs: body.logprobs
                  ? { content: ids.map((t, i) => lp(t, call.logprobs[i]!)) }
                  : null,
                finish_reason: call.finishReason,
                ...(tokenIds && { token_ids: ids }),
              },
            ],
            usage: usageOf(call),
            ...(tokenIds && { prompt_token_ids: Array.from(call.promptTokens) }),
          },
          headers,
        );
      },
    });
    return;
  }

  // The stream opens at the first token, so a request the engine refuses before sampling
  // (an unknown model, a prompt too long) still gets its HTTP error status.
  const created = Math.floor(Date.now() / 1000);
  const chunk = (delta: object, extra: object = {}) => ({
    id,
    object: 'chat.completion.chunk',
    created,
    model: body.model,
    choices: [{ index: 0, delta, logprobs: null, finish_reason: null, ...extra }],
  });
  let sse: ReturnType<typeof startSse> | undefined;
  const open = (promptIds: ArrayLike<number>) => {
    if (sse) return sse;
    sse = startSse(r.res, headers);
    sse.send({
      ...chunk({ role: 'assistant', content: '' }),
      ...(tokenIds && { prompt_token_ids: Array.from(promptIds) }),
    });
    return sse;
  };
  await chatCall(ctx, body, rollout, r.signal, 'chat.completions', {
    replay: true,
    token({ id: token, logprob, delta, promptIds }) {
      const s = open(promptIds);
      if (delta === '' && !body.logprobs && !tokenIds) return;
      s.send(
        chunk(delta === '' ? {} : { content: delta }, {
          ...(body.logprobs && { logprobs: { content: [lp(token, logprob)] } }),
          ...(tokenIds && { token_ids: [token] }),
        }),
      );
    },
    done(call, _content, toolCalls, rest) {
      const s = open(call.promptTokens);
      if (rest !== '') s.send(chunk({ content: rest }));
      toolCalls.forEach((tc, i) => {
        const head = { index: i, id: tc.id, type: 'function' };
        s.send(
          chunk({ tool_calls: [{ ...head, function: { name: tc.function.name, arguments: '' } }] }),
        );
        s.send(
          chunk({ tool_calls: [{ index: i, function: { arguments: tc.function.arguments } }] }),
        );
      });
      s.send(chunk({}, { finish_reason: call.finishReason }));
      if (body.stream_options?.include_usage)
        s.send({
          id,
          object: 'chat.completion.chunk',
          created,
          model: body.model,
          choices: [],
          usage: usageOf(call),
        });
      s.done();
    },
  });
}

/** A token as the logprobs show it: its text, or `token_id:<id>` when the request asks for ids. */
export function tokenText(ctx: GatewayContext, id: number, asIds: boolean): string {
  return asIds ? `token_id:${id}` : ctx.tokenizer.decode([id]);
}
