import { FlowGrpoError } from '@flowgrpo/core';
import { describe, expect, it } from 'vitest';
import { z } from 'zod';
import { createCalculatorTool } from '../src/calculator-tool.js';
import { defineTool, describeInputFields } from '../src/define-tool.js';
import { ToolError, ToolInputError } from '../src/errors.js';
import { createPythonTool } from '../src/python-tool.js';
import { BUILTIN_TOOL_ALIASES, builtinToolAlias, canonicalToolName } from '../src/tool-names.js';
import { ToolRegistry } from '../src/tool-registry.js';

// defineTool: metadata derived from the zod schema, execute's return/throw turned into results,
// and the mistakes it refuses at definition time. Then the built-in alias table and the registry
// looking tools up by alias.

class QuotaError extends FlowGrpoError {
  static override readonly code = 'QUOTA_EXCEEDED';
}

const weatherInput = z
  .object({
    city: z.string().min(1).describe('the city, e.g. "Paris"'),
    days: z.number().int().min(1).max(7).default(1).describe('days ahead'),
    units: z.enum(['metric', 'imperial']).optional().describe('unit system'),
    fields: z.array(z.string()).describe('what to report'),
  })
  .describe('Gives the weather forecast for a city.');

const weather = defineTool({
  name: 'weather',
  input: weatherInput,
  execute: ({ city, days }) => ({ city, days, forecast: 'sunny' }),
});

describe('defineTool', () => {
  it('derives the description and the per-field input types from the schema', () => {
    expect(weather.name).toBe('weather');
    expect(weather.description).toBe('Gives the weather forecast for a city.');
    // One line per field, in the seeds' "type - meaning" form (written out by hand from the
    // schema above: default 1 → "(default 1)", .optional() → "(optional)").
    expect(weather.metadata.inputTypes).toEqual({
      city: 'str - the city, e.g. "Paris"',
      days: 'int (default 1) - days ahead',
      units: 'str, one of "metric" | "imperial" (optional) - unit system',
      fields: 'list[str] - what to report',
    });
    expect(weather.metadata).toMatchObject({
      version: '1.0.0',
      limitations: [],
      bestPractices: [],
      examples: [],
      requiresLlm: false,
    });
    const registry = new ToolRegistry([weather]);
    expect(registry.describeForPlanner()).toContain(
      'Tool: weather\nDescription: Gives the weather forecast for a city.\nInputs:\n  - city: str - the city, e.g. "Paris"\n  - days: int (default 1) - days ahead',
    );
    expect(registry.metadataForPlanner().weather).toMatchObject({
      tool_name: 'weather',
      tool_description: 'Gives the weather forecast for a city.',
      input_types: weather.metadata.inputTypes,
    });
  });

  it('an explicit description and metadata win over the derived ones', () => {
    const tool = defineTool({
      name: 'echo',
      description: 'Repeats its text.',
      input: z.object({ text: z.string() }).describe('ignored: description is given'),
      execute: ({ text }) => text,
      version: '2.1.0',
      outputType: 'str - the same text',
      limitations: ['Text only.'],
      bestPractices: ['Keep it short.'],
      examples: [{ input: { text: 'hi' }, description: 'Says hi back' }],
      requiresLlm: true,
      inputTypes: { text: 'str - anything' },
    });
    expect(tool.description).toBe('Repeats its text.');
    expect(tool.metadata).toEqual({
      version: '2.1.0',
      inputTypes: { text: 'str - anything' },
      outputType: 'str - the same text',
      limitations: ['Text only.'],
      bestPractices: ['Keep it short.'],
      examples: [{ input: { text: 'hi' }, description: 'Says hi back' }],
      requiresLlm: true,
    });
    // Without .describe() a field line is just its type.
    expect(describeInputFields(z.object({ n: z.number(), s: z.string().nullable() }))).toEqual({
      n: 'float',
      s: 'str | None',
    });
  });

  it('runs through the registry: the schema parses (defaults applied), the return is the output', async () => {
    const registry = new ToolRegistry([weather]);
    const result = await registry.run('weather', { city: 'Oslo', fields: ['temp'] });
    expect(result).toMatchObject({
      ok: true,
      output: { city: 'Oslo', days: 1, forecast: 'sunny' },
    });
    expect(result.durationMs).toBeGreaterThanOrEqual(0);
    await expect(registry.invoke('weather', { city: '', fields: [] })).rejects.toSatisfy(
      (e: unknown) => ToolInputError.isInstance(e) && e.issues[0]?.path === 'city',
    );
  });

  it('a throw becomes an ok:false result with the error code; undefined output is empty text', async () => {
    const flaky = defineTool({
      name: 'flaky',
      input: z
        .object({ kind: z.enum(['plain', 'typed', 'nothing']) })
        .describe('Fails on purpose.'),
      execute: ({ kind }) => {
        if (kind === 'plain') throw new Error('disk full');
        if (kind === 'typed') throw new QuotaError('quota used up');
        return undefined as unknown as string;
      },
    });
    const registry = new ToolRegistry([flaky]);
    expect(await registry.run('flaky', { kind: 'plain' })).toMatchObject({
      ok: false,
      output: 'Error: disk full',
      error: 'disk full',
      errorCode: 'TOOL_EXECUTION_FAILED',
    });
    expect(await registry.run('flaky', { kind: 'typed' })).toMatchObject({
      ok: false,
      errorCode: 'QUOTA_EXCEEDED',
    });
    expect(await registry.run('flaky', { kind: 'nothing' })).toMatchObject({
      ok: true,
      output: '',
    });
  });

  it('passes the abort signal: a slow tool ends at the time limit', async () => {
    let sawAbort = false;
    const slow = defineTool({
      name: 'slow',
      input: z.object({}).describe('Waits until aborted.'),
      execute: (_input, { signal }) =>
        new Promise<string>((_resolve, reject) => {
          signal?.addEventListener('abort', () => {
            sawAbort = true;
            reject(signal.reason);
          });
        }),
    });
    const result = await new ToolRegistry([slow]).run('slow', {}, { timeoutMs: 50 });
    expect(result).toMatchObject({ ok: false, errorCode: 'TOOL_TIMEOUT' });
    expect(sawAbort).toBe(true);
  });

  it('refuses bad definitions with a ToolError naming the problem', () => {
    const execute = () => 'x';
    const ok = z.object({ q: z.string() }).describe('Does q.');
    const attempts: [() => unknown, RegExp][] = [
      [() => defineTool({ name: 'has space', input: ok, execute }), /must be 1-64 letters/],
      [() => defineTool({ name: 'None', input: ok, execute }), /reserved/],
      [
        () =>
          defineTool({
            name: 'nodesc',
            input: z.object({ q: z.string() }),
            execute,
          }),
        /needs a description/,
      ],
      [
        () =>
          defineTool({
            name: 'notobject',
            description: 'd',
            input: z.string() as unknown as z.ZodObject,
            execute,
          }),
        /must be a zod object schema/,
      ],
      [
        () =>
          defineTool({
            name: 'badexample',
            input: ok,
            execute,
            examples: [{ input: { q: 3 }, description: 'wrong type' }],
          }),
        /examples\[0\]\.input does not match the input schema: q: /,
      ],
    ];
    for (const [define, message] of attempts) {
      expect(define).toThrow(message);
      try {
        define();
      } catch (e) {
        expect(ToolError.isInstance(e)).toBe(true);
      }
    }
  });
});

describe('built-in tool names and aliases', () => {
  it('one table maps the short names to the canonical (seed) names', () => {
    expect(BUILTIN_TOOL_ALIASES).toEqual({
      python: 'Python_Code_Generator_Tool',
      calculator: 'calculator',
      wikipedia: 'Wikipedia_RAG_Search_Tool',
      web_rag: 'Web_RAG_Search_Tool',
      web_search: 'Web_Search_Tool',
      generalist: 'Generalist_Solution_Generator_Tool',
    });
    // The factories' default names are the table's canonical names.
    expect(createPythonTool().name).toBe(BUILTIN_TOOL_ALIASES.python);
    expect(createCalculatorTool().name).toBe(BUILTIN_TOOL_ALIASES.calculator);
    expect(builtinToolAlias('Python')).toBe('python');
    expect(builtinToolAlias('python_code_generator_tool')).toBe('python');
    expect(builtinToolAlias('abacus')).toBeUndefined();
    expect(canonicalToolName('web_search')).toBe('Web_Search_Tool');
    expect(canonicalToolName('weather')).toBe('weather');
  });

  it('the registry finds a built-in tool by its alias and reports it by its canonical name', async () => {
    const registry = new ToolRegistry([createPythonTool(), createCalculatorTool()]);
    expect(registry.names()).toEqual(['Python_Code_Generator_Tool', 'calculator']);
    expect(registry.has('python')).toBe(true);
    expect(registry.get('python').name).toBe('Python_Code_Generator_Tool');
    // python3 prints 6*7 = 42.
    const result = await registry.run('python', { code: 'print(6 * 7)' });
    expect(result.output).toMatchObject({ stdout: '42\n', exit_code: 0 });
    const bad = await registry.run('python', { code: 42 });
    expect(bad.error).toContain("Invalid input for tool 'Python_Code_Generator_Tool'");
    registry.setEnabled('python', false);
    expect(registry.has('Python_Code_Generator_Tool')).toBe(false);
    // A tool registered under an alias itself is found by that exact name first.
    const own = defineTool({
      name: 'python',
      input: z.object({}).describe('Mine.'),
      execute: () => 'mine',
    });
    const mine = new ToolRegistry([own, createPythonTool()]);
    expect(mine.get('python')).toBe(own);
  });
});
