import { readFileSync } from 'node:fs';
import { resolve } from 'node:path';
import {
  FlowSolver,
  OpenAIEngine,
  SolveFailedError,
  type SolveResult,
  type SolverEvent,
  type StructuredOutputMode,
} from '@flowgrpo/agent';
import { ConfigError, type LLMEngine, systemError } from '@flowgrpo/core';
import {
  BUILTIN_TOOL_ALIASES,
  builtinToolAlias,
  createCalculatorTool,
  createGeneralistTool,
  createPythonTool,
  createWebRagTool,
  createWebSearchTool,
  createWikipediaTool,
  GoogleCustomSearchProvider,
  MediaWikiClient,
  SerperSearchProvider,
  type Tool,
  ToolRegistry,
} from '@flowgrpo/tools';
import { type CliIO, type Command, numberOption, stringOption, UsageError } from '../command.js';
import { errorLines } from '../error-report.js';
import { terminalSafe, terminalSafeJson } from '../terminal-text.js';
import { requireFile } from '../user-paths.js';

// `flowgrpo solve`: one question through the Flow solver against an OpenAI-compatible server,
// printing each step as it happens (or the whole SolveResult as JSON).

// `--tools` takes the short names or the tools' own (canonical) names; traces and results show
// the canonical ones, which are what the planner sees (the table is BUILTIN_TOOL_ALIASES).
const toolTable = Object.entries(BUILTIN_TOOL_ALIASES)
  .map(([alias, name]) => `                          ${alias.padEnd(12)}${name}`)
  .join('\n');

const usage = `Usage:
  flowgrpo solve "<question>" --base-url URL --model NAME [options]

Runs the Flow solver (analyze → plan → execute → verify … → answer) with every role on the
model served at URL (vLLM, SGLang, Ollama /v1, llama.cpp, OpenAI).

Options:
  --base-url URL        OpenAI-compatible endpoint, e.g. http://localhost:8000/v1
  --model NAME          model name as served
  --api-key-file PATH   read the API key from a file (default $FLOWGRPO_API_KEY;
                        $OPENAI_API_KEY for api.openai.com)
  --api-key KEY         API key on the command line: visible to every local user in
                        ps and /proc/<pid>/cmdline; prefer the variable or the file
  --tools LIST          comma-separated short or full tool names (default python,calculator);
                        traces show the full names:
${toolTable}
                        (web_search needs $SERPER_API_KEY or $GOOGLE_API_KEY + $GOOGLE_CX)
  --max-steps N         plan/execute/verify rounds at most (default 5)
  --structured MODE     how schemas reach the server: json_schema (default), json_object, prompt
  --temperature T       sampling temperature of every role (default 0)
  --timeout SECONDS     per LLM request (default 120)
  --retries N           retries of a failed LLM request (default 2)
  --tool-timeout SECONDS  per tool call (default 60)
  --json                print the full result as JSON instead of the trace`;

/** Built-in tools by short or full name (`--tools`, and a run config's `agent.tools`). */
export function buildTools(list: string, engine: LLMEngine, env: NodeJS.ProcessEnv): Tool[] {
  const given = list
    .split(',')
    .map((s) => s.trim())
    .filter(Boolean);
  if (given.length === 0) throw new UsageError('--tools needs at least one tool');
  const aliases = new Set<string>();
  for (const name of given) {
    const alias = builtinToolAlias(name);
    if (alias === undefined) {
      throw new UsageError(
        `unknown tool '${name}' (known: ${Object.entries(BUILTIN_TOOL_ALIASES)
          .map(([a, n]) => (a === n ? a : `${a} = ${n}`))
          .join(', ')})`,
      );
    }
    aliases.add(alias); // "python,Python_Code_Generator_Tool" is one tool
  }
  return [...aliases].map((name): Tool => {
    switch (name) {
      case 'python':
        return createPythonTool() as Tool;
      case 'calculator':
        return createCalculatorTool() as Tool;
      case 'wikipedia':
        return createWikipediaTool({ backend: new MediaWikiClient(), engine }) as Tool;
      case 'generalist':
        return createGeneralistTool({ engine }) as Tool;
      case 'web_rag':
        return createWebRagTool({ engine }) as Tool;
      case 'web_search': {
        if (env.SERPER_API_KEY) {
          return createWebSearchTool({
            provider: new SerperSearchProvider({ apiKey: env.SERPER_API_KEY }),
            engine,
          }) as Tool;
        }
        if (env.GOOGLE_API_KEY && env.GOOGLE_CX) {
          return createWebSearchTool({
            provider: new GoogleCustomSearchProvider({
              apiKey: env.GOOGLE_API_KEY,
              cx: env.GOOGLE_CX,
            }),
            engine,
          }) as Tool;
        }
        throw new UsageError('web_search needs $SERPER_API_KEY, or $GOOGLE_API_KEY and $GOOGLE_CX');
      }
      default:
        throw new UsageError(`unknown tool '${name}'`);
    }
  });
}

function excerpt(value: unknown, max = 400): string {
  const text = typeof value === 'string' ? value : JSON.stringify(value);
  const oneLine = text.replace(/\s+/g, ' ').trim();
  return oneLine.length <= max ? oneLine : `${oneLine.slice(0, max - 1)}…`;
}

/** Human-readable trace lines for one event. */
export function formatEvent(e: SolverEvent): string | undefined {
  switch (e.type) {
    case 'start':
      return `Question: ${e.question}\nTools: ${e.tools.join(', ')}\n`;
    case 'analysis':
      return [
        '\nAnalysis',
        `  summary: ${excerpt(e.analysis.concise_summary)}`,
        `  skills: ${excerpt(e.analysis.required_skills)}`,
        `  relevant tools: ${excerpt(e.analysis.relevant_tools)}`,
        `  considerations: ${excerpt(e.analysis.additional_considerations)}`,
        '',
      ].join('\n');
    case 'plan':
      return [
        `\nStep ${e.step}`,
        `  sub-goal: ${excerpt(e.nextStep.sub_goal)}`,
        `  tool: ${e.nextStep.tool_name}`,
        '',
      ].join('\n');
    case 'command':
      return `  arguments: ${excerpt(e.command.arguments)}\n`;
    case 'tool_result':
      return `  result${e.result.ok ? '' : ' (failed)'}: ${excerpt(e.result.output)}\n`;
    case 'verification':
      return `  verifier: ${e.verification.stop_signal ? 'STOP' : 'CONTINUE'} — ${excerpt(e.verification.analysis, 300)}\n`;
    case 'error':
      return `  error (${e.error.role}${e.error.step ? `, step ${e.error.step}` : ''}): ${excerpt(e.error.message, 300)}\n`;
    default:
      return undefined;
  }
}

/** The generator's reply, then the parsed answer alone on the last line (easy to script). */
function summary(r: SolveResult): string {
  const secs = (r.timings.total / 1000).toFixed(1);
  return (
    `\nAnswer (stop: ${r.stopReason}, ${r.steps.length} step(s), ${secs} s, ${r.usage.total.totalTokens} tokens)\n` +
    `${r.answerText}\n\nFinal answer: ${r.finalAnswer}\n`
  );
}

function positiveInt(value: number | undefined, name: string, fallback: number): number {
  if (value === undefined) return fallback;
  if (!Number.isInteger(value) || value < 0) {
    throw new UsageError(`--${name} must be a whole number, got ${value}`);
  }
  return value;
}

/**
 * The API key: --api-key-file, else --api-key (with a warning: a command line is readable by
 * every local user), else $FLOWGRPO_API_KEY, else $OPENAI_API_KEY for api.openai.com only.
 */
function resolveApiKey(
  args: Parameters<Command['run']>[0],
  io: CliIO,
  baseURL: string,
): string | undefined {
  const file = stringOption(args, 'api-key-file');
  if (file !== undefined) {
    const path = resolve(io.cwd, file);
    requireFile(path, '--api-key-file');
    let key: string;
    try {
      key = readFileSync(path, 'utf8').trim();
    } catch (error) {
      throw systemError(error, { what: '--api-key-file' }) ?? error;
    }
    if (!key)
      throw new ConfigError(
        `--api-key-file: ${path} is empty`,
        { key: 'api-key-file' },
        { hint: 'write the API key into that file (one line)' },
      );
    return key;
  }
  const inline = stringOption(args, 'api-key');
  if (inline !== undefined) {
    io.stderr(
      'flowgrpo solve: warning: --api-key is visible to other processes (ps, /proc/<pid>/cmdline); ' +
        'use $FLOWGRPO_API_KEY or --api-key-file instead\n',
    );
    return inline;
  }
  return (
    io.env.FLOWGRPO_API_KEY ??
    // OpenAI's own key goes to OpenAI only.
    (new URL(baseURL).hostname === 'api.openai.com' ? io.env.OPENAI_API_KEY : undefined)
  );
}

export const solveCommand: Command = {
  name: 'solve',
  summary: 'answer one question with the Flow solver over an OpenAI-compatible server',
  usage,
  options: {
    'base-url': { type: 'string' },
    model: { type: 'string' },
    'api-key': { type: 'string' },
    'api-key-file': { type: 'string' },
    tools: { type: 'string' },
    'max-steps': { type: 'string' },
    structured: { type: 'string' },
    temperature: { type: 'string' },
    timeout: { type: 'string' },
    retries: { type: 'string' },
    'tool-timeout': { type: 'string' },
    json: { type: 'boolean' },
  },
  async run(args, io: CliIO) {
    const question = args.positionals.join(' ').trim();
    if (!question) throw new UsageError('solve needs a question');
    const baseURL = stringOption(args, 'base-url');
    if (!baseURL) throw new UsageError('--base-url is required');
    let protocol: string | undefined;
    try {
      protocol = new URL(baseURL).protocol;
    } catch {}
    // "localhost:8000/v1" parses as a URL of scheme "localhost:": not what was meant either.
    if (protocol !== 'http:' && protocol !== 'https:')
      throw new UsageError(`--base-url is not an http(s) URL: '${baseURL}'`, {
        hint: 'e.g. --base-url http://localhost:8000/v1',
      });
    const model = stringOption(args, 'model');
    if (!model) throw new UsageError('--model is required');
    const structured = (stringOption(args, 'structured') ?? 'json_schema') as StructuredOutputMode;
    if (!['json_schema', 'json_object', 'prompt'].includes(structured)) {
      throw new UsageError(
        `--structured must be json_schema, json_object or prompt, got '${structured}'`,
      );
    }
    const maxSteps = positiveInt(numberOption(args, 'max-steps'), 'max-steps', 5);
    if (maxSteps < 1) throw new UsageError('--max-steps must be at least 1');
    const timeoutS = numberOption(args, 'timeout') ?? 120;
    const toolTimeoutS = numberOption(args, 'tool-timeout') ?? 60;
    if (timeoutS <= 0 || toolTimeoutS <= 0) throw new UsageError('timeouts must be positive');
    const temperature = numberOption(args, 'temperature') ?? 0;
    const json = args.values.json === true;

    const engine = new OpenAIEngine({
      model,
      baseURL,
      apiKey: resolveApiKey(args, io, baseURL),
      timeoutMs: timeoutS * 1000,
      retry: { maxRetries: positiveInt(numberOption(args, 'retries'), 'retries', 2) },
      structuredOutput: structured,
      defaults: { temperature },
    });
    const tools = buildTools(stringOption(args, 'tools') ?? 'python,calculator', engine, io.env);
    const solver = new FlowSolver({
      engine,
      tools: new ToolRegistry(tools),
      maxSteps,
      toolTimeoutMs: toolTimeoutS * 1000,
      onEvent: json
        ? undefined
        : (e) => {
            const line = formatEvent(e);
            if (line) io.stdout(terminalSafe(line));
          },
    });

    let result: SolveResult;
    try {
      result = await solver.solve(question);
    } catch (error) {
      if (!SolveFailedError.isInstance(error)) throw error;
      // No model call got through: one line that points at the server, not at the question.
      const first = error.errors.find((e) => e.role !== 'tools');
      io.stderr(
        errorLines(
          first?.code ?? error.code,
          `every model call failed: ${first?.message ?? error.message}`,
          `check that ${baseURL} is running and serves '${model}' (--base-url, --model)`,
        ),
      );
      return 1;
    }
    if (json) io.stdout(`${terminalSafeJson(result, 2)}\n`);
    const generatorError = result.errors.find((e) => e.role === 'generator');
    if (generatorError) {
      io.stderr(
        errorLines(
          generatorError.code,
          `no answer: ${generatorError.message}`,
          `the final-answer call to ${baseURL} failed: check the server's log, or retry (--retries)`,
        ),
      );
      return 1;
    }
    if (!json) io.stdout(terminalSafe(summary(result)));
    // An answer reached after a role failed (the analyzer or planner call, say) stopped with
    // 'error': it is printed, but the run is no success — exit 1 with the first failure's code.
    if (result.stopReason === 'error') {
      const first = result.errors.find((e) => e.role !== 'tools') ?? result.errors[0];
      io.stderr(
        errorLines(
          first?.code ?? 'SOLVE_ERROR',
          `the run stopped early${first ? ` (${first.role}): ${first.message}` : ''}; the answer above was made without it`,
          `check that ${baseURL} is running and serves '${model}' (--base-url, --model), then ask again`,
        ),
      );
      return 1;
    }
    return 0;
  },
};
