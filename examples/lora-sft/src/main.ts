// Supervised LoRA fine-tuning of stories260K; the PEFT adapter written, reloaded and used.
//   pnpm example lora-sft [--quick] [--steps N] [--model FILE|DIR --tokenizer FILE|DIR] [--out DIR]
import { join } from 'node:path';
import { parseCommandLine } from '@flowgrpo/core';
import type { DeviceRequest } from '@flowgrpo/models';
import { loraSft } from './lora-sft.js';
import { sharedDir } from './shared.js';

const usage = `Usage: pnpm example lora-sft [flags]
  --quick            30 steps instead of 100
  --steps N          SFT steps
  --model PATH       a llama2.c .bin checkpoint or an HF model folder (default ../shared/models/stories260K/stories260K.bin)
  --tokenizer PATH   its tokenizer: tok*.bin, or the HF folder (default ../shared/models/stories260K/tok512.bin)
  --device D         cpu (default), cuda, webgpu or auto
  --out DIR          default out/lora-sft`;

const { values } = parseCommandLine(usage, {
  options: {
    quick: { type: 'boolean', default: false },
    steps: { type: 'string' },
    model: { type: 'string' },
    tokenizer: { type: 'string' },
    device: { type: 'string', default: 'cpu' },
    out: { type: 'string', default: join('out', 'lora-sft') },
  },
});
const shared = sharedDir();
const model = values.model ?? (shared && join(shared, 'models', 'stories260K', 'stories260K.bin'));
const tokenizer =
  values.tokenizer ??
  values.model ??
  (shared && join(shared, 'models', 'stories260K', 'tok512.bin'));
if (!model || !tokenizer) {
  console.log(
    'lora-sft: skipped — stories260K is read from ../shared/models (or $FLOWGRPO_SHARED), which is absent; download stories260K/stories260K.bin and stories260K/tok512.bin from the hub repo karpathy/tinyllamas and pass --model and --tokenizer (README: where the data comes from)',
  );
  process.exit(0);
}
console.log(`flowgrpo example: lora-sft — LoRA SFT of ${model}\n`);
await loraSft({
  model,
  tokenizer,
  out: values.out,
  steps: Number(values.steps ?? (values.quick ? 30 : 100)),
  device: values.device as DeviceRequest,
});
