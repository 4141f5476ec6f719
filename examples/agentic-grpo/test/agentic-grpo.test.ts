// The agentic-grpo example: the shop's tools on their own (timeout, cut output, workspace
// journal), and the --quick path end to end, where every feature of the seed's list must show up
// in the counts it prints and in the files it writes.
import { existsSync, mkdtempSync, readdirSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { ToolRegistry } from '@flowgrpo/tools';
import { afterAll, describe, expect, it } from 'vitest';
import { demonstratedAction } from '../src/agent.js';
import { createShopTools, productSheet, type WorkspaceVisit } from '../src/environment.js';
import { type AgenticGrpoResult, runAgenticGrpo, settings } from '../src/run.js';
import { createShop, makeQuestions, UNAVAILABLE } from '../src/shop.js';

const tmp = mkdtempSync(join(tmpdir(), 'flowgrpo-example-agentic-'));
afterAll(() => rmSync(tmp, { recursive: true, force: true }));

describe('the shop task and its tools', () => {
  const shop = createShop(1);

  it('asks about imported goods in a quarter of the questions; their answer is unavailable', () => {
    const qs = makeQuestions(shop, 40, 'test');
    expect(qs.filter((q) => q.imported)).toHaveLength(10);
    for (const q of qs) {
      // The answer written out by hand from the price list: qty × unit price.
      const expected = q.imported ? UNAVAILABLE : String(q.qty * shop.prices.get(q.item)!);
      expect(q.answer).toBe(expected);
      expect(q.question).toBe(`Cost of ${q.qty} kg of ${q.item}?`);
    }
  });

  it('a slow supplier ends as TOOL_TIMEOUT; a local price comes back at once', async () => {
    const visits: WorkspaceVisit[] = [];
    const registry = new ToolRegistry(createShopTools(shop, { onVisit: (v) => visits.push(v) }));
    const slow = await registry.run('price', { item: 'mango' }, { timeoutMs: 200 });
    expect(slow.ok).toBe(false);
    expect(slow.ok ? '' : slow.errorCode).toBe('TOOL_TIMEOUT');
    const fast = await registry.run('price', { item: 'pear' }, { timeoutMs: 200 });
    expect(fast.ok).toBe(true);
    expect(fast.output).toBe(productSheet(shop, 'pear'));
    const unknown = await registry.run('price', { item: 'bread' }, { timeoutMs: 200 });
    expect(unknown.ok ? '' : unknown.errorCode).toBe('UNKNOWN_GOOD');
    // No workspace given: the tools still count their calls.
    expect(visits.map((v) => v.callNumber)).toEqual([1, 2, 3]);
  });

  it('the demonstrator reads the price off the cut product sheet', () => {
    const q = makeQuestions(shop, 4, 'demo', 0)[0]!;
    expect(demonstratedAction(q, 'Cost?')).toBe(
      `<tool_call>{"name":"price","arguments":{"item":"${q.item}"}}</tool_call>`,
    );
    const sheet = productSheet(shop, q.item).slice(0, 60);
    const afterPrice = `<tool_response>\n${sheet} ...\n</tool_response>`;
    expect(demonstratedAction(q, afterPrice)).toBe(
      `<tool_call>{"name":"calc","arguments":{"expression":"${q.qty}*${shop.prices.get(q.item)}"}}</tool_call>`,
    );
    const afterCalc = `${afterPrice}<tool_response>\n${q.answer}\n</tool_response>`;
    expect(demonstratedAction(q, afterCalc)).toBe(`<answer>${q.answer}</answer>`);
    const timedOut =
      '<tool_response>\nerror TOOL_TIMEOUT: price took longer than 400 ms\n</tool_response>';
    expect(demonstratedAction(q, timedOut)).toBe(`<answer>${UNAVAILABLE}</answer>`);
  });
});

describe('agentic-grpo --quick', () => {
  it('shows every feature of the seed list in its output and files', async () => {
    const lines: string[] = [];
    const out = join(tmp, 'quick');
    const r: AgenticGrpoResult = await runAgenticGrpo({
      out,
      quick: true,
      seed: 1,
      log: (l) => lines.push(l),
    });
    const text = lines.join('\n');
    const s = settings(true, false);

    // Demonstrations: the scripted assistant asks the price of every good, so each imported
    // question ends in a timeout and each local one in a cut product sheet (~1 KB > 40 tokens).
    const demoQs = makeQuestions(createShop(1), s.demonstrations, 'demonstrations');
    const imported = demoQs.filter((q) => q.imported).length;
    const d = r.demonstrations.features;
    expect(d.rollouts).toBe(s.demonstrations);
    expect(d.timeouts).toHaveLength(imported);
    expect(d.truncations).toHaveLength(s.demonstrations - imported);
    expect(d.toolCalls).toBe(imported + 2 * (s.demonstrations - imported));
    expect(d.answers).toBe(s.demonstrations);
    // Per-rollout workspaces: one each, never shared, all removed.
    expect(d.workspaces).toHaveLength(s.demonstrations);
    expect(d.isolationViolations).toBe(0);
    expect(d.workspacesLeft).toBe(0);
    // Loss masking: the sample shows trained actions and masked prompt and tool output.
    const kinds = new Set(r.demonstrations.sample.segments!.map((g) => `${g.kind}:${g.trainable}`));
    expect(kinds).toEqual(new Set(['prompt:false', 'action:true', 'observation:false']));
    expect(r.sft!.steps).toBe(s.sftSteps);
    expect(r.sft!.lastLoss).toBeLessThan(r.sft!.firstLoss);

    // GRPO: the trainer's metrics, one record per step, with the masking ratio and KL logged.
    expect(r.steps).toHaveLength(s.grpoSteps);
    for (const step of r.steps) {
      const ratio = Number(step.metrics.trainable_token_ratio);
      expect(ratio).toBeGreaterThan(0);
      expect(ratio).toBeLessThan(1);
      expect(Number.isFinite(Number(step.metrics.kl))).toBe(true);
      // Parallel group generation: Q×G rollouts per step, more than one in flight at once.
      expect(step.features.rollouts).toBe(s.queriesPerStep * s.generations);
      expect(step.features.maxInFlight).toBeGreaterThan(1);
      // …and decoded together: rows per decode step, from the engine's live batch counters.
      expect(step.decodeBatch).toBeGreaterThan(1);
      expect(step.features.isolationViolations).toBe(0);
      expect(step.features.workspacesLeft).toBe(0);
    }
    // The fresh LoRA adapter starts at the reference: no divergence at step 1 (float32 noise).
    expect(Math.abs(Number(r.steps[0]!.metrics.kl))).toBeLessThan(1e-4);
    expect(r.workspacesLeft).toEqual([]);
    expect(readdirSync(join(out, 'workspaces'))).toEqual([]);

    // Files: the trainer's metrics.jsonl, the environment's counts, the HTML report.
    const metrics = readFileSync(r.metricsFile, 'utf8').trim().split('\n');
    expect(metrics.length).toBeGreaterThanOrEqual(s.grpoSteps);
    const env = readFileSync(r.environmentFile, 'utf8')
      .trim()
      .split('\n')
      .map((l) => JSON.parse(l) as Record<string, number>);
    expect(env.map((e) => e.step)).toEqual([1, 2, 3]);
    expect(env[0]!['rollouts/count']).toBe(s.queriesPerStep * s.generations);
    expect(env[0]!['tokens/trainable_ratio']).toBeGreaterThan(0);
    expect(existsSync(r.report)).toBe(true);

    // The printed summary names every feature of the seed's list.
    for (const feature of [
      'real-time tool execution',
      'parallel group generation',
      'loss masking',
      'KL penalty',
      'workspace isolation',
      'tool timeouts',
      'tool-output truncation',
    ])
      expect(text).toContain(`${feature}:`);
    expect(text).toMatch(/step 1 rollouts, live/);
    expect(text).toMatch(/report: .*report\.html/);
  });
});
