import { resolve } from 'node:path';
import { startViewer } from '@flowgrpo/viewer';
import { type CliIO, type Command, numberOption, stringOption, UsageError } from '../command.js';
import { isLoopback } from './serve.js';

const usage = `Usage:
  flowgrpo view RUN_DIR [--port N] [--host H]

A local web app on a run directory (a trainer's output_dir: SFT, GRPO, the gateway trainers,
remote-rollout runs alike), live while the run trains — new steps and rollouts appear without a
reload — and on a finished run: the curves with the alarms marked (docs/guides/alarms.md), the
steps, and every rollout token by token (data-logprob, data-trainable, data-advantage on each
token; prompts and tool outputs masked), a group's G rollouts side by side, filters by step,
reward, role and error, and the same question across steps. Read-only: it reads RUN_DIR and
writes nothing. Keys and URL: docs/guides/viewer.md.

Options:
  --port N     port to listen on (default 0: any free port; the URL is printed)
  --host H     interface to listen on (default 127.0.0.1, this machine only; another address
               shows the run's prompts and rollouts to anyone who can reach it, with a warning)

Prints "viewing RUN_DIR at http://HOST:PORT/" when ready; Ctrl-C (SIGINT) or SIGTERM stops it.`;

/** Resolves on the first SIGINT or SIGTERM. */
function untilSignal(): Promise<string> {
  return new Promise((done) => {
    const stop = (name: string) => {
      process.off('SIGINT', onInt);
      process.off('SIGTERM', onTerm);
      done(name);
    };
    const onInt = () => stop('SIGINT');
    const onTerm = () => stop('SIGTERM');
    process.on('SIGINT', onInt);
    process.on('SIGTERM', onTerm);
  });
}

export const viewCommand: Command = {
  name: 'view',
  summary: 'live web viewer of a run directory: curves, alarms, token-level rollouts',
  usage,
  options: {
    port: { type: 'string' },
    host: { type: 'string' },
  },
  async run(args, io: CliIO): Promise<number> {
    const [dir, extra] = args.positionals;
    if (dir === undefined) throw new UsageError('give the run directory: flowgrpo view RUN_DIR');
    if (extra !== undefined) throw new UsageError(`unexpected argument '${extra}'`);
    const port = numberOption(args, 'port') ?? 0;
    if (!Number.isInteger(port) || port < 0 || port > 65535)
      throw new UsageError(`--port must be an integer from 0 to 65535, got ${port}`);
    const host = stringOption(args, 'host') ?? '127.0.0.1';
    const runDir = resolve(io.cwd, dir);
    if (!isLoopback(host))
      io.stderr(
        `warning: --host ${host} shows this run (prompts, rollouts, config) to anyone who can reach the port; the viewer has no login\n`,
      );
    const viewer = await startViewer({ runDir, host, port });
    // Listening for the signals before saying so: a SIGTERM sent on that line stops it cleanly.
    const signalled = untilSignal();
    io.stdout(`viewing ${runDir} at ${viewer.url}\n`);
    const name = await signalled;
    io.stderr(`${name}: closing the viewer\n`);
    await viewer.close();
    return 0;
  },
};
