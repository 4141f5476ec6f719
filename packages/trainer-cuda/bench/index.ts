// `pnpm bench` for @flowgrpo/trainer: each section prints a table; keep the whole run short.

import { cpus } from 'node:os';
import * as ort from 'onnxruntime-node';
import { benchBandwidth } from './bandwidth.js';
import { benchDecoder } from './decoder.js';
import { benchGeneration } from './generation.js';
import { benchGrpoModel } from './grpo-model.js';
import { benchGrpoStep } from './grpo-step.js';
import { benchRollout } from './rollout.js';
import { benchMatMul, benchOverhead } from './runtime.js';
import { type BenchSection, formatSection } from './table.js';
import {
  benchTrainMemory,
  benchTrainMemoryCheckpointing,
  benchTrainMemoryModels,
  benchTrainMemoryVocab,
  benchVocabChunkPrice,
} from './train-memory.js';

const sections: { name: string; run: () => Promise<BenchSection>; only?: boolean }[] = [
  { name: 'overhead', run: benchOverhead },
  { name: 'matmul', run: () => benchMatMul() },
  { name: 'block', run: () => import('./block.js').then((m) => m.benchBlock()) },
  { name: 'decoder', run: benchDecoder },
  { name: 'generation', run: benchGeneration },
  { name: 'bandwidth', run: benchBandwidth },
  { name: 'rollout', run: benchRollout },
  { name: 'train-memory', run: benchTrainMemory },
  // ~30 min and a 17 GB peak (the unchunked head): only when named.
  { name: 'train-memory-vocab', run: benchTrainMemoryVocab, only: true },
  // ~21 min, 0.5B and 1.5B shapes, float32 and bf16 projections, at up to ~17 GB: only when named.
  { name: 'train-memory-models', run: benchTrainMemoryModels, only: true },
  { name: 'train-memory-checkpointing', run: benchTrainMemoryCheckpointing, only: true },
  { name: 'vocab-chunk-price', run: benchVocabChunkPrice, only: true },
  { name: 'grpo-step', run: benchGrpoStep },
  // ~15 min and ~18 GB: a 1.5B-shaped GRPO step, only when named.
  { name: 'grpo-model', run: benchGrpoModel, only: true },
];

const only = process.argv.slice(2);
console.log(
  `# @flowgrpo/trainer benchmarks — onnxruntime-node ${ort.env.versions.node}, Node ${process.version}, ` +
    `${cpus().length} CPUs (${cpus()[0]?.model ?? '?'})\n`,
);
const t0 = performance.now();
for (const s of sections) {
  if (only.length ? !only.includes(s.name) : s.only) continue;
  console.log(formatSection(await s.run()));
}
console.log(`total ${((performance.now() - t0) / 1000).toFixed(1)} s`);
