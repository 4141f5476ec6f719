// Where the data comes from when there is no data folder (../shared/data, $FLOWGRPO_SHARED or
// --data-dir): the public data sets on the Hugging Face Hub, downloaded once into the HF cache
// ($HF_HOME/hub; HF_ENDPOINT, HF_TOKEN and HF_HUB_OFFLINE are honoured) and read as they are —
// GSM8K as the math set (as with ../shared: DeepMath-103K's shards, with their R1 solutions, are
// far bigger; --math takes them), FlashRAG's NQ train split (the seed's own search set; ../shared
// holds Search-R1's sample of it) and AIME 2024 as the validation set.
import {
  type DatasetFormat,
  type DatasetSpec,
  downloadHubDataset,
  FlowGrpoError,
  type HubOptions,
  hubSettings,
} from '@flowgrpo/core';

interface HubSource {
  name: string;
  config?: string;
  split: string;
  format: DatasetFormat;
}

/** Each source's hub name, config and split (TRL's dataset_name / dataset_config / split). */
export const DATA_PREP_HUB = {
  math: { name: 'openai/gsm8k', config: 'main', split: 'train', format: 'gsm8k' },
  nq: { name: 'RUC-NLPIR/FlashRAG_datasets', config: 'nq', split: 'train', format: 'nq' },
  aime: { name: 'HuggingFaceH4/aime_2024', split: 'train', format: 'aime' },
} as const satisfies Record<string, HubSource>;

const sourceName = (s: HubSource) =>
  `${s.name} (${s.config ? `config ${s.config}, ` : ''}split ${s.split})`;

const fetchCommand = (s: HubSource) =>
  `pnpm flowgrpo data fetch ${s.name}${s.config ? ` --config ${s.config}` : ''} --split ${s.split}`;

/**
 * The three sources' files from the hub, as the specs `prepareData` reads (math and NQ for
 * training, AIME for validation). Undefined, with `skip` called with what was tried and how to
 * get the data, when a download fails (no network, or HF_HUB_OFFLINE with nothing cached).
 */
export async function hubDataSpecs(
  skip: (reason: string) => void,
  options: HubOptions = {},
): Promise<{ train: DatasetSpec[]; validation: DatasetSpec[]; from: string[] } | undefined> {
  const specs = async (s: HubSource) => {
    const ds = await downloadHubDataset(s.name, { ...options, config: s.config, split: s.split });
    return {
      specs: ds.paths.map((path): DatasetSpec => ({ path, format: s.format })),
      from: `${sourceName(s)} in ${ds.dir}`,
    };
  };
  const sources = [DATA_PREP_HUB.math, DATA_PREP_HUB.nq, DATA_PREP_HUB.aime];
  try {
    const [math, nq, aime] = [
      await specs(sources[0]),
      await specs(sources[1]),
      await specs(sources[2]),
    ];
    return {
      train: [...math.specs, ...nq.specs],
      validation: aime.specs,
      from: [math.from, nq.from, aime.from],
    };
  } catch (e) {
    if (!FlowGrpoError.isInstance(e)) throw e;
    const endpoint = (options.settings ?? hubSettings(options.env)).endpoint;
    skip(
      `no data folder: ../shared/data (or $FLOWGRPO_SHARED) is absent and no --data-dir was given, and the download of ${sources.map(sourceName).join(', ')} from ${endpoint} failed: [${e.code}] ${e.message}. ` +
        `Get them with \`${sources.map(fetchCommand).join('` and `')}\` where the hub is reachable (or set HF_ENDPOINT to a mirror; HF_HOME to a cache that has them), pass --data-dir, or point FLOWGRPO_SHARED at a shared folder`,
    );
    return undefined;
  }
}
