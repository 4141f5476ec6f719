// The gateway under many clients, over a real tiny model and real HTTP on 127.0.0.1, with the
// model folder's tokenizer.json loaded as `flowgrpo serve` loads it (HfTokenizer), on both
// generation paths: the standard prefill/decode graphs (what `serve` builds from a HF folder) and
// the fused generate graph with its continuous batcher. What must hold:
// - an empty completion — the first sampled token ends the sample — is a 200 with empty content
//   and finish_reason "stop" on every endpoint, streamed or not, and is recorded (it used to be a
//   500: @huggingface/tokenizers refuses to decode an empty list);
// - one request that fails never fails its batch-mates: with a failure injected into one request
//   of 100 concurrent ones (its decode throws — at the end, or mid-batch on its stop-string
//   check), that one gets its error and the others 200 with the tokens they get when nothing
//   fails. (Both fail without the per-row isolation.)
// The expected tokens come from the same server with nothing injected (same seeds, same tokens).
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { Tokenizer } from '@flowgrpo/models';
import { buildDecoderArtifacts, HfTokenizer, LocalPolicyEngine } from '@flowgrpo/models';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import {
  createPolicyGateway,
  LocalPolicyHost,
  type PolicyGateway,
  ROLLOUT_HEADER,
  rolloutTrajectory,
} from '../src/index.js';
import { GATEWAY_LORA, tinyGatewayModel } from './support/gateway-fixtures.js';

// biome-ignore lint/suspicious/noExplicitAny: response bodies are read field by field by the assertions
type Json = any;

const root = mkdtempSync(join(tmpdir(), 'flowgrpo-gateway-clients-'));
const dirs: Record<'standard' | 'fused', string> = {
  standard: '',
  fused: join(root, 'fused-artifacts'),
};
let tokenizer: HfTokenizer;

beforeAll(async () => {
  const t = await tinyGatewayModel(root);
  dirs.standard = t.artifacts;
  buildDecoderArtifacts(t.model.weights, dirs.fused, {
    lora: GATEWAY_LORA,
    graphs: ['decode', 'generate'],
    maxPositions: 1024,
  });
  tokenizer = await HfTokenizer.fromDir(join(root, 'model'));
}, 120_000);

afterAll(() => rmSync(root, { recursive: true, force: true }));

const user = (content: string) => ({ role: 'user', content });

/** The `data:` payloads of an SSE body, without the final [DONE]. */
function events(text: string): Json[] {
  return text
    .split('\n\n')
    .filter((e) => e.includes('data: ') && !e.includes('data: [DONE]'))
    .map((e) => JSON.parse(e.slice(e.indexOf('data: ') + 6)));
}

describe.each(['standard', 'fused'] as const)('the gateway on the %s path', (path) => {
  let host: LocalPolicyHost;
  let gw: PolicyGateway;

  beforeAll(async () => {
    host = await LocalPolicyHost.open({ artifacts: dirs[path], tokenizer, baseModel: 'tiny' });
    gw = await createPolicyGateway({ host, defaultMaxTokens: 8 });
    const fused = await (host.engine('tiny') as LocalPolicyEngine).generator.usesFusedGraph();
    expect(fused).toBe(path === 'fused');
  });

  afterAll(async () => {
    await gw?.close();
    await host?.close();
  });

  async function post(route: string, body: object, headers: Record<string, string> = {}) {
    const res = await fetch(`${gw.url}${route}`, {
      method: 'POST',
      headers: { 'content-type': 'application/json', ...headers },
      body: JSON.stringify(body),
    });
    const text = await res.text();
    let json: Json;
    try {
      json = JSON.parse(text);
    } catch {
      json = undefined;
    }
    return { status: res.status, text, json };
  }

  // Token-id prompts that end in 100 different bytes, so their first tokens differ.
  const prompt = (i: number) => [
    ...tokenizer.encode(`Request ${i}: `),
    ...tokenizer.encode(String.fromCharCode(33 + ((i * 7) % 90))),
  ];
  const request = (model: string, i: number, maxTokens: number, extra: object = {}) =>
    post('/v1/completions', {
      model,
      prompt: prompt(i),
      max_tokens: maxTokens,
      temperature: 0,
      return_token_ids: true,
      ...extra,
    });
  /** The 100 prompts at once, greedy, 8 tokens each. */
  const all = (model: string, extra: object = {}) =>
    Promise.all(Array.from({ length: 100 }, (_, i) => request(model, i, 8, extra)));

  /** A model served over the host's artifacts that stops at `stop` only, decoding with `tok`. */
  function serveStoppingAt(name: string, stop: number, tok: Tokenizer = tokenizer) {
    host.serve(
      name,
      new LocalPolicyEngine({ artifacts: host.artifacts, tokenizer: tok, stopTokenIds: [stop] }),
    );
  }

  it('an empty completion is a 200 with empty content and finish_reason stop, on every endpoint', async () => {
    // The model stops at the token it samples first for this prompt: the completion is empty.
    const messages = [user('Say nothing.')];
    const probe = await post('/v1/chat/completions', {
      model: 'tiny',
      messages,
      max_tokens: 1,
      temperature: 0,
      return_token_ids: true,
    });
    expect(probe.status).toBe(200);
    const first: number = probe.json.choices[0].token_ids[0];
    const promptIds: number[] = probe.json.prompt_token_ids;
    serveStoppingAt('quiet', first);
    const rollout = `empty-${path}`;
    const send = (route: string, body: object) =>
      post(
        route,
        { model: 'quiet', temperature: 0, max_tokens: 8, ...body },
        {
          [ROLLOUT_HEADER]: rollout,
        },
      );

    const chat = await send('/v1/chat/completions', { messages, logprobs: true });
    expect(chat.status, chat.text).toBe(200);
    expect(chat.json.choices[0].message.content).toBe('');
    expect(chat.json.choices[0].finish_reason).toBe('stop');
    expect(chat.json.usage.completion_tokens).toBe(1);

    const chatStream = await send('/v1/chat/completions', { messages, stream: true });
    expect(chatStream.status).toBe(200);
    const chunks = events(chatStream.text);
    expect(chunks.some((c) => c.error)).toBe(false);
    expect(chunks.map((c) => c.choices[0]?.delta?.content ?? '').join('')).toBe('');
    expect(chunks.at(-1).choices[0].finish_reason).toBe('stop');

    const completion = await send('/v1/completions', { prompt: promptIds });
    expect(completion.status, completion.text).toBe(200);
    expect(completion.json.choices[0]).toMatchObject({ text: '', finish_reason: 'stop' });
    const completionStream = await send('/v1/completions', { prompt: promptIds, stream: true });
    expect(completionStream.status).toBe(200);
    expect(events(completionStream.text)[0].choices[0]).toMatchObject({
      text: '',
      finish_reason: 'stop',
    });

    const response = await send('/v1/responses', { input: messages });
    expect(response.status, response.text).toBe(200);
    expect(response.json.status).toBe('completed');
    expect(response.json.output[0].content[0].text).toBe('');
    const responseStream = await send('/v1/responses', { input: messages, stream: true });
    const last = events(responseStream.text).at(-1);
    expect(last.type).toBe('response.completed');
    expect(last.response.output[0].content[0].text).toBe('');

    // Recorded: six calls on the same prompt, each the one stop token, and a valid trajectory.
    const recorded = gw.recorder.get(rollout)!;
    expect(recorded.calls).toHaveLength(6);
    for (const c of recorded.calls) {
      expect(Array.from(c.promptTokens)).toEqual(promptIds);
      expect(Array.from(c.completionTokens)).toEqual([first]);
      expect(c.text).toBe('');
      expect(c.finishReason).toBe('stop');
    }
    const trajectory = rolloutTrajectory(recorded, { queryId: 'q', groupId: 'g' });
    expect(trajectory.turns ?? trajectory.segments).toBeDefined();
    // An upstream may answer with no token at all: such a call records and chains too (the next
    // call's prompt extends it), as an empty action.
    const none = { ...recorded.calls[0]!, completionTokens: new Int32Array(0) };
    none.logprobs = new Float32Array(0);
    const next = { ...none, index: 1, promptTokens: Int32Array.from([...promptIds, 7]) };
    const chained = rolloutTrajectory(
      { ...recorded, calls: [none, next] },
      { queryId: 'q', groupId: 'g' },
    );
    expect(chained.segments!.map((x) => [x.kind, x.tokens.length])).toEqual([
      ['prompt', promptIds.length],
      ['action', 0],
      ['observation', 1],
      ['action', 0],
    ]);
  });

  it("one request's failure never fails its batch-mates (100 concurrent requests)", async () => {
    // The injected failure: a tokenizer whose decode refuses an empty list (as
    // @huggingface/tokenizers does), under a model that stops at the first token request 0
    // samples. That request's decode throws; the others (prompts whose first tokens are their
    // own) must come back 200 with the tokens the tolerant tokenizer's server gives them.
    const strict: Tokenizer = {
      ...tokenizer,
      encode: (text, o) => tokenizer.encode(text, o),
      decode: (ids, o) => {
        if (ids.length === 0) throw new Error('token_ids must be a non-empty array of integers.');
        return tokenizer.decode(ids, o);
      },
    };
    const first: number = (await request('tiny', 0, 1)).json.choices[0].token_ids[0];
    serveStoppingAt('tolerant', first);
    serveStoppingAt('strict', first, strict);
    const want = await all('tolerant');
    expect(want.every((r) => r.status === 200)).toBe(true);
    // Which requests the injected failure hits: those whose completion is empty (request 0, and
    // any other whose first token is the same).
    const empty = want.flatMap((r, i) => {
      const ids: number[] = r.json.choices[0].token_ids;
      return ids.length === 1 && ids[0] === first ? [i] : [];
    });
    expect(empty).toContain(0);
    expect(empty.length).toBeLessThan(10);

    const got = await all('strict');
    const engine = host.engine('strict') as LocalPolicyEngine;
    got.forEach((r, i) => {
      if (empty.includes(i)) {
        expect(r.status, `request ${i}`).toBe(500);
        expect(r.json.error.message).toMatch(/non-empty array/);
      } else {
        expect(r.status, `request ${i}: ${r.text}`).toBe(200);
        expect(r.json.choices[0].token_ids, `request ${i}`).toEqual(
          want[i]!.json.choices[0].token_ids,
        );
        expect(r.json.choices[0].text).toBe(want[i]!.json.choices[0].text);
      }
    });
    // The failing request really ran among others: requests were batched together.
    expect(engine.batchStats.requests).toBe(100);
    expect(engine.batchStats.batches).toBeLessThan(100);
  });

  it('a request that fails in the middle of a running batch fails alone', async () => {
    // Every request asks for a stop string that never occurs, so each row's text is decoded after
    // every token it samples, in the middle of the batch. The injected decode throws once a
    // sample starts with the first three tokens request 0 samples: that row fails there, with
    // its error; the others finish with the tokens they get when nothing throws.
    const stop = { stop: ['\u0000'] };
    const want = await all('tiny', stop);
    expect(want.every((r) => r.status === 200)).toBe(true);
    const poison: number[] = want[0]!.json.choices[0].token_ids.slice(0, 3);
    expect(poison).toHaveLength(3);
    const starts = (ids: ArrayLike<number>) =>
      ids.length >= 3 && poison.every((t, j) => ids[j] === t);
    const hit = want.flatMap((r, i) => (starts(r.json.choices[0].token_ids) ? [i] : []));
    expect(hit).toContain(0);
    expect(hit.length).toBeLessThan(10);
    const throwing: Tokenizer = {
      ...tokenizer,
      encode: (text, o) => tokenizer.encode(text, o),
      decode: (ids, o) => {
        if (starts(ids)) throw new Error('decode failed mid-sample (the injected failure)');
        return tokenizer.decode(ids, o);
      },
    };
    const base = host.engine('tiny') as LocalPolicyEngine;
    host.serve(
      'mid',
      new LocalPolicyEngine({
        artifacts: host.artifacts,
        tokenizer: throwing,
        stopTokenIds: base.stopTokenIds(),
      }),
    );
    const got = await all('mid', stop);
    got.forEach((r, i) => {
      if (hit.includes(i)) {
        expect(r.status, `request ${i}`).toBe(500);
        expect(r.json.error.message).toMatch(/decode failed mid-sample/);
      } else {
        expect(r.status, `request ${i}: ${r.text}`).toBe(200);
        expect(r.json.choices[0].token_ids, `request ${i}`).toEqual(
          want[i]!.json.choices[0].token_ids,
        );
      }
    });
  });
});
