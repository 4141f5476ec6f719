import type { Trajectory } from '@flowgrpo/core';
import {
  escapeHtml,
  RunReader,
  type TokenPieces,
  tokenPieces,
  tokenViewAssets,
  trajectoryHtml,
} from '@flowgrpo/viewer';
import { ALARM_MEANINGS, type AlarmName } from './alarms.js';
import type { MetricsRecord } from './run-dir.js';

// What `flowgrpo view` shows, inside the self-contained report.html: banners for the alarms
// raised during the run (alarms.ts), and the viewer's token view of the selected sample — the
// group of the report's sample trajectory with the largest |advantage|, side by side, coloured by
// advantage, logprob or trainable (the viewer's own CSS and script, inlined).

/** Token id → text for a run directory (its checkpoints' or its model's tokenizer.json). */
export function runTokenPieces(dir: string): TokenPieces {
  try {
    return tokenPieces(new RunReader(dir).tokenizerJson());
  } catch {
    return tokenPieces(undefined);
  }
}

/** One banner per alarm raised at some step: its name, the steps, what it means. */
export function alarmBanners(metrics: readonly MetricsRecord[]): string {
  const steps = new Map<string, number[]>();
  for (const r of metrics)
    for (const [k, v] of Object.entries(r)) {
      const name = /^alarms\/([^/]+)$/.exec(k)?.[1];
      if (name && v === 1) steps.set(name, [...(steps.get(name) ?? []), Number(r.step)]);
    }
  return [...steps]
    .map(([name, s]) => {
      const meaning = ALARM_MEANINGS[name as AlarmName] ?? '';
      const at = s.length > 6 ? `${s.slice(0, 6).join(', ')}, …` : s.join(', ');
      return `<p class="alarm" data-alarm="${escapeHtml(name)}">⚠ alarm <b>${escapeHtml(name)}</b> at step${s.length > 1 ? 's' : ''} ${at}: ${escapeHtml(meaning)} (docs/guides/alarms.md)</p>`;
    })
    .join('');
}

/** The selected sample's group token by token, with the colouring control. */
export function tokenView(trajectories: readonly Trajectory[], pieces: TokenPieces): string {
  if (trajectories.length === 0) return '';
  const selected = trajectories.reduce((a, b) =>
    Math.abs(b.advantage ?? 0) > Math.abs(a.advantage ?? 0) ? b : a,
  );
  const group = trajectories
    .map((t, i) => [t, i] as const)
    .filter(([t]) => t.groupId === selected.groupId);
  const { css, js } = tokenViewAssets();
  const options = ['advantage', 'logprob', 'trainable']
    .map((c) => `<option value="${c}">${c}</option>`)
    .join('');
  return (
    `<h2>Tokens of one group</h2><style>${css}.tokview{display:grid;grid-template-columns:repeat(auto-fill,minmax(360px,1fr));gap:8px}</style>` +
    `<p class="tok-legend">group ${escapeHtml(selected.groupId)}; each token carries data-logprob, data-trainable and data-advantage; striped spans carry no loss. Colour by <select id="tokcolour">${options}</select></p>` +
    `<div class="tokview" id="tokview">${group.map(([t, i]) => trajectoryHtml(t, i, pieces)).join('')}</div>` +
    `<script>${js}\n(() => { const v = document.getElementById('tokview'); const s = document.getElementById('tokcolour'); window.flowgrpoPaint(v, s.value); s.onchange = () => window.flowgrpoPaint(v, s.value); })();</script>`
  );
}
