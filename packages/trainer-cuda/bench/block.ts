// One attention block with LoRA on q and v, forward + backward (gradients w.r.t. the four LoRA
// matrices only, appended by the IR's `grad`), the bar set for generated graphs: causal mask as an
// additive input, one session run per step. Compared with the raw ORT MatMul rate measured in the
// same process on the block's largest product ([B·T, D]·[D, D]); the bar for a generated graph is
// ~60–75% of that rate on the CPU EP. WebGPU runs (when a Vulkan device exists) are reported
// only: lavapipe emulates the GPU on the CPU.
//
//   xn = RMSNorm(x)·g                      x [B, T, D] (an input: no gradient needed)
//   q = xn·Wq + s·(xn·Aq)·Bq,  k = xn·Wk,  v = xn·Wv + s·(xn·Av)·Bv
//   p = softmax(q·kᵀ/√dh + mask) per head, ctx = p·v, y = x + ctx·Wo
//   loss = Σ y ⊙ dy                        dy [B, T, D] stands in for the rest of the network

import { readdirSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import {
  encodeModel,
  type Graph,
  GraphBuilder,
  tensor,
  toOnnxModel,
  type Value,
} from '@flowgrpo/graph';
import { type CreateSessionOptions, createSession, deviceAvailability } from '@flowgrpo/models';
import * as ort from 'onnxruntime-node';
import type { BenchSection } from './table.js';

interface BlockConfig {
  batch: number;
  seq: number;
  dim: number;
  heads: number;
  rank: number;
}

const CONFIGS: BlockConfig[] = [
  { batch: 4, seq: 128, dim: 256, heads: 4, rank: 8 },
  { batch: 4, seq: 256, dim: 512, heads: 8, rank: 16 },
];
const LORA = ['Aq', 'Bq', 'Av', 'Bv'] as const;

function lcg(seed: number): () => number {
  let s = seed >>> 0;
  return () => {
    s = (Math.imul(s, 1664525) + 1013904223) >>> 0;
    return s / 2 ** 32 - 0.5;
  };
}

function randomF32(n: number, scale: number, seed: number): Float32Array {
  const r = lcg(seed);
  return Float32Array.from({ length: n }, () => scale * r());
}

function loraShapes(c: BlockConfig): Record<(typeof LORA)[number], number[]> {
  return { Aq: [c.dim, c.rank], Bq: [c.rank, c.dim], Av: [c.dim, c.rank], Bv: [c.rank, c.dim] };
}

/** The block's graph: forward only, or forward + `grad` w.r.t. the LoRA matrices. */
function blockGraph(c: BlockConfig, withGrad: boolean): Graph {
  const { batch: B, seq: T, dim: D, heads: h } = c;
  const dh = D / h;
  const b = new GraphBuilder(withGrad ? 'block_train' : 'block_forward');
  const x = b.input('x', 'float32', [B, T, D]);
  const mask = b.input('mask', 'float32', [T, T]);
  const dy = withGrad ? b.input('dy', 'float32', [B, T, D]) : undefined;
  const lora = Object.fromEntries(
    Object.entries(loraShapes(c)).map(([k, s]) => [k, b.input(k, 'float32', s)]),
  ) as Record<(typeof LORA)[number], Value>;
  const w = (name: string, shape: number[], seed: number) =>
    b.initializer(
      name,
      tensor('float32', shape, randomF32(shape[0]! * (shape[1] ?? 1), 2 / Math.sqrt(D), seed)),
    );
  const g = b.initializer(
    'norm',
    tensor(
      'float32',
      [D],
      randomF32(D, 0.2, 5).map((v) => 1 + v),
    ),
  );
  const [Wq, Wk, Wv, Wo] = [
    w('Wq', [D, D], 1),
    w('Wk', [D, D], 2),
    w('Wv', [D, D], 3),
    w('Wo', [D, D], 4),
  ];
  const scaling = 2; // lora_alpha / r, as PEFT

  const xn = b.mul(b.div(x, b.sqrt(b.add(b.reduceMean(b.mul(x, x), [-1], true), 1e-6))), g);
  const x2 = b.reshape(xn, [B * T, D]);
  const loraOut = (A: Value, Bm: Value) => b.mul(b.matmul(b.matmul(x2, A), Bm), scaling);
  const q = b.add(b.matmul(x2, Wq), loraOut(lora.Aq, lora.Bq));
  const k = b.matmul(x2, Wk);
  const v = b.add(b.matmul(x2, Wv), loraOut(lora.Av, lora.Bv));
  const heads = (t: Value, perm: number[]) => b.transpose(b.reshape(t, [B, T, h, dh]), perm);
  const qh = heads(b.mul(q, 1 / Math.sqrt(dh)), [0, 2, 1, 3]); // [B, h, T, dh]
  const kt = heads(k, [0, 2, 3, 1]); // [B, h, dh, T]
  const vh = heads(v, [0, 2, 1, 3]);
  const p = b.softmax(b.add(b.matmul(qh, kt), mask), -1);
  const ctx = b.reshape(b.transpose(b.matmul(p, vh), [0, 2, 1, 3]), [B * T, D]);
  const y = b.add(x, b.reshape(b.matmul(ctx, Wo), [B, T, D]));
  if (!withGrad) {
    b.output(y, 'y');
    return b.graph;
  }
  const loss = b.reduceSum(b.mul(y, dy!));
  b.output(loss, 'loss');
  b.grad(
    loss,
    LORA.map((n) => lora[n]),
  );
  return b.graph;
}

/**
 * Matmul FLOPs counted analytically (2·m·n·k per product), only the products a forward and a
 * LoRA-only backward need — not what the graph happens to contain.
 *   forward:  q, k, v, o projections 4·2·N·D²; LoRA on q, v 2·(2·N·D·r + 2·N·r·D);
 *             scores and p·v 2·2·B·T²·D (summed over heads)
 *   backward: dctx = dy·Woᵀ 2·N·D²; dp = dctx·vᵀ, dv = pᵀ·dctx, dq = dS·k 3·2·B·T²·D (no dk: k
 *             carries no LoRA); per LoRA pair dB, d(xA), dA 3·2·N·D·r
 */
function analyticFlops(c: BlockConfig): { forward: number; backward: number } {
  const N = c.batch * c.seq;
  const { dim: D, rank: r } = c;
  const attn = 2 * c.batch * c.seq * c.seq * D;
  return {
    forward: 4 * 2 * N * D * D + 2 * (4 * N * D * r) + 2 * attn,
    backward: 2 * N * D * D + 3 * attn + 2 * (3 * 2 * N * D * r),
  };
}

/** FLOPs of the MatMul/Gemm nodes the exported graph actually contains (static shapes). */
function graphMatmulFlops(graph: Graph): number {
  let f = 0;
  for (const n of graph.nodesFor(graph.outputs)) {
    if (n.op !== 'MatMul' && n.op !== 'Gemm') continue;
    const a = n.inputs[0]!.shape as number[];
    const out = n.outputs[0]!.shape as number[];
    const kdim = n.op === 'Gemm' && n.attrs.transA ? a[0]! : a[a.length - 1]!;
    f += 2 * out.reduce((p, d) => p * d, 1) * kdim;
  }
  return f;
}

function nodeCount(graph: Graph): number {
  return toOnnxModel(graph, { opset: 21 }).graph.nodes.length;
}

function feedsFor(c: BlockConfig, withGrad: boolean): Record<string, ort.Tensor> {
  const { batch: B, seq: T, dim: D } = c;
  const maskData = new Float32Array(T * T);
  for (let i = 0; i < T; i++) for (let j = i + 1; j < T; j++) maskData[i * T + j] = -1e9;
  const feeds: Record<string, ort.Tensor> = {
    x: new ort.Tensor('float32', randomF32(B * T * D, 2, 11), [B, T, D]),
    mask: new ort.Tensor('float32', maskData, [T, T]),
  };
  if (withGrad) feeds.dy = new ort.Tensor('float32', randomF32(B * T * D, 0.01, 12), [B, T, D]);
  Object.entries(loraShapes(c)).forEach(([k, s], i) => {
    feeds[k] = new ort.Tensor('float32', randomF32(s[0]! * s[1]!, 0.1, 20 + i), s);
  });
  return feeds;
}

function median(xs: number[]): number {
  const s = [...xs].sort((a, b) => a - b);
  const m = s.length >> 1;
  return s.length % 2 ? s[m]! : (s[m - 1]! + s[m]!) / 2;
}

/**
 * Median ms of each function, run in interleaved rounds (one call of each per round) so that the
 * block and the MatMul reference see the same machine load — a shared machine swings a lot.
 */
async function timeInterleaved(
  fns: readonly (() => Promise<unknown>)[],
  o: { warmup: number; minRounds: number; budgetMs: number },
): Promise<number[]> {
  for (let i = 0; i < o.warmup; i++) for (const f of fns) await f();
  const times: number[][] = fns.map(() => []);
  const start = performance.now();
  for (let round = 0; round < 200; round++) {
    if (round >= o.minRounds && performance.now() - start >= o.budgetMs) break;
    for (const [i, f] of fns.entries()) {
      const t0 = performance.now();
      await f();
      times[i]!.push(performance.now() - t0);
    }
  }
  return times.map(median);
}

function matmulBytes(m: number, k: number, n: number): Uint8Array {
  const b = new GraphBuilder('matmul');
  const a = b.input('a', 'float32', [m, k]);
  const w = b.initializer('w', tensor('float32', [k, n], randomF32(k * n, 0.1, 3)));
  b.output(b.matmul(a, w), 'c');
  return encodeModel(toOnnxModel(b.graph, { opset: 21 }));
}

const gf = (flops: number, ms: number) => flops / (ms * 1e6);

interface Target {
  label: string;
  options: CreateSessionOptions;
  budgetMs: number;
}

export async function benchBlock(): Promise<BenchSection> {
  const rows: string[][] = [];
  const notes: string[] = [];
  const targets: Target[] = [
    { label: 'cpu, 1 thread', options: { device: 'cpu', intraOpThreads: 1 }, budgetMs: 2500 },
    { label: 'cpu, 2 threads', options: { device: 'cpu', intraOpThreads: 2 }, budgetMs: 2500 },
  ];
  const webgpu = await deviceAvailability('webgpu');
  if (webgpu.available) {
    targets.push({
      label: 'webgpu',
      options: { device: 'webgpu', disableCpuFallback: true },
      budgetMs: 2000,
    });
  } else notes.push(`webgpu skipped: ${webgpu.reason}`);

  for (const c of CONFIGS) {
    const fwdGraph = blockGraph(c, false);
    const trainGraph = blockGraph(c, true);
    const fwdModel = encodeModel(toOnnxModel(fwdGraph, { opset: 21 }));
    const trainModel = encodeModel(toOnnxModel(trainGraph, { opset: 21 }));
    const flops = analyticFlops(c);
    const inGraph = graphMatmulFlops(trainGraph);
    const shape = `B${c.batch} T${c.seq} D${c.dim} h${c.heads} r${c.rank}`;
    notes.push(
      `${shape}: ${nodeCount(fwdGraph)} nodes forward, ${nodeCount(trainGraph)} forward+backward; ` +
        `analytic ${(flops.forward / 1e9).toFixed(3)} GFLOP forward + ` +
        `${(flops.backward / 1e9).toFixed(3)} backward; the graph's MatMuls do ` +
        `${(inGraph / 1e9).toFixed(3)} (${((100 * inGraph) / (flops.forward + flops.backward)).toFixed(0)}% of the analytic count)`,
    );
    const N = c.batch * c.seq;
    const mm = matmulBytes(N, c.dim, c.dim);
    const mmFeeds = { a: new ort.Tensor('float32', randomF32(N * c.dim, 1, 9), [N, c.dim]) };
    for (const t of targets) {
      // lavapipe: the larger block takes seconds per step; one config is enough to report.
      if (t.options.device === 'webgpu' && c !== CONFIGS[0]) continue;
      const sm = await createSession(mm, t.options);
      const sf = await createSession(fwdModel, t.options);
      const st = await createSession(trainModel, t.options);
      const ff = feedsFor(c, false);
      const tf = feedsFor(c, true);
      const [mmMs, fMs, tMs] = (await timeInterleaved(
        [() => sm.run(mmFeeds), () => sf.run(ff), () => st.run(tf)],
        { warmup: 1, minRounds: 3, budgetMs: t.budgetMs },
      )) as [number, number, number];
      for (const s of [sm, sf, st]) await s.release();
      const mmRate = gf(2 * N * c.dim * c.dim, mmMs);
      const fRate = gf(flops.forward, fMs);
      const tRate = gf(flops.forward + flops.backward, tMs);
      rows.push([
        shape,
        t.label,
        fMs.toFixed(2),
        fRate.toFixed(1),
        tMs.toFixed(2),
        tRate.toFixed(1),
        mmRate.toFixed(1),
        `${((100 * tRate) / mmRate).toFixed(0)}%`,
      ]);
    }
  }
  notes.push(
    'GFLOP/s = analytic matmul FLOPs / median ms; "matmul" = raw ORT MatMul [B·T, D]·[D, D] ' +
      'in this process on the same device, timed in rounds interleaved with the block runs; the bar for generated graphs: fwd+bwd at ~60–75% of it on the CPU',
  );
  if (webgpu.available) notes.push('webgpu here may be lavapipe (CPU-emulated): not judged');
  notes.push(...(await profileTopOps(CONFIGS[1]!)));
  return {
    title: 'Attention block with LoRA on q/v: forward, and forward + backward (LoRA grads)',
    header: [
      'block',
      'device',
      'fwd ms',
      'fwd GF/s',
      'fwd+bwd ms',
      'fwd+bwd GF/s',
      'matmul GF/s',
      'ratio',
    ],
    rows,
    notes,
  };
}

/** ORT's profiler on the CPU (2 threads): where the forward+backward step spends its time. */
async function profileTopOps(c: BlockConfig): Promise<string[]> {
  const prefix = join(tmpdir(), `flowgrpo-block-${process.pid}`);
  const s = await ort.InferenceSession.create(
    encodeModel(toOnnxModel(blockGraph(c, true), { opset: 21 })),
    {
      executionProviders: ['cpu'],
      intraOpNumThreads: 2,
      enableProfiling: true,
      profileFilePrefix: prefix,
      logSeverityLevel: 3,
    },
  );
  const feeds = feedsFor(c, true);
  const runs = 5;
  for (let i = 0; i < runs; i++) await s.run(feeds);
  s.endProfiling();
  await s.release();
  const dir = tmpdir();
  const base = prefix.slice(dir.length + 1);
  const files = readdirSync(dir).filter((f) => f.startsWith(base) && f.endsWith('.json'));
  if (files.length === 0) return ['profile: ORT wrote no profile file'];
  const byOp = new Map<string, number>();
  let total = 0;
  for (const f of files) {
    const events = JSON.parse(readFileSync(join(dir, f), 'utf8')) as {
      cat?: string;
      name?: string;
      dur?: number;
      args?: { op_name?: string };
    }[];
    for (const e of events) {
      if (e.cat !== 'Node' || !e.name?.endsWith('_kernel_time') || !e.args?.op_name) continue;
      byOp.set(e.args.op_name, (byOp.get(e.args.op_name) ?? 0) + (e.dur ?? 0));
      total += e.dur ?? 0;
    }
    rmSync(join(dir, f), { force: true });
  }
  const top = [...byOp.entries()].sort((a, b) => b[1] - a[1]).slice(0, 8);
  return [
    `profile (cpu, 2 threads, B${c.batch} T${c.seq} D${c.dim}, ${runs} runs incl. the first): kernel time by op — ` +
      top.map(([op, us]) => `${op} ${((100 * us) / total).toFixed(0)}%`).join(', '),
  ];
}
