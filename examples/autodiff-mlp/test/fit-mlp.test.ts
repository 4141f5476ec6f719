import { describe, expect, it } from 'vitest';
import { fitMlp } from '../src/fit-mlp.js';

describe('example: fit an MLP through the ONNX training graphs', () => {
  it('drives the loss down on the CPU EP and exports a plain-ONNX train step', async () => {
    const r = await fitMlp({ steps: 150, device: 'cpu' });
    expect(r.device).toBe('cpu');
    expect(r.losses).toHaveLength(150);
    // The target's variance is about 0.08 (sin(3x0)·x1 on [-1,1]²); a fitted MLP gets well
    // below a tenth of its starting loss. The bound is loose on purpose: this is the example's
    // smoke test, the exact agreement with a reference loop is tested in @flowgrpo/trainer.
    expect(r.losses.at(-1)!).toBeLessThan(0.1 * r.losses[0]!);
    // Only standard ops: the ONNX bytes never name the com.microsoft domain.
    expect(Buffer.from(r.trainStepOnnx).includes('com.microsoft')).toBe(false);
  });
});
