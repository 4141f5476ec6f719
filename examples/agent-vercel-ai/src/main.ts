// Trains a Vercel AI SDK agent (src/agent.ts, streaming) with GRPO through flowgrpo's policy gateway.
//   pnpm example agent-vercel-ai [--quick] [--steps N] [--out DIR]
import { join } from 'node:path';
import { parseCommandLine } from '@flowgrpo/core';
import { trainAgent } from './train.js';

const usage = `Usage: pnpm example agent-vercel-ai [flags]
  --quick     2 steps of 2 questions × 4 rollouts (the test command runs this)
  --steps N   GRPO steps (default 20; 4 questions × 8 rollouts each)
  --eval N    held-out questions scored greedily before and after (default 16; --quick 0)
  --lr X      learning rate (default 0.02; --quick 0.005)
  --out DIR   default out/agent-vercel-ai`;

const { values } = parseCommandLine(usage, {
  options: {
    quick: { type: 'boolean', default: false },
    steps: { type: 'string' },
    eval: { type: 'string' },
    lr: { type: 'string' },
    out: { type: 'string', default: join('out', 'agent-vercel-ai') },
  },
});
console.log(
  'flowgrpo example: agent-vercel-ai — a Vercel AI SDK agent trained through the gateway\n',
);
const r = await trainAgent({
  out: values.out,
  steps: Number(values.steps ?? (values.quick ? 2 : 20)),
  queriesPerStep: values.quick ? 2 : 4,
  generations: values.quick ? 4 : 8,
  evalQuestions: Number(values.eval ?? (values.quick ? 0 : 16)),
  learningRate: Number(values.lr ?? (values.quick ? 5e-3 : 2e-2)),
  log: (l) => console.log(l),
});
console.log(
  `\n${r.globalStep} steps; run directory ${join(values.out, 'run')} (report: ${r.report})`,
);
