// GSM8K with a calculator tool: SFT (LoRA) → GRPO (multi-dimension reward) → base/SFT/GRPO
// table → merged export.
//   pnpm example gsm8k-calculator [--quick] [--model <HF folder>] [--sft-steps N] [--grpo-steps N]
//                                 [--test N] [--device cpu|cuda|webgpu|auto] [--out DIR]
import { join } from 'node:path';
import { hubSettings, parseCommandLine } from '@flowgrpo/core';
import type { DeviceRequest } from '@flowgrpo/models';
import { GSM8K_HUB, gsm8kFiles } from './data-source.js';
import { runGsm8k } from './run.js';
import { sharedDir } from './shared.js';

const usage = `Usage: pnpm example gsm8k-calculator [flags]
  --quick           a small run (under a minute on 2 cores): 16 SFT steps, 2 GRPO steps, 8 test questions
  --model DIR       an HF model folder with tokenizer.json, e.g. a download of Qwen/Qwen2.5-1.5B-Instruct
                    (the chapter's model); default: a tiny Qwen2 created from --seed
  --sft-steps N     SFT optimizer steps (default 600 tiny / 300 with --model)
  --grpo-steps N    GRPO steps (default 40 tiny / 100 with --model)
  --test N          test questions per policy (default 200)
  --device D        cpu (default), cuda, webgpu or auto
  --seed N          default 1
  --out DIR         default out/gsm8k-calculator`;

const { values } = parseCommandLine(usage, {
  options: {
    quick: { type: 'boolean', default: false },
    model: { type: 'string' },
    'sft-steps': { type: 'string' },
    'grpo-steps': { type: 'string' },
    test: { type: 'string' },
    device: { type: 'string', default: 'cpu' },
    seed: { type: 'string', default: '1' },
    out: { type: 'string', default: join('out', 'gsm8k-calculator') },
  },
});
const data = await gsm8kFiles(sharedDir(), (reason) =>
  console.log(
    `gsm8k-calculator: skipped — GSM8K is read from ../shared/data/gsm8k (or $FLOWGRPO_SHARED), which is absent, ` +
      `and the download of ${GSM8K_HUB.name} (config ${GSM8K_HUB.config}, splits train and test) from ${hubSettings().endpoint} failed: ${reason}. ` +
      `Get it with \`pnpm flowgrpo data fetch ${GSM8K_HUB.name} --config ${GSM8K_HUB.config}\` (and \`--split test\`) where the hub is reachable (or set HF_ENDPOINT to a mirror; HF_HOME to a cache that has it), or point FLOWGRPO_SHARED at a shared folder`,
  ),
);
if (!data) process.exit(0);
console.log('flowgrpo example: gsm8k-calculator — SFT → GRPO → evaluation → export\n');
console.log(`GSM8K from ${data.from}`);
await runGsm8k({
  data,
  out: values.out,
  quick: values.quick,
  ...(values.model && { model: values.model }),
  ...(values['sft-steps'] && { sftSteps: Number(values['sft-steps']) }),
  ...(values['grpo-steps'] && { grpoSteps: Number(values['grpo-steps']) }),
  ...(values.test && { testQuestions: Number(values.test) }),
  device: values.device as DeviceRequest,
  seed: Number(values.seed),
});
