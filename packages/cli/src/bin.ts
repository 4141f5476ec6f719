#!/usr/bin/env node
import { runCli } from './main.js';

const code = await runCli(process.argv.slice(2), {
  stdout: (t) => process.stdout.write(t),
  stderr: (t) => process.stderr.write(t),
  cwd: process.cwd(),
  env: process.env,
  interactive: Boolean(process.stderr.isTTY),
});
process.exitCode = code;
