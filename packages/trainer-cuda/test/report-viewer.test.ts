// report.html carries what `flowgrpo view` shows (report-viewer.ts): the alarm episodes of the run
// (listed, and a band on the charts they concern), and the viewer's token view of the sample group
// with the largest |advantage|, each token with its recorded logprob, trainable flag and
// advantage. The viewer's guide to the alarms (meaning, advice, metrics) covers every alarm the
// trainer raises, in the trainer's own words.
import { TrajectorySchema } from '@flowgrpo/core';
import { ALARM_GUIDE, CHARTS } from '@flowgrpo/viewer';
import { describe, expect, it } from 'vitest';
import { renderReport } from '../src/report/report.js';
import { ALARM_MEANINGS, ALARM_NAMES } from '../src/run/alarms.js';

const traj = (groupId: string, advantage: number, logprobs: number[]) =>
  TrajectorySchema.parse({
    queryId: groupId,
    groupId,
    turns: [
      {
        index: 0,
        promptTokens: [1, 2],
        actionTokens: logprobs.map((_, i) => 10 + i),
        actionLogprobs: logprobs,
        text: 'x',
      },
    ],
    finalAnswer: '1',
    reward: advantage > 0 ? 1 : 0,
    advantage,
    stopReason: 'answer',
  });

describe('report.html: alarms and the token view', () => {
  const html = renderReport({
    title: 'run',
    metrics: [
      { step: 1, reward: 0.5, 'alarms/truncation': 0 },
      { step: 2, reward: 0.5, 'alarms/truncation': 1, 'alarms/truncation/value': 0.5 },
      { step: 3, reward: 0.5, 'alarms/truncation': 1, 'alarms/truncation/value': 0.6 },
    ],
    trajectories: [traj('a', 0.1, [-1]), traj('b', 1.5, [-0.5, -2]), traj('b', -1.5, [-3])],
  });

  it('lists each alarm episode with its first and last step', () => {
    expect(html.match(/class="alarm"/g)).toHaveLength(1);
    expect(html).toContain(
      '<li class="alarm" data-alarm="truncation" data-from="2" data-to="3">⚠ <b>truncation</b>, steps 2–3, still raised at the end (value 0.6): many completions were cut at the length limit (recent share shown). <span class="advice">What to do: their rewards are noise',
    );
    // The run records no truncation metric here, so no chart carries its band.
    expect(html).not.toContain('class="alarm-band"');
  });

  it('shows the group with the largest |advantage| token by token', () => {
    const view = html.slice(html.indexOf('id="tokview"'));
    expect(view.match(/<article class="traj"/g)).toHaveLength(2);
    expect(view).not.toContain('data-group="a"');
    expect(view).toContain(
      '<span class="tok" data-id="11" data-logprob="-2" data-trainable="1" data-advantage="1.5">⟨11⟩</span>',
    );
    expect(view).toContain('data-id="1" data-logprob="" data-trainable="0" data-advantage="0"');
    expect(view).toContain('window.flowgrpoPaint');
  });
});

describe("the viewer's alarm guide", () => {
  it("covers every alarm the trainer raises, with the trainer's meaning and a chart", () => {
    expect(Object.keys(ALARM_GUIDE).sort()).toEqual([...ALARM_NAMES].sort());
    const charted = new Set(CHARTS.flatMap((c) => c.keys));
    for (const name of ALARM_NAMES) {
      expect(ALARM_GUIDE[name]!.meaning, name).toBe(ALARM_MEANINGS[name]);
      expect(
        ALARM_GUIDE[name]!.metrics.some((m) => charted.has(m)),
        name,
      ).toBe(true);
    }
  });
});
