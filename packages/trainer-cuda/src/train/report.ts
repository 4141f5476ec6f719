import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import type { Trajectory } from '@flowgrpo/core';
import type { EvalResult } from './evaluate.js';
import type { MetricsRecord } from './run-dir.js';

// report.html: one self-contained page per run — charts drawn as inline SVG at write time (no
// script, no chart library, nothing fetched: it opens offline and prints), the evaluation table,
// and a browsable sample of trajectories.

export interface ReportOptions {
  title: string;
  metrics?: readonly MetricsRecord[];
  /** Evaluations to tabulate side by side (e.g. base / SFT / GRPO). */
  evals?: readonly EvalResult[];
  /** Trajectories to show, with their turns (a sample). */
  trajectories?: readonly Trajectory[];
  /** Extra notes shown under the title (e.g. the command that made the run). */
  notes?: readonly string[];
  /** Several runs' curves, each under its own heading (instead of `metrics`). */
  sections?: readonly { title: string; metrics: readonly MetricsRecord[] }[];
}

const CHARTS: { title: string; keys: string[] }[] = [
  { title: 'Reward', keys: ['reward', 'eval/reward'] },
  { title: 'Accuracy', keys: ['accuracy', 'eval/accuracy'] },
  { title: 'Loss', keys: ['loss', 'eval_loss', 'train_loss'] },
  { title: 'KL to the reference', keys: ['kl'] },
  {
    title: 'Clip ratios',
    keys: ['clip_ratio/low_mean', 'clip_ratio/high_mean', 'clip_ratio/region_mean'],
  },
  { title: 'Entropy', keys: ['entropy'] },
  {
    title: 'Completion length (tokens)',
    keys: ['completions/mean_length', 'eval/completion_length'],
  },
  { title: 'Turns per trajectory', keys: ['turns/mean', 'eval/turns_mean'] },
  {
    title: 'Tool calls per trajectory',
    keys: ['tools/calls_per_trajectory', 'eval/tool_calls_per_trajectory'],
  },
  { title: 'Gradient norm', keys: ['grad_norm'] },
  { title: 'Learning rate', keys: ['learning_rate'] },
  {
    title: 'Time per phase (s)',
    keys: [
      'timing/rollout_s',
      'timing/reward_s',
      'timing/logprobs_s',
      'timing/train_s',
      'timing/sync_s',
    ],
  },
];
const COLORS = ['#2563eb', '#dc2626', '#059669', '#d97706', '#7c3aed', '#0891b2'];

const esc = (s: unknown) =>
  String(s).replace(
    /[&<>"']/g,
    (c) => ({ '&': '&amp;', '<': '&lt;', '>': '&gt;', '"': '&quot;', "'": '&#39;' })[c]!,
  );

function fmt(x: number): string {
  if (x === 0) return '0';
  const a = Math.abs(x);
  if (a >= 1000 || a < 0.01) return x.toExponential(1);
  return Number(x.toPrecision(3)).toString();
}

/** An SVG line chart of `series` over the step axis. */
export function lineChart(
  title: string,
  series: readonly { name: string; points: readonly [number, number][] }[],
): string {
  const W = 420;
  const H = 220;
  const m = { l: 52, r: 12, t: 28, b: 40 };
  const all = series.flatMap((s) => s.points);
  if (all.length === 0) return '';
  let [x0, x1] = [Math.min(...all.map((p) => p[0])), Math.max(...all.map((p) => p[0]))];
  let [y0, y1] = [Math.min(...all.map((p) => p[1])), Math.max(...all.map((p) => p[1]))];
  if (x0 === x1) [x0, x1] = [x0 - 1, x1 + 1];
  if (y0 === y1) [y0, y1] = [y0 - (Math.abs(y0) || 1) * 0.1, y1 + (Math.abs(y1) || 1) * 0.1];
  const pad = (y1 - y0) * 0.05;
  y0 -= pad;
  y1 += pad;
  const X = (x: number) => m.l + ((x - x0) / (x1 - x0)) * (W - m.l - m.r);
  const Y = (y: number) => H - m.b - ((y - y0) / (y1 - y0)) * (H - m.t - m.b);
  const ticks = (a: number, b: number, n: number) =>
    Array.from({ length: n + 1 }, (_, i) => a + ((b - a) * i) / n);
  const grid = ticks(y0, y1, 4)
    .map(
      (y) =>
        `<line x1="${m.l}" x2="${W - m.r}" y1="${Y(y).toFixed(1)}" y2="${Y(y).toFixed(1)}" class="grid"/>` +
        `<text x="${m.l - 6}" y="${(Y(y) + 4).toFixed(1)}" text-anchor="end">${fmt(y)}</text>`,
    )
    .join('');
  const xt = ticks(x0, x1, 4)
    .map(
      (x) =>
        `<text x="${X(x).toFixed(1)}" y="${H - m.b + 16}" text-anchor="middle">${fmt(Math.round(x))}</text>`,
    )
    .join('');
  const lines = series
    .map((s, i) => {
      const d = s.points
        .map((p, k) => `${k === 0 ? 'M' : 'L'}${X(p[0]).toFixed(1)},${Y(p[1]).toFixed(1)}`)
        .join('');
      const dots =
        s.points.length <= 30
          ? s.points
              .map(
                (p) =>
                  `<circle cx="${X(p[0]).toFixed(1)}" cy="${Y(p[1]).toFixed(1)}" r="2.2" fill="${COLORS[i % COLORS.length]}"/>`,
              )
              .join('')
          : '';
      return `<path d="${d}" fill="none" stroke="${COLORS[i % COLORS.length]}" stroke-width="1.8"/>${dots}`;
    })
    .join('');
  const legend = series
    .map(
      (s, i) =>
        `<tspan fill="${COLORS[i % COLORS.length]}" dx="${i === 0 ? 0 : 10}">■ ${esc(s.name)}</tspan>`,
    )
    .join('');
  return (
    `<svg class="chart" viewBox="0 0 ${W} ${H}" width="${W}" height="${H}" role="img" aria-label="${esc(title)}">` +
    `<text x="${m.l}" y="16" class="title">${esc(title)}</text>${grid}${xt}` +
    `<text x="${(W + m.l) / 2}" y="${H - 6}" text-anchor="middle">step</text>${lines}` +
    `<text x="${W - m.r}" y="16" text-anchor="end" class="legend">${legend}</text></svg>`
  );
}

function charts(metrics: readonly MetricsRecord[]): string {
  return CHARTS.map(({ title, keys }) => {
    const series = keys
      .map((k) => ({
        name: k,
        points: metrics
          .filter(
            (r) => typeof r[k] === 'number' && Number.isFinite(r[k]) && typeof r.step === 'number',
          )
          .map((r) => [r.step as number, r[k] as number] as [number, number]),
      }))
      .filter((s) => s.points.length > 0);
    return series.length ? lineChart(title, series) : '';
  })
    .filter(Boolean)
    .join('\n');
}

function evalTable(evals: readonly EvalResult[]): string {
  if (evals.length === 0) return '';
  const pct = (x: number) => `${(100 * x).toFixed(1)}%`;
  const rows = evals
    .map(
      (e) =>
        `<tr><td>${esc(e.name)}</td><td>${pct(e.accuracy)} <small>[${pct(e.accuracy_ci95[0])}, ${pct(e.accuracy_ci95[1])}]</small></td>` +
        `<td>${pct(e.format_compliance)}</td><td>${e.turns_mean.toFixed(2)}</td><td>${e.tool_calls_per_trajectory.toFixed(2)}</td>` +
        `<td>${pct(e.tool_error_rate)}</td><td>${e.completion_length_mean.toFixed(1)}</td><td>${e.n}</td><td>${e.time_s.toFixed(1)} s</td></tr>`,
    )
    .join('');
  return (
    '<h2>Evaluation</h2><table><thead><tr><th>policy</th><th>accuracy [95% CI]</th><th>format</th><th>turns</th>' +
    `<th>tool calls</th><th>tool errors</th><th>tokens</th><th>n</th><th>time</th></tr></thead><tbody>${rows}</tbody></table>`
  );
}

function trajectoryList(trajectories: readonly Trajectory[]): string {
  if (trajectories.length === 0) return '';
  const items = trajectories
    .map((t) => {
      const turns = (t.turns ?? [])
        .map(
          (u) =>
            `<li><div class="k">action</div><pre>${esc(u.text)}</pre>` +
            (u.toolName
              ? `<div class="k">tool ${esc(u.toolName)}</div><pre>${esc(u.toolResult ?? '')}</pre>`
              : '') +
            '</li>',
        )
        .join('');
      const ok = (t.reward ?? 0) > 0;
      return (
        `<details class="traj"><summary><span class="${ok ? 'ok' : 'bad'}">reward ${fmt(t.reward ?? 0)}</span> ` +
        `${esc(t.question ?? t.queryId)} → <b>${esc(t.finalAnswer)}</b> <small>(gold ${esc(t.groundTruth ?? '?')}, ${t.turns?.length ?? 0} turns, ${esc(t.stopReason)})</small></summary>` +
        `<ol>${turns}</ol></details>`
      );
    })
    .join('\n');
  return `<h2>Trajectories</h2>${items}`;
}

const STYLE = `body{font:14px/1.45 system-ui,sans-serif;margin:24px;color:#111;max-width:1400px}
h1{font-size:20px}h2{font-size:16px;margin-top:28px}small{color:#555}
.charts{display:flex;flex-wrap:wrap;gap:12px}.chart{border:1px solid #ddd;border-radius:6px;background:#fff}
.chart text{font-size:10px;fill:#444}.chart .title{font-size:12px;font-weight:600;fill:#111}.chart .grid{stroke:#eee}
table{border-collapse:collapse}td,th{border:1px solid #ddd;padding:4px 8px;text-align:right}td:first-child,th:first-child{text-align:left}
.traj{border-bottom:1px solid #eee;padding:4px 0}.traj pre{white-space:pre-wrap;margin:2px 0 6px;background:#f6f6f6;padding:4px}
.k{font-size:11px;color:#666}.ok{color:#059669}.bad{color:#dc2626}`;

/** Renders the report as one HTML string. */
export function renderReport(o: ReportOptions): string {
  const notes = (o.notes ?? []).map((n) => `<p>${esc(n)}</p>`).join('');
  return `<!doctype html>
<html lang="en"><head><meta charset="utf-8"><title>${esc(o.title)}</title>
<meta name="viewport" content="width=device-width, initial-scale=1"><style>${STYLE}</style></head>
<body><h1>${esc(o.title)}</h1>${notes}
${evalTable(o.evals ?? [])}
${
  o.sections
    ? o.sections
        .map((sec) => `<h2>${esc(sec.title)}</h2><div class="charts">${charts(sec.metrics)}</div>`)
        .join('\n')
    : `<h2>Training curves</h2><div class="charts">${charts(o.metrics ?? [])}</div>`
}
${trajectoryList(o.trajectories ?? [])}
</body></html>
`;
}

/** Writes report.html into `dir`; returns its path. */
export async function writeReport(dir: string, o: ReportOptions): Promise<string> {
  const path = join(dir, 'report.html');
  writeFileSync(path, renderReport(o));
  return path;
}
