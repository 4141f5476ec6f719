// Generation on the WebGPU EP (lavapipe in CI) with the graphs a trainer opens. The fused
// `generate` graph runs its decode loop on the CPU EP only, so on WebGPU the generator steps with
// the standard decode graph — which a trainer that opened `generate` alone used not to have:
// every rollout failed with "the decode graph was not opened (graphs: generate)".
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { Trajectory } from '@flowgrpo/core';
import {
  DecoderArtifacts,
  deviceAvailability,
  LocalPolicyEngine,
  readArtifactsManifest,
  samplingGraph,
} from '@flowgrpo/models';
import { afterAll, describe, expect, it } from 'vitest';
import { tinyConfig, tinySetup, tinyTrainer } from './support/tiny-grpo.js';

const webgpu = await deviceAvailability('webgpu');
if (!webgpu.available) console.info(`[generation] WebGPU tests skipped: ${webgpu.reason}`);

const tmp = mkdtempSync(join(tmpdir(), 'flowgrpo-webgpu-generation-'));
afterAll(() => rmSync(tmp, { recursive: true, force: true }));

describe.skipIf(!webgpu.available)(
  `generation on WebGPU${webgpu.available ? '' : ` (skipped: ${webgpu.reason})`}`,
  () => {
    it('samples with the decode graph where the fused loop cannot run', async () => {
      const { artifacts } = await tinySetup(tmp);
      const manifest = readArtifactsManifest(artifacts);
      expect(manifest.graphs.generate).toBeDefined();
      expect(samplingGraph(manifest, 'cpu')).toBe('generate');
      expect(samplingGraph(manifest, 'webgpu')).toBe('decode');
    });

    it('a LocalPolicyEngine over the generate graph alone generates on WebGPU as on the CPU', async () => {
      const { artifacts, model } = await tinySetup(tmp);
      const greedy = async (device: 'cpu' | 'webgpu') => {
        // As the trainer opened them before choosing by device: the generate graph only.
        const art = await DecoderArtifacts.open(artifacts, { graphs: ['generate'], device });
        try {
          const engine = new LocalPolicyEngine({ artifacts: art, tokenizer: model.tokenizer });
          const r = await engine.generate({
            prompt: 'The Long Storm of',
            maxTokens: 12,
            temperature: 0,
          });
          return {
            tokens: Array.from(r.actionTokens),
            fused: await engine.generator.usesFusedGraph(),
            decodeOn: art.sessions.decode?.device,
          };
        } finally {
          await art.release();
        }
      };
      const cpu = await greedy('cpu');
      const gpu = await greedy('webgpu');
      expect(cpu.fused).toBe(true);
      expect(gpu.fused).toBe(false);
      expect(gpu.decodeOn).toBe('webgpu');
      expect(gpu.tokens.length).toBeGreaterThan(0);
      // float32 kernels differ slightly between the EPs; greedy picks the same tokens here.
      expect(gpu.tokens).toEqual(cpu.tokens);
    });

    it("a GRPO step's rollouts run on WebGPU and train", async () => {
      const out = join(tmp, 'grpo');
      const trajectories: Trajectory[] = [];
      const trainer = await tinyTrainer(tmp, tinyConfig(out, { max_steps: 1 }), {
        wrapAgent: (a) => ({
          async run(question, context) {
            const t = await a.run(question, context);
            trajectories.push(t);
            return t;
          },
        }),
        extra: { device: 'webgpu' },
      });
      await trainer.train();
      expect(trajectories).toHaveLength(8); // queries_per_step 2 × num_generations 4
      const failed = trajectories.filter((t) => t.stopReason === 'error');
      expect(failed.map((t) => t.metadata)).toEqual([]);
      const steps = readFileSync(join(out, 'metrics.jsonl'), 'utf8')
        .trim()
        .split('\n')
        .map((l) => JSON.parse(l) as { step?: number; loss?: number });
      expect(steps.some((s) => s.step === 1 && Number.isFinite(s.loss))).toBe(true);
    });
  },
);
