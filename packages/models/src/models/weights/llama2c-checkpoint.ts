import { readFile } from 'node:fs/promises';
import { createTensor, DataFormatError, type Tensor } from '@flowgrpo/core';
import type { DecoderConfig } from '../config.js';
import type { ModelWeights } from './model-weights.js';
import { EMBED_TOKENS, FINAL_NORM, LM_HEAD, layerTensorNames } from './tensor-names.js';
import { checkTensorShapes } from './validate.js';

// llama2.c's legacy checkpoint (version 0, as run.c reads it):
//   7 × int32  dim, hidden_dim, n_layers, n_heads, n_kv_heads, vocab_size, seq_len
//              (a negative vocab_size means the classifier is NOT shared with the embedding)
//   float32    token_embedding [vocab, dim]
//              rms_att [L, dim], wq [L, dim, dim], wk [L, kv_dim, dim], wv [L, kv_dim, dim],
//              wo [L, dim, dim], rms_ffn [L, dim], w1 [L, hidden, dim], w2 [L, dim, hidden],
//              w3 [L, hidden, dim], rms_final [dim],
//              freq_cis_real, freq_cis_imag [seq_len, head_size / 2] each (unused: RoPE is
//              recomputed), then wcls [vocab, dim] only when unshared.
// Matrices are row-major [out, in], exactly like torch.nn.Linear.weight, so only the RoPE row
// order of wq/wk differs from HF (see permuteRopeRows). w1 = gate_proj, w3 = up_proj,
// w2 = down_proj.

export interface Llama2cHeader {
  dim: number;
  hiddenDim: number;
  nLayers: number;
  nHeads: number;
  nKvHeads: number;
  vocabSize: number;
  seqLen: number;
  sharedClassifier: boolean;
}

const HEADER_BYTES = 7 * 4;

export function parseLlama2cHeader(bytes: Uint8Array, file?: string): Llama2cHeader {
  if (bytes.byteLength < HEADER_BYTES) {
    throw new DataFormatError(
      `llama2.c checkpoint is ${bytes.byteLength} bytes, shorter than its header`,
      {
        ...(file === undefined ? {} : { file }),
      },
    );
  }
  const v = new DataView(bytes.buffer, bytes.byteOffset, HEADER_BYTES);
  const [dim, hiddenDim, nLayers, nHeads, nKvHeads, vocab, seqLen] = Array.from(
    { length: 7 },
    (_, i) => v.getInt32(i * 4, true),
  ) as [number, number, number, number, number, number, number];
  const h: Llama2cHeader = {
    dim,
    hiddenDim,
    nLayers,
    nHeads,
    nKvHeads,
    vocabSize: Math.abs(vocab),
    seqLen,
    sharedClassifier: vocab > 0,
  };
  const bad =
    [dim, hiddenDim, nLayers, nHeads, nKvHeads, h.vocabSize, seqLen].some((x) => x <= 0) ||
    dim % nHeads !== 0 ||
    nHeads % nKvHeads !== 0 ||
    (dim / nHeads) % 2 !== 0;
  if (bad) {
    throw new DataFormatError(`not a llama2.c checkpoint header: ${JSON.stringify(h)}`, {
      ...(file === undefined ? {} : { file }),
    });
  }
  return h;
}

/** The HF-family config equivalent to a llama2.c header (llama2.c hard-codes θ and eps). */
export function llama2cConfig(h: Llama2cHeader): DecoderConfig {
  return {
    modelType: 'llama',
    vocabSize: h.vocabSize,
    hiddenSize: h.dim,
    intermediateSize: h.hiddenDim,
    numHiddenLayers: h.nLayers,
    numAttentionHeads: h.nHeads,
    numKeyValueHeads: h.nKvHeads,
    headDim: h.dim / h.nHeads,
    ropeTheta: 10000,
    rmsNormEps: 1e-5,
    tieWordEmbeddings: h.sharedClassifier,
    qkvBias: false,
    oBias: false,
    mlpBias: false,
    qkNorm: false,
    maxPositionEmbeddings: h.seqLen,
    torchDtype: 'float32',
    initializerRange: 0.02,
    // llama2.c's sentencepiece tokenizers: 1 = <s>, 2 = </s>.
    bosTokenId: 1,
    eosTokenId: 2,
  };
}

/**
 * Reorders the rows of a q or k projection from interleaved-pair RoPE (llama2.c / Meta: pairs
 * (2j, 2j+1) of each head rotate together) to HF's half rotation (pairs (j, j + d/2)).
 *
 * Within each head of size d, HF row  c·d/2 + j  takes source row  2j + c  (c ∈ {0, 1},
 * j < d/2):  hf[h·d + c·d/2 + j] = src[h·d + 2j + c].  In torch terms
 * `w.view(heads, d/2, 2, in).transpose(1, 2).reshape(heads·d, in)` — the inverse of what
 * llama2.c's export.py `permute_reverse` does when it goes from HF to llama2.c
 * (`view(heads, 2, d/2, in).transpose(1, 2)`). Both layouts use the frequency θ^(−2j/d) for
 * pair j, so q·k scores, and therefore the whole forward, are unchanged.
 */
export function permuteRopeRows(
  w: Float32Array,
  heads: number,
  headDim: number,
  inFeatures: number,
): Float32Array<ArrayBuffer> {
  const out = new Float32Array(w.length);
  const half = headDim / 2;
  for (let h = 0; h < heads; h++) {
    for (let c = 0; c < 2; c++) {
      for (let j = 0; j < half; j++) {
        const dst = (h * headDim + c * half + j) * inFeatures;
        const src = (h * headDim + 2 * j + c) * inFeatures;
        out.set(w.subarray(src, src + inFeatures), dst);
      }
    }
  }
  return out;
}

/** Parses a llama2.c checkpoint held in memory into HF-named float32 weights. */
export function parseLlama2cCheckpoint(bytes: Uint8Array, file?: string): ModelWeights {
  const h = parseLlama2cHeader(bytes, file);
  const config = llama2cConfig(h);
  const headSize = h.dim / h.nHeads;
  const kvDim = h.nKvHeads * headSize;
  const floats = Math.floor((bytes.byteLength - HEADER_BYTES) / 4);
  const aligned = (bytes.byteOffset + HEADER_BYTES) % 4 === 0;
  const data = aligned
    ? new Float32Array(bytes.buffer, bytes.byteOffset + HEADER_BYTES, floats)
    : new Float32Array(bytes.slice(HEADER_BYTES, HEADER_BYTES + floats * 4).buffer);
  let offset = 0;
  const take = (n: number, what: string): Float32Array<ArrayBuffer> => {
    if (offset + n > data.length) {
      throw new DataFormatError(
        `llama2.c checkpoint ends inside ${what}: needs ${(offset + n) * 4 + HEADER_BYTES} bytes, has ${bytes.byteLength}`,
        { ...(file === undefined ? {} : { file }) },
      );
    }
    const v = new Float32Array(data.subarray(offset, offset + n));
    offset += n;
    return v;
  };
  const L = h.nLayers;
  const embed = take(h.vocabSize * h.dim, 'token_embedding_table');
  const rmsAtt = take(L * h.dim, 'rms_att_weight');
  const wq = take(L * h.dim * h.dim, 'wq');
  const wk = take(L * kvDim * h.dim, 'wk');
  const wv = take(L * kvDim * h.dim, 'wv');
  const wo = take(L * h.dim * h.dim, 'wo');
  const rmsFfn = take(L * h.dim, 'rms_ffn_weight');
  const w1 = take(L * h.hiddenDim * h.dim, 'w1');
  const w2 = take(L * h.dim * h.hiddenDim, 'w2');
  const w3 = take(L * h.hiddenDim * h.dim, 'w3');
  const rmsFinal = take(h.dim, 'rms_final_weight');
  take((h.seqLen * headSize) / 2, 'freq_cis_real');
  take((h.seqLen * headSize) / 2, 'freq_cis_imag');
  const wcls = h.sharedClassifier ? undefined : take(h.vocabSize * h.dim, 'wcls');

  const tensors = new Map<string, Tensor<'F32'>>();
  const put = (name: string, shape: number[], values: Float32Array<ArrayBuffer>) =>
    tensors.set(name, createTensor('F32', shape, values));
  const layer = (all: Float32Array<ArrayBuffer>, l: number, size: number) =>
    all.subarray(l * size, (l + 1) * size);
  put(EMBED_TOKENS, [h.vocabSize, h.dim], embed);
  for (let l = 0; l < L; l++) {
    const n = layerTensorNames(l);
    put(n.inputNorm, [h.dim], layer(rmsAtt, l, h.dim).slice());
    put(
      n.qProj,
      [h.dim, h.dim],
      permuteRopeRows(layer(wq, l, h.dim * h.dim), h.nHeads, headSize, h.dim),
    );
    put(
      n.kProj,
      [kvDim, h.dim],
      permuteRopeRows(layer(wk, l, kvDim * h.dim), h.nKvHeads, headSize, h.dim),
    );
    put(n.vProj, [kvDim, h.dim], layer(wv, l, kvDim * h.dim).slice());
    put(n.oProj, [h.dim, h.dim], layer(wo, l, h.dim * h.dim).slice());
    put(n.postAttentionNorm, [h.dim], layer(rmsFfn, l, h.dim).slice());
    put(n.gateProj, [h.hiddenDim, h.dim], layer(w1, l, h.hiddenDim * h.dim).slice());
    put(n.downProj, [h.dim, h.hiddenDim], layer(w2, l, h.dim * h.hiddenDim).slice());
    put(n.upProj, [h.hiddenDim, h.dim], layer(w3, l, h.hiddenDim * h.dim).slice());
  }
  put(FINAL_NORM, [h.dim], rmsFinal);
  if (wcls !== undefined) put(LM_HEAD, [h.vocabSize, h.dim], wcls);
  checkTensorShapes(config, new Map([...tensors].map(([k, t]) => [k, t.shape])), file);
  return { config, tensors };
}

/** Reads a llama2.c `.bin` checkpoint (e.g. stories260K.bin) as HF-layout weights. */
export async function loadLlama2cCheckpoint(path: string): Promise<ModelWeights> {
  return parseLlama2cCheckpoint(new Uint8Array(await readFile(path)), path);
}
