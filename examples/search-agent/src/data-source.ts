// Where this example's HotpotQA comes from: ../shared/data/hotpotqa/dev-distractor-500.jsonl (500
// dev questions with their paragraphs) when the shared folder is there, else the public data set
// on the Hugging Face Hub — hotpotqa/hotpot_qa, config distractor, split validation (Parquet) —
// downloaded once into the HF cache ($HF_HOME/hub; HF_ENDPOINT, HF_TOKEN and HF_HUB_OFFLINE are
// honoured), whose first 500 rows are written back in HotpotQA's JSON layout under the run
// folder, so the rest of the example reads one layout either way.
import { existsSync } from 'node:fs';
import { join } from 'node:path';
import {
  downloadHubDataset,
  FlowGrpoError,
  type HubOptions,
  hubSettings,
  readHotpotQaHubRows,
  writeJsonl,
} from '@flowgrpo/core';

/** The public source of the questions and paragraphs, as TRL's dataset_name / config / split name it. */
export const HOTPOTQA_HUB = {
  name: 'hotpotqa/hotpot_qa',
  config: 'distractor',
  split: 'validation',
} as const;

/** The file the example reads, relative to a folder laid out like ../shared. */
export const HOTPOTQA_FILE = join('data', 'hotpotqa', 'dev-distractor-500.jsonl');
const WIKI_SAMPLE = join('data', 'wiki-sample', 'wiki18-sample-1000.jsonl');
/** Rows taken from the hub's split: as many as the shared copy holds. */
const HUB_ROWS = 500;

export interface SearchAgentData {
  /** A folder laid out like ../shared: data/hotpotqa/ (and data/wiki-sample/ from ../shared). */
  root: string;
  /** Where the rows came from, for the log. */
  from: string;
}

/**
 * The example's data: `shared` when it holds HotpotQA, else the hub's rows written under `out`.
 * Undefined, with `skip` called with the reason, when neither is there: no shared folder and
 * the hub unreachable (or HF_HUB_OFFLINE with nothing cached), or the wiki sample asked for
 * without the shared folder (the hub holds only FlashRAG's whole wiki-18 dump).
 */
export async function searchAgentData(
  shared: string | undefined,
  o: { out: string; corpus: 'hotpotqa' | 'wiki-sample'; skip: (reason: string) => void },
  options: HubOptions = {},
): Promise<SearchAgentData | undefined> {
  if (shared && existsSync(join(shared, HOTPOTQA_FILE))) {
    if (o.corpus === 'wiki-sample' && !existsSync(join(shared, WIKI_SAMPLE))) {
      o.skip(`--corpus wiki-sample reads ${join(shared, WIKI_SAMPLE)}, which is absent`);
      return undefined;
    }
    return { root: shared, from: join(shared, HOTPOTQA_FILE) };
  }
  const where = `../shared/${HOTPOTQA_FILE} (or $FLOWGRPO_SHARED) is absent`;
  if (o.corpus === 'wiki-sample') {
    o.skip(
      `--corpus wiki-sample reads ../shared/${WIKI_SAMPLE}, and ${where}; the hub holds only FlashRAG's whole wiki-18 corpus (RUC-NLPIR/FlashRAG_datasets, retrieval-corpus/), not this 1,000-passage sample: run with --corpus hotpotqa, or point FLOWGRPO_SHARED at a shared folder`,
    );
    return undefined;
  }
  const { name, config, split } = HOTPOTQA_HUB;
  try {
    const ds = await downloadHubDataset(name, { ...options, config, split });
    const rows = await readHotpotQaHubRows(ds.paths, { limit: HUB_ROWS });
    await writeJsonl(join(o.out, HOTPOTQA_FILE), rows);
    return {
      root: o.out,
      from: `the first ${rows.length} rows of the hub's ${name} (${config}, ${split}) in ${ds.dir}, written as ${join(o.out, HOTPOTQA_FILE)}`,
    };
  } catch (e) {
    if (!FlowGrpoError.isInstance(e)) throw e;
    const endpoint = (options.settings ?? hubSettings(options.env)).endpoint;
    o.skip(
      `${where}, and the download of ${name} (config ${config}, split ${split}) from ${endpoint} failed: [${e.code}] ${e.message}. ` +
        `Get it with \`pnpm flowgrpo data fetch ${name} --config ${config} --split ${split}\` where the hub is reachable (or set HF_ENDPOINT to a mirror; HF_HOME to a cache that has it), or point FLOWGRPO_SHARED at a shared folder`,
    );
    return undefined;
  }
}
