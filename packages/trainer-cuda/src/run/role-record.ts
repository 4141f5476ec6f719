// A run that trains a policy per role writes each role's metrics under `<role>/` beside the run's
// unprefixed ones (step-record.ts). Read back together, they are the record GRPOTrainer would have
// written had it trained that role alone — what the alarms judge per role (run-alarms.ts), so an
// entropy collapse of one role is not averaged away by another.

type Record_ = Readonly<Record<string, number | string>>;

/**
 * `record` as the record of `role`: the run's unprefixed keys, overridden by the role's own
 * (prefix dropped); the other roles' keys left out. `roles`: every trained role of the run.
 */
export function roleRecord(
  record: Record_,
  role: string,
  roles: readonly string[],
): Record<string, number | string> {
  const prefixes = roles.map((r) => `${r}/`);
  const own = `${role}/`;
  const out: Record<string, number | string> = {};
  for (const [k, v] of Object.entries(record))
    if (!prefixes.some((p) => k.startsWith(p))) out[k] = v;
  for (const [k, v] of Object.entries(record)) if (k.startsWith(own)) out[k.slice(own.length)] = v;
  return out;
}
