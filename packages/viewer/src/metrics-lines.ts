// The lines of a metrics.jsonl, read the one way every reader of a run directory reads them (the
// viewer, report.html, the trainer's own history): one record per line, a JSON object with a
// numeric `step` as TRL's log history has. Anything else — a line torn by a kill or a full disk,
// a `null`, a number, a string, an array, an object without a step — is no record: it is skipped
// and counted, so a reader draws every good line and can say how many it left out.

export type MetricsRecord = Record<string, number | string>;

export interface MetricsLines {
  records: MetricsRecord[];
  /** Non-empty lines that were no record (not JSON, not an object, no numeric `step`). */
  skipped: number;
}

/** A JSON value that is a metrics record: an object (not an array) with a finite `step`. */
export function isMetricsRecord(value: unknown): value is MetricsRecord {
  return (
    typeof value === 'object' &&
    value !== null &&
    !Array.isArray(value) &&
    typeof (value as { step?: unknown }).step === 'number' &&
    Number.isFinite((value as { step: number }).step)
  );
}

/** Every non-empty line of `text` as a record, or counted in `skipped`. */
export function parseMetricsLines(text: string): MetricsLines {
  const records: MetricsRecord[] = [];
  let skipped = 0;
  for (const line of text.split('\n')) {
    if (!line.trim()) continue;
    let value: unknown;
    try {
      value = JSON.parse(line);
    } catch {
      skipped++;
      continue;
    }
    if (isMetricsRecord(value)) records.push(value);
    else skipped++;
  }
  return { records, skipped };
}
