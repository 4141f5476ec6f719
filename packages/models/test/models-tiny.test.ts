// The tiny Qwen2 factory (a real HF folder, deterministic from the seed, loaded back bit for bit)
// and the reference forward on Qwen2 / Qwen3 checkpoints with biases, GQA, untied heads, bf16
// and shards, checked against an independent numpy implementation of HF's full-sequence
// forward (rotate_half RoPE, repeat_kv, causal mask) run in a real python3 subprocess.
import { spawnSync } from 'node:child_process';
import { mkdtemp, readdir, readFile, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { createRng, type Tensor, tensorToFloat32 } from '@flowgrpo/core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import {
  createTinyQwen2,
  type DecoderConfig,
  HfTokenizer,
  loadHfModel,
  loadTokenizer,
  type ModelWeights,
  saveHfModel,
  tinyQwen2Config,
  type WeightDType,
} from '../src/index.js';
import { generateGreedy, ReferenceDecoder } from '../src/models/reference/reference-decoder.js';
import { initTinyWeights } from '../src/models/tiny-factory.js';

// HF's Qwen2/Qwen3 forward in numpy float64, written from the transformers modeling code's
// semantics (not from our TypeScript): whole sequence at once, no cache.
const NUMPY_FORWARD = `
import json, os, struct, sys
import numpy as np
d, tokens = sys.argv[1], json.loads(sys.argv[2])
cfg = json.load(open(os.path.join(d, 'config.json')))
files = ['model.safetensors']
if os.path.exists(os.path.join(d, 'model.safetensors.index.json')):
    files = sorted(set(json.load(open(os.path.join(d, 'model.safetensors.index.json')))['weight_map'].values()))
W = {}
for f in files:
    raw = open(os.path.join(d, f), 'rb').read()
    n = struct.unpack('<Q', raw[:8])[0]
    for name, info in json.loads(raw[8:8 + n]).items():
        if name == '__metadata__':
            continue
        a, b = info['data_offsets']
        buf = raw[8 + n + a:8 + n + b]
        if info['dtype'] == 'F32':
            arr = np.frombuffer(buf, '<f4')
        elif info['dtype'] == 'BF16':
            arr = (np.frombuffer(buf, '<u2').astype(np.uint32) << 16).view(np.float32)
        else:
            arr = np.frombuffer(buf, '<f2')
        W[name] = arr.astype(np.float64).reshape(info['shape'])
H, nh, nkv = cfg['hidden_size'], cfg['num_attention_heads'], cfg['num_key_value_heads']
hd = cfg.get('head_dim') or H // nh
eps, theta, T = cfg['rms_norm_eps'], cfg['rope_theta'], len(tokens)
qwen2 = cfg['model_type'] == 'qwen2'
qkv_bias = qwen2 or cfg.get('attention_bias', False)
o_bias = (not qwen2) and cfg.get('attention_bias', False)
def rms(x, w):
    return x / np.sqrt((x * x).mean(-1, keepdims=True) + eps) * w
def rotate_half(x):
    h = x.shape[-1] // 2
    return np.concatenate([-x[..., h:], x[..., :h]], -1)
def linear(x, p, bias):
    y = x @ W[p + '.weight'].T
    return y + W[p + '.bias'] if bias else y
inv_freq = 1.0 / theta ** (np.arange(0, hd, 2) / hd)
freqs = np.outer(np.arange(T), inv_freq)
emb = np.concatenate([freqs, freqs], -1)
cos, sin = np.cos(emb), np.sin(emb)
mask = np.triu(np.full((T, T), -np.inf), 1)
x = W['model.embed_tokens.weight'][tokens]
for l in range(cfg['num_hidden_layers']):
    p = 'model.layers.%d.' % l
    h = rms(x, W[p + 'input_layernorm.weight'])
    q = linear(h, p + 'self_attn.q_proj', qkv_bias).reshape(T, nh, hd)
    k = linear(h, p + 'self_attn.k_proj', qkv_bias).reshape(T, nkv, hd)
    v = linear(h, p + 'self_attn.v_proj', qkv_bias).reshape(T, nkv, hd)
    if cfg['model_type'] == 'qwen3':
        q = rms(q, W[p + 'self_attn.q_norm.weight'])
        k = rms(k, W[p + 'self_attn.k_norm.weight'])
    q, k, v = q.transpose(1, 0, 2), k.transpose(1, 0, 2), v.transpose(1, 0, 2)
    q = q * cos + rotate_half(q) * sin
    k = k * cos + rotate_half(k) * sin
    k = np.repeat(k, nh // nkv, axis=0)
    v = np.repeat(v, nh // nkv, axis=0)
    s = q @ k.transpose(0, 2, 1) / np.sqrt(hd) + mask
    s = np.exp(s - s.max(-1, keepdims=True))
    s = s / s.sum(-1, keepdims=True)
    a = (s @ v).transpose(1, 0, 2).reshape(T, nh * hd)
    x = x + linear(a, p + 'self_attn.o_proj', o_bias)
    h = rms(x, W[p + 'post_attention_layernorm.weight'])
    g = linear(h, p + 'mlp.gate_proj', False)
    u = linear(h, p + 'mlp.up_proj', False)
    x = x + linear(g / (1 + np.exp(-g)) * u, p + 'mlp.down_proj', False)
x = rms(x, W['model.norm.weight'])
head = W['model.embed_tokens.weight'] if cfg.get('tie_word_embeddings') else W['lm_head.weight']
print(json.dumps((x @ head.T).tolist()))
`;

function numpyLogits(dir: string, tokens: number[]): number[][] {
  const r = spawnSync('python3', ['-c', NUMPY_FORWARD, dir, JSON.stringify(tokens)], {
    encoding: 'utf8',
    maxBuffer: 64 << 20,
  });
  if (r.status !== 0) throw new Error(`python3 failed: ${r.stderr}`);
  return JSON.parse(r.stdout) as number[][];
}

const hasNumpy = spawnSync('python3', ['-c', 'import numpy'], { encoding: 'utf8' }).status === 0;
if (!hasNumpy) console.warn('[skip] numpy reference forward: python3 with numpy is not available');

/** Weights of `config` with every tensor drawn at a scale where every part of the model matters. */
function scrambled(config: DecoderConfig, seed: number): ModelWeights {
  const w = initTinyWeights(config, seed);
  const rng = createRng(seed).fork('scramble');
  for (const [name, t] of w.tensors) {
    const v = t.data as Float32Array;
    const isNorm = name.endsWith('norm.weight');
    for (let i = 0; i < v.length; i++) v[i] = isNorm ? 1 + 0.3 * rng.normal() : 0.25 * rng.normal();
  }
  return w;
}

function maxAbsDiff(a: Float32Array[], b: number[][]): number {
  let m = 0;
  for (let p = 0; p < a.length; p++)
    for (let i = 0; i < a[p]!.length; i++) m = Math.max(m, Math.abs(a[p]![i]! - b[p]![i]!));
  return m;
}

function bitsEqual(a: Tensor, b: Tensor): boolean {
  if (a.dtype !== b.dtype || a.shape.join() !== b.shape.join()) return false;
  const x = new Uint8Array(a.data.buffer, a.data.byteOffset, a.data.byteLength);
  const y = new Uint8Array(b.data.buffer, b.data.byteOffset, b.data.byteLength);
  return x.length === y.length && x.every((v, i) => v === y[i]);
}

describe('createTinyQwen2', () => {
  let root: string;
  beforeAll(async () => {
    root = await mkdtemp(join(tmpdir(), 'tiny-qwen2-'));
  });
  afterAll(() => rm(root, { recursive: true, force: true }));

  it('writes a real HF folder that loads back bit for bit, same seed → same bytes', async () => {
    const opts = { seed: 7, hiddenSize: 32, layers: 2, heads: 4, kvHeads: 2, intermediateSize: 48 };
    const a = await createTinyQwen2(join(root, 'a'), opts);
    const b = await createTinyQwen2(join(root, 'b'), opts);
    const c = await createTinyQwen2(join(root, 'c'), { ...opts, seed: 8 });
    expect((await readdir(a.dir)).sort()).toEqual([
      'config.json',
      'generation_config.json',
      'model.safetensors',
      'tokenizer.json',
      'tokenizer_config.json',
    ]);
    const bytes = (m: { dir: string }) => readFile(join(m.dir, 'model.safetensors'));
    expect((await bytes(a)).equals(await bytes(b))).toBe(true);
    expect((await bytes(a)).equals(await bytes(c))).toBe(false);

    const config = JSON.parse(await readFile(join(a.dir, 'config.json'), 'utf8'));
    expect(config).toMatchObject({
      model_type: 'qwen2',
      architectures: ['Qwen2ForCausalLM'],
      hidden_size: 32,
      num_key_value_heads: 2,
      vocab_size: 259,
      torch_dtype: 'float32',
      tie_word_embeddings: true,
      eos_token_id: 258,
    });
    const gen = JSON.parse(await readFile(join(a.dir, 'generation_config.json'), 'utf8'));
    expect(gen.eos_token_id).toEqual([258, 256]);

    const loaded = await loadHfModel(a.dir, { dtype: 'keep' });
    expect(loaded.config).toEqual(a.weights.config);
    expect([...loaded.tensors.keys()].sort()).toEqual([...a.weights.tensors.keys()].sort());
    for (const [name, t] of a.weights.tensors)
      expect(bitsEqual(loaded.tensors.get(name)!, t), name).toBe(true);

    // The written tokenizer files load in @huggingface/tokenizers and agree with the in-memory one.
    const tok = await loadTokenizer(a.dir);
    expect(tok).toBeInstanceOf(HfTokenizer);
    const text = '<|im_start|>user\n2+2=?<|im_end|>\n';
    expect(Array.from(tok.encode(text))).toEqual(Array.from(a.tokenizer.encode(text)));
  });

  it('initialises like transformers: N(0, 0.02) matrices, unit norms, zero biases', async () => {
    const m = await createTinyQwen2(join(root, 'init'), { seed: 1, hiddenSize: 64, heads: 4 });
    const embed = tensorToFloat32(m.weights.tensors.get('model.embed_tokens.weight')!);
    let s = 0;
    let s2 = 0;
    for (const v of embed) {
      s += v;
      s2 += v * v;
    }
    const mean = s / embed.length;
    const std = Math.sqrt(s2 / embed.length - mean * mean);
    // 259·64 = 16,576 draws: the sample std is within a few percent of 0.02.
    expect(Math.abs(std - 0.02)).toBeLessThan(0.001);
    expect(Math.abs(mean)).toBeLessThan(0.001);
    expect(
      tensorToFloat32(m.weights.tensors.get('model.layers.1.input_layernorm.weight')!).every(
        (v) => v === 1,
      ),
    ).toBe(true);
    expect(
      tensorToFloat32(m.weights.tensors.get('model.layers.0.self_attn.q_proj.bias')!).every(
        (v) => v === 0,
      ),
    ).toBe(true);
  });

  it('bf16 storage: the returned weights are the stored bf16 bits; the forward runs on them', async () => {
    const m = await createTinyQwen2(join(root, 'bf16'), {
      seed: 3,
      dtype: 'BF16',
      hiddenSize: 32,
      heads: 2,
    });
    expect(m.weights.config.torchDtype).toBe('bfloat16');
    const loaded = await loadHfModel(m.dir, { dtype: 'keep' });
    for (const [name, t] of m.weights.tensors) {
      expect(t.dtype).toBe('BF16');
      expect(bitsEqual(loaded.tensors.get(name)!, t), name).toBe(true);
    }
    const model = new ReferenceDecoder(await loadHfModel(m.dir));
    const prompt = m.tokenizer.encode(
      m.tokenizer.applyChatTemplate([{ role: 'user', content: 'hi' }], {
        addGenerationPrompt: true,
      }),
    );
    const r = generateGreedy(model, prompt, { maxNewTokens: 5, stopTokenIds: [258] });
    expect(r.ids.slice(0, prompt.length)).toEqual(Array.from(prompt));
    for (const id of r.ids) expect(id >= 0 && id < 259).toBe(true);
  });

  it('rejects a vocabulary smaller than the tokenizer', () => {
    expect(() => tinyQwen2Config({ seed: 0, vocabSize: 100 })).toThrow(RangeError);
  });
});

describe.skipIf(!hasNumpy)('ReferenceDecoder vs numpy HF forward', () => {
  let root: string;
  beforeAll(async () => {
    root = await mkdtemp(join(tmpdir(), 'ref-vs-numpy-'));
  });
  afterAll(() => rm(root, { recursive: true, force: true }));

  const tokens = [256, 72, 101, 108, 108, 111, 44, 32, 258, 10, 257, 3, 200];
  const cases: {
    name: string;
    config: DecoderConfig;
    dtype: WeightDType;
    shard?: number;
    tol: number;
  }[] = [
    {
      name: 'Qwen2, q/k/v biases, GQA 4/2, tied, f32',
      config: tinyQwen2Config({
        seed: 0,
        hiddenSize: 32,
        heads: 4,
        kvHeads: 2,
        intermediateSize: 40,
        layers: 2,
      }),
      dtype: 'F32',
      tol: 1e-5,
    },
    {
      name: 'Qwen2, MHA 2/2, untied, bf16, sharded',
      config: tinyQwen2Config({
        seed: 0,
        hiddenSize: 16,
        heads: 2,
        intermediateSize: 24,
        layers: 3,
        tieWordEmbeddings: false,
        ropeTheta: 10000,
      }),
      dtype: 'BF16',
      shard: 2000,
      tol: 1e-5,
    },
    {
      name: 'Qwen2, GQA 6/3, f16 storage',
      config: tinyQwen2Config({
        seed: 0,
        hiddenSize: 24,
        heads: 6,
        kvHeads: 3,
        intermediateSize: 20,
      }),
      dtype: 'F16',
      tol: 1e-5,
    },
    {
      name: 'Qwen3, q/k norm, head_dim 16 ≠ hidden/heads, GQA 4/1',
      config: {
        ...tinyQwen2Config({
          seed: 0,
          hiddenSize: 32,
          heads: 4,
          kvHeads: 1,
          headDim: 16,
          intermediateSize: 40,
        }),
        modelType: 'qwen3',
        qkvBias: false,
        qkNorm: true,
      },
      dtype: 'F32',
      tol: 1e-5,
    },
    {
      name: 'Llama with attention_bias (q/k/v and o biases)',
      config: {
        ...tinyQwen2Config({ seed: 0, hiddenSize: 24, heads: 3, kvHeads: 1, intermediateSize: 30 }),
        modelType: 'llama',
        qkvBias: true,
        oBias: true,
      },
      dtype: 'F32',
      tol: 1e-5,
    },
  ];

  for (const [i, c] of cases.entries()) {
    it(c.name, async () => {
      const dir = join(root, `case-${i}`);
      const w = scrambled(c.config, 100 + i);
      await saveHfModel(dir, w, { dtype: c.dtype, ...(c.shard ? { maxShardSize: c.shard } : {}) });
      if (c.shard) expect(await readdir(dir)).toContain('model.safetensors.index.json');
      const model = new ReferenceDecoder(await loadHfModel(dir));
      const ours = model.forwardSequence(tokens);
      const ref = numpyLogits(dir, tokens);
      // Logits here are O(1–10): the scrambled weights make attention, biases and norms matter.
      let scale = 0;
      for (const row of ref) for (const v of row) scale = Math.max(scale, Math.abs(v));
      expect(scale).toBeGreaterThan(0.5);
      expect(maxAbsDiff(ours, ref)).toBeLessThan(c.tol * Math.max(1, scale));
    });
  }

  it('the KV-cached forward equals a fresh forward of each prefix (cache only stores the past)', async () => {
    const c = cases[0]!;
    const model = new ReferenceDecoder(scrambled(c.config, 5));
    const full = model.forwardSequence(tokens);
    const prefix = model.forwardSequence(tokens.slice(0, 6));
    expect(Array.from(prefix[5]!)).toEqual(Array.from(full[5]!));
  });
});
