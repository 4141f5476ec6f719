import { mkdir, mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import {
  DataFormatError,
  FlowGrpoError,
  SafetensorsError,
  ValidationError,
  writeSafetensors,
} from '@flowgrpo/core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import {
  createSession,
  deviceAvailability,
  ExecutionProviderUnavailableError,
  loadDecoderModel,
  loadHfModel,
  ModelLoadError,
  parseDecoderConfig,
  resolveDevice,
  WeightsMismatchError,
} from '../src/index.js';
import {
  parseLlama2cCheckpoint,
  parseLlama2cHeader,
} from '../src/models/weights/llama2c-checkpoint.js';
import { expectedTensorShapes } from '../src/models/weights/tensor-names.js';

// The fault matrix of @flowgrpo/trainer at its inputs: corrupt llama2.c checkpoints, a config
// that does not match its weights, a corrupt ONNX model, and an execution provider that is not
// there. Each case states the expected typed error (with the file, tensor or fix a user needs)
// and then checks that the run continues: a good model loads right after, in the same process.

let dir: string;
beforeAll(async () => {
  dir = await mkdtemp(join(tmpdir(), 'flowgrpo-trainer-faults-'));
});
afterAll(async () => {
  await rm(dir, { recursive: true, force: true });
});

/** A llama2.c checkpoint: 7 int32 header fields, then `floats` float32 values. */
function llama2c(header: number[], floats = 0): Uint8Array {
  const buf = new ArrayBuffer(28 + floats * 4);
  new Int32Array(buf, 0, 7).set(header);
  return new Uint8Array(buf);
}

// A valid tiny checkpoint: dim 4, hidden 6, 1 layer, 2 heads, 1 kv head, vocab 5 (shared
// classifier), seq 3. Floats as llama2.c's export lays them out: the embedding, per layer
// rms_att, wq, wk, wv, wo, rms_ffn, w1, w2, w3, then rms_final and the two freq_cis tables
// (seq × headSize/2 each).
const GOOD_HEADER = [4, 6, 1, 2, 1, 5, 3];
function goodFloats(): number {
  const [dim, hidden, layers, heads, kv, vocab, seq] = GOOD_HEADER as [
    number,
    number,
    number,
    number,
    number,
    number,
    number,
  ];
  const headSize = dim / heads;
  const kvDim = (dim * kv) / heads;
  const perLayer = dim + dim * dim + 2 * dim * kvDim + dim * dim + dim + 3 * dim * hidden;
  return vocab * dim + layers * perLayer + dim + seq * headSize;
}

const expectGoodCheckpointLoads = () => {
  const w = parseLlama2cCheckpoint(llama2c(GOOD_HEADER, goodFloats()));
  expect(w.config.hiddenSize).toBe(4);
};

describe('corrupt llama2.c checkpoints', () => {
  // Expected: DataFormatError (with the file when read from disk), before any allocation sized
  // by the header's claims.
  it.each([
    ['shorter than its header', new Uint8Array(10)],
    ['all-zero header', llama2c([0, 0, 0, 0, 0, 0, 0])],
    ['negative sizes', llama2c([-4, 6, 1, 2, 1, 5, 3])],
    ['dim not a multiple of the heads', llama2c([5, 6, 1, 2, 1, 5, 3])],
    ['heads not a multiple of the kv heads', llama2c([4, 6, 1, 3, 2, 5, 3])],
    [
      'a header claiming 2^20-wide layers over 32 bytes of data',
      llama2c([1 << 20, 1 << 21, 1000, 16, 16, 32000, 4096], 8),
    ],
    ['a good header with its data cut short', llama2c(GOOD_HEADER, goodFloats() - 7)],
  ] as const)('%s', async (label, bytes) => {
    expect(() => parseLlama2cCheckpoint(bytes)).toThrow(DataFormatError);
    const path = join(dir, `${label.replace(/\W+/g, '-')}.bin`);
    await writeFile(path, bytes);
    const err = await loadDecoderModel(path).catch((e: unknown) => e);
    expect(DataFormatError.isInstance(err), String(err)).toBe(true);
    expect((err as DataFormatError).file).toBe(path);
    expectGoodCheckpointLoads();
  });

  it('the header alone parses as written (so the cases above fail for the stated reason)', () => {
    expect(parseLlama2cHeader(llama2c(GOOD_HEADER))).toMatchObject({
      dim: 4,
      nLayers: 1,
      vocabSize: 5,
      sharedClassifier: true,
    });
  });
});

describe('config.json vs weights', () => {
  // A 1-layer llama: hidden 8, 2 heads, 1 kv head (head_dim 4), ffn 16, vocab 10, tied.
  const config = {
    model_type: 'llama',
    vocab_size: 10,
    hidden_size: 8,
    intermediate_size: 16,
    num_hidden_layers: 1,
    num_attention_heads: 2,
    num_key_value_heads: 1,
    tie_word_embeddings: true,
  };
  const tensors = (override: Readonly<Record<string, readonly number[] | null>> = {}) => {
    const shapes = new Map(expectedTensorShapes(parseDecoderConfig(config)));
    for (const [name, shape] of Object.entries(override)) {
      if (shape === null) shapes.delete(name);
      else shapes.set(name, [...shape]);
    }
    return [...shapes].map(([name, shape]) => {
      const data = new Float32Array(shape.reduce((a, b) => a * b, 1)).fill(0.25);
      return [name, { dtype: 'F32' as const, shape, data }] as const;
    });
  };
  async function folder(name: string, cfg: unknown, weights: ReturnType<typeof tensors>) {
    const d = join(dir, name);
    await rm(d, { recursive: true, force: true });
    await mkdir(d);
    await writeFile(join(d, 'config.json'), typeof cfg === 'string' ? cfg : JSON.stringify(cfg));
    await writeSafetensors(join(d, 'model.safetensors'), weights);
    return d;
  }
  const expectGoodFolderLoads = async () => {
    const w = await loadHfModel(await folder('good', config, tensors()));
    expect(w.tensors.get('model.norm.weight')?.shape).toEqual([8]);
  };

  it.each([
    [
      'a tensor of the wrong shape',
      { 'model.layers.0.self_attn.k_proj.weight': [8, 8] },
      'model.layers.0.self_attn.k_proj.weight',
    ],
    [
      'a missing tensor',
      { 'model.layers.0.mlp.down_proj.weight': null },
      'model.layers.0.mlp.down_proj.weight',
    ],
    [
      'a tensor of another architecture',
      { 'model.layers.0.self_attn.q_proj.bias': [8] },
      'model.layers.0.self_attn.q_proj.bias',
    ],
  ] as const)('%s: WeightsMismatchError naming the tensor', async (label, override, tensor) => {
    const d = await folder(label.replace(/\W+/g, '-'), config, tensors(override));
    const err = await loadDecoderModel(d).catch((e: unknown) => e);
    expect(WeightsMismatchError.isInstance(err), String(err)).toBe(true);
    expect((err as WeightsMismatchError).tensor).toBe(tensor);
    await expectGoodFolderLoads();
  });

  it('a config with more layers than the weights hold: the first missing tensor is named', async () => {
    const d = await folder('two-layers', { ...config, num_hidden_layers: 2 }, tensors());
    const err = await loadDecoderModel(d).catch((e: unknown) => e);
    expect(WeightsMismatchError.isInstance(err)).toBe(true);
    expect((err as WeightsMismatchError).tensor).toMatch(/^model\.layers\.1\./);
    expect((err as WeightsMismatchError).actual).toBeUndefined();
    await expectGoodFolderLoads();
  });

  it('a config.json that is not JSON, or not a decoder config: a typed error', async () => {
    const notJson = await folder('not-json', '{"model_type": "llama", ', tensors());
    const e1 = await loadDecoderModel(notJson).catch((e: unknown) => e);
    expect(FlowGrpoError.isInstance(e1), String(e1)).toBe(true);
    const noHidden = { ...config, hidden_size: undefined };
    const e2 = await loadDecoderModel(await folder('no-hidden', noHidden, tensors())).catch(
      (e: unknown) => e,
    );
    expect(ValidationError.isInstance(e2), String(e2)).toBe(true);
    await expectGoodFolderLoads();
  });

  it('corrupt weights beside a good config: SafetensorsError naming the file', async () => {
    const d = await folder('corrupt-weights', config, tensors());
    await writeFile(join(d, 'model.safetensors'), new Uint8Array([1, 2, 3]));
    const err = await loadDecoderModel(d).catch((e: unknown) => e);
    expect(SafetensorsError.isInstance(err), String(err)).toBe(true);
    expect((err as SafetensorsError).file).toBe(join(d, 'model.safetensors'));
    await expectGoodFolderLoads();
  });
});

describe('ONNX Runtime inputs', () => {
  it('a corrupt ONNX model: ModelLoadError, and the process is still here', async () => {
    const err = await createSession(new Uint8Array([8, 7, 0xff, 1, 2, 3]), { device: 'cpu' }).catch(
      (e: unknown) => e,
    );
    expect(ModelLoadError.isInstance(err), String(err)).toBe(true);
    const missing = await createSession(join(dir, 'absent.onnx'), { device: 'cpu' }).catch(
      (e: unknown) => e,
    );
    expect(ModelLoadError.isInstance(missing)).toBe(true);
    expect((missing as ModelLoadError).reason).toBe('no such file');
  });

  it('a missing execution provider: ExecutionProviderUnavailableError with the fix', async (ctx) => {
    // CUDA's EP comes from onnxruntime-node's install step, which this project skips; on a
    // machine where it was installed the case has nothing to show.
    const cuda = await deviceAvailability('cuda');
    if (cuda.available) {
      ctx.skip(`the CUDA execution provider is installed here`);
      return;
    }
    const err = await resolveDevice('cuda').catch((e: unknown) => e);
    expect(ExecutionProviderUnavailableError.isInstance(err)).toBe(true);
    expect((err as ExecutionProviderUnavailableError).device).toBe('cuda');
    expect((err as ExecutionProviderUnavailableError).fix.length).toBeGreaterThan(10);
    const viaSession = await createSession(new Uint8Array(0), { device: 'cuda' }).catch(
      (e: unknown) => e,
    );
    expect(ExecutionProviderUnavailableError.isInstance(viaSession)).toBe(true);
    // The run continues on the CPU.
    expect(await resolveDevice('cpu')).toBe('cpu');
  });
});
