// Supervised LoRA fine-tuning of stories260K; the PEFT adapter written, reloaded and used.
//   pnpm example lora-sft [--quick] [--steps N] [--model FILE|DIR --tokenizer FILE|DIR] [--out DIR]
import { join } from 'node:path';
import { parseCommandLine } from '@flowgrpo/core';
import type { DeviceRequest } from '@flowgrpo/models';
import { stories260K } from './data-source.js';
import { loraSft } from './lora-sft.js';
import { sharedDir } from './shared.js';

const usage = `Usage: pnpm example lora-sft [flags]
  --quick            30 steps instead of 100
  --steps N          SFT steps
  --model PATH       a llama2.c .bin checkpoint or an HF model folder (default ../shared/models/stories260K/stories260K.bin,
                     else stories260K/stories260K.bin of the hub repo karpathy/tinyllamas)
  --tokenizer PATH   its tokenizer: tok*.bin, or the HF folder (default: --model's folder, or tok512.bin beside
                     the default model)
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
/** --model (its tokenizer: --tokenizer, else the model's folder), else stories260K from ../shared or the hub. */
async function modelFiles(): Promise<{ model: string; tokenizer: string }> {
  if (values.model !== undefined)
    return { model: values.model, tokenizer: values.tokenizer ?? values.model };
  const found = await stories260K(sharedDir(), (reason) =>
    console.log(`lora-sft: skipped — ${reason}`),
  );
  if (!found) process.exit(0);
  console.log(`stories260K: ${found.from}`);
  return { model: found.model, tokenizer: values.tokenizer ?? found.tokenizer };
}
const { model, tokenizer } = await modelFiles();
console.log(`flowgrpo example: lora-sft — LoRA SFT of ${model}\n`);
await loraSft({
  model,
  tokenizer,
  out: values.out,
  steps: Number(values.steps ?? (values.quick ? 30 : 100)),
  device: values.device as DeviceRequest,
});
