// metrics.jsonl read the one way the viewer, report.html and the trainer read it: each line that is
// a JSON object with a numeric step is a record; every other non-empty line is skipped and
// counted. The expected records and counts are read off the hand-written lines below.
import { describe, expect, it } from 'vitest';
import { parseMetricsLines } from '../src/metrics-lines.js';

describe('metrics.jsonl lines', () => {
  it('keeps the records and counts every line that is none', () => {
    const text = [
      '{"step": 1, "reward": 0.5}',
      'null',
      '3',
      '"a string"',
      '[1, 2]',
      '{"reward": 0.7}', // no step
      '{"step": "2", "reward": 0.7}', // a step that is no number
      '{"step": 2, "rew', // torn by a kill
      '',
      '   ',
      '{"step": 3, "loss": null, "alarms/truncation": 1}',
      '',
    ].join('\n');
    expect(parseMetricsLines(text)).toEqual({
      records: [
        { step: 1, reward: 0.5 },
        { step: 3, loss: null, 'alarms/truncation': 1 },
      ],
      skipped: 7,
    });
  });

  it('reads an empty file as no records and nothing skipped', () => {
    expect(parseMetricsLines('')).toEqual({ records: [], skipped: 0 });
  });
});
