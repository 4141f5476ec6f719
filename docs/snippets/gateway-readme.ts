// Snippets of packages/gateway/README.md (compiled by the test command).
// #region quickstart
import { createPolicyGateway, LocalPolicyHost } from '@flowgrpo/gateway';
import { loadTokenizer } from '@flowgrpo/models';

const tokenizer = await loadTokenizer('/tmp/tiny-model');
const host = await LocalPolicyHost.open({ artifacts: '/tmp/tiny-artifacts', tokenizer });
const gateway = await createPolicyGateway({ host, port: 0 });
console.log(`OpenAI-compatible server at ${gateway.baseURL}`);
// … run an agent against gateway.baseURL; gateway.recorder holds its calls …
await gateway.close();
// #endregion quickstart
