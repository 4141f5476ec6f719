// Snippets of packages/tools/README.md (compiled by the test command).
// #region registry
import { createCalculatorTool, createPythonTool, ToolRegistry } from '@flowgrpo/tools';

const tools = new ToolRegistry([createCalculatorTool(), createPythonTool()]);
tools.describeForPlanner(); // text block for the planner prompt
await tools.run('calculator', { expression: '48/2' });
// → { ok: true, output: '24', durationMs: 0.4 }
// #endregion registry
