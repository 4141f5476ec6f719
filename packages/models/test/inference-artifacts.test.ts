// buildDecoderArtifacts on its own: the inference graphs only (this package never builds the
// trainer's train_step), a train_step asked for without its builder refused before anything is
// written, and a builder passed in adding its graph to the same folder and weights.data. Expected
// values come from the written files and the tiny model's config.
import { existsSync, mkdtempSync, rmSync, statSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import {
  buildDecoderArtifacts,
  buildDecoderGraph,
  DEFAULT_GRAPHS,
  DecoderArtifacts,
  initTinyWeights,
  type LoraConfig,
  readArtifactsManifest,
  tinyQwen2Config,
} from '../src/index.js';

const tmp = mkdtempSync(join(tmpdir(), 'flowgrpo-inference-artifacts-'));
afterAll(() => rmSync(tmp, { recursive: true, force: true }));

const config = tinyQwen2Config({ seed: 0, hiddenSize: 32, layers: 1, heads: 4, kvHeads: 2 });
const weights = initTinyWeights(config, 3);
const lora: LoraConfig = { r: 2, alpha: 4, targetModules: ['q_proj', 'v_proj'] };

describe('inference artifacts (no trainer)', () => {
  it('with LoRA and no builders: every inference graph, no train_step', async () => {
    const dir = join(tmp, 'inference');
    const m = buildDecoderArtifacts(weights, dir, { lora, maxPositions: 32 });
    expect(Object.keys(m.graphs)).toEqual(DEFAULT_GRAPHS.filter((k) => k !== 'train_step'));
    expect(existsSync(join(dir, 'train_step.onnx'))).toBe(false);
    expect(readArtifactsManifest(dir)).toEqual(m);
    const artifacts = await DecoderArtifacts.open(dir, { graphs: ['logprobs'] });
    expect(artifacts.session('logprobs').inputNames).toContain('lora_scale');
    await artifacts.release();
  });

  it('train_step without its builder: a RangeError asking for one, nothing written', () => {
    const dir = join(tmp, 'refused');
    expect(() => buildDecoderArtifacts(weights, dir, { lora, graphs: ['train_step'] })).toThrow(
      /no builder for the 'train_step' graph/,
    );
    expect(existsSync(dir)).toBe(false);
  });

  it('a builder adds its kind to the same folder and the one weights.data', () => {
    const dir = join(tmp, 'builder');
    const calls: string[] = [];
    const m = buildDecoderArtifacts(weights, dir, {
      lora,
      graphs: ['decode', 'train_step'],
      builders: {
        // Any graph over the written base weights will do: the plumbing is what is tested.
        train_step: (base, l) => {
          calls.push(`train_step r=${l?.r}`);
          return buildDecoderGraph(base, { kind: 'logprobs', ...(l && { lora: l }) });
        },
      },
    });
    expect(calls).toEqual(['train_step r=2']);
    expect(Object.keys(m.graphs)).toEqual(['decode', 'train_step']);
    expect(statSync(join(dir, 'train_step.onnx')).size).toBeGreaterThan(0);
    expect(m.weights.bytes).toBe(statSync(join(dir, 'weights.data')).size);
  });
});
