import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import {
  ALARM_MEANINGS,
  type AlarmName,
  type AlarmsConfig,
  AlarmsConfigSchema,
  alarmMetrics,
  computeAlarms,
  isEvalRecord,
  type TrainingKind,
  trainingKind,
} from './alarms.js';

// The alarms (alarms.ts) of one run directory: the metrics history kept in memory, so a step's
// alarms cost no re-read of metrics.jsonl, and one console warning per episode of an alarm, not on
// every step it stays raised: an episode ends when the alarm stays clear for `rewarn_after_steps`
// steps (a spike alarm clears the step after each spike; its flicker is one episode). The
// thresholds are the run's `alarms` config key, read from its config.json — which every trainer
// writes before its first step — so no trainer has to pass them.

type MetricsRecord = Record<string, number | string>;

export class RunAlarms {
  #history: MetricsRecord[] | undefined;
  #config: { alarms: AlarmsConfig; kind: TrainingKind; warmupSteps: number } | undefined;
  /** The step at which each alarm was last raised (a warning is printed when an episode starts). */
  #lastRaised = new Map<string, number>();

  constructor(
    private readonly run: { readonly dir: string; readMetrics(): MetricsRecord[] },
    private readonly warn: (line: string) => void = (line) => console.warn(line),
  ) {}

  /** `record` with its alarms added (an evaluation's own line is returned as it is). */
  add(record: MetricsRecord): MetricsRecord {
    if (!this.#history) {
      this.#history = this.run.readMetrics();
      // A resumed run: alarms already raised before the resume point are not announced again.
      for (const r of this.#history)
        if (!isEvalRecord(r))
          for (const [k, v] of Object.entries(r))
            if (/^alarms\/[^/]+$/.test(k) && v === 1)
              this.#lastRaised.set(k.slice('alarms/'.length), Number(r.step));
    }
    if (isEvalRecord(record)) {
      this.#history.push(record);
      return record;
    }
    const { alarms: config, kind, warmupSteps } = this.#readConfig();
    const alarms = computeAlarms([...this.#history, record], config, kind, warmupSteps);
    const full = { ...record, ...alarmMetrics(alarms) };
    this.#history.push(full);
    const step = Number(record.step);
    const raised = Object.keys(alarms).filter((n) => alarms[n as AlarmName]?.raised);
    for (const name of raised) {
      const last = this.#lastRaised.get(name);
      this.#lastRaised.set(name, step);
      if (last === undefined || step - last > Math.max(1, config.rewarn_after_steps)) {
        const a = alarms[name as AlarmName]!;
        const value = a.value === undefined ? '' : ` (value ${Number(a.value.toPrecision(3))})`;
        this.warn(
          `alarm at step ${record.step}: ${name}${value}: ${ALARM_MEANINGS[name as AlarmName]}; see docs/guides/alarms.md`,
        );
      }
    }
    return full;
  }

  /** metrics.jsonl was cut back (resume): the history is read again at the next record. */
  reset(): void {
    this.#history = undefined;
    this.#lastRaised.clear();
  }

  /** The run's alarms config, its kind of training (which alarms apply) and its warm-up. */
  #readConfig() {
    if (this.#config) return this.#config;
    let config: {
      alarms?: unknown;
      trainer?: unknown;
      warmup_steps?: unknown;
      warmup_ratio?: unknown;
      max_steps?: unknown;
    } | null = null;
    try {
      config = JSON.parse(readFileSync(join(this.run.dir, 'config.json'), 'utf8'));
    } catch {
      // No config.json (a RunDirectory used on its own): the defaults, judged as RL.
    }
    // The trainer validated the key when it parsed its config; here a value it could not have
    // written (an older run's file) falls back to the defaults rather than stopping the run.
    const parsed = AlarmsConfigSchema.safeParse(config?.alarms ?? {});
    this.#config = {
      alarms: parsed.success ? parsed.data : AlarmsConfigSchema.parse({}),
      kind: trainingKind(config?.trainer),
      warmupSteps: warmupSteps(config ?? {}),
    };
    return this.#config;
  }
}

/** HF's warm-up length: warmup_steps when set, else ⌈warmup_ratio × max_steps⌉. */
function warmupSteps(c: { warmup_steps?: unknown; warmup_ratio?: unknown; max_steps?: unknown }) {
  const n = (v: unknown) => (typeof v === 'number' && Number.isFinite(v) ? v : 0);
  return n(c.warmup_steps) > 0 ? n(c.warmup_steps) : Math.ceil(n(c.warmup_ratio) * n(c.max_steps));
}
