// `flowgrpo view` in a real headless Chromium (Debian's chromium-headless-shell, driven through
// the DevTools protocol by playwright-core), on a run directory this test is still writing: the
// page shows step 1, then — without a reload — step 2 once its metrics line and rollouts file
// appear, with the alarm that line raised as a banner; a click on a rollout shows it token by
// token, the colouring switches, and the token elements carry the recorded values. The page
// requests nothing beyond the loopback server and logs no error. Skipped, with the reason printed,
// where no Chromium is installed.
import { existsSync, mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { startViewer } from '../src/index.js';
import { logStep, startRun, writeStepRollouts } from './run-fixture.js';

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
afterAll(() => rmSync(tmp, { recursive: true, force: true }));

describe.skipIf(!CHROMIUM)('flowgrpo view in Chromium', () => {
  it('follows a run being written and shows rollouts token by token', async () => {
    const dir = join(tmp, 'run');
    startRun(dir);
    logStep(dir, { step: 1, reward: 0.5, entropy: 1.2, 'alarms/entropy_collapse': 0 });
    await writeStepRollouts(dir, 1);
    const viewer = await startViewer({ runDir: dir });
    const { chromium } = await import('playwright-core');
    const browser = await chromium.launch({
      executablePath: CHROMIUM,
      args: ['--no-sandbox', '--disable-gpu', '--disable-background-networking'],
    });
    try {
      const page = await browser.newPage();
      const errors: string[] = [];
      const elsewhere: string[] = [];
      page.on('console', (m) => {
        if (m.type() === 'error') errors.push(m.text());
      });
      page.on('pageerror', (e) => errors.push(e.message));
      page.on('request', (r) => {
        if (!r.url().startsWith(viewer.url)) elsewhere.push(r.url());
      });
      await page.goto(viewer.url);
      await page.locator('#steps li[data-step="1"]').waitFor();
      await page.locator('#charts .chart[data-chart="reward"]').waitFor();
      expect(await page.locator('#alarms .alarm').count()).toBe(0);

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
      await expect
        .poll(() => page.locator('#alarms .alarm').getAttribute('data-alarm'), WAIT)
        .toBe('entropy_collapse');
      expect(await page.locator('#steps li[data-step="2"]').getAttribute('class')).toContain(
        'alarm',
      );

      // Step 2, its first rollout.
      await page.locator('#steps li[data-step="2"]').click();
      await page.locator('#rollouts tbody tr[data-index="0"]').click();
      const action = page.locator('#detail .traj .action .tok');
      await expect.poll(() => action.count(), WAIT).toBe(4 + 6); // "calc", then "ans 42"
      const first = await action
        .first()
        .evaluate((el) => ({ ...el.dataset, text: el.textContent }));
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
        .evaluate((el) => ({ ...el.dataset }));
      expect(prompt).toMatchObject({ trainable: '0', logprob: '', advantage: '0' });
      expect(await page.locator('#detail .toolresult').textContent()).toBe('→ 42');

      // Colouring: by advantage (green, the default), then by logprob (red, deeper as it falls).
      const bg = () =>
        action.evaluateAll((els) =>
          els
            .slice(0, 4)
            .map(
              (el) =>
                (el as unknown as { style: { backgroundColor: string } }).style.backgroundColor,
            ),
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

      // Group view: both rollouts of q1 side by side; the error filter leaves the failed one.
      await page.locator('#group-view').check();
      await expect.poll(() => page.locator('#detail.group .traj').count(), WAIT).toBe(2);
      await page.locator('#f-error').check();
      await expect.poll(() => page.locator('#rollouts tbody tr').count(), WAIT).toBe(1);
      expect(await page.locator('#rollouts tbody tr').getAttribute('data-index')).toBe('2');

      expect(errors).toEqual([]);
      expect(elsewhere).toEqual([]);
    } finally {
      await browser.close();
      await viewer.close();
    }
  });
});
