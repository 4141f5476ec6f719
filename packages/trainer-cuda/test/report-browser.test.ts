// report.html opened in a real headless Chromium (Debian's chromium-headless-shell, or chromium):
// the charts are drawn (SVG paths with real extents), the page logs no error and requests
// nothing from the network — it is self-contained; and what a reader reads off the rendered page
// is right: step ticks, axes from 0, legends clear of titles, recorded rewards, rollout errors,
// inconclusive comparisons; and on a run directory like the math-tags template's GRPO run, the
// alarm episodes as bands over the steps they span, metrics lines that are no record counted,
// stop reasons explained, answers without tag fragments, and tokens decoded with the base model's
// tokenizer (or a note where there is none). Skipped, with the reason printed, where no Chromium is
// installed (.ci/run installs one).
import { appendFileSync, existsSync, mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { type Trajectory, TrajectorySchema } from '@flowgrpo/core';
import type { Page } from 'playwright-core';
import { afterAll, describe, expect, it } from 'vitest';
import {
  type EvalResult,
  type MetricsRecord,
  RunDirectory,
  wilsonInterval,
  writeReport,
} from '../src/index.js';

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
  it('a template-like run: alarm episodes as bands, skipped lines, stop reasons, clean answers, tokens', async () => {
    // The run as `flowgrpo train` leaves the math-tags template's GRPO run: a LoRA checkpoint whose
    // adapter_config.json names the base model (the folder with the tokenizer), artifacts without
    // one, and metrics logged through RunDirectory, which computes the real alarms.
    const dir = join(tmp, 'template');
    const base = join(tmp, 'template-base');
    const letters = ' abcdefghijklmnopqrstuvwxyz0123456789';
    const vocab = Object.fromEntries(Array.from(letters, (ch, i) => [ch === ' ' ? 'Ġ' : ch, i]));
    mkdirSync(base, { recursive: true });
    writeFileSync(join(base, 'tokenizer.json'), JSON.stringify({ model: { type: 'BPE', vocab } }));
    mkdirSync(join(dir, 'checkpoint-12'), { recursive: true });
    writeFileSync(
      join(dir, 'checkpoint-12', 'adapter_config.json'),
      JSON.stringify({ peft_type: 'LORA', base_model_name_or_path: base }),
    );
    const warnings: string[] = [];
    let run = new RunDirectory(dir, { warn: (l) => warnings.push(l) });
    // zero_variance_groups is raised while the mean of frac_reward_zero_std over the last 5
    // logged steps is ≥ 0.75, judged once 5 steps are logged (docs/guides/alarms.md). With 1 at
    // steps 1–6, 0 at 7–8 and 1 at 9–12: step 5's window {1,1,1,1,1} is the first full one
    // (raised), step 7's {1,1,1,1,0} 0.8 (raised), step 8's 0.6 (cleared), step 11's {0,0,1,1,1}
    // 0.6, step 12's {0,1,1,1,1} 0.8 (raised): episodes 5–7 and 12–12, the last still open.
    for (let step = 1; step <= 12; step++) {
      run.logMetrics({
        step,
        reward: 0,
        frac_reward_zero_std: step <= 6 || step >= 9 ? 1 : 0,
        learning_rate: 5e-4,
      });
      // Lines that are no record, as a hand edit or another tool might leave them; then the run
      // resumes (a new RunDirectory reads the history for its alarms, past those lines).
      if (step === 6) {
        appendFileSync(join(dir, 'metrics.jsonl'), 'null\n42\n["x"]\n');
        run = new RunDirectory(dir, { warn: (l) => warnings.push(l) });
      }
    }
    // The console warns once: a raise within rewarn_after_steps (50) of the last is not announced
    // again. The report shows both episodes, each where it was.
    expect(warnings).toHaveLength(1);
    const segment = (text: string, trainable: boolean) => ({
      tokens: Array.from(text, (ch) => letters.indexOf(ch)),
      ...(trainable && { logprobs: Array.from(text, () => -0.5) }),
      trainable,
      kind: trainable ? 'action' : 'prompt',
    });
    const tagged = (finalAnswer: string, stopReason: string, advantage: number) =>
      TrajectorySchema.parse({
        queryId: 'q',
        groupId: 'g',
        question: 'Hana had 43 marbles and gave 11 away. How many marbles are left?',
        groundTruth: '32',
        segments: [segment('how many', false), segment('think 32', true)],
        finalAnswer,
        reward: 0,
        advantage,
        stopReason,
      });
    const path = await writeReport(dir, {
      title: 'GRPO run',
      metrics: run.readMetrics(),
      trajectories: [tagged('<answer>359', 'answer', 1), tagged('', 'parse_error', -1)],
    });
    await inBrowser(path, async (page) => {
      expect(await page.locator('p.notice.skipped').textContent()).toContain(
        'metrics.jsonl: 3 lines skipped',
      );
      // The episodes, listed.
      const listed = await page
        .locator('.alarms li.alarm')
        .evaluateAll((els) =>
          els.map((el) => [
            el.getAttribute('data-alarm'),
            el.getAttribute('data-from'),
            el.getAttribute('data-to'),
          ]),
        );
      expect(listed).toEqual([
        ['zero_variance_groups', '5', '7'],
        ['zero_variance_groups', '12', '12'],
      ]);
      expect(await page.locator('.alarms li.alarm').nth(1).textContent()).toContain(
        'still raised at the end',
      );
      // One band per episode, on the zero-variance chart only, over the ticks of its steps and
      // clear of the steps between.
      const bands = await page.$$eval('svg.chart', (svgs) =>
        svgs.map((svg) => {
          const ticks = Object.fromEntries(
            [...svg.querySelectorAll('.x-axis text')].map((t) => {
              const b = t.getBoundingClientRect();
              return [t.textContent, (b.left + b.right) / 2];
            }),
          );
          return {
            chart: svg.getAttribute('aria-label'),
            ticks,
            bands: [...svg.querySelectorAll('rect.alarm-band')].map((r) => {
              const b = r.getBoundingClientRect();
              return { alarm: r.getAttribute('data-alarm'), left: b.left, right: b.right };
            }),
            labels: [...svg.querySelectorAll('text.alarm-label')].map((t) => t.textContent),
          };
        }),
      );
      expect(bands.filter((c) => c.bands.length > 0).map((c) => c.chart)).toEqual([
        'Zero-variance groups',
      ]);
      const zv = bands.find((c) => c.chart === 'Zero-variance groups')!;
      expect(zv.labels).toEqual(['zero_variance_groups', 'zero_variance_groups']);
      const [first, second] = zv.bands;
      // Step ticks every 2 steps: 2, 4, … 12. The first band covers steps 5–7.
      expect(first!.left).toBeGreaterThan(zv.ticks['4']!);
      expect(first!.left).toBeLessThan(zv.ticks['6']!);
      expect(first!.right).toBeGreaterThan(zv.ticks['6']!);
      expect(first!.right).toBeLessThan(zv.ticks['8']!);
      expect(second!.left).toBeGreaterThan(zv.ticks['10']!);
      expect(second!.right).toBeGreaterThanOrEqual(zv.ticks['12']!);

      // Stop reasons explained, on hover and in a legend; the answer without its tag fragment.
      const stops = page.locator('details.traj summary .stop');
      expect(await stops.nth(1).getAttribute('title')).toContain(
        'parse_error: the policy’s reply could not be parsed',
      );
      expect(
        await page
          .locator('ul.stop-legend li')
          .evaluateAll((els) => els.map((el) => el.getAttribute('data-stop'))),
      ).toEqual(['answer', 'parse_error']);
      expect(await page.locator('details.traj summary b.final').first().textContent()).toBe('359');
      expect(await page.locator('details.traj p.recorded code').textContent()).toBe('<answer>359');
      // Tokens decoded with the base model's tokenizer (the checkpoint and artifacts have none).
      expect(await page.locator('.tokens-note').count()).toBe(0);
      const action = await page
        .locator('#tokview .traj[data-index="0"] .action .tok')
        .evaluateAll((els) => els.map((el) => el.textContent).join(''));
      expect(action).toBe('think 32');
    });

    // Without the base model, the report says where it looked.
    rmSync(base, { recursive: true });
    const bare = await writeReport(dir, {
      title: 'GRPO run',
      metrics: run.readMetrics(),
      trajectories: [tagged('32', 'answer', 1)],
    });
    await inBrowser(bare, async (page) => {
      const note = await page.locator('.tokens-note').textContent();
      expect(note).toContain('Tokens are shown as ⟨id⟩: no tokenizer.json found for this run');
      expect(note).toContain(join(base, 'tokenizer.json'));
    });
  }, 120_000);
});
