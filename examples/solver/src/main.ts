// The Flow solver on the seeds' query against any OpenAI-compatible endpoint.
//   pnpm example solver [--quick] [--base-url URL] [--model NAME] [--question Q]
//                       [--wiki offline|live] [--corpus FILE] [--tools LIST] [--max-steps N]
//                       [--local <HF folder | artifacts | tiny>] [--adapter DIR]
import { parseCommandLine } from '@flowgrpo/core';
import type { DeviceRequest } from '@flowgrpo/models';
import { DEFAULT_OUT, solverCorpus } from './data-source.js';
import { scriptedServer } from './scripted-server.js';
import { sharedDir } from './shared.js';
import { loadPassages, runSolverExample, SEED_QUERY } from './solve.js';

const usage = `Usage: pnpm example solver [flags]
  --base-url URL     OpenAI-compatible endpoint (vLLM, SGLang, Ollama /v1, llama.cpp, OpenAI);
                     default $OPENAI_BASE_URL; without one the project's scripted test server
                     answers (canned replies, no model: it shows the trace, not reasoning)
  --model NAME       model as served (default $MODEL, or Qwen/Qwen2.5-7B-Instruct)
                     the API key comes from $FLOWGRPO_API_KEY or $OPENAI_API_KEY
  --question Q       default: the seeds' query "${SEED_QUERY}"
  --wiki MODE        offline (default: BM25 over the HotpotQA paragraphs in ../shared/data, else the
                     first 500 rows of the hub's hotpotqa/hotpot_qa, written to ${DEFAULT_OUT}/data) or live
                     (the MediaWiki API of en.wikipedia.org; needs network)
  --corpus FILE      offline corpus: HotpotQA jsonl, or FlashRAG/DPR jsonl ({id, contents}), e.g. a full wiki-18 dump
  --tools LIST       comma-separated: calculator, python, wikipedia, generalist (default all four)
  --max-steps N      plan/execute/verify rounds at most (default 5)
  --local SPEC       run the planner on a local model: an HF folder, a flowgrpo artifacts folder,
                     or "tiny" (an untrained tiny Qwen2); the other roles stay on the endpoint
  --adapter DIR      PEFT LoRA adapter for the local planner (e.g. a Flow-GRPO checkpoint)
  --device D         device of the local planner: cpu (default), cuda, webgpu, auto
  --quick            the same run with at most 3 steps`;

const { values, positionals } = parseCommandLine(usage, {
  allowPositionals: true,
  options: {
    quick: { type: 'boolean', default: false },
    'base-url': { type: 'string' },
    model: { type: 'string' },
    question: { type: 'string' },
    wiki: { type: 'string', default: 'offline' },
    corpus: { type: 'string' },
    tools: { type: 'string' },
    'max-steps': { type: 'string' },
    local: { type: 'string' },
    adapter: { type: 'string' },
    device: { type: 'string', default: 'cpu' },
  },
});
if (values.wiki !== 'offline' && values.wiki !== 'live') {
  console.error(`--wiki must be offline or live, got '${values.wiki}'`);
  process.exit(2);
}

// The offline Wikipedia: --corpus, else HotpotQA's paragraphs from ../shared/data or the hub.
let corpus = values.corpus;
let format: 'hotpotqa' | 'flashrag' =
  corpus && !corpus.includes('hotpotqa') ? 'flashrag' : 'hotpotqa';
if (values.wiki === 'offline' && !corpus) {
  const found = await solverCorpus(sharedDir(), {
    out: DEFAULT_OUT,
    skip: (reason) => console.log(`solver: skipped — ${reason}`),
  });
  if (!found) process.exit(0);
  corpus = found.file;
  format = 'hotpotqa';
  console.log(`Offline Wikipedia: the paragraphs of ${found.from}`);
}

const question = values.question ?? (positionals.length > 0 ? positionals.join(' ') : undefined);
let baseURL = values['base-url'] ?? process.env.OPENAI_BASE_URL;
let server: Awaited<ReturnType<typeof scriptedServer>> | undefined;
if (!baseURL) {
  server = await scriptedServer();
  baseURL = server.baseURL;
  console.log(
    `No --base-url or $OPENAI_BASE_URL: using the project's scripted OpenAI-compatible test server at ${baseURL}\n` +
      '(canned replies, no model behind them). Point --base-url at vLLM, SGLang, Ollama or OpenAI for real answers.\n',
  );
}
try {
  const r = await runSolverExample({
    ...(question && { question }),
    baseURL,
    model:
      values.model ?? process.env.MODEL ?? (server ? 'test-model' : 'Qwen/Qwen2.5-7B-Instruct'),
    ...((process.env.FLOWGRPO_API_KEY ?? process.env.OPENAI_API_KEY) && {
      apiKey: process.env.FLOWGRPO_API_KEY ?? process.env.OPENAI_API_KEY,
    }),
    wiki: values.wiki,
    ...(corpus && { passages: await loadPassages(corpus, format) }),
    ...(values.tools && { tools: values.tools.split(',').map((t) => t.trim()) }),
    maxSteps: Number(values['max-steps'] ?? (values.quick ? 3 : 5)),
    ...(values.local && { local: values.local }),
    ...(values.adapter && { adapter: values.adapter }),
    device: values.device as DeviceRequest,
    ...(values.quick && { plannerTokens: 64 }),
  });
  if (!r.finalAnswer) process.exitCode = 1;
} finally {
  await server?.close();
}
