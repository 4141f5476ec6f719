// Plain-text tables for benchmark output.

export interface BenchSection {
  title: string;
  header: string[];
  rows: string[][];
  /** Printed under the table: what was skipped and why, caveats. */
  notes: string[];
}

export function formatSection(s: BenchSection): string {
  const widths = s.header.map((h, i) =>
    Math.max(h.length, ...s.rows.map((r) => (r[i] ?? '').length)),
  );
  const line = (cells: string[]) =>
    cells
      .map((c, i) => (i === 0 ? c.padEnd(widths[i]!) : c.padStart(widths[i]!)))
      .join('  ')
      .trimEnd();
  const out = [
    `## ${s.title}`,
    line(s.header),
    widths.map((w) => '-'.repeat(w)).join('  '),
    ...s.rows.map(line),
  ];
  for (const n of s.notes) out.push(`  note: ${n}`);
  return `${out.join('\n')}\n`;
}
