// Snippets of docs/guides/cli.md (compiled by the test command).
import { runCli } from '@flowgrpo/cli';

export async function fromCode(): Promise<number> {
  // #region run-cli
  // The `flowgrpo` command as a function: same arguments, output through your callbacks.
  const code = await runCli(['data', 'prepare', '--out', 'out/data'], {
    stdout: (text) => process.stdout.write(text),
    stderr: (text) => process.stderr.write(text),
    cwd: process.cwd(),
    env: process.env,
    interactive: false,
  });
  // #endregion run-cli
  return code;
}
