// The Qwen2.5-0.5B-shaped model (random float32 weights) at batch 1 against the memory-bandwidth
// bound: a decode step must read every weight once (the tied embedding whole, as the LM head), so
// tokens/s ≤ read bandwidth / weight bytes. The bandwidth is measured in the same run by a C
// stream-read kernel (bench/anchors/membw.c) on 1 and 2 threads; the machine's is the larger.
// FLOWGRPO_BENCH_QWEN_LAYERS picks how many of the 24 layers the model gets (default 24).

import { execFile } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { promisify } from 'node:util';
import type { ModelWeights } from '@flowgrpo/models';
import { DecoderArtifacts, DecoderGenerator, expectedTensorShapes } from '@flowgrpo/models';
import { buildTrainingArtifacts } from '../src/index.js';
import { compileC, loadAverage, median } from './anchors.js';
import { qwen05, randomWeights } from './models.js';
import type { BenchSection } from './table.js';

const run = promisify(execFile);

/** GB/s of a streaming read per thread count (1, 2, …), or why not measured. */
async function readBandwidth(dir: string): Promise<Map<number, number> | string> {
  const exe = join(dir, 'membw');
  const c = compileC([join(import.meta.dirname, 'anchors', 'membw.c')], exe, [
    '-O3',
    '-march=native',
    '-ffast-math',
    '-funroll-loops',
  ]);
  if (!c.ok) return c.reason;
  const { stdout } = await run(exe, ['2', '5']);
  const out = new Map<number, number>();
  for (const line of stdout.trim().split('\n')) {
    const [t, gbs] = line.split(' ').map(Number);
    out.set(t!, gbs!);
  }
  return out;
}

export async function benchBandwidth(): Promise<BenchSection> {
  const rows: string[][] = [];
  const notes: string[] = [];
  const tmp = mkdtempSync(join(tmpdir(), 'flowgrpo-bench-bw-'));
  try {
    const bw = await readBandwidth(tmp);
    if (typeof bw === 'string') notes.push(`bandwidth not measured: ${bw}`);
    const machine = typeof bw === 'string' ? undefined : Math.max(...bw.values());
    const layers = Number(process.env.FLOWGRPO_BENCH_QWEN_LAYERS ?? 24);
    const config = qwen05(layers);
    let params = 0;
    for (const s of expectedTensorShapes(config).values()) params += s.reduce((a, b) => a * b, 1);
    const bytes = params * 4; // float32; the tied embedding counted once (the LM head reads it whole)
    const t0 = performance.now();
    const holder: { weights?: ModelWeights } = { weights: randomWeights(config) };
    buildTrainingArtifacts(holder.weights!, join(tmp, 'art'), {
      graphs: ['generate'],
      maxPositions: 256,
    });
    delete holder.weights;
    notes.push(
      `qwen2.5-0.5B shape, ${layers} layers: ${(params / 1e6).toFixed(0)}M parameters, ${(bytes / 2 ** 30).toFixed(2)} GiB of float32 weights read per token; built in ${((performance.now() - t0) / 1000).toFixed(1)} s`,
    );
    const prompt = Array.from({ length: 16 }, (_, i) => (i * 7919 + 13) % config.vocabSize);
    for (const threads of [1, 2]) {
      const art = await DecoderArtifacts.open(join(tmp, 'art'), { intraOpThreads: threads });
      try {
        const gen = new DecoderGenerator(art);
        const time = async (n: number) => {
          const s = performance.now();
          await gen.generate([prompt], { maxNewTokens: n, temperature: 0 });
          return performance.now() - s;
        };
        await time(2);
        const per: number[] = [];
        for (let r = 0; r < 3; r++) {
          const one = await time(1);
          const many = await time(9);
          per.push((many - one) / 8);
        }
        const ms = median(per);
        const tokS = 1000 / ms;
        const own = typeof bw === 'string' ? undefined : bw.get(threads);
        const bound = machine ? (machine * 1e9) / bytes : undefined;
        rows.push([
          `flowgrpo generate graph, B=1, ${threads} thread${threads > 1 ? 's' : ''}`,
          ms.toFixed(1),
          tokS.toFixed(2),
          own ? ((own * 1e9) / bytes).toFixed(2) : '—',
          bound ? bound.toFixed(2) : '—',
          bound ? `${((100 * tokS) / bound).toFixed(0)}%` : '—',
          own ? ((tokS * bytes) / 1e9).toFixed(1) : '—',
        ]);
      } finally {
        await art.release();
      }
    }
    if (typeof bw !== 'string')
      notes.push(
        `read bandwidth (membw.c, 1 GiB, best of 5): ${[...bw.entries()].map(([t, g]) => `${t} thread${t > 1 ? 's' : ''} ${g.toFixed(1)} GB/s`).join(', ')}; the bound uses the machine's (the larger)`,
      );
    notes.push(
      `ms/token: (time of 9 new tokens − time of 1) / 8 after a 16-token prompt, median of 3; load average at the end: ${loadAverage()}`,
    );
  } finally {
    rmSync(tmp, { recursive: true, force: true });
  }
  return {
    title: 'memory-bandwidth bound: Qwen2.5-0.5B-shaped decode at batch 1 (float32, CPU EP)',
    header: [
      'run',
      'ms/token',
      'tok/s',
      'bound (own threads)',
      'bound (machine)',
      'of bound',
      'GB/s read',
    ],
    rows,
    notes,
  };
}
