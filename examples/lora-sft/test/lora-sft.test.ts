// The lora-sft example's --quick path on the real stories260K weights: the adapter is trained,
// written in PEFT's layout, read back, and changes what the model writes.
import { existsSync, mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { sharedPath, skipWithoutShared } from '../../../test-utils/shared.js';
import { loraSft } from '../src/lora-sft.js';

const tmp = mkdtempSync(join(tmpdir(), 'flowgrpo-example-lora-sft-'));
afterAll(() => rmSync(tmp, { recursive: true, force: true }));

describe.skipIf(skipWithoutShared('lora-sft --quick (stories260K in ../shared/models)'))(
  'lora-sft --quick',
  () => {
    it('trains, writes and reloads a PEFT adapter that changes the story', async () => {
      const lines: string[] = [];
      const r = await loraSft({
        model: sharedPath('models', 'stories260K', 'stories260K.bin'),
        tokenizer: sharedPath('models', 'stories260K', 'tok512.bin'),
        out: tmp,
        steps: 30,
        log: (l) => lines.push(l),
      });
      expect(r.losses).toHaveLength(30);
      expect(r.losses.at(-1)!).toBeLessThan(r.losses[0]!);
      // PEFT's files and names (what PEFT and vLLM load).
      const config = JSON.parse(readFileSync(join(r.adapterDir, 'adapter_config.json'), 'utf8'));
      expect(config).toMatchObject({ peft_type: 'LORA', r: 8, lora_alpha: 16 });
      expect(existsSync(join(r.adapterDir, 'adapter_model.safetensors'))).toBe(true);
      // 5 layers × 4 modules × (A, B) = 40 tensors.
      expect(r.adapter.params.size).toBe(40);
      expect([...r.adapter.params.keys()][0]).toMatch(
        /^base_model\.model\.model\.layers\.\d+\.self_attn\.\w_proj\.lora_[AB]\.weight$/,
      );
      // Without the adapter the model writes what llama2.c's run.c writes greedily
      // (../shared/models/stories260K/greedy.json); with it, the fine-tuning stories.
      const greedy = JSON.parse(
        readFileSync(sharedPath('models', 'stories260K', 'greedy.json'), 'utf8'),
      ) as { prompt: string; text: string }[];
      const lily = greedy.find((g) => g.prompt === '')!.text;
      expect(lily.startsWith(`Once upon a time${r.base.slice(0, 40)}`)).toBe(true);
      expect(r.tuned).toContain('robot named Bolt');
      expect(lines.join('\n')).toMatch(
        /with adapter: Once upon a time, there was a robot named Bolt/,
      );
    });
  },
);
