import { randomUUID } from 'node:crypto';
import { type GatewayContext, ROLLOUT_HEADER, type RouteRequest, rolloutOf } from '../context.js';
import { readJson, sendJson } from '../http-util.js';
import { ResponseStream } from '../response-stream.js';
import { ResponsesRequestSchema, responseObject, responsesToChat } from '../responses.js';
import { ChatCompletionRequestSchema, parseBody } from '../wire.js';
import { chatCall } from './chat-call.js';

// POST /v1/responses: the Responses API's input items → the chat path (chat-call.ts) → a
// response object, or with `stream: true` its events as the text is sampled (response-stream.ts).

export async function responses(ctx: GatewayContext, r: RouteRequest): Promise<void> {
  const request = parseBody(ResponsesRequestSchema, await readJson(r, ctx.maxBody));
  const body = parseBody(ChatCompletionRequestSchema, responsesToChat(request));
  const rollout = rolloutOf(r, body);
  const id = `resp_${randomUUID().replaceAll('-', '')}`;
  const headers = { [ROLLOUT_HEADER]: rollout.rolloutId };
  const stream = request.stream
    ? new ResponseStream(r.res, { id, createdAt: Date.now(), model: body.model, request }, headers)
    : undefined;
  await chatCall(ctx, body, rollout, r.signal, 'responses', {
    ...(stream && { token: ({ delta }) => stream.delta(delta) }),
    done(call, content, toolCalls, rest) {
      const parts = {
        id,
        createdAt: call.startedAt,
        model: body.model,
        content,
        toolCalls,
        finishReason: call.finishReason,
        usage: { input: call.promptTokens.length, output: call.completionTokens.length },
        request,
      };
      if (stream) stream.finish(parts, rest);
      else {
        const status = call.finishReason === 'length' ? 'incomplete' : 'completed';
        sendJson(r.res, 200, responseObject(parts, status), headers);
      }
    },
  });
}
