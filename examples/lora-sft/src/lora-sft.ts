// Supervised LoRA fine-tuning of a real pretrained model (Karpathy's stories260K, a llama2.c
// checkpoint) through the public trainer API, in the order a user writes it:
//   load the model and tokenizer → build LoRA artifacts → SFTTrainer → the PEFT adapter on disk
//   → load it back → generate with and without it.
import { join } from 'node:path';
import {
  DecoderArtifacts,
  type DeviceRequest,
  LocalPolicyEngine,
  loadDecoderModel,
  loadLoraAdapter,
  loadTokenizer,
} from '@flowgrpo/models';
import { buildTrainingArtifacts, SFTTrainer } from '@flowgrpo/trainer';

/** The stories the adapter learns: a character the base model has never heard of. */
export const STORIES = [
  'Once upon a time, there was a robot named Bolt. Bolt liked to fix toys for the kids in the park.',
  'Once upon a time, there was a robot named Bolt. One day Bolt found a broken kite and fixed it.',
  'Once upon a time, there was a robot named Bolt. Bolt had shiny blue wheels and a big smile.',
  'Once upon a time, there was a robot named Bolt. Bolt helped a little girl find her red ball.',
  'Once upon a time, there was a robot named Bolt. Every morning Bolt said hello to the birds.',
  'Once upon a time, there was a robot named Bolt. Bolt and his friend Sam built a tall tower.',
];

export interface LoraSftOptions {
  /** llama2.c checkpoint (.bin) or HF model folder. */
  model: string;
  /** tok512.bin for a llama2.c checkpoint; the HF folder itself otherwise. */
  tokenizer: string;
  out: string;
  steps: number;
  device?: DeviceRequest;
  log?: (line: string) => void;
}

export async function loraSft(o: LoraSftOptions) {
  const log = o.log ?? console.log;
  const weights = await loadDecoderModel(o.model);
  const tokenizer = await loadTokenizer(o.tokenizer, { vocabSize: weights.config.vocabSize });
  const lora = {
    r: 8,
    alpha: 16,
    targetModules: ['q_proj', 'k_proj', 'v_proj', 'o_proj'] as const,
  };
  const artifacts = join(o.out, 'artifacts');
  buildTrainingArtifacts(weights, artifacts, {
    lora: { ...lora, targetModules: [...lora.targetModules] },
  });

  const sft = await new SFTTrainer({
    config: {
      output_dir: join(o.out, 'run'),
      // The example's own output folder: a re-run replaces the previous run (logged).
      overwrite_output_dir: true,
      learning_rate: 3e-3,
      max_steps: o.steps,
      per_device_train_batch_size: STORIES.length,
      lora: { r: lora.r, lora_alpha: lora.alpha, target_modules: [...lora.targetModules] },
      seed: 1,
    },
    artifacts,
    tokenizer,
    trainDataset: STORIES.map((text) => ({ text })),
    device: o.device ?? 'cpu',
  }).train();
  const losses = sft.metrics.filter((m) => typeof m.loss === 'number').map((m) => Number(m.loss));
  log(`SFT: ${sft.globalStep} steps, loss ${losses[0]!.toFixed(3)} → ${losses.at(-1)!.toFixed(3)}`);

  // The checkpoint is a PEFT adapter folder (adapter_config.json + adapter_model.safetensors).
  const adapter = await loadLoraAdapter(sft.checkpoint, weights.config);
  log(
    `adapter: ${sft.checkpoint} — r ${adapter.lora.r}, alpha ${adapter.lora.alpha}, ${adapter.params.size} tensors`,
  );

  const art = await DecoderArtifacts.open(artifacts, {
    graphs: ['decode'],
    device: o.device ?? 'cpu',
  });
  try {
    const engine = new LocalPolicyEngine({ artifacts: art, tokenizer });
    const generate = async () =>
      (await engine.generate({ prompt: 'Once upon a time', maxTokens: 40, temperature: 0 })).text;
    const base = await generate();
    await engine.updateAdapter({ name: 'bolt', path: sft.checkpoint });
    const tuned = await generate();
    log(`base:         Once upon a time${base}`);
    log(`with adapter: Once upon a time${tuned}`);
    return { losses, adapterDir: sft.checkpoint, adapter, base, tuned };
  } finally {
    await art.release();
  }
}
