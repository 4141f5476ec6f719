// Every GRPO trainer writes GRPOTrainer's step record (step-record.ts): the tests of the gateway's
// trainers compare the keys of their metrics.jsonl with those of a GRPOTrainer run on the tiny
// demo task — per trained role, as the alarms read a role's record (role-record.ts).
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { isEvalRecord } from '../../src/run/alarms.js';
import { roleRecord } from '../../src/run/role-record.js';
import { tinyConfig, tinyTrainer } from './tiny-grpo.js';

type Records = readonly Record<string, number | string>[];

/** metrics.jsonl of a run folder. */
export function readRecords(dir: string): Record<string, number | string>[] {
  return readFileSync(join(dir, 'metrics.jsonl'), 'utf8')
    .trim()
    .split('\n')
    .map((l) => JSON.parse(l));
}

/**
 * The keys of a run's step records (evaluations' lines left out), read as `role`'s record when
 * given. An alarm's `/value` is left out: it is there once the history is long enough for the
 * data at hand, not by what the trainer records.
 */
export function recordKeys(records: Records, role?: { name: string; roles: string[] }): string[] {
  const keys = new Set<string>();
  for (const r of records.filter((x) => !isEvalRecord(x)))
    for (const k of Object.keys(role ? roleRecord(r, role.name, role.roles) : r))
      if (!k.endsWith('/value')) keys.add(k);
  return [...keys].sort();
}

/**
 * The keys of a GRPOTrainer run on the tiny demo task (4 steps, beta ≠ 0) — but the reward
 * function's own `rewards/<name>/*`, which name its function, not the trainer. `root`: a folder
 * of its own (the tiny demo model is built in it).
 */
export async function grpoTrainerKeys(root: string): Promise<string[]> {
  const out = join(root, 'grpo-reference');
  await (await tinyTrainer(root, tinyConfig(out))).train();
  return recordKeys(readRecords(out)).filter((k) => !k.startsWith('rewards/'));
}
