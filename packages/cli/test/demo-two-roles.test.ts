// The two-role variant of the embedded demo (planner and verifier both trained models) at a smoke
// budget: the loop's invariants, not its accuracies (docs/demo-two-roles.md reports those) — each
// GRPO run trains exactly its roles' adapters through the gateway, per-role metrics are recorded
// from each role's own calls, the demonstrations hold both roles' turns, and the held-out
// questions share nothing with training.
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { PolicyEngine } from '@flowgrpo/agent';
import type { Turn } from '@flowgrpo/core';
import { loadHfModel, loadLoraAdapter } from '@flowgrpo/models';
import { createAlmanac, PolicyVerifierEngine } from '@flowgrpo/trainer/demo';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { z } from 'zod';
import { runTwoRoleDemo, type TwoRoleDemoResult } from '../src/demo/two-roles.js';

const out = mkdtempSync(join(tmpdir(), 'flowgrpo-demo-roles-'));
afterAll(() => rmSync(out, { recursive: true, force: true }));
let result: TwoRoleDemoResult;
beforeAll(async () => {
  result = await runTwoRoleDemo({ outDir: out, seed: 2, budget: 'smoke' });
}, 900_000); // a hang guard, not a duration

describe('flowgrpo demo --two-roles (smoke budget)', () => {
  it('evaluates SFT, the three GRPO runs and the teacher on the same held-out questions', () => {
    expect(result.evals.map((e) => e.name)).toEqual([
      'sft',
      'grpo planner-only',
      'grpo verifier-only',
      'grpo both',
      'teacher (demonstrator)',
    ]);
    for (const e of result.evals) expect(e.n).toBe(24);
    // Per question kind (the sources of the held-out rows).
    expect(Object.keys(result.evals[0]!.per_source).length).toBeGreaterThan(1);
    expect(result.table).toContain('event_plus');
    expect(readFileSync(result.report, 'utf8')).toContain('GRPO, both');
  });

  it('each run trains exactly its roles: both adapters move in the two-role run, and differ', async () => {
    const { config } = await loadHfModel(result.sft.checkpoint);
    expect(Object.keys(result.runs['planner-only'].adapters)).toEqual(['planner']);
    expect(Object.keys(result.runs['verifier-only'].adapters)).toEqual(['verifier']);
    expect(Object.keys(result.runs.both.adapters).sort()).toEqual(['planner', 'verifier']);
    const b = async (path: string) => {
      const params = (await loadLoraAdapter(path, config)).params;
      return params.get([...params.keys()].find((k) => k.includes('lora_B'))!)!;
    };
    const planner = await b(result.runs.both.adapters.planner!);
    const verifier = await b(result.runs.both.adapters.verifier!);
    // PEFT's init has B = 0: a non-zero B is an adapter that was trained.
    expect(planner.some((v) => v !== 0)).toBe(true);
    expect(verifier.some((v) => v !== 0)).toBe(true);
    expect(Array.from(planner)).not.toEqual(Array.from(verifier));
  });

  it("records each trained role's metrics from its own calls, token-exact", () => {
    const roles = {
      'planner-only': ['planner'],
      'verifier-only': ['verifier'],
      both: ['planner', 'verifier'],
    };
    for (const [run, trained] of Object.entries(roles)) {
      const metrics = result.runs[run as keyof typeof roles].metrics;
      expect(metrics.length).toBeGreaterThan(0);
      for (const m of metrics) {
        // Both roles act in every rollout; only the trained ones are updated.
        expect(m['planner/calls']).toBeGreaterThan(0);
        expect(m['verifier/calls']).toBeGreaterThan(0);
        for (const role of ['planner', 'verifier']) {
          if (!trained.includes(role)) {
            expect(m[`${role}/loss`]).toBeUndefined();
            continue;
          }
          expect(m[`${role}/train/tokens`]).toBeGreaterThan(0);
          expect(m[`${role}/logprob_mismatch/max`]).toBeLessThanOrEqual(1e-3);
        }
      }
    }
  });

  it('keeps the held-out questions disjoint from the demonstrations and the GRPO questions', () => {
    const train = new Set([...result.questions.demonstrations, ...result.questions.grpo]);
    expect(result.questions.test).toHaveLength(24);
    for (const q of result.questions.test) expect(train.has(q)).toBe(false);
    // No held-out landmark is a training one (the almanac's halves, as runTwoRoleDemo builds it).
    const almanac = createAlmanac({ seed: 2, trainLandmarks: 100, testLandmarks: 50 });
    const trainNames = almanac.train.landmarks.map((l) => l.name);
    const trainText = [...train].join('\n');
    for (const l of almanac.test.landmarks) expect(trainText.includes(l.name)).toBe(false);
    expect(trainNames.some((n) => trainText.includes(n))).toBe(true);
  });
});

describe('PolicyVerifierEngine', () => {
  // The verifier schema FlowRun asks for (MemoryVerification).
  const schema = z.object({ analysis: z.string(), stop_signal: z.boolean() });
  const reply = (text: string): PolicyEngine => ({
    model: 'v',
    async generate(r) {
      return {
        text,
        promptTokens: Int32Array.from([r.prompt!.length]),
        actionTokens: Int32Array.from([1, 2]),
        actionLogprobs: new Float32Array(2),
        finishReason: 'stop',
        model: 'v',
      };
    },
  });
  const messages = [
    {
      role: 'user' as const,
      content:
        'Question: What happened in 1728?\nSteps taken and their results: {"Action Step 1":{"tool_name":"almanac","sub_goal":"event in the year","command":{},"result":"the Fire of Dun"}}\n',
    },
  ];

  it('answers the verifier schema from the model decision, with the short prompt the model saw', async () => {
    const record: Turn[] = [];
    const v = new PolicyVerifierEngine(reply('{"stop_signal":true}'), { record });
    const r = await v.generateObject(messages, schema);
    expect(r.object.stop_signal).toBe(true);
    expect(record).toHaveLength(1);
    expect(record[0]!.promptText).toBe(
      'Q: What happened in 1728?\n1 almanac: event in the year -> the Fire of Dun\nStop?\n',
    );
  });

  it('a reply that is not a decision is an error (FlowRun records it; the run goes on)', async () => {
    const v = new PolicyVerifierEngine(reply('{"stop_sig'));
    await expect(v.generateObject(messages, schema)).rejects.toMatchObject({
      code: 'LLM_MALFORMED_REPLY',
    });
  });
});
