// `grpo-model`: one GRPO step of a Qwen2.5-1.5B-shaped model on this machine (issue #33's "one
// GRPO step of a 1.5B-shaped model completes within 24 GiB with half-precision frozen weights"):
// random weights at the real vocabulary (151,936), bf16 projections, 8 rollouts of up to 512 new
// tokens from the trainer's own engine, then the LoRA update, in a fresh process
// (grpo-model-child.ts). The table gives the preflight's estimate beside the process's peak, and
// the step's phases; the notes give what the preflight advised for the default switches. Needs the
// Qwen3 tokenizer in ../shared/models (the sampled ids are decoded); ~15 min, ~18 GB.
import { existsSync } from 'node:fs';
import { join } from 'node:path';
import { loadAverage, SHARED } from './anchors.js';
import { freshProcessJson } from './fresh-process.js';
import { PHASES } from './grpo-step.js';
import type { BenchSection } from './table.js';

const TOKENIZER = join(SHARED, 'models', 'qwen3-tokenizer');

export async function benchGrpoModel(): Promise<BenchSection> {
  const title =
    'one GRPO step of a Qwen2.5-1.5B shape (random weights, vocab 151,936, bf16 projections)';
  const header = [
    'run',
    'estimate MiB',
    'peak MiB',
    'estimate ×',
    ...PHASES.map((p) => `${p} s`),
    'train tok/s',
    'grad norm',
  ];
  if (!existsSync(TOKENIZER))
    return { title, header, rows: [], notes: [`skipped: no tokenizer at ${TOKENIZER}`] };
  const r = await freshProcessJson<{
    buildS: number;
    advice: string;
    refused?: string;
    refusals?: string[];
    maxTokensPerMicrobatch?: number;
    estimateMiB: number;
    runS: number;
    peakMiB: number;
    metrics: Record<string, unknown>;
  }>(join(import.meta.dirname, 'grpo-model-child.ts'), [TOKENIZER]);
  if (r.refused)
    return {
      title,
      header,
      rows: [],
      notes: [
        `the preflight with both switches off: ${r.advice}`,
        `with both on, refused too: ${r.refused}`,
      ],
    };
  const m = r.metrics;
  return {
    title,
    header,
    rows: [
      [
        `8 rollouts × ≤ 512 new tokens, gradient_checkpointing + share_frozen_weights, max_tokens_per_microbatch ${r.maxTokensPerMicrobatch}`,
        r.estimateMiB.toFixed(0),
        r.peakMiB.toFixed(0),
        (r.estimateMiB / r.peakMiB).toFixed(2),
        ...PHASES.map((p) => Number(m[`timing/${p}_s`] ?? 0).toFixed(0)),
        Number(m['train/tokens_per_s']).toFixed(0),
        Number(m.grad_norm).toFixed(3),
      ],
    ],
    notes: [
      `the preflight with both switches off: ${r.advice}`,
      ...(r.refusals ?? []).map((x) => `with both on, first refused: ${x}`),
      `build ${r.buildS.toFixed(0)} s, the step ${r.runS.toFixed(0)} s; ${String(m['train/tokens'])} trained tokens, mean completion ${Number(m['completions/mean_length']).toFixed(0)} tokens; peak = the process's VmHWM`,
      `load average at the end: ${loadAverage()}`,
    ],
  };
}
