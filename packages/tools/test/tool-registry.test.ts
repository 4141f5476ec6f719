import { describe, expect, it } from 'vitest';
import { z } from 'zod';
import { createCalculatorTool } from '../src/calculator-tool.js';
import {
  ToolAbortedError,
  ToolInputError,
  ToolNotFoundError,
  ToolResultError,
  ToolTimeoutError,
} from '../src/errors.js';
import { createPythonTool } from '../src/python-tool.js';
import type { Tool, ToolResult } from '../src/tool.js';
import { ToolRegistry } from '../src/tool-registry.js';
import { Workspace } from '../src/workspace.js';

interface Observed {
  started?: boolean;
  aborted?: boolean;
}

// A tool that never finishes by itself: it ends only when its abort signal fires (or never, with
// `ignoreSignal`), and records what happened to it. So a test that gets an answer knows the
// registry's timeout or the caller's abort produced it, without measuring time.
function hangingTool(
  observed: Observed,
  options: { ignoreSignal?: boolean; onStart?: () => void } = {},
): Tool<Record<string, never>> {
  return {
    name: 'hanging',
    description: 'Waits until aborted.',
    inputSchema: z.object({}).strict(),
    metadata: {
      version: '0',
      inputTypes: {},
      outputType: 'str',
      limitations: [],
      bestPractices: [],
      examples: [],
      requiresLlm: false,
    },
    execute: (_input, ctx) =>
      new Promise<ToolResult>((_resolve, reject) => {
        observed.started = true;
        if (!options.ignoreSignal) {
          ctx.signal?.addEventListener('abort', () => {
            observed.aborted = true;
            reject(ctx.signal?.reason);
          });
        }
        options.onStart?.();
      }),
  };
}

describe('ToolRegistry', () => {
  it('gets, lists and disables tools; unknown names raise ToolNotFoundError', () => {
    const registry = new ToolRegistry([createCalculatorTool(), createPythonTool()]);
    expect(registry.names()).toEqual(['calculator', 'Python_Code_Generator_Tool']);
    registry.setEnabled('Python_Code_Generator_Tool', false);
    expect(registry.list().map((t) => t.name)).toEqual(['calculator']);
    let caught: unknown;
    try {
      registry.get('Python_Code_Generator_Tool');
    } catch (error) {
      caught = error;
    }
    expect(ToolNotFoundError.isInstance(caught)).toBe(true);
    expect((caught as ToolNotFoundError).available).toEqual(['calculator']);
    expect(() => registry.register(createCalculatorTool())).toThrow(/already registered/);
  });

  it('validates input against the schema with zod issues', () => {
    const registry = new ToolRegistry([createPythonTool({ maxTimeoutSeconds: 5 })]);
    let caught: unknown;
    try {
      registry.validate('Python_Code_Generator_Tool', { code: 42, timeout: 60 });
    } catch (error) {
      caught = error;
    }
    expect(ToolInputError.isInstance(caught)).toBe(true);
    const issues = (caught as ToolInputError).issues;
    expect(issues.map((i) => i.path).sort()).toEqual(['code', 'timeout']);
    expect(registry.validate('Python_Code_Generator_Tool', { code: 'print(1)' })).toEqual({
      code: 'print(1)',
    });
  });

  it('describes enabled tools for the planner with limitations and best practices', () => {
    const registry = new ToolRegistry([createCalculatorTool()]);
    const text = registry.describeForPlanner();
    expect(text).toContain('Tool: calculator');
    expect(text).toMatch(/Inputs:\n {2}- expression: str/);
    expect(text).toMatch(/Limitations:\n {2}- Numbers only/);
    expect(text).toContain('Best practices:');
    expect(text).toContain('{"expression":"48/2"}');
    const meta = registry.metadataForPlanner().calculator!;
    expect(meta.tool_name).toBe('calculator');
    expect(meta.user_metadata.limitations.length).toBeGreaterThan(0);
    // Every example shown to the planner must pass the tool's own schema.
    for (const tool of registry.list()) {
      for (const ex of tool.metadata.examples) {
        expect(tool.inputSchema.safeParse(ex.input).success).toBe(true);
      }
    }
  });

  it('times out a slow tool with ToolTimeoutError and aborts its signal', async () => {
    const observed: Observed = {};
    const registry = new ToolRegistry([hangingTool(observed)]);
    await expect(registry.invoke('hanging', {}, { timeoutMs: 100 })).rejects.toSatisfy(
      (e) =>
        ToolTimeoutError.isInstance(e) &&
        (e as ToolTimeoutError).timeoutMs === 100 &&
        (e as ToolTimeoutError).code === 'TOOL_TIMEOUT',
    );
    expect(observed).toEqual({ started: true, aborted: true });
  });

  it('abandons a tool that ignores its signal once the limit passes', async () => {
    // The tool never settles, so the result can only come from the registry giving up on it.
    const observed: Observed = {};
    const registry = new ToolRegistry([hangingTool(observed, { ignoreSignal: true })]);
    const result = await registry.run('hanging', {}, { timeoutMs: 50 });
    expect(result).toMatchObject({ ok: false, errorCode: 'TOOL_TIMEOUT' });
    expect(result.error).toMatch(/50 ms/);
    expect(observed).toEqual({ started: true });
  });

  it('stops on the caller abort with ToolAbortedError', async () => {
    // The caller aborts while the tool runs; the tool sees its own signal fire.
    const observed: Observed = {};
    const controller = new AbortController();
    const registry = new ToolRegistry([
      hangingTool(observed, { onStart: () => controller.abort(new Error('user stop')) }),
    ]);
    await expect(
      registry.invoke('hanging', {}, { signal: controller.signal, timeoutMs: 600_000 }),
    ).rejects.toSatisfy((e) => ToolAbortedError.isInstance(e));
    expect(observed).toEqual({ started: true, aborted: true });
  });

  it('run() turns every failure into a result the model can read', async () => {
    const registry = new ToolRegistry([createCalculatorTool()]);
    const missing = await registry.run('search', { query: 'x' });
    expect(missing).toMatchObject({ ok: false, errorCode: 'TOOL_NOT_FOUND' });
    expect(missing.output).toBe("Error: Tool 'search' not found. Available tools: calculator");
    const bad = await registry.run('calculator', { expr: '1+1' });
    expect(bad).toMatchObject({ ok: false, errorCode: 'TOOL_INPUT_INVALID' });
    expect(bad.error).toMatch(/expression/);
    const good = await registry.run('calculator', { expression: '6*7' });
    expect(good).toMatchObject({ ok: true, output: '42' });
  });

  it('runs the python tool through the registry with a registry timeout', async () => {
    const registry = new ToolRegistry([createPythonTool()]);
    // The registry returns at the limit; the tool's own clean-up finishes later, so the test
    // owns the workspace and removes it itself.
    const workspace = await Workspace.create();
    try {
      const result = await registry.run(
        'Python_Code_Generator_Tool',
        { code: 'while True: pass' },
        { timeoutMs: 500, workspace },
      );
      expect(result.ok).toBe(false);
      expect(result.errorCode).toBe('TOOL_TIMEOUT');
    } finally {
      await workspace.cleanup();
    }
  });
});

// Tools with bugs: whatever a tool returns or throws, the registry answers with a ToolResult the
// agents can read, show the model and record — never a TypeError later, in the agent or the
// recorder, and never a thrown error out of `run`.
describe('faulty tools', () => {
  const circular: Record<string, unknown> = {};
  circular.self = circular;
  const rawTool = (name: string, execute: () => unknown): Tool => ({
    name,
    description: 'A faulty tool.',
    inputSchema: z.object({}),
    metadata: {
      version: '0',
      inputTypes: {},
      outputType: 'str',
      limitations: [],
      bestPractices: [],
      examples: [],
      requiresLlm: false,
    },
    execute: execute as Tool['execute'],
  });
  const ok = (output: unknown) => ({ ok: true, output, durationMs: 0 });
  const cases: Array<[string, () => unknown, Partial<ToolResult>]> = [
    [
      'returns undefined',
      async () => undefined,
      {
        ok: false,
        errorCode: 'TOOL_INVALID_RESULT',
        error: "Tool 't' returned undefined, not a tool result ({ok, output})",
      },
    ],
    [
      'returns a bare string',
      async () => 'hello',
      {
        ok: false,
        errorCode: 'TOOL_INVALID_RESULT',
        error: "Tool 't' returned a string, not a tool result ({ok, output})",
      },
    ],
    [
      'returns an object without ok',
      async () => ({ output: 'x' }),
      { ok: false, errorCode: 'TOOL_INVALID_RESULT' },
    ],
    [
      'returns a result without output',
      async () => ({ ok: true, durationMs: 0 }),
      { ok: true, output: '' },
    ],
    [
      'returns a BigInt output',
      async () => ok(10n),
      {
        ok: false,
        errorCode: 'TOOL_INVALID_RESULT',
        error: expect.stringMatching(/not JSON.*BigInt/),
      },
    ],
    [
      'returns a circular output',
      async () => ok(circular),
      {
        ok: false,
        errorCode: 'TOOL_INVALID_RESULT',
        error: expect.stringMatching(/not JSON.*circular/),
      },
    ],
    ['returns its result synchronously', () => ok('sync'), { ok: true, output: 'sync' }],
    [
      'throws synchronously',
      () => {
        throw new Error('sync boom');
      },
      { ok: false, errorCode: 'TOOL_EXECUTION_FAILED', error: 'sync boom' },
    ],
    [
      'throws a string',
      async () => {
        throw 'boom';
      },
      { ok: false, errorCode: 'TOOL_EXECUTION_FAILED', error: 'boom' },
    ],
    [
      'throws undefined',
      async () => {
        throw undefined;
      },
      { ok: false, errorCode: 'TOOL_EXECUTION_FAILED', error: 'undefined' },
    ],
    [
      'throws an object without a string form',
      async () => {
        throw Object.create(null);
      },
      { ok: false, errorCode: 'TOOL_EXECUTION_FAILED', error: 'a thrown Object without a message' },
    ],
  ];
  for (const [name, execute, expected] of cases) {
    it(`a tool that ${name}: a readable result`, async () => {
      const registry = new ToolRegistry([rawTool('t', execute)]);
      const result = await registry.run('t', {});
      expect(result).toMatchObject(expected);
      // Whatever it was, the result can be recorded.
      expect(() => JSON.stringify(result)).not.toThrow();
      if (!result.ok) expect(result.error).toEqual(expect.any(String));
    });
  }

  it('ToolResultError is the typed error behind TOOL_INVALID_RESULT', () => {
    expect(new ToolResultError('t', 'returned 1').code).toBe('TOOL_INVALID_RESULT');
  });
});
