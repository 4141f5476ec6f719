// Where this example's GSM8K comes from: the copy in ../shared/data/gsm8k (train.jsonl,
// test.jsonl) when it is there, else the public data set on the Hugging Face Hub — openai/gsm8k,
// config "main", splits train and test (the same rows, as Parquet) — downloaded once into the HF
// cache ($HF_HOME/hub, shared with Python's huggingface_hub; HF_ENDPOINT, HF_TOKEN and
// HF_HUB_OFFLINE are honoured).
import { existsSync } from 'node:fs';
import { join } from 'node:path';
import { downloadHubDataset, FlowGrpoError, type HubOptions } from '@flowgrpo/core';

/** The public source of the GSM8K rows, as TRL's dataset_name / dataset_config name it. */
export const GSM8K_HUB = { name: 'openai/gsm8k', config: 'main' } as const;

export interface Gsm8kFiles {
  train: string;
  test: string;
  /** Where they were found, for the log. */
  from: string;
}

/**
 * GSM8K's train and test files: from `shared` (the shared folder) when it holds them, else from
 * the hub. Undefined, with `why` called, when neither is available (no shared folder and no
 * network, or HF_HUB_OFFLINE with nothing cached).
 */
export async function gsm8kFiles(
  shared: string | undefined,
  why: (reason: string) => void,
  options: HubOptions = {},
): Promise<Gsm8kFiles | undefined> {
  const dir = shared && join(shared, 'data', 'gsm8k');
  if (dir && existsSync(join(dir, 'train.jsonl')) && existsSync(join(dir, 'test.jsonl')))
    return { train: join(dir, 'train.jsonl'), test: join(dir, 'test.jsonl'), from: dir };
  try {
    const split = (s: string) =>
      downloadHubDataset(GSM8K_HUB.name, { ...options, config: GSM8K_HUB.config, split: s });
    const [train, test] = [await split('train'), await split('test')];
    return {
      train: train.paths[0] as string,
      test: test.paths[0] as string,
      from: `the hub's ${GSM8K_HUB.name} (${GSM8K_HUB.config}) in ${train.dir}`,
    };
  } catch (e) {
    if (!FlowGrpoError.isInstance(e)) throw e;
    why(`[${e.code}] ${e.message}`);
    return undefined;
  }
}
