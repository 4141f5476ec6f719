// The load APIs take hub names: a tiny Qwen2 written with saveHfModel is served by a local
// stand-in of the Hub's HTTP API, then loadDecoderModel / loadTokenizer('tiny/qwen2') download it
// into HF's cache layout and the loaded model generates exactly what the original does.
import { mkdtempSync, readdirSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type FakeHub, startFakeHub } from '../../../test-utils/fake-hub.js';
import {
  buildDecoderArtifacts,
  createTinyQwen2,
  DecoderArtifacts,
  LocalPolicyEngine,
  loadDecoderModel,
  loadTokenizer,
  type TinyModel,
} from '../src/index.js';

describe('loading a model by hub name', () => {
  const tmp = mkdtempSync(join(tmpdir(), 'flowgrpo-hub-load-'));
  const saved = { ...process.env };
  let hub: FakeHub;
  let tiny: TinyModel;

  beforeAll(async () => {
    const src = join(tmp, 'src');
    tiny = await createTinyQwen2(src, { seed: 3, hiddenSize: 32, layers: 1, heads: 4, kvHeads: 2 });
    const files = Object.fromEntries(readdirSync(src).map((f) => [f, readFileSync(join(src, f))]));
    hub = await startFakeHub([
      { type: 'model', repo: 'tiny/qwen2', commit: 'e'.repeat(40), files },
    ]);
    process.env.HF_ENDPOINT = hub.url;
    process.env.HF_HOME = join(tmp, 'hf');
    delete process.env.HF_HUB_OFFLINE;
    delete process.env.HF_HUB_CACHE;
  });
  afterAll(async () => {
    process.env = saved;
    await hub?.close();
    rmSync(tmp, { recursive: true, force: true });
  });

  it('downloads, loads and generates as the original model does', async () => {
    const weights = await loadDecoderModel('tiny/qwen2');
    const tokenizer = await loadTokenizer('tiny/qwen2');
    expect(
      readdirSync(join(tmp, 'hf', 'hub', 'models--tiny--qwen2', 'snapshots', 'e'.repeat(40))),
    ).toContain('model.safetensors');
    expect([...weights.tensors.keys()].sort()).toEqual([...tiny.weights.tensors.keys()].sort());
    expect(tokenizer.encode('hello hub')).toEqual(tiny.tokenizer.encode('hello hub'));

    const generate = async (w: typeof weights, name: string) => {
      buildDecoderArtifacts(w, join(tmp, name), { graphs: ['prefill', 'decode'] });
      const art = await DecoderArtifacts.open(join(tmp, name), { intraOpThreads: 1 });
      try {
        const engine = new LocalPolicyEngine({ artifacts: art, tokenizer, model: name });
        return (await engine.generate({ prompt: 'abc', maxTokens: 12, temperature: 0 })).text;
      } finally {
        await art.release();
      }
    };
    expect(await generate(weights, 'from-hub')).toBe(await generate(tiny.weights, 'original'));

    // A second load is served from the cache: no file is downloaded again.
    const before = hub.downloads().length;
    await loadDecoderModel('tiny/qwen2');
    expect(hub.downloads().length).toBe(before);
  });
});
