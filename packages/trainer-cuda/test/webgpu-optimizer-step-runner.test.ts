// TrainStepRunner on the WebGPU EP (lavapipe in CI): the MLP of support/mlp-reference.ts fitted
// with parameters, gradients and AdamW moments kept in GPU buffers, compared step by step with the
// plain-TypeScript float64 loop. `disableCpuFallback` makes the sessions refuse to load if any
// node of the train step, the optimizer or the export graph would run on the CPU EP.

import { deviceAvailability } from '@flowgrpo/models';
import { describe, expect, it } from 'vitest';
import { TrainStepRunner } from '../src/index.js';
import {
  buildMlpLoss,
  HP,
  lrAt,
  maxRelError,
  ortBatch,
  ortParams,
  problem,
  referenceRun,
  SHAPES,
  STEPS,
} from './support/mlp-reference.js';

const webgpu = await deviceAvailability('webgpu');
if (!webgpu.available) console.info(`[optimizer-step] WebGPU tests skipped: ${webgpu.reason}`);

describe.skipIf(!webgpu.available)(
  `TrainStepRunner (WebGPU EP${webgpu.available ? '' : `, skipped: ${webgpu.reason}`})`,
  () => {
    it('fits the MLP like the plain-TS AdamW loop with state in GPU buffers', async () => {
      const pr = problem();
      const ref = referenceRun(pr);
      const runner = await TrainStepRunner.create({
        device: 'webgpu',
        session: { disableCpuFallback: true },
        trainStep: buildMlpLoss,
        params: ortParams(pr),
        optimizer: HP,
      });
      expect(runner.device).toBe('webgpu');
      expect(new Set(Object.values(runner.residency()))).toEqual(new Set(['host']));
      const batch = ortBatch(pr);
      const losses: number[] = [];
      const norms: number[] = [];
      for (let t = 1; t <= STEPS; t++) {
        const r = await runner.step(batch, { lr: lrAt(t) });
        losses.push(r.loss);
        norms.push(r.gradNorm);
        if (t === 1)
          expect(new Set(Object.values(runner.residency()))).toEqual(new Set(['gpu-buffer']));
      }
      expect(maxRelError(losses, ref.losses)).toBeLessThan(1e-4);
      // WebGPU's float32 kernels (tanh, reduction order) already differ from float64 by ~2e-5
      // at step 1, before any update; gradient norms late in the fit are small differences of
      // larger sums, so they get a looser bound than on the CPU EP (measured ≤ 1.7e-4).
      expect(maxRelError(norms, ref.gradNorms)).toBeLessThan(3e-4);
      expect(losses[STEPS - 1]!).toBeLessThan(0.25 * losses[0]!);

      // Export copies GPU → host through an Identity session; training goes on afterwards.
      const state = await runner.exportState();
      expect(state.step).toBe(STEPS);
      for (const [k, s] of Object.entries(SHAPES)) {
        expect(state.params[k]!.dims).toEqual(s);
        expect(state.params[k]!.location).toBe('cpu');
        const got = state.params[k]!.data as Float32Array;
        for (let i = 0; i < got.length; i++) expect(got[i]!).toBeCloseTo(ref.params[k]![i]!, 4);
      }
      const next = await runner.step(batch, { lr: lrAt(STEPS + 1) });
      expect(next.step).toBe(STEPS + 1);
      expect(next.loss).toBeLessThan(losses[STEPS - 1]!);
      await runner.release();
    });
  },
);
