import cliProgress from 'cli-progress';

// Progress of long phases (SFT epochs, rollouts, training steps, evaluation): a live bar from
// cli-progress on a terminal, plain periodic lines otherwise (CI logs, pipes), nothing at all
// when silenced. Trainers take a `Progress` so apps can plug in their own.

export interface ProgressBar {
  /** Sets the count and the values shown beside the bar (e.g. reward, accuracy). */
  update(value: number, values?: Record<string, number | string>): void;
  /** Ends the bar (prints its last state). */
  stop(): void;
}

export interface Progress {
  start(label: string, total: number): ProgressBar;
  /** A line of its own (between bars). */
  log(line: string): void;
}

const format = (values: Record<string, number | string>) =>
  Object.entries(values)
    .map(([k, v]) => `${k} ${typeof v === 'number' ? (Number.isInteger(v) ? v : v.toFixed(3)) : v}`)
    .join('  ');

/** A progress reporter for `stream`: bars on a TTY, a line every `everyMs` otherwise. */
export function terminalProgress(
  stream: NodeJS.WriteStream = process.stderr,
  options: { everyMs?: number } = {},
): Progress {
  if (stream.isTTY) {
    return {
      start(label, total) {
        const bar = new cliProgress.SingleBar(
          {
            stream,
            format: `${label.padEnd(10)} {bar} {value}/{total}  {extra}`,
            barsize: 24,
            hideCursor: true,
            clearOnComplete: false,
            etaBuffer: 20,
          },
          cliProgress.Presets.shades_classic,
        );
        bar.start(total, 0, { extra: '' });
        return {
          update: (value, values = {}) => bar.update(value, { extra: format(values) }),
          stop: () => bar.stop(),
        };
      },
      log: (line) => stream.write(`${line}\n`),
    };
  }
  const every = options.everyMs ?? 10_000;
  return {
    start(label, total) {
      let last = 0;
      let lastValue = 0;
      let lastValues: Record<string, number | string> = {};
      const line = () =>
        stream.write(
          `${label} ${lastValue}/${total}${Object.keys(lastValues).length ? `  ${format(lastValues)}` : ''}\n`,
        );
      return {
        update(value, values = {}) {
          lastValue = value;
          lastValues = values;
          const now = performance.now();
          if (now - last >= every || value >= total) {
            last = now;
            line();
          }
        },
        stop() {
          if (lastValue < total) line();
        },
      };
    },
    log: (line) => stream.write(`${line}\n`),
  };
}

/** Reports nothing. */
export const silentProgress: Progress = {
  start: () => ({ update() {}, stop() {} }),
  log() {},
};
