// Where the offline Wikipedia comes from: the paragraphs of ../shared/data/hotpotqa/
// dev-distractor-500.jsonl when the shared folder is there, else the public data set on the
// Hugging Face Hub — hotpotqa/hotpot_qa, config distractor, split validation (Parquet) —
// downloaded once into the HF cache ($HF_HOME/hub; HF_ENDPOINT, HF_TOKEN and HF_HUB_OFFLINE are
// honoured), whose first 500 rows are written back in HotpotQA's JSON layout under `out`, the
// layout the corpus loader reads.
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

/** The public source of the paragraphs, as TRL's dataset_name / config / split name it. */
export const HOTPOTQA_HUB = {
  name: 'hotpotqa/hotpot_qa',
  config: 'distractor',
  split: 'validation',
} as const;

/** The file the corpus is read from, relative to a folder laid out like ../shared. */
export const HOTPOTQA_FILE = join('data', 'hotpotqa', 'dev-distractor-500.jsonl');
/** Rows taken from the hub's split: as many as the shared copy holds. */
const HUB_ROWS = 500;

/** Where the downloaded rows are written when ../shared is absent (relative to the working directory). */
export const DEFAULT_OUT = join('out', 'solver');

/**
 * The HotpotQA file whose paragraphs are the offline Wikipedia, and where it came from.
 * Undefined, with `skip` called with the reason, when there is no shared folder and the hub
 * cannot be reached (or HF_HUB_OFFLINE is set with nothing cached).
 */
export async function solverCorpus(
  shared: string | undefined,
  o: { out: string; skip: (reason: string) => void },
  options: HubOptions = {},
): Promise<{ file: string; from: string } | undefined> {
  if (shared && existsSync(join(shared, HOTPOTQA_FILE)))
    return { file: join(shared, HOTPOTQA_FILE), from: join(shared, HOTPOTQA_FILE) };
  const { name, config, split } = HOTPOTQA_HUB;
  try {
    const ds = await downloadHubDataset(name, { ...options, config, split });
    const rows = await readHotpotQaHubRows(ds.paths, { limit: HUB_ROWS });
    const file = join(o.out, HOTPOTQA_FILE);
    await writeJsonl(file, rows);
    return {
      file,
      from: `the first ${rows.length} rows of the hub's ${name} (${config}, ${split}) in ${ds.dir}, written as ${file}`,
    };
  } catch (e) {
    if (!FlowGrpoError.isInstance(e)) throw e;
    const endpoint = (options.settings ?? hubSettings(options.env)).endpoint;
    o.skip(
      `the offline Wikipedia is read from ../shared/${HOTPOTQA_FILE} (or $FLOWGRPO_SHARED), which is absent, and the download of ${name} (config ${config}, split ${split}) from ${endpoint} failed: [${e.code}] ${e.message}. ` +
        `Get it with \`pnpm flowgrpo data fetch ${name} --config ${config} --split ${split}\` where the hub is reachable (or set HF_ENDPOINT to a mirror; HF_HOME to a cache that has it), point FLOWGRPO_SHARED at a shared folder, or run with --corpus FILE or --wiki live`,
    );
    return undefined;
  }
}
