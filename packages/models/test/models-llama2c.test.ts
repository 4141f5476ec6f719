// llama2.c checkpoints: the RoPE row permutation (checked by hand on a small matrix and against
// run.c's interleaved rotation written out here), a synthetic untied checkpoint, and fidelity on
// the real stories260K model against the logits and greedy tokens of llama2.c's own run.c.
import { readFileSync } from 'node:fs';
import { describe, expect, it } from 'vitest';
import { sharedPath, skipWithoutShared } from '../../../test-utils/shared.js';
import {
  Llama2cTokenizer,
  loadDecoderModel,
  loadLlama2cCheckpoint,
  loadTokenizer,
  WeightsMismatchError,
  weightAsFloat32,
} from '../src/index.js';
import {
  generateGreedy,
  ReferenceDecoder,
  referenceSequenceLogprobs,
  referenceTokenLogprob,
} from '../src/models/reference/reference-decoder.js';
import {
  parseLlama2cCheckpoint,
  permuteRopeRows,
} from '../src/models/weights/llama2c-checkpoint.js';
import { LM_HEAD } from '../src/models/weights/tensor-names.js';

/** run.c's RoPE: pairs (2i, 2i+1) of each head rotate by pos · θ^(-2i/d). */
function ropeInterleaved(v: Float64Array, headDim: number, pos: number): Float64Array {
  const out = Float64Array.from(v);
  for (let i = 0; i < v.length; i += 2) {
    const hd = i % headDim;
    const a = pos / 10000 ** (hd / headDim);
    out[i] = v[i]! * Math.cos(a) - v[i + 1]! * Math.sin(a);
    out[i + 1] = v[i]! * Math.sin(a) + v[i + 1]! * Math.cos(a);
  }
  return out;
}

/** HF's rotate_half RoPE: pairs (j, j + d/2) of each head. */
function ropeHalves(v: Float64Array, headDim: number, pos: number): Float64Array {
  const out = Float64Array.from(v);
  const half = headDim / 2;
  for (let h = 0; h < v.length; h += headDim) {
    for (let j = 0; j < half; j++) {
      const a = pos / 10000 ** ((2 * j) / headDim);
      const x1 = v[h + j]!;
      const x2 = v[h + j + half]!;
      out[h + j] = x1 * Math.cos(a) - x2 * Math.sin(a);
      out[h + j + half] = x2 * Math.cos(a) + x1 * Math.sin(a);
    }
  }
  return out;
}

function matVec(w: Float32Array, x: Float64Array, rows: number): Float64Array {
  const cols = x.length;
  const out = new Float64Array(rows);
  for (let i = 0; i < rows; i++) for (let j = 0; j < cols; j++) out[i]! += w[i * cols + j]! * x[j]!;
  return out;
}

describe('permuteRopeRows', () => {
  it('moves row 2j+c of each head to c·d/2+j (hand-derived on 2 heads of size 4)', () => {
    // One column, rows numbered 0..7: head 0 rows (0,1,2,3) become (0,2,1,3); head 1 likewise.
    const w = Float32Array.from([0, 1, 2, 3, 4, 5, 6, 7]);
    expect(Array.from(permuteRopeRows(w, 2, 4, 1))).toEqual([0, 2, 1, 3, 4, 6, 5, 7]);
    // Two columns: whole rows move.
    const w2 = Float32Array.from([0, 0.5, 1, 1.5, 2, 2.5, 3, 3.5]);
    expect(Array.from(permuteRopeRows(w2, 1, 4, 2))).toEqual([0, 0.5, 2, 2.5, 1, 1.5, 3, 3.5]);
  });

  it('half rotation of permuted rows gives the q·k scores of interleaved rotation of the originals', () => {
    // Random wq/wk (2 heads of size 8, input 6); scores compared at several position pairs.
    let s = 7;
    const rand = () => {
      s = (Math.imul(s, 1103515245) + 12345) >>> 0;
      return s / 2 ** 32 - 0.5;
    };
    const heads = 2;
    const d = 8;
    const inF = 6;
    const wq = Float32Array.from({ length: heads * d * inF }, rand);
    const wk = Float32Array.from({ length: heads * d * inF }, rand);
    const x = Float64Array.from({ length: inF }, rand);
    const y = Float64Array.from({ length: inF }, rand);
    const pq = permuteRopeRows(wq, heads, d, inF);
    const pk = permuteRopeRows(wk, heads, d, inF);
    for (const [pos1, pos2] of [
      [0, 0],
      [3, 1],
      [17, 5],
      [100, 99],
    ] as const) {
      const a = ropeInterleaved(matVec(wq, x, heads * d), d, pos1);
      const b = ropeInterleaved(matVec(wk, y, heads * d), d, pos2);
      const c = ropeHalves(matVec(pq, x, heads * d), d, pos1);
      const e = ropeHalves(matVec(pk, y, heads * d), d, pos2);
      for (let h = 0; h < heads; h++) {
        let s1 = 0;
        let s2 = 0;
        for (let i = h * d; i < (h + 1) * d; i++) {
          s1 += a[i]! * b[i]!;
          s2 += c[i]! * e[i]!;
        }
        expect(s2).toBeCloseTo(s1, 10);
      }
    }
  });
});

describe('referenceTokenLogprob', () => {
  it('is log softmax(logits / T) (hand-derived: logits [0, ln 3])', () => {
    // T = 1: p = [1/4, 3/4]. T = 2: logits [0, ln √3], p(1) = √3 / (1 + √3).
    expect(referenceTokenLogprob([0, Math.log(3)], 1)).toBeCloseTo(Math.log(0.75), 12);
    expect(referenceTokenLogprob([0, Math.log(3)], 0)).toBeCloseTo(Math.log(0.25), 12);
    expect(referenceTokenLogprob([0, Math.log(3)], 1, 2)).toBeCloseTo(
      Math.log(Math.sqrt(3) / (1 + Math.sqrt(3))),
      12,
    );
    expect(() => referenceTokenLogprob([0, 1], 0, 0)).toThrow(RangeError);
  });
});

describe('parseLlama2cCheckpoint', () => {
  // dim 4, hidden 6, 1 layer, 2 heads, 1 kv head, vocab -5 (untied), seq_len 3; weights 0, 1, 2, …
  function synthetic(vocab: number, extraFloats = 0): { bytes: Uint8Array; floats: number } {
    const dim = 4;
    const hidden = 6;
    const kvDim = 2;
    const headSize = 2;
    const v = Math.abs(vocab);
    const counts = [
      v * dim,
      dim,
      dim * dim,
      kvDim * dim,
      kvDim * dim,
      dim * dim,
      dim,
      hidden * dim,
      dim * hidden,
      hidden * dim,
      dim,
      (3 * headSize) / 2,
      (3 * headSize) / 2,
      vocab < 0 ? v * dim : 0,
    ];
    const floats = counts.reduce((a, b) => a + b, 0) + extraFloats;
    const buf = new ArrayBuffer(28 + floats * 4);
    new Int32Array(buf, 0, 7).set([dim, hidden, 1, 2, 1, vocab, 3]);
    const f = new Float32Array(buf, 28, floats);
    for (let i = 0; i < floats; i++) f[i] = i;
    return { bytes: new Uint8Array(buf), floats };
  }

  it('reads an untied classifier after the skipped freq_cis tables (offsets counted by hand)', () => {
    const { bytes, floats } = synthetic(-5);
    const w = parseLlama2cCheckpoint(bytes);
    expect(w.config.tieWordEmbeddings).toBe(false);
    expect(w.config.numKeyValueHeads).toBe(1);
    // wcls is the last 5·4 floats of the file: values floats-20 .. floats-1.
    const head = weightAsFloat32(w, LM_HEAD);
    expect(head[0]).toBe(floats - 20);
    expect(head[19]).toBe(floats - 1);
    // wv of layer 0 starts after embed (20), rms_att (4), wq (16), wk (8): value 48, unpermuted.
    expect(
      Array.from(weightAsFloat32(w, 'model.layers.0.self_attn.v_proj.weight').slice(0, 2)),
    ).toEqual([48, 49]);
    // wk rows (head size 2) keep their order: with d = 2 the permutation is the identity.
    expect(weightAsFloat32(w, 'model.layers.0.self_attn.k_proj.weight')[0]).toBe(40);
  });

  it('a tied checkpoint has no lm_head; a truncated one is rejected', () => {
    const { bytes } = synthetic(5);
    const w = parseLlama2cCheckpoint(bytes);
    expect(w.config.tieWordEmbeddings).toBe(true);
    expect(w.tensors.has(LM_HEAD)).toBe(false);
    expect(() => parseLlama2cCheckpoint(bytes.subarray(0, bytes.byteLength - 64))).toThrow(
      /ends inside/,
    );
    expect(WeightsMismatchError.code).toBe('WEIGHTS_MISMATCH');
  });
});

describe.skipIf(skipWithoutShared('stories260K fidelity'))('stories260K vs llama2.c run.c', () => {
  const dir = () => sharedPath('models', 'stories260K');

  it('teacher-forced logits match run.c within 1e-4 at every position', async () => {
    const model = new ReferenceDecoder(await loadLlama2cCheckpoint(`${dir()}/stories260K.bin`));
    const ref = JSON.parse(readFileSync(`${dir()}/logits-once-upon-a-time.json`, 'utf8')) as {
      prompt: string;
      tokens: number[];
      logits: number[][];
    };
    const tok = await Llama2cTokenizer.load(`${dir()}/tok512.bin`, 512);
    expect(Array.from(tok.encode(ref.prompt, { addBos: true }))).toEqual(ref.tokens);
    const logits = model.forwardSequence(ref.tokens);
    expect(logits.length).toBe(ref.logits.length);
    for (let p = 0; p < logits.length; p++) {
      let maxErr = 0;
      for (let i = 0; i < 512; i++)
        maxErr = Math.max(maxErr, Math.abs(logits[p]![i]! - ref.logits[p]![i]!));
      expect(maxErr, `position ${p}`).toBeLessThanOrEqual(1e-4);
    }
  });

  it('sequence logprobs equal log-softmax of run.c logits (temperature 1 and 0.7)', async () => {
    const model = new ReferenceDecoder(await loadLlama2cCheckpoint(`${dir()}/stories260K.bin`));
    const ref = JSON.parse(readFileSync(`${dir()}/logits-once-upon-a-time.json`, 'utf8')) as {
      tokens: number[];
      logits: number[][];
    };
    for (const temperature of [1, 0.7]) {
      const ours = referenceSequenceLogprobs(model, ref.tokens, { temperature });
      expect(ours.length).toBe(ref.tokens.length - 1);
      for (let t = 1; t < ref.tokens.length; t++) {
        const row = ref.logits[t - 1]!.map((v) => v / temperature);
        const lse = Math.log(row.reduce((a, v) => a + Math.exp(v), 0));
        expect(ours[t - 1]).toBeCloseTo(row[ref.tokens[t]!]! - lse, 4);
      }
    }
  });

  it('greedy decoding reproduces run.c -t 0 token for token (stopping at BOS), and its text', async () => {
    // The generic loaders pick the llama2.c formats for files (folders would be HF).
    const weights = await loadDecoderModel(`${dir()}/stories260K.bin`);
    expect(weights.tensors.get('model.layers.4.mlp.down_proj.weight')?.shape).toEqual([64, 172]);
    const model = new ReferenceDecoder(weights);
    const tok = await loadTokenizer(`${dir()}/tok512.bin`, { vocabSize: 512 });
    const entries = JSON.parse(readFileSync(`${dir()}/greedy.json`, 'utf8')) as {
      prompt: string;
      steps: number;
      text: string;
      ids: number[];
    }[];
    expect(entries.length).toBeGreaterThan(0);
    for (const e of entries) {
      // run.c encodes the prompt with BOS (an empty prompt is BOS alone), runs `steps` forward
      // passes (positions 0..steps-1), forces prompt tokens, and breaks when BOS is sampled.
      const prompt = tok.encode(e.prompt, { addBos: true });
      const r = generateGreedy(model, prompt, {
        maxNewTokens: e.steps - (prompt.length - 1),
        stopTokenIds: [1],
      });
      expect(r.ids).toEqual(e.ids);
      expect(tok.decode(r.ids)).toBe(e.text);
    }
  });
});
