import { z } from 'zod';
import { calculate } from './calculator.js';
import { failureResult, successResult, type Tool, type ToolResult } from './tool.js';

export interface CalculatorToolInput {
  expression: string;
}

/** The GSM8K calculator of the seeds' tag agent: `calculator(expression="48/2")` → `"24"`. */
export function createCalculatorTool(options: { name?: string } = {}): Tool<CalculatorToolInput> {
  return {
    name: options.name ?? 'calculator',
    description:
      'Evaluates an arithmetic expression exactly as written and returns the number, e.g. "(48/2) * 3".',
    inputSchema: z.object({ expression: z.string().min(1, 'expression must not be empty') }),
    metadata: {
      version: '1.0.0',
      inputTypes: {
        expression:
          'str - arithmetic with + - * / // % ^ (or **), parentheses, sqrt abs round floor ceil min max log ln exp sin cos tan, pi and e',
      },
      outputType: 'str - the result as a number, e.g. "24" or "0.333333333333"',
      limitations: [
        'Numbers only: no variables, units, equations or symbolic algebra.',
        'Results are double-precision floats shown with 12 significant digits.',
        'log(x) is base 10; use ln(x) for the natural logarithm. A trailing "x%" means x/100.',
      ],
      bestPractices: [
        'Write one complete expression with every number substituted in.',
        'Use it for each arithmetic step instead of computing mentally.',
      ],
      examples: [
        { input: { expression: '48/2' }, description: 'Half of 48' },
        {
          input: { expression: '(1,250 * 12) * (1 - 15%)' },
          description: 'A yearly total less 15%',
        },
      ],
      requiresLlm: false,
    },
    async execute(input: CalculatorToolInput): Promise<ToolResult> {
      const start = performance.now();
      try {
        return successResult(calculate(input.expression).text, start);
      } catch (error) {
        return failureResult(error, start);
      }
    },
  };
}
