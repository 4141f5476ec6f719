// The short table printed at the end of a GPU measurement (the device tool returns the end of
// the output): every figure side by side, each cell from results.json, '—' where a step did not
// produce it (its error is listed below the table).

import type { Results, StepRecord } from './results.js';

interface DecodeRow {
  batch: number;
  tokensPerSecond: number;
}

const fmt = (x: unknown, digits = 0) =>
  typeof x === 'number' && Number.isFinite(x) ? x.toFixed(digits) : '—';
/** Errors span orders of magnitude: two significant digits. */
const sci = (x: unknown) =>
  typeof x === 'number' && Number.isFinite(x) ? x.toExponential(1) : '—';

function decodeOf(step: StepRecord | undefined, batch: number): number | undefined {
  const rows = step?.ok ? (step.decode as DecodeRow[] | undefined) : undefined;
  return rows?.find((r) => r.batch === batch)?.tokensPerSecond;
}

interface TorchRun {
  dtype: string;
  decode?: DecodeRow[];
  train?: { tokensPerSecond: number; peakMiB: number };
  error?: string;
}

export function summarize(results: Results): string {
  const s = results.steps;
  const lines: string[] = [`# flowgrpo GPU measurement (${results.mode}), ${results.updatedAt}`];
  const adapter = s.adapter;
  if (adapter)
    lines.push(
      `adapter: hardware [${(adapter.hardware as string[] | undefined)?.join(', ') ?? ''}], software [${(adapter.software as string[] | undefined)?.join(', ') ?? ''}]`,
    );
  const shapes = new Set<string>();
  for (const name of Object.keys(s)) {
    const m = /^(?:ours-(?:decode|train)|torch)-(.+?)(?:-(?:cpu|webgpu)(?:-[a-z0-9-]+)?)?$/.exec(
      name,
    );
    if (m) shapes.add(m[1]!);
  }
  for (const shape of shapes) {
    const torch = s[`torch-${shape}`];
    const runs = (torch?.ok ? (torch.runs as TorchRun[] | undefined) : undefined) ?? [];
    const batches = new Set<number>();
    for (const dev of ['webgpu', 'cpu'])
      for (const r of (s[`ours-decode-${shape}-${dev}`]?.decode as DecodeRow[] | undefined) ?? [])
        batches.add(r.batch);
    for (const run of runs) for (const r of run.decode ?? []) batches.add(r.batch);
    const soft = ['decode', 'train'].some((k) => s[`ours-${k}-${shape}-webgpu`]?.softwareAdapter);
    lines.push('', `## ${shape}${soft ? ' (WebGPU on a SOFTWARE adapter: not GPU figures)' : ''}`);
    lines.push('| figure | ours webgpu | ours cpu | torch f32 | torch bf16 |');
    lines.push('| --- | --- | --- | --- | --- |');
    const torchCell = (dtype: string, f: (r: TorchRun) => number | undefined) => {
      const r = runs.find((x) => x.dtype === dtype);
      return r ? fmt(f(r)) : '—';
    };
    for (const b of [...batches].sort((x, y) => x - y))
      lines.push(
        `| decode tok/s B=${b} | ${fmt(decodeOf(s[`ours-decode-${shape}-webgpu`], b))} | ${fmt(decodeOf(s[`ours-decode-${shape}-cpu`], b))} | ${torchCell('float32', (r) => r.decode?.find((d) => d.batch === b)?.tokensPerSecond)} | ${torchCell('bfloat16', (r) => r.decode?.find((d) => d.batch === b)?.tokensPerSecond)} |`,
      );
    const train = (dev: string, variant = '') =>
      s[`ours-train-${shape}-${dev}${variant && `-${variant}`}`];
    const ok = (r: StepRecord | undefined) => (r?.ok ? r : undefined);
    lines.push(
      `| LoRA train step tok/s | ${fmt(ok(train('webgpu'))?.tokensPerSecond)} | ${fmt(ok(train('cpu'))?.tokensPerSecond)} | ${torchCell('float32', (r) => r.train?.tokensPerSecond)} | ${torchCell('bfloat16', (r) => r.train?.tokensPerSecond)} |`,
    );
    const peak = (r: StepRecord | undefined) =>
      r?.gpuMemory ? r.gpuMemory.peakMiB - r.gpuMemory.baselineMiB : undefined;
    lines.push(
      `| train peak GPU MiB | ${fmt(peak(train('webgpu')))} | — | ${torchCell('float32', (r) => r.train?.peakMiB)} | ${torchCell('bfloat16', (r) => r.train?.peakMiB)} |`,
    );
    // The build switches (ours.ts TrainVariant), each beside the float32 default above.
    const variants = new Set<string>();
    for (const name of Object.keys(s)) {
      const v = new RegExp(`^ours-train-${shape.replace(/[.]/g, '\\.')}-(?:cpu|webgpu)-(.+)$`).exec(
        name,
      );
      if (v) variants.add(v[1]!);
    }
    for (const v of [...variants].sort()) {
      lines.push(
        `| LoRA train step tok/s, ${v} | ${fmt(ok(train('webgpu', v))?.tokensPerSecond)} | ${fmt(ok(train('cpu', v))?.tokensPerSecond)} | — | — |`,
        `| train peak GPU MiB, ${v} | ${fmt(peak(train('webgpu', v)))} | — | — | — |`,
      );
    }
  }
  for (const [name, step] of Object.entries(s)) {
    if (!name.startsWith('profile-') || !step.ok) continue;
    lines.push('', `## ${name}: top GPU kernels, ms per run (host-side dispatch in brackets)`);
    for (const part of ['decode', 'trainStep'] as const) {
      const p = step[part] as
        | {
            msPerRun: number;
            gpuKernels: { msPerRun: number; top: { op: string; msPerRun: number }[] };
            hostKernels: { msPerRun: number };
          }
        | undefined;
      if (!p) continue;
      const top = p.gpuKernels.top
        .slice(0, 6)
        .map((t) => `${t.op} ${fmt(t.msPerRun, 2)}`)
        .join(', ');
      lines.push(
        `${part}: run ${fmt(p.msPerRun, 2)}, GPU kernels ${fmt(p.gpuKernels.msPerRun, 2)} [host ${fmt(p.hostKernels.msPerRun, 2)}]: ${top}`,
      );
    }
  }
  const fid = s['fidelity-compare'];
  if (fid?.ok) {
    lines.push('', '## fidelity (vs transformers/PEFT, or the numpy float64 reference)');
    for (const [k, v] of Object.entries(fid.logits ?? {}))
      lines.push(
        `logits ${k}: max abs ${sci((v as { maxAbs?: number }).maxAbs)}, rel norm ${sci((v as { relNorm?: number }).relNorm)}`,
      );
    const g = fid.grads as { maxRelNorm?: number; skipped?: string } | undefined;
    if (g) lines.push(`LoRA grads: ${g.skipped ?? `max rel norm ${sci(g.maxRelNorm)}`}`);
  }
  const cuda = s['cuda-probe'];
  if (cuda)
    lines.push(
      '',
      `CUDA EP for onnxruntime-node: ${cuda.cudaLoads ? 'loads' : `no (${String(cuda.reason ?? cuda.error ?? '')})`}`,
    );
  const failed = Object.entries(s).filter(([, r]) => !r.ok);
  if (failed.length) {
    lines.push('', '## not measured');
    for (const [name, r] of failed)
      lines.push(`${name}: ${(r.skipped ?? r.error ?? 'failed').toString().slice(0, 300)}`);
  }
  return lines.join('\n');
}
