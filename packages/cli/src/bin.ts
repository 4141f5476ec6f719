#!/usr/bin/env node
import { debugRequested, reportError } from './error-report.js';
import { runCli } from './main.js';

// runCli reports every error a command throws. What escapes it — a rejection no command awaited,
// an exception thrown from a timer or a stream callback — is reported the same way (one
// `[CODE] message` line and the fix, the stack only with --debug), never as Node's raw trace.
const debug = debugRequested(process.argv.slice(2), process.env);
const fatal = (error: unknown) => {
  process.stderr.write(reportError(error, { debug }).text);
  process.exit(1);
};
process.on('unhandledRejection', fatal);
process.on('uncaughtException', fatal);

const code = await runCli(process.argv.slice(2), {
  stdout: (t) => process.stdout.write(t),
  stderr: (t) => process.stderr.write(t),
  cwd: process.cwd(),
  env: process.env,
  interactive: Boolean(process.stderr.isTTY),
});
process.exitCode = code;
