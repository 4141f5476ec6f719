// report.html opened in a real headless Chromium (Debian's chromium-headless-shell, or chromium):
// the charts are drawn (SVG paths with real extents), the page logs no error and requests
// nothing from the network — it is self-contained. Skipped, with the reason printed, where no
// Chromium is installed (.ci/run installs one).
import { existsSync, mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { type EvalResult, type MetricsRecord, writeReport } from '../src/index.js';

const CHROMIUM = [
  '/usr/bin/chromium-headless-shell',
  '/usr/bin/chromium',
  '/usr/lib/chromium/chromium-headless-shell',
].find((p) => existsSync(p));
if (!CHROMIUM)
  console.warn('[skip] report in a browser: no Chromium (apt-get install chromium-headless-shell)');

const tmp = mkdtempSync(join(tmpdir(), 'flowgrpo-report-'));
afterAll(() => rmSync(tmp, { recursive: true, force: true }));

// Twelve steps of made-up but plausible metrics, and one evaluation.
const metrics: MetricsRecord[] = Array.from({ length: 12 }, (_, i) => ({
  step: i + 1,
  reward: 0.3 + 0.04 * i,
  accuracy: 0.25 + 0.05 * i,
  loss: 0.1 / (i + 1),
  kl: 0.001 * i,
  'clip_ratio/low_mean': 0.01,
  'clip_ratio/high_mean': 0.02,
  'clip_ratio/region_mean': 0.03,
  entropy: 1 - 0.05 * i,
  'completions/mean_length': 120 + i,
  'turns/mean': 2 + 0.1 * i,
  'tools/calls_per_trajectory': 1 + 0.1 * i,
  grad_norm: 0.5,
  learning_rate: 5e-4,
  'timing/rollout_s': 2.5,
  'timing/train_s': 1.2,
}));
const evalResult: EvalResult = {
  name: 'grpo',
  n: 100,
  accuracy: 0.7,
  accuracy_ci95: [0.6, 0.78],
  reward_mean: 0.7,
  format_compliance: 0.95,
  turns_mean: 3,
  tool_calls_per_trajectory: 2,
  tool_error_rate: 0.05,
  completion_length_mean: 150,
  time_s: 5,
  per_source: {},
};

describe.skipIf(!CHROMIUM)('report.html in headless Chromium', () => {
  it('draws every chart, logs no error and fetches nothing', async () => {
    const path = await writeReport(tmp, {
      title: 'test run <script>alert(1)</script>',
      sections: [{ title: 'GRPO', metrics }],
      evals: [evalResult],
      trajectories: [
        {
          queryId: 'q1',
          groupId: 'g1',
          question: 'What happened in 1234?',
          groundTruth: 'the Long Fair of Oskel',
          finalAnswer: 'the Long Fair of Oskel',
          reward: 1,
          stopReason: 'answer',
          timings: {},
          turns: [
            {
              index: 0,
              promptTokens: new Int32Array(0),
              actionTokens: new Int32Array(0),
              actionLogprobs: new Float32Array(0),
              text: '{"sub_goal":"event in the year","tool_name":"almanac"}',
              toolName: 'almanac',
              toolResult: 'the Long Fair of Oskel',
              parsed: true,
            },
          ],
        },
      ],
    });
    const { chromium } = await import('playwright-core');
    const browser = await chromium.launch({
      executablePath: CHROMIUM,
      args: [
        '--no-sandbox',
        '--disable-gpu',
        '--disable-background-networking',
        '--disable-component-update',
      ],
    });
    try {
      const page = await browser.newPage();
      const errors: string[] = [];
      const requests: string[] = [];
      page.on('console', (m) => {
        if (m.type() === 'error') errors.push(m.text());
      });
      page.on('pageerror', (e) => errors.push(e.message));
      page.on('request', (r) => {
        if (!r.url().startsWith('file:')) requests.push(r.url());
      });
      await page.goto(`file://${path}`);
      const charts = await page.$$eval('svg.chart', (svgs) =>
        svgs.map((svg) => {
          const paths = [...svg.querySelectorAll('path')].map((p) =>
            (p as unknown as { getBBox(): { width: number } }).getBBox(),
          );
          return {
            label: svg.getAttribute('aria-label'),
            paths: paths.length,
            widest: Math.max(0, ...paths.map((b) => b.width)),
          };
        }),
      );
      // Reward, accuracy, loss, KL, clip ratios, entropy, length, turns, tool calls, grad norm,
      // learning rate, time: twelve charts, each with at least one line spanning the x axis.
      expect(charts.map((c) => c.label)).toContain('Reward');
      expect(charts.length).toBe(12);
      for (const c of charts) {
        expect(c.paths, c.label ?? '').toBeGreaterThan(0);
        expect(c.widest, c.label ?? '').toBeGreaterThan(100);
      }
      expect(await page.locator('table td').first().textContent()).toBe('grpo');
      expect(await page.locator('details.traj').count()).toBe(1);
      // The title is text, not markup.
      expect(await page.locator('h1').textContent()).toContain('<script>');
      expect(errors).toEqual([]);
      expect(requests).toEqual([]);
    } finally {
      await browser.close();
    }
  }, 60_000);
});
