// `flowgrpo view` in a real headless Chromium (Debian's chromium-headless-shell, driven through
// the DevTools protocol by playwright-core), read through the page's DOM. On a run directory this
// test is still writing: the page opens on the latest step's first rollout, then — without a
// reload — shows step 2 once its metrics line and rollouts file appear, with the alarm episode
// that line opened listed and banded on its chart only; the rollout shows token by token, the
// colouring switches, and the token elements carry the recorded values. Then runs that once broke
// or misled the page: metrics lines that are no record (a `null` blanked the page), a LoRA run
// whose tokens need the base model's tokenizer (and one with none anywhere), constant series
// (drawn on 0–100 axes), stop reasons and answers with tag fragments. The page requests nothing
// beyond the loopback server and logs no error. Skipped, with the reason printed, where no
// Chromium is installed.
import { appendFileSync, existsSync, mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { TrajectorySchema } from '@flowgrpo/core';
import type { Browser, Page } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startViewer } from '../src/index.js';
import {
  ids,
  logStep,
  startLoraRun,
  startRun,
  trajectories,
  writeStepRollouts,
  writeTokenizer,
} from './run-fixture.js';

const CHROMIUM = [
  '/usr/bin/chromium-headless-shell',
  '/usr/bin/chromium',
  '/usr/lib/chromium/chromium-headless-shell',
].find((p) => existsSync(p));
if (!CHROMIUM)
  console.warn('[skip] viewer in a browser: no Chromium (apt-get install chromium-headless-shell)');

// The page polls every second; a busy machine may take several.
const WAIT = { timeout: 60_000 };

const tmp = mkdtempSync(join(tmpdir(), 'flowgrpo-viewer-browser-'));
let browser: Browser | undefined;
afterAll(async () => {
  await browser?.close();
  rmSync(tmp, { recursive: true, force: true });
});

/** Opens the viewer of `dir` in a new page, runs `check`, then asserts the page logged no error
 * and requested nothing beyond the viewer. */
async function onPage(dir: string, check: (page: Page) => Promise<void>): Promise<void> {
  const viewer = await startViewer({ runDir: dir });
  const page = await browser!.newPage({ viewport: { width: 1400, height: 1000 } });
  const errors: string[] = [];
  const elsewhere: string[] = [];
  page.on('console', (m) => {
    if (m.type() === 'error') errors.push(m.text());
  });
  page.on('pageerror', (e) => errors.push(e.message));
  page.on('request', (r) => {
    if (!r.url().startsWith(viewer.url)) elsewhere.push(r.url());
  });
  try {
    await page.goto(viewer.url);
    await check(page);
    expect(errors).toEqual([]);
    expect(elsewhere).toEqual([]);
  } finally {
    await page.close();
    await viewer.close();
  }
}

/** What the tests read of a DOM element (this package's tsconfig has no DOM types). */
interface Element {
  dataset: Record<string, string>;
  style: { backgroundColor: string };
}

/** The text of the selected rollout's trained tokens, joined. */
const actionText = (page: Page) =>
  page
    .locator('#detail .traj .action .tok')
    .evaluateAll((els) => els.map((el) => el.textContent).join(''));

describe.skipIf(!CHROMIUM)('flowgrpo view in Chromium', () => {
  beforeAll(async () => {
    const { chromium } = await import('playwright-core');
    browser = await chromium.launch({
      executablePath: CHROMIUM,
      args: ['--no-sandbox', '--disable-gpu', '--disable-background-networking'],
    });
  }, 60_000);

  it('follows a run being written, opens on its latest rollout, and shows it token by token', async () => {
    const dir = join(tmp, 'run');
    startRun(dir);
    logStep(dir, { step: 1, reward: 0.5, entropy: 1.2, 'alarms/entropy_collapse': 0 });
    await writeStepRollouts(dir, 1);
    await onPage(dir, async (page) => {
      // Opened on step 1's first rollout, without a click.
      await expect.poll(() => new URL(page.url()).hash, WAIT).toBe('#step=1&traj=0');
      await page.locator('#detail .traj[data-index="0"]').waitFor();
      expect(await page.locator('#rollouts tbody tr.sel').getAttribute('data-index')).toBe('0');
      await page.locator('#charts .chart[data-chart="Reward"]').waitFor();
      expect(await page.locator('#alarms').isHidden()).toBe(true);
      expect(await page.locator('#no-rollouts').isHidden()).toBe(true);
      expect(await page.locator('#tokenizer').textContent()).toBe(
        `tokens: ${join(dir, 'checkpoint-1', 'tokenizer.json')}`,
      );

      // The trainer writes step 2 while the page is open: a metrics line raising an alarm, then
      // the step's rollouts.
      logStep(dir, {
        step: 2,
        reward: 0.7,
        entropy: 0.01,
        'alarms/entropy_collapse': 1,
        'alarms/entropy_collapse/value': 0.008,
      });
      await writeStepRollouts(dir, 2);
      await page.locator('#steps li[data-step="2"]').waitFor();
      const episode = page.locator('#alarms-list .alarm');
      await expect.poll(() => episode.count(), WAIT).toBe(1);
      expect(await episode.evaluate((el) => ({ ...(el as unknown as Element).dataset }))).toEqual({
        alarm: 'entropy_collapse',
        from: '2',
        to: '2',
      });
      const text = await episode.textContent();
      expect(text).toContain('still raised');
      expect(text).toContain('value 0.008');
      expect(text).toContain('What to do: lower learning_rate');
      // One band, on the entropy chart only.
      await expect
        .poll(() => page.locator('.chart[data-chart="Entropy"]').getAttribute('data-bands'), WAIT)
        .toBe('entropy_collapse:2-2');
      expect(await page.locator('.chart[data-chart="Reward"]').getAttribute('data-bands')).toBe('');
      expect(await page.locator('#steps li[data-step="2"]').getAttribute('class')).toContain(
        'alarm',
      );
      expect(await page.locator('#steps li[data-step="1"]').getAttribute('class')).not.toContain(
        'alarm',
      );

      // Step 2 opens on its first rollout.
      await page.locator('#steps li[data-step="2"]').click();
      await expect.poll(() => new URL(page.url()).hash, WAIT).toBe('#step=2&traj=0');
      const action = page.locator('#detail .traj .action .tok');
      await expect.poll(() => action.count(), WAIT).toBe(4 + 6); // "calc", then "ans 42"
      expect(await actionText(page)).toBe('calcans 42');
      const first = await action
        .first()
        .evaluate((el) => ({ ...(el as unknown as Element).dataset, text: el.textContent }));
      expect(first).toEqual({
        id: '3',
        logprob: '-0.25',
        trainable: '1',
        advantage: '1',
        text: 'c',
      });
      // The prompt is there but masked: no loss, no sampler logprob.
      const prompt = await page
        .locator('#detail details.masked .tok')
        .first()
        .evaluate((el) => ({ ...(el as unknown as Element).dataset }));
      expect(prompt).toMatchObject({ trainable: '0', logprob: '', advantage: '0' });
      expect(await page.locator('#detail .toolresult').textContent()).toBe('→ 42');

      // Colouring: by advantage (green, the default), then by logprob (red, deeper as it falls).
      const bg = () =>
        action.evaluateAll((els) =>
          els.slice(0, 4).map((el) => (el as unknown as Element).style.backgroundColor),
        );
      const byAdvantage = await bg();
      expect(new Set(byAdvantage).size).toBe(1);
      expect(byAdvantage[0]).toMatch(/^rgba\(30, 160, 60/);
      await page.locator('#colour').selectOption('logprob');
      await expect
        .poll(() => page.locator('#detail').getAttribute('data-colour'), WAIT)
        .toBe('logprob');
      const byLogprob = await bg();
      expect(byLogprob.every((c) => c.startsWith('rgba(220, 40, 40'))).toBe(true);
      expect(new Set(byLogprob).size).toBe(4);
      expect(new URL(page.url()).hash).toContain('colour=logprob');

      // Group view: both rollouts of q1 side by side; the error filter leaves the failed one,
      // and opens it.
      await page.locator('#group-view').check();
      await expect.poll(() => page.locator('#detail.group .traj').count(), WAIT).toBe(2);
      await page.locator('#f-error').check();
      await expect.poll(() => page.locator('#rollouts tbody tr').count(), WAIT).toBe(1);
      expect(await page.locator('#rollouts tbody tr').getAttribute('data-index')).toBe('2');
      await expect.poll(() => new URL(page.url()).hash, WAIT).toContain('traj=2');
    });
  }, 180_000);

  it('reads any metrics line: one that is no record is skipped, counted and said', async () => {
    // A `null` line once threw in the page's alarm scan and blanked it for good.
    const dir = join(tmp, 'null-lines');
    startRun(dir);
    logStep(dir, { step: 1, reward: 0.25, entropy: 1 });
    appendFileSync(join(dir, 'metrics.jsonl'), 'null\n7\n"text"\n[1, 2]\n');
    logStep(dir, { step: 2, reward: 0.5, entropy: 0.9 });
    await writeStepRollouts(dir, 1);
    await writeStepRollouts(dir, 2);
    await onPage(dir, async (page) => {
      const notice = page.locator('.notice[data-notice="skipped"]');
      await notice.waitFor(WAIT);
      expect(await notice.textContent()).toContain('metrics.jsonl: 4 lines skipped');
      await page.locator('#charts .chart[data-chart="Entropy"]').waitFor();
      expect(await page.locator('#charts .chart').count()).toBe(2);
      expect(await page.locator('#steps li').count()).toBe(2);
      // The reward axis fits the two good lines, 0.25 and 0.5.
      const [lo, hi] = (await page.locator('.chart[data-chart="Reward"]').getAttribute('data-y'))!
        .split(',')
        .map(Number);
      expect(lo).toBeLessThanOrEqual(0.25);
      expect(hi).toBeGreaterThanOrEqual(0.5);
      expect(hi! - lo!).toBeLessThan(1);
      await expect.poll(() => actionText(page), WAIT).toBe('calcans 42');
    });
  }, 120_000);

  it("decodes a LoRA run's tokens with the base model's tokenizer, and says so when there is none", async () => {
    // As `flowgrpo train` leaves the math-tags template's GRPO run: no tokenizer in the adapter
    // checkpoint nor in the artifacts; the adapter's base model folder has one.
    const base = join(tmp, 'base-model');
    const file = writeTokenizer(base);
    const dir = join(tmp, 'lora');
    startLoraRun(dir, base);
    logStep(dir, { step: 1, reward: 0.5 });
    await writeStepRollouts(dir, 1);
    await onPage(dir, async (page) => {
      await expect.poll(() => actionText(page), WAIT).toBe('calcans 42');
      expect(await page.locator('#tokenizer').textContent()).toBe(`tokens: ${file}`);
      expect(await page.locator('.notice[data-notice="tokenizer"]').count()).toBe(0);
    });

    const bare = join(tmp, 'lora-bare');
    startLoraRun(bare, join(tmp, 'deleted-model'));
    logStep(bare, { step: 1, reward: 0.5 });
    await writeStepRollouts(bare, 1);
    await onPage(bare, async (page) => {
      const notice = page.locator('.notice[data-notice="tokenizer"]');
      await notice.waitFor(WAIT);
      const text = await notice.textContent();
      expect(text).toContain('Tokens are shown as ⟨id⟩: no tokenizer.json found for this run.');
      for (const place of [
        join(bare, 'checkpoint-1', 'tokenizer.json'),
        join(tmp, 'deleted-model', 'tokenizer.json'),
        join(bare, 'artifacts', 'tokenizer.json'),
      ])
        expect(text).toContain(place);
      await expect
        .poll(() => actionText(page), WAIT)
        .toBe('⟨3⟩⟨1⟩⟨12⟩⟨3⟩' + '⟨1⟩⟨14⟩⟨19⟩⟨0⟩⟨31⟩⟨29⟩');
    });
  }, 120_000);

  it('fits constant series, explains stop reasons, and shows answers without tag fragments', async () => {
    const dir = join(tmp, 'template-like');
    startRun(dir);
    // As the math-tags template's first GRPO steps: no reward yet, every group without variance.
    for (const step of [1, 2, 3])
      logStep(dir, {
        step,
        reward: 0,
        frac_reward_zero_std: 1,
        learning_rate: 5e-4,
        entropy: 1 + step / 10,
      });
    const tagged = (finalAnswer: string, stopReason: 'answer' | 'parse_error' | 'max_turns') =>
      TrajectorySchema.parse({
        queryId: 'q3',
        groupId: 'step3/q3',
        question: 'how many marbles are left',
        segments: [
          { tokens: ids('how many'), trainable: false, kind: 'prompt' },
          { tokens: ids('359'), logprobs: [-1, -1, -1], trainable: true, kind: 'action' },
        ],
        finalAnswer,
        reward: 0,
        advantage: 0,
        stopReason,
      });
    // Answers the template's tiny policy recorded (final-answer.test.ts).
    await writeStepRollouts(dir, 3, [
      tagged('<answer>359', 'answer'),
      tagged('', 'parse_error'),
      tagged('', 'max_turns'),
      ...trajectories(3),
    ]);
    await onPage(dir, async (page) => {
      await page.locator('#detail .traj[data-index="0"]').waitFor(WAIT);
      // Ranges around the constant: ±1 around 0, ±10% around 1 and 5e-4 (not uPlot's 0–100).
      const range = (title: string) =>
        page.locator(`.chart[data-chart="${title}"]`).getAttribute('data-y');
      expect(await range('Reward')).toBe('-1,1');
      expect((await range('Zero-variance groups'))!.split(',').map(Number)).toEqual([0.9, 1.1]);
      const [lo, hi] = (await range('Learning rate'))!.split(',').map(Number);
      expect([lo, hi]).toEqual([expect.closeTo(4.5e-4, 12), expect.closeTo(5.5e-4, 12)]);

      // The clean answer in the table and under the tokens; the recorded text beside it.
      expect(await page.locator('#rollouts tbody tr[data-index="0"] td.a').textContent()).toBe(
        '359',
      );
      expect(await page.locator('#detail .answer code.final').textContent()).toBe('359');
      expect(await page.locator('#detail .answer .recorded code').textContent()).toBe(
        '<answer>359',
      );

      // Every stop reason shown is explained: in the table, in the rollout's header, and once
      // each under the table.
      const stop = page.locator('#rollouts tbody tr[data-index="1"] td.stop');
      expect(await stop.textContent()).toBe('parse_error');
      const title = await stop.getAttribute('title');
      expect(title).toContain('parse_error: the policy’s reply could not be parsed');
      expect(title).toContain('Look at: the end of the last action');
      expect(await page.locator('#detail .traj header .stop').getAttribute('title')).toContain(
        'answer: the policy gave its final answer',
      );
      expect(
        await page
          .locator('#stop-legend li')
          .evaluateAll((els) => els.map((el) => (el as unknown as Element).dataset.stop)),
      ).toEqual(['answer', 'error', 'max_turns', 'parse_error']);
      for (const row of await page.locator('#rollouts tbody td.stop').all())
        expect(await row.getAttribute('title')).toMatch(/^[a-z_]+: .+\. Look at: .+\.$/);
    });
  }, 120_000);
  it('says so when a run has written no rollouts (an SFT run)', async () => {
    const dir = join(tmp, 'sft');
    startRun(dir);
    logStep(dir, { step: 1, loss: 2.5, grad_norm: 1 });
    logStep(dir, { step: 2, loss: 2.1, grad_norm: 0.8 });
    await onPage(dir, async (page) => {
      await page.locator('#charts .chart[data-chart="Loss"]').waitFor(WAIT);
      const notice = page.locator('#no-rollouts');
      await notice.waitFor({ state: 'visible', ...WAIT });
      expect(await notice.textContent()).toContain('This run has written no rollouts yet');
      expect(await page.locator('#detail .traj').count()).toBe(0);
    });
  }, 120_000);
});
