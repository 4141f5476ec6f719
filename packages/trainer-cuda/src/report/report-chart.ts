// The line charts of report.html, drawn as inline SVG at write time. Every label a reader relies
// on is plain SVG text (the browser test reads them back): the step axis shows distinct integers
// taken from the data's range, the value axis shows "nice" round ticks and starts at 0 whenever
// the series never go below it (a learning rate or a length drawn from −1.5e-4 misleads), and
// the legend has a band of its own between the title and the plot, so the two never overlap.
// Alarm episodes are translucent red bands behind the lines, each labelled with its alarm's name.

export interface ChartSeries {
  name: string;
  points: readonly (readonly [number, number])[];
}

/** A span of steps to mark (an alarm episode), from its first to its last step. */
export interface ChartBand {
  label: string;
  from: number;
  to: number;
}

const COLORS = ['#2563eb', '#dc2626', '#059669', '#d97706', '#7c3aed', '#0891b2'];
const W = 420;
const PLOT_H = 150;
const TITLE_BAND = 24;
const LEGEND_ROW = 14;
const MARGIN = { l: 56, r: 14, b: 40 };
// 10 px system-ui text averages under 6 px a character; a generous estimate wraps the legend a
// row early rather than letting it run past the chart's right edge.
const LEGEND_CHAR_PX = 6.2;

const ENTITIES: Record<string, string> = {
  '&': '&amp;',
  '<': '&lt;',
  '>': '&gt;',
  '"': '&quot;',
  "'": '&#39;',
};
/**
 * Text for HTML: markup characters as entities, and control characters (a model's terminal escape
 * sequences, NULs) shown as \xNN — invisible or replaced otherwise, they would hide what the
 * text really was. Newlines, carriage returns and tabs stay.
 */
export const esc = (s: unknown) =>
  String(s).replace(
    // biome-ignore lint/suspicious/noControlCharactersInRegex: matching them is the point
    /[&<>"']|[\x00-\x08\x0b\x0c\x0e-\x1f\x7f]/g,
    (c) => ENTITIES[c] ?? `\\x${c.charCodeAt(0).toString(16).padStart(2, '0')}`,
  );

/** The smallest of 1, 2, 2.5 (unless `integer`), 5 × 10^k that is at least `raw`. */
function niceStep(raw: number, integer: boolean): number {
  const p = 10 ** Math.floor(Math.log10(raw));
  const steps = integer ? [1, 2, 5, 10] : [1, 2, 2.5, 5, 10];
  const m = steps.find((s) => s * p >= raw * (1 - 1e-9))!;
  return Math.max(integer ? 1 : 0, m * p);
}

// Sums like 0.1 + 0.2 print as 0.30000000000000004; ticks are rounded to 12 significant digits.
const clean = (x: number) => Number(x.toPrecision(12));

/**
 * Ticks of the step axis: distinct integers, multiples of a 1-2-5 step, inside [lo, hi], at most
 * `max` of them. One step gives one tick.
 */
export function stepTicks(lo: number, hi: number, max = 7): number[] {
  const first = Math.ceil(lo);
  const last = Math.floor(hi);
  if (last < first) return [];
  if (last === first) return [first];
  let step = niceStep((last - first) / (max - 1), true);
  for (;;) {
    const ticks: number[] = [];
    for (let t = Math.ceil(first / step) * step; t <= last; t += step) ticks.push(t);
    if (ticks.length <= max) return ticks;
    step = niceStep(step * 1.5, true);
  }
}

/**
 * The value axis of series spanning [lo, hi]: 3 to 6 intervals of a 1-2-2.5-5 step, from a
 * multiple of it at or below lo (0 when lo ≥ 0) to one at or above hi — the step that wastes the
 * least of the axis, a 2.5 only where it wastes less than the others.
 */
export function valueTicks(lo: number, hi: number): { ticks: number[]; step: number } {
  let [a, b] = [lo, hi];
  if (a >= 0) a = 0;
  if (a === b) {
    // A constant negative series (a non-negative constant already spans [0, c]; all zeros lands
    // here too): widen it so it sits inside the axis, not on an edge of nothing.
    const d = Math.abs(a) * 0.1 || 1;
    [a, b] = lo >= 0 ? [0, d] : [a - d, b + d];
  }
  const k = Math.floor(Math.log10((b - a) / 4));
  let best: { from: number; to: number; step: number; span: number } | undefined;
  for (const p of [k - 1, k, k + 1])
    for (const m of [1, 2, 5, 2.5]) {
      const step = clean(m * 10 ** p);
      const from = Math.floor(clean(a / step));
      const to = Math.ceil(clean(b / step));
      const span = clean((to - from) * step);
      if (to - from < 3 || to - from > 6) continue;
      if (!best || span < best.span || (span === best.span && step > best.step && m !== 2.5))
        best = { from, to, step, span };
    }
  const { from, to, step } = best!;
  const ticks = Array.from({ length: to - from + 1 }, (_, i) => clean((from + i) * step));
  return { ticks, step };
}

/**
 * The labels of an axis's ticks, with just the digits that tell neighbours apart; very small or
 * large values in exponent form, all with the same number of digits.
 */
export function tickLabels(ticks: readonly number[], step: number): string[] {
  const stepExp = Math.floor(Math.log10(step) + 1e-9);
  const extra = clean(step / 10 ** stepExp) % 1 === 0 ? 0 : 1; // 2.5 × 10^k needs one digit more
  const maxAbs = Math.max(...ticks.map(Math.abs));
  const exponent = maxAbs >= 1e5 || step < 1e-3;
  const digits = Math.max(0, Math.floor(Math.log10(maxAbs) + 1e-9) - stepExp + extra);
  return ticks.map((x) => {
    if (x === 0) return '0';
    if (exponent) return x.toExponential(Math.min(6, digits));
    return x.toFixed(Math.max(0, -stepExp + extra));
  });
}

/** Lays the legend's entries out left to right, wrapping into rows that fit the chart's width. */
function legendRows(names: readonly string[]): { x: number; row: number }[] {
  const out: { x: number; row: number }[] = [];
  let [x, row] = [0, 0];
  for (const name of names) {
    const w = 14 + (name.length + 1) * LEGEND_CHAR_PX;
    if (x > 0 && x + w > W - 2 * 10) [x, row] = [0, row + 1];
    out.push({ x: 10 + x, row });
    x += w + 8;
  }
  return out;
}

/**
 * The bands behind the plot: each covers its steps and half the smallest step gap on either side
 * (so a one-step episode has a width, and neighbouring ones do not overlap), clipped to the plot;
 * a label is drawn where it does not run into the one before.
 */
function bandsSvg(
  bands: readonly ChartBand[],
  xs: readonly number[],
  X: (x: number) => number,
  top: number,
): string {
  const steps = [...new Set(xs)].sort((a, b) => a - b);
  const gaps = steps.slice(1).map((x, i) => x - steps[i]!);
  const half = gaps.length > 0 ? Math.min(...gaps) / 2 : 0.5;
  let labelEnd = Number.NEGATIVE_INFINITY;
  return bands
    .map((b) => {
      const a = Math.max(MARGIN.l, X(b.from - half));
      const z = Math.min(W - MARGIN.r, X(b.to + half));
      if (z <= a) return '';
      const span = b.from === b.to ? `step ${b.from}` : `steps ${b.from}–${b.to}`;
      let label = '';
      if (a + 3 > labelEnd) {
        label = `<text class="alarm-label" x="${(a + 3).toFixed(1)}" y="${top + 10}">${esc(b.label)}</text>`;
        labelEnd = a + 3 + b.label.length * LEGEND_CHAR_PX + 6;
      }
      return (
        `<rect class="alarm-band" data-alarm="${esc(b.label)}" data-from="${b.from}" data-to="${b.to}" x="${a.toFixed(1)}" y="${top}" width="${(z - a).toFixed(1)}" height="${PLOT_H}"><title>${esc(b.label)}: ${span}</title></rect>` +
        `<line class="alarm-edge" x1="${a.toFixed(1)}" x2="${a.toFixed(1)}" y1="${top}" y2="${top + PLOT_H}"/>${label}`
      );
    })
    .join('');
}

/** An SVG line chart of `series` over the step axis, with `bands` (alarm episodes) behind it. */
export function lineChart(
  title: string,
  series: readonly ChartSeries[],
  bands: readonly ChartBand[] = [],
): string {
  const all = series.flatMap((s) => s.points);
  if (all.length === 0) return '';
  const xs = all.map((p) => p[0]);
  const ys = all.map((p) => p[1]);
  const [xLo, xHi] = [Math.min(...xs), Math.max(...xs)];
  const xTicks = stepTicks(xLo, xHi);
  // A single step sits in the middle of the axis.
  const [x0, x1] = xLo === xHi ? [xLo - 1, xHi + 1] : [xLo, xHi];
  const { ticks: yTicks, step: yStep } = valueTicks(Math.min(...ys), Math.max(...ys));
  const [y0, y1] = [yTicks[0]!, yTicks.at(-1)!];

  const legend = legendRows(series.map((s) => s.name));
  const rows = legend.length === 0 ? 0 : legend.at(-1)!.row + 1;
  const top = TITLE_BAND + rows * LEGEND_ROW + 10;
  const H = top + PLOT_H + MARGIN.b;
  const X = (x: number) => MARGIN.l + ((x - x0) / (x1 - x0)) * (W - MARGIN.l - MARGIN.r);
  const Y = (y: number) => top + PLOT_H - ((y - y0) / (y1 - y0)) * PLOT_H;
  const color = (i: number) => COLORS[i % COLORS.length]!;

  const yLabels = tickLabels(yTicks, yStep);
  const yAxis = yTicks
    .map(
      (y, i) =>
        `<line x1="${MARGIN.l}" x2="${W - MARGIN.r}" y1="${Y(y).toFixed(1)}" y2="${Y(y).toFixed(1)}" class="grid"/>` +
        `<text x="${MARGIN.l - 6}" y="${(Y(y) + 3.5).toFixed(1)}" text-anchor="end">${yLabels[i]}</text>`,
    )
    .join('');
  const xAxis = xTicks
    .map(
      (x) =>
        `<text x="${X(x).toFixed(1)}" y="${top + PLOT_H + 16}" text-anchor="middle">${x}</text>`,
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
                  `<circle cx="${X(p[0]).toFixed(1)}" cy="${Y(p[1]).toFixed(1)}" r="2.2" fill="${color(i)}"/>`,
              )
              .join('')
          : '';
      return `<path d="${d}" fill="none" stroke="${color(i)}" stroke-width="1.8"/>${dots}`;
    })
    .join('');
  const legendSvg = series
    .map((s, i) => {
      const { x, row } = legend[i]!;
      const y = TITLE_BAND + row * LEGEND_ROW;
      return (
        `<rect x="${x}" y="${y + 2}" width="8" height="8" fill="${color(i)}"/>` +
        `<text x="${x + 12}" y="${y + 10}">${esc(s.name)}</text>`
      );
    })
    .join('');
  return (
    `<svg class="chart" viewBox="0 0 ${W} ${H}" width="${W}" height="${H}" role="img" aria-label="${esc(title)}">` +
    `<text x="10" y="16" class="title">${esc(title)}</text>` +
    `<g class="legend">${legendSvg}</g>` +
    `<g class="y-axis">${yAxis}</g><g class="x-axis">${xAxis}</g>` +
    `<g class="alarm-bands">${bandsSvg(bands, xs, X, top)}</g>` +
    `<text x="${(W + MARGIN.l) / 2}" y="${H - 6}" text-anchor="middle">step</text>${lines}</svg>`
  );
}
