import type { MetricsRecord, Progress } from '@flowgrpo/trainer';
import { terminalProgress } from '@flowgrpo/trainer';
import type { CliIO } from './command.js';
import { terminalSafe } from './terminal-text.js';

// Progress and Ctrl-C for long commands (train, eval). On a terminal: the trainer's live bars on
// stderr. Otherwise (CI logs, pipes, tests) the same reporter in line mode, written through
// `io.stderr`, plus one line per logged step. Ctrl-C aborts the run's signal — the trainer
// finishes the step it is in, writes a checkpoint and returns; a second Ctrl-C exits at once.

/** A Progress that draws on the process's terminal when interactive, else writes lines to io. */
export function cliProgress(io: CliIO): Progress {
  if (io.interactive) return terminalProgress(process.stderr);
  // terminalProgress only calls write() and reads isTTY on a non-TTY stream.
  const lines = {
    isTTY: false,
    write: (s: string) => {
      io.stderr(s);
      return true;
    },
  };
  return terminalProgress(lines as unknown as NodeJS.WriteStream, { everyMs: 10_000 });
}

const SHOWN = [
  'loss',
  'reward',
  'reward_std',
  'accuracy',
  'grad_norm',
  'learning_rate',
  'eval_loss',
  'kl',
  'entropy',
  'turns/mean',
];

/** One log line per logged step (non-interactive runs; a terminal shows the bar instead). */
export function metricsLine(record: MetricsRecord): string {
  const parts = SHOWN.filter((k) => record[k] !== undefined).map((k) => {
    const v = record[k]!;
    return `${k} ${typeof v === 'number' ? (Number.isInteger(v) ? v : v.toPrecision(4)) : v}`;
  });
  // Failed rollouts only when there are some (the trainer's own line says which and why).
  const failed = record['rollouts/failed'];
  if (typeof failed === 'number' && failed > 0) parts.push(`rollouts_failed ${failed}`);
  // Values can quote a rollout's error message, which can quote the model: terminal-safe.
  return `${terminalSafe(`step ${record.step}: ${parts.join('  ')}`, { oneLine: true })}\n`;
}

/**
 * An AbortSignal fired by the first SIGINT (and SIGTERM); a second SIGINT exits with 130. The
 * handlers are removed by `dispose`, which restores Node's default Ctrl-C behaviour.
 */
export function interruptSignal(io: CliIO): { signal: AbortSignal; dispose: () => void } {
  const controller = new AbortController();
  const onSignal = (name: string) => {
    if (controller.signal.aborted) {
      io.stderr(`\n${name} again: exiting without a final checkpoint\n`);
      process.exit(130);
    }
    io.stderr(`\n${name}: finishing the current step, then writing a checkpoint (again to quit)\n`);
    controller.abort(new Error(`interrupted by ${name}`));
  };
  const onInt = () => onSignal('SIGINT');
  const onTerm = () => onSignal('SIGTERM');
  process.on('SIGINT', onInt);
  process.on('SIGTERM', onTerm);
  return {
    signal: controller.signal,
    dispose: () => {
      process.off('SIGINT', onInt);
      process.off('SIGTERM', onTerm);
    },
  };
}
