import { randomUUID } from 'node:crypto';
import { type GatewayContext, ROLLOUT_HEADER, type RouteRequest, rolloutOf } from '../context.js';
import { badRequest } from '../errors.js';
import { readJson, sendJson, startSse } from '../http-util.js';
import type { RecordedCall } from '../recorder.js';
import { sample } from '../sample.js';
import { TextStream } from '../text-stream.js';
import { CompletionRequestSchema, parseBody } from '../wire.js';
import { tokenText } from './chat-completions.js';

// POST /v1/completions: text or token ids → policy → a text_completion, recorded. With
// `stream: true`, one text_completion event per sampled token that brings text (or every token
// when logprobs are asked), then one with the finish_reason, the usage when
// stream_options.include_usage, then [DONE].

export async function completions(ctx: GatewayContext, r: RouteRequest): Promise<void> {
  const { tokenizer, recorder } = ctx;
  const body = parseBody(CompletionRequestSchema, await readJson(r, ctx.maxBody));
  const { rolloutId, named } = rolloutOf(r, body);
  const started = Date.now();
  const t0 = performance.now();
  const p = body.prompt;
  let promptIds: number[];
  if (typeof p === 'string') promptIds = Array.from(tokenizer.encode(p, { addBos: true }));
  else if (typeof p[0] === 'string')
    promptIds = Array.from(tokenizer.encode(p[0], { addBos: true }));
  else if (Array.isArray(p[0])) promptIds = p[0] as number[];
  else promptIds = p as number[];
  if (promptIds.length === 0) throw badRequest('the prompt is empty', 'prompt');

  const id = `cmpl-${randomUUID().replaceAll('-', '')}`;
  const created = Math.floor(started / 1000);
  const headers = { [ROLLOUT_HEADER]: rolloutId };
  const asIds = body.return_tokens_as_token_ids === true;
  const tokenIds = body.return_token_ids === true;
  const want = body.logprobs !== undefined && body.logprobs !== null;
  const event = (choice: object) => ({
    id,
    object: 'text_completion',
    created,
    model: body.model,
    choices: [{ index: 0, logprobs: null, finish_reason: null, ...choice }],
  });
  const stop = body.stop == null ? [] : typeof body.stop === 'string' ? [body.stop] : body.stop;
  const stream = body.stream
    ? new TextStream({ decode: (ids) => tokenizer.decode(ids, { skipSpecialTokens: true }), stop })
    : undefined;
  // The stream opens at the first token, so a refusal before sampling keeps its HTTP status.
  let sse: ReturnType<typeof startSse> | undefined;
  let offset = 0;
  const streamToken = (token: number, logprob: number) => {
    const delta = stream!.push(token);
    if (!sse) {
      sse = startSse(r.res, headers);
      if (tokenIds) sse.send(event({ text: '', prompt_token_ids: promptIds }));
    }
    if (delta === '' && !want && !tokenIds) return;
    const t = tokenText(ctx, token, asIds);
    sse.send(
      event({
        text: delta,
        ...(want && {
          logprobs: {
            tokens: [t],
            token_logprobs: [logprob],
            top_logprobs: [{ [t]: logprob }],
            text_offset: [offset],
          },
        }),
        ...(tokenIds && { token_ids: [token] }),
      }),
    );
    offset += t.length;
  };
  let heard = false;

  const index = recorder.begin(rolloutId);
  let call: RecordedCall | undefined;
  try {
    const g = await sample(ctx, {
      model: body.model,
      promptIds,
      maxTokens: body.max_tokens ?? 16,
      temperature: body.temperature,
      topP: body.top_p,
      stop: body.stop,
      seed: body.seed,
      rolloutId,
      named,
      index,
      signal: r.signal,
      ...(stream && {
        onToken: (token: number, logprob: number) => {
          heard = true;
          streamToken(token, logprob);
        },
      }),
    });
    const res = g.result;
    call = {
      index,
      model: body.model,
      endpoint: 'completions',
      promptTokens: Int32Array.from(res.promptTokens),
      completionTokens: Int32Array.from(res.actionTokens),
      logprobs: Float32Array.from(res.actionLogprobs),
      text: res.text,
      finishReason: res.finishReason === 'length' ? 'length' : 'stop',
      startedAt: started,
      timings: {
        queue_ms: g.queueMs,
        generate_ms: g.generateMs,
        total_ms: performance.now() - t0,
      },
    };
    const ids = Array.from(call.completionTokens);
    const usage = {
      prompt_tokens: promptIds.length,
      completion_tokens: ids.length,
      total_tokens: promptIds.length + ids.length,
    };
    if (!stream) {
      const tokens = ids.map((t) => tokenText(ctx, t, asIds));
      const offsets: number[] = [];
      tokens.reduce((at, t) => {
        offsets.push(at);
        return at + t.length;
      }, 0);
      const lps = call.logprobs;
      const logprobs = want
        ? {
            tokens,
            token_logprobs: Array.from(lps),
            top_logprobs: tokens.map((t, i) => ({ [t]: lps[i]! })),
            text_offset: offsets,
          }
        : null;
      const choice = {
        index: 0,
        text: res.text,
        logprobs,
        finish_reason: call.finishReason,
        ...(tokenIds && { token_ids: ids, prompt_token_ids: promptIds }),
      };
      sendJson(
        r.res,
        200,
        { id, object: 'text_completion', created, model: body.model, choices: [choice], usage },
        headers,
      );
      return;
    }
    // An engine that does not stream: its tokens go through the same stream now, all at once.
    if (!heard)
      ids.forEach((t, i) => {
        streamToken(t, call!.logprobs[i]!);
      });
    if (!sse) sse = startSse(r.res, headers);
    sse.send(event({ text: stream.rest(res.text), finish_reason: call.finishReason }));
    if (body.stream_options?.include_usage)
      sse.send({ id, object: 'text_completion', created, model: body.model, choices: [], usage });
    sse.done();
  } finally {
    recorder.end(rolloutId, call);
    if (call) ctx.options.onCall?.(rolloutId, call);
  }
}
