// Generation against llama2.c: stories260K greedy from "Once upon a time" until BOS (342 tokens),
// in-process on both sides — run.c's own generate() compiled with -Ofast -march=native
// (bench/anchors/llama2c-bench.c), and DecoderGenerator over the fused `generate` graph (the
// default) and over the standard prefill/decode graphs (before issue #11) — at batch 1 and 32.
// The two sides alternate in rounds so that both see the same load; figures are medians.

import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import {
  DecoderArtifacts,
  DecoderGenerator,
  loadLlama2cCheckpoint,
  loadTokenizer,
} from '@flowgrpo/models';
import { buildTrainingArtifacts } from '../src/index.js';
import { buildLlama2c, loadAverage, median, runLlama2c, STORIES } from './anchors.js';
import type { BenchSection } from './table.js';

const PROMPT = 'Once upon a time';
const STEPS = 512; // run.c's -n: positions 0 … 511

interface Timed {
  ms: number;
  tokens: number;
}

async function timeGenerate(gen: DecoderGenerator, prompt: number[], B: number): Promise<Timed> {
  const t0 = performance.now();
  const out = await gen.generate(Array(B).fill(prompt), {
    maxNewTokens: STEPS - prompt.length,
    temperature: 0,
    stopTokenIds: [1], // run.c ends a sample at BOS
  });
  return { ms: performance.now() - t0, tokens: out.reduce((s, o) => s + o.tokens.length, 0) };
}

export async function benchGeneration(): Promise<BenchSection> {
  const header = ['run', 'batch', 'tokens', 'tok/s', 'µs/token', '× run.c'];
  const notes: string[] = [];
  const rows: string[][] = [];
  const section = (): BenchSection => ({
    title: `generation vs llama2.c run.c: stories260K greedy, "${PROMPT}" until BOS, in-process (medians)`,
    header,
    rows,
    notes,
  });
  let weights: Awaited<ReturnType<typeof loadLlama2cCheckpoint>>;
  try {
    weights = await loadLlama2cCheckpoint(join(STORIES, 'stories260K.bin'));
  } catch {
    notes.push(`skipped: ${join(STORIES, 'stories260K.bin')} absent`);
    return section();
  }
  const tokenizer = await loadTokenizer(join(STORIES, 'tok512.bin'), {
    vocabSize: weights.config.vocabSize,
  });
  const prompt = Array.from(tokenizer.encode(PROMPT, { addBos: true }));
  const tmp = mkdtempSync(join(tmpdir(), 'flowgrpo-bench-gen-'));
  try {
    const c = buildLlama2c(tmp);
    if ('reason' in c) notes.push(`llama2.c skipped: ${c.reason}`);
    buildTrainingArtifacts(weights, join(tmp, 'art'), {
      graphs: ['decode', 'generate'],
      maxPositions: STEPS,
    });
    // The split-cache decode loop (no per-token copy of the cache), for comparison.
    buildTrainingArtifacts(weights, join(tmp, 'split'), {
      graphs: ['generate'],
      maxPositions: STEPS,
      generate: { attention: 'split' },
    });
    const open = (graphs: ('decode' | 'generate')[], threads: number) =>
      DecoderArtifacts.open(join(tmp, 'art'), { graphs, intraOpThreads: threads });
    const fusedArt = await open(['generate'], 1);
    const fused2Art = await open(['generate'], 2);
    const stdArt = await open(['decode'], 1);
    const splitArt = await DecoderArtifacts.open(join(tmp, 'split'), { intraOpThreads: 1 });
    const split = new DecoderGenerator(splitArt);
    const fused = new DecoderGenerator(fusedArt);
    const fused2 = new DecoderGenerator(fused2Art);
    const std = new DecoderGenerator(stdArt, { useGenerateGraph: false });
    // Two worker threads, each a one-thread continuous batch of half the rows (batcher-pool.ts).
    const workers = new DecoderGenerator(fusedArt, { generateWorkers: 2 });
    // Warm-up (first-run allocations, code paths).
    await timeGenerate(fused, prompt, 1);
    await timeGenerate(std, prompt, 1);
    await timeGenerate(workers, prompt, 32); // opens the workers

    const runc: Timed[] = [];
    const runC = async (reps: number) => {
      if ('reason' in c) return;
      const r = await runLlama2c(c.exe, PROMPT, STEPS, reps + 1);
      // The first call of a fresh process warms caches and pages: dropped.
      for (const x of r.slice(1)) runc.push({ ms: x.us / 1000, tokens: x.tokens });
    };
    const f1: Timed[] = [];
    const s1: Timed[] = [];
    for (let round = 0; round < 5; round++) {
      await runC(3);
      for (let i = 0; i < 3; i++) f1.push(await timeGenerate(fused, prompt, 1));
      s1.push(await timeGenerate(std, prompt, 1));
    }
    const f32: Timed[] = [];
    const f32x2: Timed[] = [];
    const f32split: Timed[] = [];
    const f32w: Timed[] = [];
    const f64: Timed[] = [];
    const f64w: Timed[] = [];
    const s32: Timed[] = [];
    for (let round = 0; round < 2; round++) {
      await runC(3);
      for (let i = 0; i < 2; i++) f32.push(await timeGenerate(fused, prompt, 32));
      for (let i = 0; i < 2; i++) f32x2.push(await timeGenerate(fused2, prompt, 32));
      for (let i = 0; i < 2; i++) f32split.push(await timeGenerate(split, prompt, 32));
      for (let i = 0; i < 2; i++) f32w.push(await timeGenerate(workers, prompt, 32));
      f64.push(await timeGenerate(fused, prompt, 64));
      f64w.push(await timeGenerate(workers, prompt, 64));
      s32.push(await timeGenerate(std, prompt, 32));
    }
    await runC(3);

    const perToken = (xs: Timed[]) => median(xs.map((x) => (x.ms * 1000) / x.tokens));
    const ref = runc.length ? perToken(runc) : undefined;
    const row = (what: string, B: number, xs: Timed[]) => {
      const us = perToken(xs);
      rows.push([
        what,
        String(B),
        String(xs[0]!.tokens),
        (1e6 / us).toFixed(0),
        us.toFixed(1),
        ref ? (ref / us).toFixed(2) : '—',
      ]);
    };
    if (ref) row('llama2.c run.c -Ofast -march=native (1 stream)', 1, runc);
    row('flowgrpo generate graph, 1 thread (default)', 1, f1);
    row('flowgrpo prefill/decode graphs, 1 thread (before)', 1, s1);
    row('flowgrpo generate graph, 1 thread', 32, f32);
    row('flowgrpo generate graph, 2 threads', 32, f32x2);
    row('flowgrpo generate graph, split-cache loop, 1 thread', 32, f32split);
    row('flowgrpo generate graph, 2 worker batchers × 1 thread (default)', 32, f32w);
    row('flowgrpo generate graph, 1 thread', 64, f64);
    row('flowgrpo generate graph, 2 worker batchers × 1 thread (default)', 64, f64w);
    row('flowgrpo prefill/decode graphs, 1 thread (before)', 32, s32);
    notes.push(
      `tokens: sampled tokens per call (run.c's count comes from the same loop without printing); ` +
        `µs/token = call time / sampled tokens (prefill included on both sides); × run.c = ` +
        `tok/s over run.c's single-stream tok/s. Batch 32 runs 32 copies of the prompt ` +
        `(aggregate tok/s). run.c: ${runc.length} calls; flowgrpo batch 1: ${f1.length} calls; ` +
        `load average at the end: ${loadAverage()}`,
    );
    await workers.release();
    await Promise.all([
      fusedArt.release(),
      fused2Art.release(),
      stdArt.release(),
      splitArt.release(),
    ]);
  } finally {
    rmSync(tmp, { recursive: true, force: true });
  }
  return section();
}
