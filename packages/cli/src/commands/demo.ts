import { resolve } from 'node:path';
import { accuracyDifference, formatAccuracyDifference } from '@flowgrpo/trainer';
import { DEMO_TASK_NAMES, type DemoTaskName } from '@flowgrpo/trainer/demo';
import { type CliIO, type Command, numberOption, stringOption, UsageError } from '../command.js';
import { runDemo } from '../demo/pipeline.js';
import { cliProgress, interruptSignal } from '../run-progress.js';
import { runTwoRoleDemoCommand } from './demo-two-roles.js';

const usage = `Usage:
  flowgrpo demo [--task default|explore] [--quick] [--rft] [--seed N] [--out DIR]
  flowgrpo demo --two-roles [--quick] [--seed N] [--out DIR]

The embedded Flow-GRPO demo, offline on the CPU: an almanac question task generated from the
seed (1–3 tool calls: almanac lookups and a calculator), a tiny Qwen2-architecture planner
created from the seed, SFT on an imperfect teacher's demonstrations until the validation loss
stops improving, then Flow-GRPO from the SFT model with outcome rewards only — and base, SFT and
GRPO evaluated side by side on held-out questions (no landmark, town or year shared with
training). The planner runs inside the real FlowRollout; the executor, verifier, final-answer
generator and judge are rule-based engines. About 6 minutes on 2 idle CPU cores; --quick under 2.

Writes DIR/report.html (curves, the table, sample trajectories), DIR/results.json, the runs
(metrics.jsonl, checkpoints, rollouts as Parquet) and the data. See docs/demo.md. DIR is the
demo's own (marked .flowgrpo-demo): a second demo into it replaces the first's runs
(overwrite_output_dir, logged); a DIR that holds anything else, or a symbolic link, is refused
before anything is written.

Options:
  --task T     default: the teacher stops one hop early on some multi-hop questions.
               explore: the teacher's logs hold no correct three-hop plan, so imitation (SFT,
               and RFT with --rft) cannot learn one; GRPO has to find it by exploring. Prints
               accuracy per question kind too.
  --quick      smaller budgets everywhere (shows the whole loop; the gain is reported, not promised,
               and called inconclusive when the 95% intervals overlap)
  --rft        also the rejection-sampling baseline: the same SFT on only the demonstrations the
               judge marks correct (uses the reward, as GRPO does; one more SFT run)
  --two-roles  the variant where the verifier is a trained model too: GRPO on the planner only,
               the verifier only and both at once, one LoRA adapter per role through the policy
               gateway (docs/demo-two-roles.md; 28 minutes on a busy 2-core machine)
  --seed N     seed of the task, the model and the trainers (default 1)
  --out DIR    output folder (default out/demo[-explore], or …-quick with --quick)
  --device D   cpu (default) | auto | webgpu | cuda`;

export const demoCommand: Command = {
  name: 'demo',
  summary: 'the embedded demo: SFT then Flow-GRPO of a tiny planner, offline on the CPU',
  usage,
  options: {
    task: { type: 'string' },
    quick: { type: 'boolean' },
    rft: { type: 'boolean' },
    'two-roles': { type: 'boolean' },
    seed: { type: 'string' },
    out: { type: 'string' },
    device: { type: 'string' },
  },
  async run(args, io: CliIO): Promise<number> {
    if (args.positionals.length > 0)
      throw new UsageError(`unexpected argument '${args.positionals[0]}'`);
    const quick = args.values.quick === true;
    const seed = numberOption(args, 'seed') ?? 1;
    if (!Number.isInteger(seed)) throw new UsageError(`--seed must be an integer, got ${seed}`);
    const device = stringOption(args, 'device') ?? 'cpu';
    if (!['cpu', 'auto', 'webgpu', 'cuda'].includes(device))
      throw new UsageError(`--device must be cpu, auto, webgpu or cuda, got '${device}'`);
    const task = stringOption(args, 'task') ?? 'default';
    if (!DEMO_TASK_NAMES.includes(task as DemoTaskName))
      throw new UsageError(`--task must be ${DEMO_TASK_NAMES.join(' or ')}, got '${task}'`);
    const twoRoles = args.values['two-roles'] === true;
    if (twoRoles && args.values.rft === true)
      throw new UsageError(
        '--rft is a baseline of the one-role demo; leave it out with --two-roles',
      );
    if (twoRoles && task !== 'default')
      throw new UsageError('--two-roles has its own task; leave --task out with it');
    const defaultOut = `out/demo${task === 'default' ? '' : `-${task}`}${quick ? '-quick' : ''}`;
    const outDir = resolve(io.cwd, stringOption(args, 'out') ?? defaultOut);
    const progress = cliProgress(io);
    const interrupt = interruptSignal(io);
    try {
      if (twoRoles)
        return await runTwoRoleDemoCommand(io, {
          outDir: stringOption(args, 'out') ? outDir : `${outDir}-two-roles`,
          budget: quick ? 'quick' : 'full',
          seed,
          device: device as 'cpu',
          progress,
          signal: interrupt.signal,
        });
      const flags = `${task === 'default' ? '' : ` --task ${task}`}${quick ? ' --quick' : ''}`;
      io.stderr(`flowgrpo demo${flags} (seed ${seed}) → ${outDir}\n`);
      const r = await runDemo({
        outDir,
        task: task as DemoTaskName,
        quick,
        rft: args.values.rft === true,
        seed,
        device: device as 'cpu',
        progress,
        signal: interrupt.signal,
      });
      io.stdout(`\nHeld-out accuracy (${r.evals[0]!.n} questions, greedy):\n\n${r.table}\n\n`);
      if (task !== 'default') io.stdout(`By question kind:\n\n${kindTable(r.perKind)}\n\n`);
      const byName = (prefix: string) => r.evals.find((e) => e.name.startsWith(prefix));
      const [base, sft, grpo] = [byName('base'), byName('sft'), byName('grpo')];
      // A --quick run evaluates few questions: the line says when its difference is noise.
      io.stdout(
        `${formatAccuracyDifference(accuracyDifference(grpo!, sft!), { name: 'GRPO', baseline: 'SFT' })} ` +
          `(base ${(100 * base!.accuracy).toFixed(1)}%, SFT ${(100 * sft!.accuracy).toFixed(1)}%, GRPO ${(100 * grpo!.accuracy).toFixed(1)}%) in ${r.timings.total_s!.toFixed(0)} s\n`,
      );
      const rft = byName('rft');
      if (rft)
        io.stdout(
          `${formatAccuracyDifference(accuracyDifference(grpo!, rft), { name: 'GRPO', baseline: 'RFT' })} (RFT ${(100 * rft.accuracy).toFixed(1)}%, on ${r.rft!.demonstrations} correct demonstrations)\n`,
        );
      io.stdout(
        `machine:  ${r.machine.cpu}, ONNX Runtime ${r.machine.onnxruntime} (${r.machine.isa} float kernels)\n`,
      );
      io.stdout(`report:   ${r.report}\nrun dir:  ${r.outDir}\n`);
      return 0;
    } finally {
      interrupt.dispose();
    }
  },
};

/** Accuracy per question kind (rows) and policy (columns). */
function kindTable(perKind: Record<string, Record<string, { n: number; accuracy: number }>>) {
  const policies = Object.keys(perKind);
  const kinds = Object.keys(perKind[policies[0]!] ?? {});
  const rows = kinds.map((k) => [
    `${k} (${perKind[policies[0]!]![k]!.n})`,
    ...policies.map((p) => `${(100 * (perKind[p]![k]?.accuracy ?? 0)).toFixed(1)}%`),
  ]);
  const head = ['kind (n)', ...policies.map((p) => p.split(' ')[0]!)];
  const widths = head.map((h, i) => Math.max(h.length, ...rows.map((r) => r[i]!.length)));
  const line = (cells: string[]) => cells.map((c, i) => c.padEnd(widths[i]!)).join('  ');
  return [line(head), ...rows.map(line)].join('\n');
}
