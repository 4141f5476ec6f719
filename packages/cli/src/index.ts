export type { CliIO, Command } from './command.js';
export { commands, runCli } from './main.js';
