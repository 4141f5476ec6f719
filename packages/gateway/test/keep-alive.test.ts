// A client whose event loop was blocked longer than a server's keep-alive timeout (the trainer's
// update runs for seconds in the process that drives the agents, and often in the gateway's own)
// reuses a pooled connection at the moment the server's timer closes it: the request then dies
// with ECONNRESET before any route sees it. With Node's default keepAliveTimeout (5 s) this test
// failed at the second blocked update every time it ran (fetch failed: ECONNRESET); the gateway
// keeps idle connections until the client closes them. Real HTTP on 127.0.0.1, Node's own fetch.
import { ByteLevelTokenizer } from '@flowgrpo/models';
import { expect, it } from 'vitest';
import { createPolicyGateway, EnginePolicyHost } from '../src/index.js';
import { ScriptedEngine } from './support/gateway-fixtures.js';

/** Holds this thread as a synchronous ONNX Runtime run does, for longer than Node's 5 s default. */
function blockEventLoop(ms: number): void {
  const until = Date.now() + ms;
  while (Date.now() < until) {}
}

it('a request after the event loop was blocked past 5 s reaches the route', async () => {
  // A scripted engine: no model is needed to answer a request.
  const tokenizer = new ByteLevelTokenizer();
  const engine = new ScriptedEngine(tokenizer, ['Hello there.']);
  const gw = await createPolicyGateway({
    host: new EnginePolicyHost({ tokenizer, engines: { policy: engine } }),
    defaultMaxTokens: 16,
  });
  try {
    const ask = async () => {
      const res = await fetch(`${gw.baseURL}/chat/completions`, {
        method: 'POST',
        headers: { 'content-type': 'application/json' },
        body: JSON.stringify({ model: 'policy', messages: [{ role: 'user', content: 'hi' }] }),
      });
      return res.status;
    };
    // A step's requests, the update, the next step's requests: three times.
    for (let step = 0; step < 3; step++) {
      expect(await ask()).toBe(200);
      blockEventLoop(6_000);
      expect(await ask()).toBe(200);
    }
  } finally {
    await gw.close();
  }
}, 120_000);
