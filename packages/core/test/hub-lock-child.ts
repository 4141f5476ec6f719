// One of the two processes of hub-lock.test.ts: downloads a data set's split into the HF cache
// its environment names (HF_ENDPOINT, HF_HOME) and prints what the hub client said, then the
// result, one JSON line each.
import { downloadHubDataset } from '../src/index.js';

const [repo = '', split = 'train'] = process.argv.slice(2);
const r = await downloadHubDataset(repo, {
  split,
  log: (line) => console.log(JSON.stringify({ log: line })),
});
console.log(JSON.stringify({ paths: r.paths, downloaded: r.downloaded }));
