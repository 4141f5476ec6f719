// The "production" agentic GRPO seed's feature list, each feature printed as it happens.
//   pnpm example agentic-grpo [--quick] [--model <HF folder>] [--sft-steps N] [--grpo-steps N]
//                             [--live-steps N] [--beta B] [--device D] [--seed N] [--out DIR]
import { join } from 'node:path';
import { parseCommandLine } from '@flowgrpo/core';
import type { DeviceRequest } from '@flowgrpo/models';
import { runAgenticGrpo } from './run.js';

const usage = `Usage: pnpm example agentic-grpo [flags]
  --quick           a small run (about a minute on 2 cores): 100 SFT steps, 3 GRPO steps
  --model DIR       an HF model folder with tokenizer.json (e.g. Qwen2.5-1.5B-Instruct): no warm start;
                    default: a tiny Qwen2 created from --seed, warm-started on demonstrations
  --sft-steps N     warm-start steps (default 300; --quick 100; 0 with --model)
  --grpo-steps N    GRPO steps (default 30; --quick 3)
  --live-steps N    GRPO steps whose tool calls are printed as they happen (default 1)
  --beta B          KL coefficient (default 0.1, the seed's kl_coeff)
  --device D        cpu (default), cuda, webgpu or auto
  --seed N          task, model and sampling seed (default 1)
  --out DIR         run folder (default out/agentic-grpo)`;

const { values } = parseCommandLine(usage, {
  options: {
    quick: { type: 'boolean', default: false },
    model: { type: 'string' },
    'sft-steps': { type: 'string' },
    'grpo-steps': { type: 'string' },
    'live-steps': { type: 'string' },
    beta: { type: 'string' },
    device: { type: 'string', default: 'cpu' },
    seed: { type: 'string', default: '1' },
    out: { type: 'string', default: join('out', 'agentic-grpo') },
  },
});
console.log('flowgrpo example: agentic-grpo — the production agentic GRPO feature list, live\n');
await runAgenticGrpo({
  out: values.out,
  quick: values.quick,
  ...(values.model && { model: values.model }),
  ...(values['sft-steps'] && { sftSteps: Number(values['sft-steps']) }),
  ...(values['grpo-steps'] && { grpoSteps: Number(values['grpo-steps']) }),
  ...(values['live-steps'] && { liveSteps: Number(values['live-steps']) }),
  ...(values.beta && { beta: Number(values.beta) }),
  device: values.device as DeviceRequest,
  seed: Number(values.seed),
});
