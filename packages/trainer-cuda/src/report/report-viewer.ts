import type { Trajectory } from '@flowgrpo/core';
import {
  type AlarmEpisode,
  escapeHtml,
  RunReader,
  type TokenPieces,
  tokenPieces,
  tokenViewAssets,
  trajectoryHtml,
} from '@flowgrpo/viewer';

// What `flowgrpo view` shows, inside the self-contained report.html: the alarm episodes of the run
// (the viewer's alarm-episodes.ts: the alarm's name, its first and last step, what it means and
// what to do), and the viewer's token view of the selected sample — the group of
// the report's sample trajectory with the largest |advantage|, side by side, coloured by
// advantage, logprob or trainable (the viewer's own CSS and script, inlined).

/**
 * Token id → text for a run directory, from the tokenizer the viewer finds for it (the viewer's
 * run-tokenizer.ts); when there is none, a note saying where it looked.
 */
export function runTokenPieces(dir: string): { pieces: TokenPieces; note?: string } {
  let lookup: ReturnType<RunReader['tokenizer']>;
  try {
    lookup = new RunReader(dir).tokenizer();
  } catch {
    return { pieces: tokenPieces(undefined), note: `no run directory at ${dir}` };
  }
  if (lookup.found) return { pieces: tokenPieces(lookup.found.json) };
  const where = lookup.tried.map((t) => `${t.from} (${t.path}: ${t.reason})`).join('; ');
  return {
    pieces: tokenPieces(undefined),
    note: `no tokenizer.json found for this run${where ? `; looked in: ${where}` : ''}`,
  };
}

const steps = (e: AlarmEpisode) => (e.from === e.to ? `step ${e.from}` : `steps ${e.from}–${e.to}`);

/** The list of alarm episodes: name, first and last step, meaning, what to do. */
export function alarmPanel(episodes: readonly AlarmEpisode[]): string {
  if (episodes.length === 0) return '';
  const items = episodes
    .map((e) => {
      const value = e.value === undefined ? '' : ` (value ${Number(e.value.toPrecision(3))})`;
      return (
        `<li class="alarm" data-alarm="${escapeHtml(e.name)}" data-from="${e.from}" data-to="${e.to}">` +
        `⚠ <b>${escapeHtml(e.name)}</b>, ${steps(e)}${e.open ? ', still raised at the end' : ''}${value}` +
        `: ${escapeHtml(e.meaning ?? 'an alarm this report does not know')}` +
        `${e.advice ? `. <span class="advice">What to do: ${escapeHtml(e.advice)}.</span>` : ''}</li>`
      );
    })
    .join('');
  return (
    `<div class="alarms"><p>${episodes.length} alarm episode${episodes.length === 1 ? '' : 's'} ` +
    '(docs/guides/alarms.md), each a red band on the charts it concerns:</p>' +
    `<ol>${items}</ol></div>`
  );
}

/**
 * The selected sample's group token by token, with the colouring control; `note` (tokens shown
 * as ids: why) above it.
 */
export function tokenView(
  trajectories: readonly Trajectory[],
  pieces: TokenPieces,
  note?: string,
): string {
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
    (note
      ? `<p class="notice tokens-note">Tokens are shown as ⟨id⟩: ${escapeHtml(note)}.</p>`
      : '') +
    `<p class="tok-legend">group ${escapeHtml(selected.groupId)}; each token carries data-logprob, data-trainable and data-advantage; striped spans carry no loss. Colour by <select id="tokcolour">${options}</select></p>` +
    `<div class="tokview" id="tokview">${group.map(([t, i]) => trajectoryHtml(t, i, pieces)).join('')}</div>` +
    `<script>${js}\n(() => { const v = document.getElementById('tokview'); const s = document.getElementById('tokcolour'); window.flowgrpoPaint(v, s.value); s.onchange = () => window.flowgrpoPaint(v, s.value); })();</script>`
  );
}
