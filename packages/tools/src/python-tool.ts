import type { LLMEngine } from '@flowgrpo/core';
import { z } from 'zod';
import { ToolError } from './errors.js';
import {
  type PythonIsolation,
  type PythonLimits,
  type PythonRunResult,
  runPython,
} from './python-sandbox.js';
import {
  elapsedMs,
  failureResult,
  type JsonValue,
  type Tool,
  type ToolContext,
  type ToolResult,
} from './tool.js';
import { Workspace } from './workspace.js';
import type { SyncLimitReason } from './workspace-sync.js';

export interface PythonToolOptions {
  name?: string;
  /** Timeout when the input gives none, in seconds. Default 10 (as the seeds' python tool). */
  defaultTimeoutSeconds?: number;
  /** Largest timeout the input may ask for, in seconds. Default 30. */
  maxTimeoutSeconds?: number;
  maxOutputBytes?: number;
  limits?: PythonLimits;
  python?: string;
  /** Network access of the code; default `auto` (none: the sandbox's empty network namespace). */
  network?: 'auto' | 'deny' | 'allow';
  /**
   * Default `sandbox` (bubblewrap; a call fails with SANDBOX_UNAVAILABLE where it cannot be
   * had). `none` runs the code as a plain subprocess: an explicit opt-in, reported in the output.
   */
  isolation?: PythonIsolation;
  /** The bubblewrap binary; default `bwrap` on PATH or in /usr/bin. */
  bwrap?: string;
  /**
   * How long the interpreter, and the sandbox around it, each get to answer the check of their
   * first start, in seconds (default 15). Past it the call fails with PYTHON_START_TIMEOUT and
   * the next call checks again; raise it on a machine that is often busy.
   */
  startTimeoutSeconds?: number;
  /**
   * With an engine the tool also accepts `{query}` instead of `{code}`: the LLM writes the code
   * first, as the seeds' Python_Code_Generator_Tool does, and the output includes that code.
   */
  engine?: LLMEngine;
}

export interface PythonToolInput {
  /** Python source (a ```python fence around it is removed). */
  code?: string | undefined;
  /** A task in words; only with an engine, which writes the code. */
  query?: string | undefined;
  timeout?: number | undefined;
}

/** Asks the engine for a program solving `query` and takes the code out of its reply. */
export async function generatePythonCode(
  engine: LLMEngine,
  query: string,
  signal?: AbortSignal,
): Promise<string> {
  const reply = await engine.generateText(
    [
      {
        role: 'system',
        content:
          'Write a short, self-contained Python 3 program (standard library only) that solves the ' +
          'task and prints the final result. Reply with the code in one ```python block.',
      },
      { role: 'user', content: query },
    ],
    { temperature: 0, ...(signal && { signal }) },
  );
  return extractPythonCode(reply.text);
}

/** Takes the code out of a ```python fence when the model wrapped it in one. */
export function extractPythonCode(text: string): string {
  const fence = /```(?:python|py)?[^\S\n]*\n([\s\S]*?)```/i.exec(text);
  return (fence ? fence[1]! : text).replace(/^\n+|\s+$/g, '');
}

/** Time kept back from the caller's limit for returning the result (at most a tenth of it). */
const RETURN_RESERVE_MS = 500;

const SYNC_REASONS: Record<SyncLimitReason, string> = {
  files: 'more files than the workspace file limit',
  bytes: 'more bytes than the workspace byte limit',
  time: 'the call ran out of time',
  paths: 'paths too long for the host',
  kept: 'the workspace already had an entry there that the run was never given (kept)',
};

function summarize(run: PythonRunResult, timeoutSeconds: number): string | undefined {
  if (run.timedOut) {
    return `Execution timed out after ${Number(timeoutSeconds.toFixed(2))} s and was killed`;
  }
  if (run.outputLimitExceeded) return 'Execution was killed: it wrote too much output';
  if (run.oomKilled) return 'Execution was killed: it exceeded its memory limit';
  if (run.signal === 'SIGXCPU') return 'Execution exceeded its CPU-time limit';
  if (run.signal) return `Execution was killed by ${run.signal}`;
  if (run.exitCode !== 0) {
    const lastLine = run.stderr.trimEnd().split('\n').at(-1) ?? '';
    return `Python exited with code ${run.exitCode}${lastLine ? `: ${lastLine}` : ''}`;
  }
  return undefined;
}

/**
 * Runs model-written Python in a sandbox (see `runPython`): a tmpfs workspace that starts with the
 * files of the call's workspace, when there is one, and is copied back to it after the run.
 * Output is `{ stdout, stderr, exit_code, timed_out, sandbox: { isolation, limits } }`, `limits`
 * saying how each limit was enforced in this run.
 */
export function createPythonTool(options: PythonToolOptions = {}): Tool<PythonToolInput> {
  const defaultTimeout = options.defaultTimeoutSeconds ?? 10;
  const maxTimeout = options.maxTimeoutSeconds ?? 30;
  const engine = options.engine;
  const inputSchema = z
    .object({
      code: z.string().min(1, 'code must not be empty').optional(),
      query: z.string().min(1, 'query must not be empty').optional(),
      timeout: z.number().positive().max(maxTimeout).optional(),
    })
    .refine((v) => v.code !== undefined || (engine !== undefined && v.query !== undefined), {
      message: engine ? 'give either code or query' : 'code is required',
      path: ['code'],
    });
  return {
    name: options.name ?? 'Python_Code_Generator_Tool',
    description:
      'Executes a Python 3 code snippet and returns what it printed. Use it for arithmetic, ' +
      'math and logic problems; print the final result.',
    inputSchema,
    metadata: {
      version: '1.0.0',
      inputTypes: {
        code: 'str - a complete Python 3 program; print() every value you need to see',
        ...(engine && {
          query: 'str, instead of code - the task in words; code is written for it first',
        }),
        timeout: `float, optional - seconds before the run is killed (default ${defaultTimeout}, at most ${maxTimeout})`,
      },
      outputType: `dict - {stdout: str, stderr: str, exit_code: int | None, timed_out: bool${engine ? ', code: str (with query)' : ''}}`,
      limitations: [
        'Only the standard library is guaranteed; third-party packages may be missing.',
        'Runs in a sandbox: no network, no access to the host, only its workspace directory is writable (files there persist between calls of one task when the agent gives it a workspace).',
        `Execution is killed after ${defaultTimeout} seconds by default; memory and output are capped.`,
      ],
      bestPractices: [
        'Write self-contained code with all numeric inputs spelled out, and print the final answer.',
        'Good for math, counting, dates and logic; verify results that matter.',
      ],
      examples: [
        { input: { code: 'print(sum(range(1, 101)))' }, description: 'Sum of 1..100' },
        {
          input: { code: 'import math\nprint(math.comb(10, 3))', timeout: 5 },
          description: 'Binomial coefficient with a 5 s limit',
        },
      ],
      requiresLlm: engine !== undefined,
    },
    async execute(input: PythonToolInput, context: ToolContext): Promise<ToolResult> {
      const start = performance.now();
      // The caller's limit (the registry's) covers writing the code and the whole run, the
      // workspace's copy back included; a small reserve lets this call's own result — which says
      // what was copied — arrive before that limit cuts the call off.
      const callerDeadline =
        context.timeoutMs === undefined
          ? Number.POSITIVE_INFINITY
          : start + context.timeoutMs - Math.min(RETURN_RESERVE_MS, context.timeoutMs / 10);
      let workspace: Workspace | undefined;
      try {
        let code: string;
        let generated = false;
        if (input.code !== undefined) {
          code = extractPythonCode(input.code);
        } else if (engine && input.query !== undefined) {
          code = await generatePythonCode(engine, input.query, context.signal);
          generated = true;
        } else {
          throw new ToolError('The python tool needs code');
        }
        const timeoutSeconds = Math.max(
          0.001,
          Math.min(input.timeout ?? defaultTimeout, (callerDeadline - performance.now()) / 1000),
        );
        const isolation = options.isolation ?? 'sandbox';
        // The sandbox needs no host directory of its own (its workspace is a tmpfs); without
        // isolation the code runs in a temporary directory removed afterwards.
        workspace =
          context.workspace ?? (isolation === 'none' ? await Workspace.create() : undefined);
        const run = await runPython(code, {
          ...(workspace && { cwd: workspace.dir }),
          isolation,
          ...(options.bwrap && { bwrap: options.bwrap }),
          ...(options.startTimeoutSeconds !== undefined && {
            startTimeoutMs: Math.round(options.startTimeoutSeconds * 1000),
          }),
          timeoutMs: Math.round(timeoutSeconds * 1000),
          ...(options.maxOutputBytes !== undefined && { maxOutputBytes: options.maxOutputBytes }),
          ...(options.limits && { limits: options.limits }),
          ...(options.python && { python: options.python }),
          ...(options.network && { network: options.network }),
          ...(context.signal && { signal: context.signal }),
        });
        const output: { [key: string]: JsonValue } = {
          stdout: run.stdout,
          stderr: run.stderr,
          exit_code: run.exitCode,
          timed_out: run.timedOut,
          sandbox: { isolation: run.isolation, limits: { ...run.limits } },
        };
        if (generated) output.code = code;
        const sync = run.workspaceSync;
        if (sync && (sync.skippedFiles > 0 || sync.reasons.length > 0)) {
          output.workspace_not_copied = {
            files: sync.skippedFiles,
            why: sync.reasons.map((r) => SYNC_REASONS[r]),
            copied_files: sync.copiedFiles,
            copied_bytes: sync.copiedBytes,
            ...(sync.kept && { kept: sync.kept }),
          };
        }
        const problem = summarize(run, timeoutSeconds);
        const truncated = run.stdoutTruncated || run.stderrTruncated;
        const result: ToolResult = problem
          ? {
              ok: false,
              output,
              error: problem,
              errorCode: run.timedOut ? 'TOOL_TIMEOUT' : 'PYTHON_FAILED',
              durationMs: elapsedMs(start),
            }
          : { ok: true, output, durationMs: elapsedMs(start) };
        if (truncated) result.truncated = true;
        return result;
      } catch (error) {
        return failureResult(error, start);
      } finally {
        if (workspace && !context.workspace) await workspace.cleanup();
      }
    },
  };
}
