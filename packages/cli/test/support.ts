import type { CliIO } from '../src/command.js';

/** A CliIO that captures output, for running the CLI in-process. */
export function captureIO(
  cwd: string,
  env: NodeJS.ProcessEnv = {},
): CliIO & { out: string; err: string } {
  const io = {
    out: '',
    err: '',
    cwd,
    env,
    interactive: false,
    stdout: (t: string) => {
      io.out += t;
    },
    stderr: (t: string) => {
      io.err += t;
    },
  };
  return io;
}
