// The gsm8k-calculator example: the agent format on real GSM8K rows, and the --quick pipeline
// (SFT → GRPO → table → merged export) end to end.
import { existsSync, mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { SampleRow } from '@flowgrpo/core';
import { ByteLevelTokenizer, loadHfModel, weightAsFloat32 } from '@flowgrpo/models';
import { afterAll, describe, expect, it } from 'vitest';
import { sharedPath, skipWithoutShared } from '../../../test-utils/shared.js';
import { parseCalculatorCall, toDemonstration } from '../src/agent-format.js';
import { multiDimensionReward } from '../src/rewards.js';
import { type Gsm8kRunResult, runGsm8k } from '../src/run.js';

const tmp = mkdtempSync(join(tmpdir(), 'flowgrpo-example-gsm8k-'));
afterAll(() => rmSync(tmp, { recursive: true, force: true }));

describe('the agent format', () => {
  // GSM8K train row 0 as @flowgrpo/core normalises it (notes stripped into extra_info).
  const row: SampleRow = {
    id: 0,
    question:
      'Natalia sold clips to 48 of her friends in April, and then she sold half as many clips in May. How many clips did Natalia sell altogether in April and May?',
    chain:
      'Natalia sold 48/2 = 24 clips in May.\nNatalia sold 48+24 = 72 clips altogether in April and May.',
    result: '72',
    source: 'gsm8k',
    extra_info: { ground_truth: '72', idx: 0, calculations: ['48/2=24', '48+24=72'] },
  };

  it('puts the reasoning in <think> and the last calculation in the calculator call', () => {
    const d = toDemonstration(row);
    expect(d.expression).toBe('48+24');
    expect(d.first).toBe(
      '<think>\nNatalia sold 48/2 = 24 clips in May.\nNatalia sold 48+24 = 72 clips altogether in April and May.\n' +
        'Final calculation needed: 48+24\n</think>\n\n<tool_call>\ncalculator(expression="48+24")\n</tool_call>',
    );
    expect(d.final).toBe('The final answer is **72**.');
    expect(parseCalculatorCall(d.first)).toBe('48+24');
    expect(parseCalculatorCall("<tool_call>calculator(expression='2*3')</tool_call>")).toBe('2*3');
    expect(parseCalculatorCall('calculator(expression="1+1")')).toBeUndefined(); // not in a block
  });

  it('answers directly when the solution has no calculation', () => {
    const d = toDemonstration({ ...row, extra_info: { ground_truth: '72', idx: 0 } });
    expect(d.expression).toBeUndefined();
    expect(d.first).toMatch(/<\/think>\n\nThe final answer is \*\*72\*\*\.$/);
  });

  it('scores the transcript with the chapter reward (1.0 for a full, correct demonstration)', async () => {
    const d = toDemonstration(row);
    const transcript = `${d.first}\n<tool_response>\n72\n</tool_response>\n${d.final}`;
    const r = await multiDimensionReward.score({
      question: row.question,
      groundTruth: '72',
      finalAnswer: '72',
      trajectory: {
        queryId: 'q',
        groupId: 'q',
        finalAnswer: '72',
        stopReason: 'answer',
        timings: {},
        metadata: { completion: transcript },
      },
    });
    // 0.5 accuracy + 0.2 format + 0.2 reasoning + 0.1 conciseness (seed 003's weights).
    expect(r.score).toBeCloseTo(1, 10);
  });
});

describe.skipIf(skipWithoutShared('gsm8k-calculator --quick (GSM8K in ../shared/data)'))(
  'gsm8k-calculator --quick',
  () => {
    let result: Gsm8kRunResult;
    const lines: string[] = [];

    it('runs SFT → GRPO → the base/SFT/GRPO table → merged export', async () => {
      result = await runGsm8k({
        data: {
          train: sharedPath('data', 'gsm8k', 'train.jsonl'),
          test: sharedPath('data', 'gsm8k', 'test.jsonl'),
        },
        out: join(tmp, 'quick'),
        quick: true,
        log: (l) => lines.push(l),
      });
      const out = lines.join('\n');
      expect(result.table.map((r) => r.name)).toEqual(['base', 'SFT', 'GRPO']);
      expect(out).toMatch(/Metric +base +SFT +GRPO/);
      for (const label of ['Accuracy', 'Format compliance', 'Avg. length (words)'])
        expect(out).toMatch(new RegExp(`${label.replace(/[.()]/g, '\\$&')} +\\S+ +\\S+ +\\S+`));
      expect(result.sft.filter((m) => typeof m.loss === 'number')).toHaveLength(16);
      expect(result.grpo.map((m) => m.step)).toEqual([1, 2]);
      expect(existsSync(join(result.adapter, 'adapter_model.safetensors'))).toBe(true);
    });

    it('records demonstrations with the real calculator response masked', () => {
      const tok = new ByteLevelTokenizer();
      const seg = result.demonstration.segments!;
      expect(seg.map((g) => g.kind)).toEqual(['prompt', 'action', 'observation', 'action']);
      expect(seg.map((g) => g.trainable)).toEqual([false, true, false, true]);
      // Train row 0's last note is 48+24: the calculator answered 72.
      expect(tok.decode(seg[2]!.tokens)).toBe('\n<tool_response>\n72\n</tool_response>\n');
    });

    it('exports the GRPO model merged into the SFT model, as an HF folder', async () => {
      const merged = await loadHfModel(result.exported);
      const sft = await loadHfModel(result.sftMerged);
      expect(merged.config.hiddenSize).toBe(64);
      expect(existsSync(join(result.exported, 'tokenizer.json'))).toBe(true);
      const name = 'model.layers.0.self_attn.q_proj.weight';
      expect(weightAsFloat32(merged, name)).toHaveLength(weightAsFloat32(sft, name).length);
    });
  },
);
