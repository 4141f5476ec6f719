// Snippets of docs/guides/tools.md (compiled by the test command).
import {
  createCalculatorTool,
  createPythonTool,
  createWikipediaTool,
  defineTool,
  LocalCorpus,
  loadHotpotQaPassages,
  type Tool,
  ToolRegistry,
} from '@flowgrpo/tools';
import { z } from 'zod';

export async function runTools(): Promise<void> {
  // #region registry
  const tools = new ToolRegistry([createCalculatorTool(), createPythonTool()]);
  const r = await tools.run('calculator', { expression: '12^2' }, { timeoutMs: 5_000 });
  console.log(r.ok, r.output); // true '144'
  // Failures are results, not exceptions: the model reads them.
  const bad = await tools.run('calculator', { expression: '12 apples' });
  console.log(bad.ok, bad.errorCode); // false, the CalculatorError's code
  // #endregion registry
}

// #region define-tool
/** Your own tool in a few lines; it works in ToolRegistry, FlowSolver, FlowRollout, TagAgent. */
export const weather: Tool = defineTool({
  name: 'weather',
  description: 'Current temperature of a city in °C.',
  input: z.object({ city: z.string().describe('city name, e.g. "Paris"') }),
  async execute({ city }, { signal }) {
    const res = await fetch(`https://api.example.com/t?city=${encodeURIComponent(city)}`, {
      ...(signal && { signal }),
    });
    return `${city}: ${await res.text()} °C`;
  },
}) as Tool;
// #endregion define-tool

export async function offlineWikipedia(file: string): Promise<Tool> {
  // #region offline-wikipedia
  // BM25 over HotpotQA's paragraphs: the Wikipedia tool without network.
  const corpus = new LocalCorpus(await loadHotpotQaPassages(file));
  const hits = await corpus.search('Kiss and Tell 1945 film', { topK: 3 });
  console.log(hits.map((h) => h.title));
  const wikipedia = createWikipediaTool({ backend: corpus }); // no engine: raw top passages
  // #endregion offline-wikipedia
  return wikipedia as Tool;
}
