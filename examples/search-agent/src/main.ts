// The AReaL search agent: local /retrieve server, <search>/<information>/<answer> rollouts,
// F1 reward, GRPO steps with timings.
//   pnpm example search-agent [--quick] [--model <HF folder>] [--corpus hotpotqa|wiki-sample]
//                             [--retriever-url URL] [--sft-steps N] [--grpo-steps N] [--out DIR]
import { join } from 'node:path';
import { parseCommandLine } from '@flowgrpo/core';
import type { DeviceRequest } from '@flowgrpo/models';
import { searchAgentData } from './data-source.js';
import { runSearchAgent } from './run.js';
import { sharedDir } from './shared.js';

const usage = `Usage: pnpm example search-agent [flags]
  --quick               a small run (about a minute on 2 cores): 2 GRPO steps, 8 test questions
  --model DIR           an HF model folder (config.json, safetensors, tokenizer.json), e.g. Qwen2.5-1.5B-Instruct;
                        default: a tiny Qwen2 created from --seed
  --corpus NAME         hotpotqa (default: the 4,947 paragraphs of HotpotQA dev) or wiki-sample
  --retriever-url URL   use a running /retrieve server (AReaL / Search-R1 layout) instead of ours
  --sft-steps N         warm-start steps on demonstrations (default 400 for the tiny model, --quick 40, 0 with --model)
  --grpo-steps N        GRPO steps (default 20; --quick 2)
  --device D            cpu (default), cuda, webgpu or auto
  --seed N              model, data order and sampling seed (default 1)
  --out DIR             run folder (default out/search-agent)`;

const { values } = parseCommandLine(usage, {
  options: {
    quick: { type: 'boolean', default: false },
    model: { type: 'string' },
    corpus: { type: 'string', default: 'hotpotqa' },
    'retriever-url': { type: 'string' },
    'sft-steps': { type: 'string' },
    'grpo-steps': { type: 'string' },
    device: { type: 'string', default: 'cpu' },
    seed: { type: 'string', default: '1' },
    out: { type: 'string', default: join('out', 'search-agent') },
  },
});
if (values.corpus !== 'hotpotqa' && values.corpus !== 'wiki-sample') {
  console.error(`--corpus must be hotpotqa or wiki-sample, got '${values.corpus}'`);
  process.exit(2);
}
const data = await searchAgentData(sharedDir(), {
  out: values.out,
  corpus: values.corpus,
  skip: (reason) => console.log(`search-agent: skipped — ${reason}`),
});
if (!data) process.exit(0);
console.log('flowgrpo example: search-agent — the AReaL search agent, trained with GRPO\n');
console.log(`HotpotQA: ${data.from}`);
await runSearchAgent({
  sharedDir: data.root,
  out: values.out,
  quick: values.quick,
  corpus: values.corpus,
  ...(values['retriever-url'] && { retrieverUrl: values['retriever-url'] }),
  ...(values.model && { model: values.model }),
  ...(values['sft-steps'] && { sftSteps: Number(values['sft-steps']) }),
  ...(values['grpo-steps'] && { grpoSteps: Number(values['grpo-steps']) }),
  device: values.device as DeviceRequest,
  seed: Number(values.seed),
});
