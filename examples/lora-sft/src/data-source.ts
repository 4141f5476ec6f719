// Where stories260K comes from: ../shared/models/stories260K when the shared folder is there,
// else Karpathy's hub repo karpathy/tinyllamas — the llama2.c files stories260K/stories260K.bin
// and stories260K/tok512.bin, no transformers model, so fetched by name as hf_hub_download does —
// downloaded once into the HF cache ($HF_HOME/hub; HF_ENDPOINT, HF_TOKEN and HF_HUB_OFFLINE are
// honoured).
import { existsSync } from 'node:fs';
import { join } from 'node:path';
import { downloadHubFiles, FlowGrpoError, type HubOptions, hubSettings } from '@flowgrpo/core';

/** The public source: the hub repo and the two files in it. */
export const STORIES_HUB = {
  name: 'karpathy/tinyllamas',
  model: 'stories260K/stories260K.bin',
  tokenizer: 'stories260K/tok512.bin',
} as const;

export interface Stories260K {
  model: string;
  tokenizer: string;
  /** Where they were found, for the log. */
  from: string;
}

/**
 * The checkpoint and tokenizer: from `shared` when it holds them, else from the hub. Undefined,
 * with `skip` called with what was tried and how to get them, when neither is available.
 */
export async function stories260K(
  shared: string | undefined,
  skip: (reason: string) => void,
  options: HubOptions = {},
): Promise<Stories260K | undefined> {
  const dir = shared && join(shared, 'models', 'stories260K');
  if (dir && existsSync(join(dir, 'stories260K.bin')) && existsSync(join(dir, 'tok512.bin')))
    return {
      model: join(dir, 'stories260K.bin'),
      tokenizer: join(dir, 'tok512.bin'),
      from: dir,
    };
  const { name, model, tokenizer } = STORIES_HUB;
  try {
    const r = await downloadHubFiles(name, [model, tokenizer], options);
    return {
      model: r.paths[0] as string,
      tokenizer: r.paths[1] as string,
      from: `the hub's ${name} in ${r.dir}`,
    };
  } catch (e) {
    if (!FlowGrpoError.isInstance(e)) throw e;
    const endpoint = (options.settings ?? hubSettings(options.env)).endpoint;
    skip(
      `stories260K is read from ../shared/models/stories260K (or $FLOWGRPO_SHARED), which is absent, and the download of ${model} and ${tokenizer} from the hub repo ${name} at ${endpoint} failed: [${e.code}] ${e.message}. ` +
        `Get them with \`pnpm flowgrpo data fetch ${name} --type model --file ${model} --file ${tokenizer}\` where the hub is reachable (or set HF_ENDPOINT to a mirror; HF_HOME to a cache that has them), point FLOWGRPO_SHARED at a shared folder, or pass --model and --tokenizer`,
    );
    return undefined;
  }
}
