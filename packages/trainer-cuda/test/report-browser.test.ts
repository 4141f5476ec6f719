// report.html opened in a real headless Chromium (Debian's chromium-headless-shell, or chromium):
// the charts are drawn (SVG paths with real extents), the page logs no error and requests
// nothing from the network — it is self-contained; and what a reader reads off the rendered page
// is right: step ticks, axes from 0, legends clear of titles, recorded rewards, rollout errors,
// inconclusive comparisons. Skipped, with the reason printed, where no Chromium is installed
// (.ci/run installs one).
import { existsSync, mkdirSync, mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { Trajectory } from '@flowgrpo/core';
import type { Page } from 'playwright-core';
import { afterAll, describe, expect, it } from 'vitest';
import { type EvalResult, type MetricsRecord, wilsonInterval, writeReport } from '../src/index.js';

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

/** Opens `path` in headless Chromium, runs `check`, and asserts the page logged no error and
 * requested nothing beyond its own file. */
async function inBrowser(path: string, check: (page: Page) => Promise<void>): Promise<void> {
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
    await check(page);
    expect(errors).toEqual([]);
    expect(requests).toEqual([]);
  } finally {
    await browser.close();
  }
}

interface ChartReading {
  label: string;
  xTicks: string[];
  yTicks: string[];
  /** Legend entries whose box intersects the title's box. */
  legendOverTitle: number;
  /** Legend entries that run past the chart's edges. */
  legendOutside: number;
  legend: string[];
}

/** Every chart as a reader sees it: its tick labels, its legend, and where they sit. */
function readCharts(page: Page): Promise<ChartReading[]> {
  return page.$$eval('svg.chart', (svgs) =>
    svgs.map((svg) => {
      const texts = (sel: string) => [...svg.querySelectorAll(sel)].map((t) => t.textContent ?? '');
      const title = svg.querySelector('.title')!.getBoundingClientRect();
      const chart = svg.getBoundingClientRect();
      const entries = [...svg.querySelectorAll('.legend text, .legend rect')].map((e) =>
        e.getBoundingClientRect(),
      );
      // (No DOM types in this package's tsconfig: a box is what getBoundingClientRect returns.)
      type Box = { left: number; right: number; top: number; bottom: number };
      const overlaps = (a: Box, b: Box) =>
        a.left < b.right && b.left < a.right && a.top < b.bottom && b.top < a.bottom;
      return {
        label: svg.getAttribute('aria-label') ?? '',
        xTicks: texts('.x-axis text'),
        // As read on the page, top to bottom: the lowest tick last.
        yTicks: [...svg.querySelectorAll('.y-axis text')]
          .map((t) => ({ text: t.textContent ?? '', top: t.getBoundingClientRect().top }))
          .sort((a, b) => a.top - b.top)
          .map((t) => t.text),
        legendOverTitle: entries.filter((e) => overlaps(e, title)).length,
        legendOutside: entries.filter((e) => e.left < chart.left || e.right > chart.right).length,
        legend: texts('.legend text'),
      };
    }),
  );
}

// n steps of a warm-up learning rate from 0 (the schedule that drew an axis from −1.5e-4), a loss,
// lengths, and — at the steps in `failed` — rollouts that failed with two error codes.
function runMetrics(n: number, failed: readonly number[] = []): MetricsRecord[] {
  return Array.from({ length: n }, (_, i) => ({
    step: i + 1,
    reward: 0.2 + 0.1 * i,
    loss: 0.02 / (i + 1),
    learning_rate: (5e-4 * i) / Math.max(1, n - 1),
    'completions/mean_length': 120 + i,
    'timing/rollout_s': 2.5,
    'timing/reward_s': 0.1,
    'timing/logprobs_s': 0.4,
    'timing/train_s': 1.2,
    'timing/sync_s': 0.05,
    ...(failed.length > 0 && {
      'rollouts/failed': failed.includes(i + 1) ? 8 : 0,
      'rollouts/failed/CONTEXT_LENGTH_EXCEEDED': failed.includes(i + 1) ? 7 : 0,
      'rollouts/failed/TOOL_TIMEOUT': failed.includes(i + 1) ? 1 : 0,
    }),
  }));
}

const evalOf = (name: string, k: number, n: number): EvalResult => ({
  ...evalResult,
  name,
  n,
  accuracy: k / n,
  accuracy_ci95: wilsonInterval(k, n),
});

const trajectory = (
  answer: string,
  reward: number | undefined,
  extra: Partial<Trajectory> = {},
): Trajectory => ({
  queryId: `q-${answer}`,
  groupId: 'g',
  question: 'Which storm ended the year 1234?',
  groundTruth: 'the Long Storm of Daipair',
  finalAnswer: answer,
  ...(reward !== undefined && { reward }),
  stopReason: 'answer',
  timings: {},
  turns: [],
  ...extra,
});

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
    await inBrowser(path, async (page) => {
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
    });
  }, 60_000);

  it('step ticks are distinct integers, non-negative axes start at 0, legends clear titles', async () => {
    // One report, three runs: 1, 3 and 6 steps (the lengths that read "1 2 2 3 3" and
    // "1 2 4 5 6"), and 12 (ticks every 2 steps).
    const sections = [1, 3, 6, 12].map((n) => ({ title: `${n} steps`, metrics: runMetrics(n) }));
    const dir = join(tmp, 'axes');
    mkdirSync(dir);
    const path = await writeReport(dir, { title: 'axes', sections });
    await inBrowser(path, async (page) => {
      const charts = await readCharts(page);
      // Reward, loss, length, learning rate and time, per run.
      expect(charts).toHaveLength(4 * 5);
      const expected = [
        ['1'],
        ['1', '2', '3'],
        ['1', '2', '3', '4', '5', '6'],
        ['2', '4', '6', '8', '10', '12'],
      ];
      charts.forEach((c, i) => {
        const steps = expected[Math.floor(i / 5)]!;
        expect(c.xTicks, c.label).toEqual(steps);
        // Every value tick is a distinct label, and every series here is ≥ 0: the axis starts at 0.
        expect(new Set(c.yTicks).size, c.label).toBe(c.yTicks.length);
        expect(c.yTicks.at(-1), c.label).toBe('0');
        expect(c.legendOverTitle, c.label).toBe(0);
        expect(c.legendOutside, c.label).toBe(0);
      });
      // Five timing series wrap onto more than one legend row; none runs into the title either.
      const timing = charts.find((c) => c.label === 'Time per phase (s)')!;
      expect(timing.legend).toHaveLength(5);
      const lr = charts.filter((c) => c.label === 'Learning rate').at(-1)!;
      expect(lr.yTicks).toEqual(['5e-4', '4e-4', '3e-4', '2e-4', '1e-4', '0']);
    });
  }, 60_000);

  it('shows recorded rewards, failed rollouts with their errors, and inconclusive comparisons', async () => {
    const dir = join(tmp, 'failures');
    mkdirSync(dir);
    const rolloutError = {
      role: 'rollout',
      code: 'CONTEXT_LENGTH_EXCEEDED',
      message: 'prompt 0 (972 tokens) + 32 new tokens exceeds the 512 positions the graphs support',
      hint: 'raise max_positions or shorten the prompt',
    };
    const path = await writeReport(dir, {
      title: 'failures',
      metrics: runMetrics(6, [2, 5]),
      evals: [evalOf('base', 2, 120), evalOf('sft', 40, 60), evalOf('grpo', 46, 60)],
      comparisons: [
        ['grpo', 'sft'],
        ['grpo', 'base'],
      ],
      trajectories: [
        trajectory('the Long Storm of Daipair', 1),
        trajectory('the Short Storm', 0),
        trajectory('half right', 0.5),
        trajectory('not scored', undefined),
        trajectory('', 0, {
          stopReason: 'error',
          metadata: { errors: [rolloutError], rolloutError: { name: 'X', message: 'y' } },
        }),
        trajectory('storm', 0, {
          // A model's text with a terminal escape (an OSC 52 clipboard write) and markup.
          turns: [
            {
              index: 0,
              promptTokens: new Int32Array(0),
              actionTokens: new Int32Array(0),
              actionLogprobs: new Float32Array(0),
              text: '\x1b]52;c;cm0gLXJm\x07<img src=x onerror=alert(1)>',
              parsed: true,
            },
          ],
          metadata: {
            rewardError: { code: 'INVALID_REWARD', message: "reward 'f' returned undefined" },
          },
        }),
      ],
    });
    await inBrowser(path, async (page) => {
      const badges = await page.locator('details.traj summary .reward').allTextContents();
      expect(badges).toEqual([
        'reward 1',
        'reward 0',
        'reward 0.5',
        'unscored',
        'reward 0',
        'reward 0',
      ]);
      const summaries = await page.locator('details.traj summary').allTextContents();
      expect(summaries[4]).toContain(
        'CONTEXT_LENGTH_EXCEEDED — prompt 0 (972 tokens) + 32 new tokens exceeds the 512 positions',
      );
      expect(summaries[4]).toContain('(fix: raise max_positions or shorten the prompt)');
      expect(summaries[4]).toContain('0 turns, error');
      expect(summaries[5]).toContain("INVALID_REWARD — reward 'f' returned undefined");
      // Opened, a trajectory lists every error with its role.
      expect(
        await page.locator('details.traj').nth(4).locator('ul.errors li').allTextContents(),
      ).toEqual([
        'rollout: CONTEXT_LENGTH_EXCEEDED — prompt 0 (972 tokens) + 32 new tokens exceeds the 512 positions the graphs support (fix: raise max_positions or shorten the prompt)',
      ]);
      // The escape is shown, not passed on; the markup is text.
      const action = await page.locator('details.traj').nth(5).locator('pre').first().textContent();
      expect(action).toBe('\\x1b]52;c;cm0gLXJm\\x07<img src=x onerror=alert(1)>');
      expect(await page.locator('img').count()).toBe(0);

      // Failed rollouts: a row per failing step with its codes, and a chart of them.
      const rows = await page.locator('table.failures tbody tr').allTextContents();
      expect(rows).toEqual([
        '28CONTEXT_LENGTH_EXCEEDED 7, TOOL_TIMEOUT 1',
        '58CONTEXT_LENGTH_EXCEEDED 7, TOOL_TIMEOUT 1',
      ]);
      const failed = (await readCharts(page)).find((c) => c.label === 'Failed rollouts')!;
      expect(failed.legend).toEqual([
        'rollouts/failed',
        'rollouts/failed/CONTEXT_LENGTH_EXCEEDED',
        'rollouts/failed/TOOL_TIMEOUT',
      ]);
      expect(failed.yTicks.at(-1)).toBe('0');
      expect([failed.legendOverTitle, failed.legendOutside]).toEqual([0, 0]);
      expect(failed.xTicks).toEqual(['1', '2', '3', '4', '5', '6']);

      // grpo 46/60 vs sft 40/60: the intervals overlap; grpo vs base 2/120 they do not.
      const comparisons = page.locator('li.comparison');
      expect(await comparisons.allTextContents()).toEqual([
        'grpo − sft: 10.0 points, inconclusive: the 95% intervals overlap',
        'grpo − base: 75.0 points',
      ]);
      expect(await page.locator('li.comparison.inconclusive').count()).toBe(1);
    });
  }, 60_000);
});
