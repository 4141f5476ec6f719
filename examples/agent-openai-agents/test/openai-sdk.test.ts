// An agent written with the plain `openai` SDK and a tool (src/openai-sdk-agent.ts), pointed at
// the gateway and trained with GRPO: every recorded call is token-exact and the held-out reward
// (greedy, 8 questions of the almanac's held-out half) goes up. The reward is the demo's judge
// plus 0.1 × the share of letters, digits and spaces in the answer; the tiny untrained model
// never answers right, so what it learns here is the shaping term (the most it can score is
// 0.1). Expected values come from this seed's run: 0 before, 0.1 after 10 steps.
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, expect, it } from 'vitest';
import { runOpenAISdkAgent } from '../src/openai-sdk-agent.js';
import { trainAgent } from '../src/train.js';

const out = mkdtempSync(join(tmpdir(), 'flowgrpo-example-openai-sdk-'));
afterAll(() => rmSync(out, { recursive: true, force: true }));

it('trains an openai-SDK agent through the gateway: token-exact, held-out reward up', async () => {
  const r = await trainAgent({
    out,
    steps: 10,
    queriesPerStep: 4,
    generations: 8,
    evalQuestions: 8,
    learningRate: 2e-2,
    runAgent: runOpenAISdkAgent,
  });
  for (const m of r.metrics.filter((x) => typeof x.reward === 'number'))
    expect(m['logprob_mismatch/max'] as number).toBeLessThanOrEqual(1e-4);
  expect(r.before).toBeDefined();
  expect(r.eval).toBeDefined();
  console.log(`held-out reward: before ${r.before!.reward_mean} after ${r.eval!.reward_mean}`);
  expect(r.eval!.reward_mean).toBeGreaterThan(r.before!.reward_mean);
}, 300_000);
