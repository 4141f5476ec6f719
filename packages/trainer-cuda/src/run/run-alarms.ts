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
  parseAlarmKey,
  type TrainingKind,
  trainingKind,
} from './alarms.js';
import { roleRecord } from './role-record.js';

// The alarms (alarms.ts) of one run directory: the metrics history kept in memory, so a step's
// alarms cost no re-read of metrics.jsonl, and one console warning per episode of an alarm, not on
// every step it stays raised: an episode ends when the alarm stays clear for `rewarn_after_steps`
// steps (a spike alarm clears the step after each spike; its flicker is one episode). The
// thresholds are the run's `alarms` config key, read from its config.json — which every trainer
// writes before its first step — so no trainer has to pass them.
//
// A run that trains a policy per role (config.json's `roles`, the gateway's trainers) is judged
// twice over: the run's record as it is (its rollouts as a whole: alarms/<name>), and each trained
// role's record as GRPOTrainer would have written it (role-record.ts: <role>/alarms/<name>) — the
// entropy, clip ratio, lengths and zero-variance groups of that role's own batch and update.

type MetricsRecord = Record<string, number | string>;

export class RunAlarms {
  /** The history per view: the run's (key '') and each trained role's (role-record.ts). */
  #views: Map<string, MetricsRecord[]> | undefined;
  #config:
    | { alarms: AlarmsConfig; kind: TrainingKind; warmupSteps: number; roles: string[] }
    | undefined;
  /** The step at which each alarm was last raised (a warning is printed when an episode starts). */
  #lastRaised = new Map<string, number>();

  constructor(
    private readonly run: { readonly dir: string; readMetrics(): MetricsRecord[] },
    private readonly warn: (line: string) => void = (line) => console.warn(line),
  ) {}

  /** `record` with its alarms added (an evaluation's own line is returned as it is). */
  add(record: MetricsRecord): MetricsRecord {
    const { alarms: config, kind, warmupSteps, roles } = this.#readConfig();
    const view = (r: MetricsRecord, role: string) => (role ? roleRecord(r, role, roles) : r);
    if (!this.#views) {
      const history = this.run.readMetrics();
      this.#views = new Map(
        ['', ...roles].map((role) => [role, history.map((r) => view(r, role))]),
      );
      // A resumed run: alarms already raised before the resume point are not announced again.
      for (const r of history)
        if (!isEvalRecord(r))
          for (const [k, v] of Object.entries(r)) {
            const a = parseAlarmKey(k);
            if (a && v === 1) this.#lastRaised.set(alarmLabel(a), Number(r.step));
          }
    }
    if (isEvalRecord(record)) {
      for (const history of this.#views.values()) history.push(record);
      return record;
    }
    const full = { ...record };
    for (const [role, history] of this.#views) {
      const own = view(record, role);
      const alarms = computeAlarms([...history, own], config, kind, warmupSteps);
      history.push(own);
      for (const [k, v] of Object.entries(alarmMetrics(alarms)))
        full[role ? `${role}/${k}` : k] = v;
      this.#announce(alarms, role, Number(record.step), config);
    }
    return full;
  }

  /** metrics.jsonl was cut back (resume): the history is read again at the next record. */
  reset(): void {
    this.#views = undefined;
    this.#lastRaised.clear();
  }

  /** A console line for each alarm raised whose episode starts at this step. */
  #announce(
    alarms: ReturnType<typeof computeAlarms>,
    role: string,
    step: number,
    config: AlarmsConfig,
  ): void {
    for (const [name, a] of Object.entries(alarms)) {
      if (!a.raised) continue;
      const label = alarmLabel({ name, ...(role && { role }) });
      const last = this.#lastRaised.get(label);
      this.#lastRaised.set(label, step);
      if (last === undefined || step - last > Math.max(1, config.rewarn_after_steps)) {
        const value = a.value === undefined ? '' : ` (value ${Number(a.value.toPrecision(3))})`;
        this.warn(
          `alarm at step ${step}: ${label}${value}: ${ALARM_MEANINGS[name as AlarmName]}; see docs/guides/alarms.md`,
        );
      }
    }
  }

  /** The run's alarms config, its kind of training (which alarms apply), warm-up, trained roles. */
  #readConfig() {
    if (this.#config) return this.#config;
    let config: {
      alarms?: unknown;
      trainer?: unknown;
      warmup_steps?: unknown;
      warmup_ratio?: unknown;
      max_steps?: unknown;
      roles?: unknown;
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
      roles: trainedRoles(config?.roles),
    };
    return this.#config;
  }
}

/** An alarm as the console and the viewer name it: `<name>`, or `<role>/<name>`. */
const alarmLabel = (a: { name: string; role?: string }) =>
  a.role === undefined ? a.name : `${a.role}/${a.name}`;

/** The trained roles of config.json's `roles` ({ <role>: { trainable } }), in its order. */
function trainedRoles(roles: unknown): string[] {
  if (typeof roles !== 'object' || roles === null) return [];
  return Object.entries(roles)
    .filter(([, r]) => (r as { trainable?: unknown } | null)?.trainable === true)
    .map(([name]) => name);
}

/** HF's warm-up length: warmup_steps when set, else ⌈warmup_ratio × max_steps⌉. */
function warmupSteps(c: { warmup_steps?: unknown; warmup_ratio?: unknown; max_steps?: unknown }) {
  const n = (v: unknown) => (typeof v === 'number' && Number.isFinite(v) ? v : 0);
  return n(c.warmup_steps) > 0 ? n(c.warmup_steps) : Math.ceil(n(c.warmup_ratio) * n(c.max_steps));
}
