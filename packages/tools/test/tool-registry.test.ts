import { describe, expect, it } from 'vitest';
import { z } from 'zod';
import { createCalculatorTool } from '../src/calculator-tool.js';
import {
  ToolAbortedError,
  ToolInputError,
  ToolNotFoundError,
  ToolTimeoutError,
} from '../src/errors.js';
import { createPythonTool } from '../src/python-tool.js';
import { successResult, type Tool } from '../src/tool.js';
import { ToolRegistry } from '../src/tool-registry.js';
import { Workspace } from '../src/workspace.js';

// A tool that waits `ms` milliseconds and reports whether its abort signal fired.
function sleeper(observed: { aborted?: boolean }, ignoreSignal = false): Tool<{ ms: number }> {
  return {
    name: 'sleeper',
    description: 'Waits.',
    inputSchema: z.object({ ms: z.number().int().nonnegative() }),
    metadata: {
      version: '0',
      inputTypes: { ms: 'int' },
      outputType: 'str',
      limitations: [],
      bestPractices: [],
      examples: [],
      requiresLlm: false,
    },
    execute: (input, ctx) =>
      new Promise((resolve, reject) => {
        const start = performance.now();
        const timer = setTimeout(() => resolve(successResult('done', start)), input.ms);
        if (!ignoreSignal) {
          ctx.signal?.addEventListener('abort', () => {
            observed.aborted = true;
            clearTimeout(timer);
            reject(ctx.signal?.reason);
          });
        }
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
    const observed: { aborted?: boolean } = {};
    const registry = new ToolRegistry([sleeper(observed)]);
    const t0 = performance.now();
    await expect(registry.invoke('sleeper', { ms: 5000 }, { timeoutMs: 100 })).rejects.toSatisfy(
      (e) => ToolTimeoutError.isInstance(e) && (e as ToolTimeoutError).timeoutMs === 100,
    );
    expect(performance.now() - t0).toBeLessThan(1000);
    expect(observed.aborted).toBe(true);
  });

  it('abandons a tool that ignores its signal once the limit passes', async () => {
    const registry = new ToolRegistry([sleeper({}, true)]);
    const result = await registry.run('sleeper', { ms: 2000 }, { timeoutMs: 50 });
    expect(result).toMatchObject({ ok: false, errorCode: 'TOOL_TIMEOUT' });
    expect(result.durationMs).toBeLessThan(1000);
  });

  it('stops on the caller abort with ToolAbortedError', async () => {
    const registry = new ToolRegistry([sleeper({})]);
    const controller = new AbortController();
    setTimeout(() => controller.abort(), 30);
    await expect(
      registry.invoke('sleeper', { ms: 5000 }, { signal: controller.signal }),
    ).rejects.toSatisfy((e) => ToolAbortedError.isInstance(e));
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
