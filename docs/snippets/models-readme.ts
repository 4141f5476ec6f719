// Snippets of packages/models/README.md (compiled by the test command).
// #region quickstart
import {
  buildDecoderArtifacts,
  createTinyQwen2,
  DecoderArtifacts,
  LocalPolicyEngine,
} from '@flowgrpo/models';

const model = await createTinyQwen2('/tmp/tiny-model', { seed: 'readme' });
buildDecoderArtifacts(model.weights, '/tmp/tiny-artifacts');
const artifacts = await DecoderArtifacts.open('/tmp/tiny-artifacts');
const policy = new LocalPolicyEngine({ artifacts, tokenizer: model.tokenizer });
const out = await policy.generate({ prompt: 'Hello', maxTokens: 8, temperature: 0 });
console.log(out.text);
await artifacts.release();
// #endregion quickstart
