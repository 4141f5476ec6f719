import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import type { Trajectory } from '@flowgrpo/core';
import {
  alarmEpisodes,
  chartSpecs,
  displayAnswer,
  episodeCharts,
  failureCodes,
  RunReader,
  stopReasonHelp,
  stopReasonTitle,
  type TokenPieces,
  tokenPieces,
} from '@flowgrpo/viewer';
import { accuracyDifference, formatAccuracyDifference } from '../eval/accuracy-difference.js';
import { type EvalResult, trajectoryTurns } from '../eval/evaluate.js';
import type { MetricsRecord } from '../run/run-dir.js';
import { type ChartSeries, esc, lineChart } from './report-chart.js';
import { alarmPanel, runTokenPieces, tokenView } from './report-viewer.js';

// report.html: one self-contained page per run — the charts the viewer draws (the viewer's
// charts.ts), as inline SVG at write time (no chart library, nothing fetched: it opens offline and
// prints), with the alarm episodes as red bands and listed; the evaluation table with its
// comparisons, the steps whose rollouts failed, a browsable sample of trajectories (stop reasons
// explained, answers without tag fragments) and the viewer's token view of one group
// (report-viewer.ts; its only script colours it).

export interface ReportOptions {
  title: string;
  metrics?: readonly MetricsRecord[];
  /** Evaluations to tabulate side by side (e.g. base / SFT / GRPO). */
  evals?: readonly EvalResult[];
  /**
   * Accuracy differences to state under the table, as [policy, baseline] names of `evals`
   * (default: each evaluation against the first).
   */
  comparisons?: readonly (readonly [string, string])[];
  /** Token id → text for the token view (writeReport reads the run's tokenizer.json). */
  tokenPieces?: TokenPieces;
  /** Why the token view shows ids (writeReport: where it looked when it found no tokenizer). */
  tokensNote?: string;
  /** Lines of metrics.jsonl that were no record (writeReport counts them in the run's file). */
  metricsSkipped?: number;
  /** Trajectories to show, with their turns (a sample), each with its recorded reward. */
  trajectories?: readonly Trajectory[];
  /** Extra notes shown under the title (e.g. the command that made the run). */
  notes?: readonly string[];
  /** Several runs' curves, each under its own heading (instead of `metrics`). */
  sections?: readonly { title: string; metrics: readonly MetricsRecord[] }[];
}

const FAILED = 'rollouts/failed';

/** A metric as a chart series: the records carrying it as a finite number, by step. */
function seriesOf(metrics: readonly MetricsRecord[], key: string): ChartSeries {
  return {
    name: key,
    points: metrics
      .filter(
        (r) => typeof r[key] === 'number' && Number.isFinite(r[key]) && typeof r.step === 'number',
      )
      .map((r) => [r.step as number, r[key] as number] as const),
  };
}

const failedSteps = (metrics: readonly MetricsRecord[]) =>
  metrics.filter((r) => typeof r[FAILED] === 'number' && (r[FAILED] as number) > 0);

/** The run's charts, each with a band per alarm episode that concerns it. */
function charts(metrics: readonly MetricsRecord[]): string {
  const specs = chartSpecs(metrics);
  const episodes = alarmEpisodes(metrics).map((e) => ({ ...e, charts: episodeCharts(e, specs) }));
  return specs
    .map(({ title, keys }) =>
      lineChart(
        title,
        keys.map((k) => seriesOf(metrics, k)),
        episodes
          .filter((e) => e.charts.includes(title))
          .map((e) => ({ label: e.name, from: e.from, to: e.to })),
      ),
    )
    .join('\n');
}

/** The steps whose rollouts failed, with how many failed of each error code. */
function failureTable(metrics: readonly MetricsRecord[]): string {
  const steps = failedSteps(metrics);
  if (steps.length === 0) return '';
  const codes = failureCodes(metrics);
  const rows = steps
    .map((r) => {
      const byCode = codes
        .filter(
          (c) => typeof r[`${FAILED}/${c}`] === 'number' && (r[`${FAILED}/${c}`] as number) > 0,
        )
        .map((c) => `${esc(c)} ${r[`${FAILED}/${c}`]}`)
        .join(', ');
      return `<tr><td>${esc(r.step)}</td><td>${esc(r[FAILED])}</td><td>${byCode}</td></tr>`;
    })
    .join('');
  return (
    `<p class="failures">Failed rollouts: ${steps.length} step${steps.length === 1 ? '' : 's'} ` +
    'had rollouts that failed (the trajectories below show each error)</p><table class="failures">' +
    `<thead><tr><th>step</th><th>failed</th><th>by error code</th></tr></thead><tbody>${rows}</tbody></table>`
  );
}

function evalTable(evals: readonly EvalResult[], pairs?: ReportOptions['comparisons']): string {
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
  const byName = new Map(evals.map((e) => [e.name, e]));
  const comparisons = (pairs ?? evals.slice(1).map((e) => [e.name, evals[0]!.name] as const))
    .flatMap(([a, b]) => {
      const [pa, pb] = [byName.get(a), byName.get(b)];
      return pa && pb ? [accuracyDifference(pa, pb)] : [];
    })
    .map(
      (d) =>
        `<li class="comparison${d.inconclusive ? ' inconclusive' : ''}">${esc(formatAccuracyDifference(d))}</li>`,
    )
    .join('');
  return (
    '<h2>Evaluation</h2><table><thead><tr><th>policy</th><th>accuracy [95% CI]</th><th>format</th><th>turns</th>' +
    `<th>tool calls</th><th>tool errors</th><th>tokens</th><th>n</th><th>time</th></tr></thead><tbody>${rows}</tbody></table>` +
    (comparisons ? `<ul class="comparisons">${comparisons}</ul>` : '')
  );
}

/** A recorded error of a rollout: the agent's (metadata.errors) or the reward function's. */
interface RecordedError {
  role?: string;
  step?: number;
  turn?: number;
  code?: string;
  message?: string;
  /** The fix, when the error knew one (a FlowGrpoError's hint). */
  hint?: string;
}

/** What went wrong in a rollout: the agent's errors in order, then the reward function's. */
function recordedErrors(t: Trajectory): { agent: RecordedError[]; reward?: RecordedError } {
  const m = (t.metadata ?? {}) as {
    errors?: unknown;
    rolloutError?: { name?: string; message?: string };
    rewardError?: unknown;
  };
  const agent = (Array.isArray(m.errors) ? m.errors : []).filter(
    (e): e is RecordedError => typeof e === 'object' && e !== null,
  );
  // runOne records a thrown rollout both ways; the older form alone still shows.
  if (m.rolloutError && !agent.some((e) => e.role === 'rollout'))
    agent.push({ role: 'rollout', code: m.rolloutError.name, message: m.rolloutError.message });
  const r = m.rewardError as RecordedError | string | undefined;
  if (r === undefined || r === null) return { agent };
  return {
    agent,
    reward: typeof r === 'string' ? { role: 'reward', message: r } : { ...r, role: 'reward' },
  };
}

const errorText = (e: RecordedError) =>
  [e.code, e.message].filter((x) => x !== undefined && x !== '').join(' — ') +
  (e.hint ? ` (fix: ${e.hint})` : '');

const fmtReward = (x: number) => Number(x.toPrecision(3)).toString();

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
      const { agent, reward } = recordedErrors(t);
      const errors = reward ? [...agent, reward] : agent;
      // What ended a failed rollout (its own error, else the agent's last) explains its empty
      // answer, and a reward error its score: on the summary line; every error in the body.
      const fatal =
        t.stopReason === 'error'
          ? (agent.find((e) => e.role === 'rollout') ?? agent.at(-1) ?? reward)
          : reward;
      const errorList = errors.length
        ? `<ul class="errors">${errors
            .map(
              (e) =>
                `<li>${esc([e.role, e.step ?? e.turn].filter((x) => x !== undefined).join(' '))}: ${esc(errorText(e))}</li>`,
            )
            .join('')}</ul>`
        : '';
      const badge =
        t.reward === undefined
          ? '<span class="reward none">unscored</span>'
          : `<span class="reward ${t.reward > 0 ? 'ok' : 'bad'}">reward ${fmtReward(t.reward)}</span>`;
      const { answer, recorded } = displayAnswer(t.finalAnswer);
      const stop = `<span class="stop" data-stop="${esc(t.stopReason)}" title="${esc(stopReasonTitle(t.stopReason))}">${esc(t.stopReason)}</span>`;
      return (
        `<details class="traj"><summary>${badge} ` +
        `${esc(t.question ?? t.queryId)} → <b class="final">${answer ? esc(answer) : '<i>no answer</i>'}</b> <small>(gold ${esc(t.groundTruth ?? '?')}, ${trajectoryTurns(t)} turns, ${stop})</small>` +
        (fatal ? ` <span class="error">${esc(errorText(fatal))}</span>` : '') +
        `</summary>${errorList}` +
        (recorded === undefined
          ? ''
          : `<p class="recorded">answer as recorded, with tag fragments: <code>${esc(recorded)}</code></p>`) +
        `<ol>${turns}</ol></details>`
      );
    })
    .join('\n');
  return `<h2>Trajectories</h2>${stopLegend(trajectories)}${items}`;
}

/** What each stop reason among `trajectories` means and what to look at. */
function stopLegend(trajectories: readonly Trajectory[]): string {
  const reasons = [...new Set(trajectories.map((t) => t.stopReason))].sort();
  const items = reasons
    .map((r) => {
      const help = stopReasonHelp(r);
      return `<li data-stop="${esc(r)}"><b>${esc(r)}</b>: ${esc(help?.meaning ?? 'no description')}${help ? `. <span class="look">Look at: ${esc(help.look)}.</span>` : ''}</li>`;
    })
    .join('');
  return `<ul class="stop-legend">${items}</ul>`;
}

const STYLE = `body{font:14px/1.45 system-ui,sans-serif;margin:24px;color:#111;max-width:1400px}
h1{font-size:20px}h2{font-size:16px;margin-top:28px}small{color:#555}
.charts{display:flex;flex-wrap:wrap;gap:12px}.chart{border:1px solid #ddd;border-radius:6px;background:#fff}
.chart text{font-size:10px;fill:#444}.chart .title{font-size:12px;font-weight:600;fill:#111}.chart .grid{stroke:#eee}
table{border-collapse:collapse;margin-bottom:8px}td,th{border:1px solid #ddd;padding:4px 8px;text-align:right}td:first-child,th:first-child{text-align:left}
p.failures{font-weight:600;color:#dc2626}.failures td:last-child{text-align:left}
.comparisons{padding-left:20px}.inconclusive{color:#b45309;font-weight:600}
.traj{border-bottom:1px solid #eee;padding:4px 0}.traj pre{white-space:pre-wrap;margin:2px 0 6px;background:#f6f6f6;padding:4px}
.k{font-size:11px;color:#666}.ok{color:#059669}.bad,.error,.errors{color:#dc2626}.none{color:#666}
.alarms{background:#fff1f0;border:1px solid #e59;color:#900;padding:4px 12px;border-radius:4px;margin:8px 0}.alarms p{margin:4px 0;font-weight:600}.alarms ol{margin:4px 0;padding-left:22px}
.chart .alarm-band{fill:rgba(220,0,0,0.12)}.chart .alarm-edge{stroke:rgba(220,0,0,0.6)}.chart text.alarm-label{fill:#a00}
.notice{background:#fff8e1;border:1px solid #e0b84f;color:#5c4300;padding:4px 12px;border-radius:4px}
.stop{text-decoration:underline dotted;cursor:help}.stop-legend{font-size:12px;color:#445;padding-left:20px}.stop-legend .look,.recorded{color:#667}`;

/** Renders the report as one HTML string. */
export function renderReport(o: ReportOptions): string {
  const notes = (o.notes ?? []).map((n) => `<p>${esc(n)}</p>`).join('');
  const skipped = o.metricsSkipped
    ? `<p class="notice skipped">metrics.jsonl: ${o.metricsSkipped} line${o.metricsSkipped === 1 ? '' : 's'} skipped (not a JSON object with a numeric "step": torn by a kill, or written by something else); every other line is shown.</p>`
    : '';
  const curves = (metrics: readonly MetricsRecord[]) =>
    `${alarmPanel(alarmEpisodes(metrics))}${failureTable(metrics)}<div class="charts">${charts(metrics)}</div>`;
  return `<!doctype html>
<html lang="en"><head><meta charset="utf-8"><title>${esc(o.title)}</title>
<meta name="viewport" content="width=device-width, initial-scale=1"><style>${STYLE}</style></head>
<body><h1>${esc(o.title)}</h1>${notes}
${evalTable(o.evals ?? [], o.comparisons)}
${
  o.sections
    ? o.sections.map((sec) => `<h2>${esc(sec.title)}</h2>${curves(sec.metrics)}`).join('\n')
    : `<h2>Training curves</h2>${skipped}${curves(o.metrics ?? [])}`
}
${trajectoryList(o.trajectories ?? [])}
${tokenView(o.trajectories ?? [], o.tokenPieces ?? tokenPieces(undefined), o.tokenPieces ? o.tokensNote : (o.tokensNote ?? 'no tokenizer was given'))}
</body></html>
`;
}

/**
 * Writes report.html into `dir`; returns its path. The run's tokenizer shows the tokens (the
 * viewer's lookup: checkpoint, config, base model, artifacts), and the lines of its metrics.jsonl
 * that were no record are counted, unless `o` says otherwise.
 */
export async function writeReport(dir: string, o: ReportOptions): Promise<string> {
  const path = join(dir, 'report.html');
  const run = o.tokenPieces ? undefined : runTokenPieces(dir);
  const { skipped } = new RunReader(dir).metrics();
  writeFileSync(
    path,
    renderReport({
      ...(run && { tokenPieces: run.pieces, ...(run.note && { tokensNote: run.note }) }),
      metricsSkipped: skipped,
      ...o,
    }),
  );
  return path;
}
