// Token-by-token streaming through the policy gateway, with the real openai SDK against the real
// server on 127.0.0.1 over a real tiny model, on both generation paths: chunks leave while the engine is still sampling,
// the deltas add up to the non-streamed reply on every endpoint (and the recorded call is the
// same), a character split across tokens never streams half-written, nothing past a stop string
// streams, and a client that goes away stops its own generation and no other.
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { PolicyEngine, PolicyGenerateResult } from '@flowgrpo/agent';
import {
  buildDecoderArtifacts,
  DecoderArtifacts,
  LocalPolicyEngine,
  type StreamingPolicyRequest,
  type TinyModel,
} from '@flowgrpo/models';
import OpenAI from 'openai';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import {
  createPolicyGateway,
  EnginePolicyHost,
  type PolicyGateway,
  ROLLOUT_HEADER,
} from '../src/index.js';
import { GATEWAY_LORA, tinyGatewayModel } from './support/gateway-fixtures.js';

/** One generation as the engine saw it: tokens it streamed, and how it ended. */
interface Generation {
  tokens: number;
  result: Promise<PolicyGenerateResult>;
}

/**
 * The local engine, watched: every generation is kept, and while `gate` is set the engine's
 * answer waits for it after sampling is done — so the server cannot end a reply before the test
 * has seen what streamed meanwhile.
 */
class WatchedEngine implements PolicyEngine {
  readonly generations: Generation[] = [];
  gate: Promise<void> | undefined;
  constructor(readonly inner: LocalPolicyEngine) {}
  get model() {
    return this.inner.model;
  }
  async generate(request: StreamingPolicyRequest): Promise<PolicyGenerateResult> {
    const seen = { tokens: 0 };
    const result = this.inner.generate({
      ...request,
      onToken: (t, lp) => {
        seen.tokens++;
        request.onToken?.(t, lp);
      },
    });
    const g: Generation = {
      get tokens() {
        return seen.tokens;
      },
      result,
    };
    this.generations.push(g);
    const out = await g.result;
    await this.gate;
    return out;
  }
}

/** Answers `text` token by token (the tokenizer's ids, then EOS), yielding between tokens. */
class ScriptedStream implements PolicyEngine {
  readonly model = 'script';
  constructor(
    readonly model_: TinyModel,
    public text: string,
  ) {}
  async generate(request: StreamingPolicyRequest): Promise<PolicyGenerateResult> {
    const tok = this.model_.tokenizer;
    const ids = [...tok.encode(this.text), tok.eosTokenId!];
    for (const id of ids) {
      await new Promise((r) => setImmediate(r));
      request.onToken?.(id, -0.5);
    }
    return {
      text: this.text,
      promptTokens: Int32Array.from(request.promptTokens as ArrayLike<number>),
      actionTokens: Int32Array.from(ids),
      actionLogprobs: new Float32Array(ids.length).fill(-0.5),
      finishReason: 'stop',
    };
  }
}

const root = mkdtempSync(join(tmpdir(), 'flowgrpo-gateway-stream-'));
let model: TinyModel;
/** The standard prefill/decode graphs, and the fused generate graph with its continuous batcher. */
const dirs: Record<'standard' | 'fused', string> = {
  standard: '',
  fused: join(root, 'fused-artifacts'),
};

beforeAll(async () => {
  const t = await tinyGatewayModel(root);
  model = t.model;
  dirs.standard = t.artifacts;
  buildDecoderArtifacts(t.model.weights, dirs.fused, {
    lora: GATEWAY_LORA,
    graphs: ['decode', 'generate'],
    maxPositions: 1024,
  });
}, 120_000);

afterAll(() => rmSync(root, { recursive: true, force: true }));

const messages = [{ role: 'user' as const, content: 'Tell me a story.' }];
// Sampled with a seed: the same tokens every time. (Greedy decoding of this random tiny model
// repeats one newline, which would make every comparison here trivially true.)
const seeded = { model: 'tiny', temperature: 1, seed: 7 };

describe.each(['standard', 'fused'] as const)('streaming on the %s path', (path) => {
  let artifacts: DecoderArtifacts;
  let engine: WatchedEngine;
  let script: ScriptedStream;
  let gw: PolicyGateway;
  let client: OpenAI;

  beforeAll(async () => {
    artifacts = await DecoderArtifacts.open(dirs[path], { graphs: ['decode'], device: 'cpu' });
    const local = new LocalPolicyEngine({ artifacts, tokenizer: model.tokenizer });
    expect(await local.generator.usesFusedGraph()).toBe(path === 'fused');
    engine = new WatchedEngine(local);
    script = new ScriptedStream(model, '');
    const host = new EnginePolicyHost({
      tokenizer: model.tokenizer,
      engines: { tiny: engine, script },
      maxContext: artifacts.manifest.maxPositions,
    });
    gw = await createPolicyGateway({ host });
    client = new OpenAI({ baseURL: gw.baseURL, apiKey: 'unused', maxRetries: 0 });
  }, 120_000);

  afterAll(async () => {
    await gw?.close();
    await artifacts?.release();
  });

  it('sends the first chunk while the engine has not finished the request', async () => {
    let open!: () => void;
    engine.gate = new Promise((r) => {
      open = r;
    });
    try {
      const stream = await client.chat.completions.create(
        { ...seeded, messages, max_tokens: 64, stream: true },
        { headers: { [ROLLOUT_HEADER]: 'first' } },
      );
      let firstContentWhileRunning: boolean | undefined;
      let text = '';
      for await (const chunk of stream) {
        const delta = chunk.choices[0]?.delta?.content ?? '';
        if (delta !== '' && firstContentWhileRunning === undefined) {
          // The engine's answer is held until `open`: the reply cannot have ended yet.
          const r = gw.recorder.get('first')!;
          firstContentWhileRunning = r.calls.length === 0 && r.inFlight === 1;
          open();
        }
        text += delta;
      }
      expect(firstContentWhileRunning).toBe(true);
      expect(text.length).toBeGreaterThan(0);
    } finally {
      open();
      engine.gate = undefined;
    }
  });

  it('chat: the deltas add up to the non-streamed reply, and the recorded calls are the same', async () => {
    const body = { ...seeded, messages, max_tokens: 40 };
    const whole = await client.chat.completions
      .create(body, { headers: { [ROLLOUT_HEADER]: 'chat-whole' } })
      .withResponse();
    const stream = await client.chat.completions.create(
      { ...body, stream: true, stream_options: { include_usage: true } },
      { headers: { [ROLLOUT_HEADER]: 'chat-stream' } },
    );
    const chunks = [];
    for await (const c of stream) chunks.push(c);
    expect(chunks[0]!.choices[0]!.delta.role).toBe('assistant');
    const text = chunks.map((c) => c.choices[0]?.delta?.content ?? '').join('');
    expect(text).toBe(whole.data.choices[0]!.message.content);
    // More than one piece of text: the reply streamed, not sent whole at the end.
    expect(
      chunks.filter((c) => (c.choices[0]?.delta?.content ?? '') !== '').length,
    ).toBeGreaterThan(1);
    expect(chunks.at(-2)!.choices[0]!.finish_reason).toBe(whole.data.choices[0]!.finish_reason);
    expect(chunks.at(-1)!.usage).toEqual(whole.data.usage);
    const [a, b] = ['chat-whole', 'chat-stream'].map((id) => gw.recorder.get(id)!.calls[0]!);
    expect(Array.from(b!.promptTokens)).toEqual(Array.from(a!.promptTokens));
    expect(Array.from(b!.completionTokens)).toEqual(Array.from(a!.completionTokens));
    expect(Array.from(b!.logprobs)).toEqual(Array.from(a!.logprobs));
    expect(b!.text).toBe(a!.text);
  });

  it('completions: the text deltas add up to the non-streamed text', async () => {
    const body = { ...seeded, prompt: 'Once upon a time', max_tokens: 40 };
    const whole = await client.completions.create(body);
    const stream = await client.completions.create({ ...body, stream: true });
    const pieces: string[] = [];
    let finish: string | null | undefined;
    for await (const c of stream) {
      pieces.push(c.choices[0]?.text ?? '');
      finish = c.choices[0]?.finish_reason ?? finish;
    }
    expect(pieces.join('')).toBe(whole.choices[0]!.text);
    expect(pieces.filter((p) => p !== '').length).toBeGreaterThan(1);
    expect(finish).toBe(whole.choices[0]!.finish_reason);
  });

  it('responses: output_text.delta events add up to the output text', async () => {
    const body = {
      model: 'tiny',
      input: 'Tell me a story.',
      temperature: 0,
      max_output_tokens: 40,
    };
    const whole = await client.responses.create(body);
    const stream = await client.responses.create({ ...body, stream: true });
    const deltas: string[] = [];
    const types: string[] = [];
    let done: string | undefined;
    for await (const e of stream) {
      types.push(e.type);
      if (e.type === 'response.output_text.delta') deltas.push(e.delta);
      if (e.type === 'response.output_text.done') done = e.text;
    }
    expect(deltas.length).toBeGreaterThan(1);
    expect(deltas.join('')).toBe(whole.output_text);
    expect(done).toBe(whole.output_text);
    expect(types.slice(0, 4)).toEqual([
      'response.created',
      'response.in_progress',
      'response.output_item.added',
      'response.content_part.added',
    ]);
    expect(types.at(-1)).toBe(
      whole.status === 'completed' ? 'response.completed' : 'response.incomplete',
    );
  });

  it('never streams half a character: a multi-byte UTF-8 character split across tokens waits', async () => {
    script.text = 'né € 😀 漢字 ok';
    // The byte-level tokenizer splits each of these characters into several tokens.
    expect(model.tokenizer.encode('😀').length).toBeGreaterThan(1);
    const stream = await client.chat.completions.create({
      model: 'script',
      messages,
      stream: true,
    });
    const deltas: string[] = [];
    for await (const c of stream) {
      const d = c.choices[0]?.delta?.content;
      if (d) deltas.push(d);
    }
    expect(deltas.join('')).toBe(script.text);
    expect(deltas.some((d) => d.includes('\uFFFD'))).toBe(false);
    expect(deltas.length).toBeGreaterThan(3);
  });

  it('streams the text before a tool call, never the call block, then the call in one delta', async () => {
    script.text =
      'Let me look.\n<tool_call>\n{"name": "lookup", "arguments": {"query": "x"}}\n</tool_call>';
    const tools = [
      {
        type: 'function' as const,
        function: {
          name: 'lookup',
          parameters: { type: 'object', properties: { query: { type: 'string' } } },
        },
      },
    ];
    const body = { model: 'script', messages, tools };
    const whole = (await client.chat.completions.create(body)).choices[0]!;
    const stream = await client.chat.completions.create({ ...body, stream: true });
    const content: string[] = [];
    const calls: { id?: string; name?: string; args: string }[] = [];
    let finish: string | null = null;
    for await (const c of stream) {
      const choice = c.choices[0];
      if (!choice) continue;
      if (choice.delta.content) content.push(choice.delta.content);
      for (const tc of choice.delta.tool_calls ?? []) {
        calls[tc.index] ??= { args: '' };
        const call = calls[tc.index]!;
        if (tc.id) call.id = tc.id;
        if (tc.function?.name) call.name = tc.function.name;
        call.args += tc.function?.arguments ?? '';
      }
      finish = choice.finish_reason ?? finish;
    }
    expect(content.join('')).toBe('Let me look.');
    expect(content.join('')).toBe(whole.message.content);
    expect(content.some((d) => d.includes('<'))).toBe(false);
    expect(calls).toEqual([
      {
        id: expect.stringMatching(/^call_/),
        name: 'lookup',
        args: '{"query": "x"}',
      },
    ]);
    expect(finish).toBe('tool_calls');
    const parsed = whole.message.tool_calls![0]!;
    expect(parsed.type === 'function' && parsed.function.arguments).toBe('{"query": "x"}');
  });

  it('never streams past a stop string, nor the start of one', async () => {
    const body = { ...seeded, messages, max_tokens: 40 };
    const whole = (await client.chat.completions.create(body)).choices[0]!.message.content!;
    // A stop string from the middle of the reply: its first occurrence, no replacement char.
    let at = Math.floor(whole.length / 2);
    while (at < whole.length - 3 && whole.slice(at, at + 3).includes('\uFFFD')) at++;
    const stop = whole.slice(at, at + 3);
    const cut = whole.slice(0, whole.indexOf(stop));
    const stopped = await client.chat.completions.create({ ...body, stop: [stop] });
    expect(stopped.choices[0]!.message.content).toBe(cut);
    const stream = await client.chat.completions.create({ ...body, stop: [stop], stream: true });
    let text = '';
    for await (const c of stream) text += c.choices[0]?.delta?.content ?? '';
    expect(text).toBe(cut);
  });

  it('stops the generation of a client that goes away, and only that one', async () => {
    // Greedy: this model then never samples EOS, so left alone the request would take all 600.
    const greedy = { model: 'tiny', temperature: 0 };
    const long = { ...greedy, messages, max_tokens: 600 };
    expect((await client.chat.completions.create(long)).choices[0]!.finish_reason).toBe('length');
    const otherBody = {
      ...seeded,
      messages: [{ role: 'user' as const, content: 'other' }],
      max_tokens: 30,
    };
    const alone = await client.chat.completions.create(otherBody);
    const before = engine.generations.length;
    const stream = await client.chat.completions.create(
      { ...long, stream: true },
      { headers: { [ROLLOUT_HEADER]: 'gone' } },
    );
    const other = client.chat.completions.create(otherBody);
    for await (const c of stream) {
      if ((c.choices[0]?.delta?.content ?? '') !== '') break; // leaving the loop aborts the request
    }
    const gone = engine.generations[before]!;
    await expect(gone.result).rejects.toThrow(/client closed the connection/);
    expect(gone.tokens).toBeLessThan(600);
    // The other request is answered as if it had been alone.
    expect((await other).choices[0]!.message.content).toBe(alone.choices[0]!.message.content);
    // The reply the client never saw is not part of its rollout.
    const r = gw.recorder.get('gone');
    expect(r?.calls ?? []).toHaveLength(0);
    expect(r?.inFlight ?? 0).toBe(0);
  });
});
