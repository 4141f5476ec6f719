// Solves one question with the Flow solver (analyze → plan → run a tool → verify → answer) on any
// OpenAI-compatible server: vLLM, SGLang, Ollama (/v1), llama.cpp's llama-server, OpenAI.
import { FlowSolver, OpenAIEngine } from '@flowgrpo/agent';
import { createCalculatorTool } from '@flowgrpo/tools';

const engine = new OpenAIEngine({
  baseURL: process.env.OPENAI_BASE_URL ?? 'http://127.0.0.1:8000/v1',
  model: process.env.MODEL ?? 'Qwen/Qwen2.5-7B-Instruct',
  apiKey: process.env.OPENAI_API_KEY,
});
const solver = new FlowSolver({ engine, tools: [createCalculatorTool()], maxSteps: 3 });

const result = await solver.solve(process.argv[2] ?? 'What is 12 squared?');
for (const step of result.steps) {
  const output = JSON.stringify(step.result?.output);
  console.log(`step ${step.step}: ${step.toolName} ${JSON.stringify(step.arguments)} → ${output}`);
}
console.log(`answer: ${result.finalAnswer} (stop: ${result.stopReason})`);
