// `pnpm bench` for @flowgrpo/grpo: time of the per-step maths on a large packed batch.
// Speed is measured here, never asserted in tests.

import { computeAdvantages, grpoLoss, LOSS_AGGREGATIONS, tokenWeights } from '../src/index.js';

const numSeqs = 1024;
const tokensPerSeq = 1024;
const n = numSeqs * tokensPerSeq;

let state = 12345;
const rnd = () => {
  state = (Math.imul(state, 1664525) + 1013904223) >>> 0;
  return state / 2 ** 32;
};

const mask = new Uint8Array(n);
const seqIndex = new Int32Array(n);
const turnIndex = new Int32Array(n);
const logp = new Float32Array(n);
const oldLogp = new Float32Array(n);
const refLogp = new Float32Array(n);
for (let i = 0; i < n; i++) {
  const pos = i % tokensPerSeq;
  seqIndex[i] = Math.floor(i / tokensPerSeq);
  turnIndex[i] = Math.floor(pos / 256);
  mask[i] = pos % 256 < 64 ? 0 : 1; // each turn: 64 prompt/observation tokens, then its action
  logp[i] = -3 * rnd();
  oldLogp[i] = logp[i] - 0.4 * (rnd() - 0.5);
  refLogp[i] = logp[i] - 0.4 * (rnd() - 0.5);
}
const rewards = Float64Array.from({ length: numSeqs }, () => (rnd() < 0.5 ? 1 : 0));

function time(label: string, f: () => unknown, reps = 5): void {
  f();
  const t0 = performance.now();
  for (let r = 0; r < reps; r++) f();
  const ms = (performance.now() - t0) / reps;
  console.log(`| ${label.padEnd(40)} | ${ms.toFixed(2).padStart(9)} ms |`);
}

console.log(
  `# @flowgrpo/grpo — ${numSeqs} sequences × ${tokensPerSeq} tokens (${n} tokens), Node ${process.version}\n`,
);
console.log('| step | time |\n| --- | --- |');
time(`computeAdvantages (${numSeqs} rewards, G = 8)`, () => computeAdvantages(rewards, 8));
const layout = { mask, seqIndex, turnIndex };
const seqAdvantages = computeAdvantages(rewards, 8);
for (const aggregation of LOSS_AGGREGATIONS) {
  time(`grpoLoss ${aggregation}`, () =>
    grpoLoss({ layout, logp, oldLogp, refLogp, seqAdvantages }, { aggregation, beta: 0.01 }),
  );
}
time('tokenWeights flow', () => tokenWeights(layout, 'flow'));
