// Snippets of packages/tools/README.md (compiled by the test command).
// #region define-tool
import { FlowSolver, OpenAIEngine } from '@flowgrpo/agent';
import { createCalculatorTool, defineTool } from '@flowgrpo/tools';
import { z } from 'zod';

const weather = defineTool({
  name: 'weather',
  input: z
    .object({
      city: z.string().describe('the city, e.g. "Paris"'),
      days: z.number().int().min(1).max(7).default(1).describe('days ahead'),
    })
    .describe('Gives the weather forecast for a city.'),
  execute: async ({ city, days }, { signal }) => {
    const url = `https://api.example.com/forecast?city=${encodeURIComponent(city)}&days=${days}`;
    const res = await fetch(url, { signal: signal ?? null });
    return res.text(); // or a JSON value
  },
});
const engine = new OpenAIEngine({
  baseURL: 'http://127.0.0.1:8000/v1',
  model: 'Qwen/Qwen2.5-7B-Instruct',
});
const solver = new FlowSolver({ engine, tools: [weather, createCalculatorTool()] }); // @flowgrpo/agent
// #endregion define-tool

// Uses the region's result (noUnusedLocals).
export const shown = solver;
