// report.html carries what `flowgrpo view` shows (report-viewer.ts): a banner per alarm raised
// during the run, and the viewer's token view of the sample group with the largest |advantage|,
// each token with its recorded logprob, trainable flag and advantage.
import { TrajectorySchema } from '@flowgrpo/core';
import { describe, expect, it } from 'vitest';
import { renderReport } from '../src/index.js';

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

  it('has one banner per alarm raised, with its steps', () => {
    expect(html.match(/class="alarm"/g)).toHaveLength(1);
    expect(html).toContain('alarm <b>truncation</b> at steps 2, 3: many completions were cut');
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
