// Snippets of docs/guides/hub.md (compiled by the test command).
import {
  downloadHubDataset,
  downloadHubFiles,
  downloadHubModel,
  resolveModelSource,
} from '@flowgrpo/core';
import { loadDecoderModel, loadTokenizer } from '@flowgrpo/models';

export async function fromCode(): Promise<void> {
  // #region hub-api
  // A model by hub name: config, tokenizer files and safetensors into $HF_HOME/hub.
  const model = await downloadHubModel('Qwen/Qwen2.5-0.5B-Instruct');
  console.log(model.dir, model.downloaded); // …/models--Qwen--Qwen2.5-0.5B-Instruct/snapshots/<commit>
  // One split of a data set, as TRL names it (dataset_name, dataset_config, split).
  const gsm8k = await downloadHubDataset('openai/gsm8k', { config: 'main', split: 'test' });
  console.log(gsm8k.paths); // [ …/datasets--openai--gsm8k/snapshots/<commit>/main/test-00000-of-00001.parquet ]
  // Named files of any repo, as hf_hub_download fetches them (here llama2.c files).
  const stories = await downloadHubFiles('karpathy/tinyllamas', ['stories260K/tok512.bin']);
  console.log(stories.paths); // [ …/models--karpathy--tinyllamas/snapshots/<commit>/stories260K/tok512.bin ]
  // A local path wins; org/name[@revision] that is no local path goes to the hub.
  const dir = await resolveModelSource('Qwen/Qwen2.5-0.5B-Instruct@main');
  // The load APIs take hub names too.
  const weights = await loadDecoderModel('Qwen/Qwen2.5-0.5B-Instruct');
  const tokenizer = await loadTokenizer('Qwen/Qwen2.5-0.5B-Instruct');
  // #endregion hub-api
  console.log(dir, weights.config, tokenizer.vocabSize);
}
