import { accuracyDifference, formatAccuracyDifference } from '@flowgrpo/trainer';
import type { CliIO } from '../command.js';
import { runTwoRoleDemo, type TwoRoleDemoOptions } from '../demo/two-roles.js';

// `flowgrpo demo --two-roles`: the variant in which the verifier is a trained model too
// (docs/demo-two-roles.md). Runs it and prints the table, the per-kind table and the two
// differences the variant is about: both roles against each single role.

export async function runTwoRoleDemoCommand(io: CliIO, o: TwoRoleDemoOptions): Promise<number> {
  io.stderr(
    `flowgrpo demo --two-roles${o.budget === 'quick' ? ' --quick' : ''} (seed ${o.seed}) → ${o.outDir}\n`,
  );
  const r = await runTwoRoleDemo(o);
  io.stdout(`\nHeld-out accuracy (${r.evals[0]!.n} questions, greedy):\n\n${r.table}\n\n`);
  const byName = (name: string) => r.evals.find((e) => e.name === name)!;
  const both = byName('grpo both');
  for (const single of ['planner-only', 'verifier-only'])
    io.stdout(
      `${formatAccuracyDifference(accuracyDifference(both, byName(`grpo ${single}`)), { name: 'both roles', baseline: single })}\n`,
    );
  io.stdout(
    `in ${r.timings.total_s!.toFixed(0)} s\nreport:   ${r.report}\nrun dir:  ${r.outDir}\n`,
  );
  return 0;
}
