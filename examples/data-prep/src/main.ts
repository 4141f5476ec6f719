// The Flow-GRPO seed's training set (math + NQ) and AIME24 validation set, as Parquet.
//   pnpm example data-prep [--quick] [--data-dir DIR] [--math F.parquet …] [--nq F] [--aime F]
//                          [--out DIR] [--seed N]
import { join } from 'node:path';
import { parseCommandLine } from '@flowgrpo/core';
import { hubDataSpecs } from './data-source.js';
import { DEFAULT_OUT, prepareData } from './prepare-data.js';
import { sharedDir } from './shared.js';

const usage = `Usage: pnpm example data-prep [flags]
  --quick           the first 2,000 rows of each source
  --data-dir DIR    a folder laid out like ../shared/data (default: $FLOWGRPO_SHARED/data or ../shared/data;
                    without one, openai/gsm8k, RUC-NLPIR/FlashRAG_datasets (nq) and HuggingFaceH4/aime_2024
                    from the hub)
  --math FILE       DeepMath-103K Parquet file (repeat for each shard) instead of the GSM8K stand-in
  --nq FILE         FlashRAG NQ train Parquet/JSONL instead of Search-R1's NQ sample
  --aime FILE       AIME 2024 Parquet/JSONL instead of ../shared/data/aime24
  --out DIR         where combined_train.parquet and val.parquet go (default ${DEFAULT_OUT})
  --seed N          shuffle seed (default 42)`;

const { values } = parseCommandLine(usage, {
  options: {
    quick: { type: 'boolean', default: false },
    'data-dir': { type: 'string' },
    math: { type: 'string', multiple: true },
    nq: { type: 'string' },
    aime: { type: 'string' },
    out: { type: 'string', default: DEFAULT_OUT },
    seed: { type: 'string', default: '42' },
  },
});
const shared = sharedDir();
const dataDir = values['data-dir'] ?? (shared ? join(shared, 'data') : undefined);
// No data folder and not both full sets given: the public sources from the hub.
const needHub = !dataDir && !(values.math && values.nq);
const hub = needHub
  ? await hubDataSpecs((reason) => console.log(`data-prep: skipped — ${reason}`))
  : undefined;
if (needHub && !hub) process.exit(0);
console.log("flowgrpo example: data-prep — the Flow-GRPO seed's training and validation sets\n");
if (hub) console.log(`from the hub:\n${hub.from.map((f) => `  ${f}`).join('\n')}\n`);
await prepareData({
  ...(dataDir && { dataDir }),
  ...(hub && { sources: hub }),
  ...(values.math && { math: values.math }),
  ...(values.nq && { nq: values.nq }),
  ...(values.aime && { aime: values.aime }),
  out: values.out,
  seed: Number(values.seed),
  ...(values.quick && { limit: 2000 }),
});
