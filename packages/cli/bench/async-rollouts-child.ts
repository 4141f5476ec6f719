// One GRPO run of the async-rollouts bench (async-rollouts.ts spawns it pinned to one core): the
// demo's GRPO phase from a demo folder's SFT model, sampled by a `flowgrpo serve` at URL through
// OpenAIPolicyEngine (the client a vLLM fleet gets), at max_staleness K. Then the last adapter is
// evaluated greedily on the demo's held-out questions here (not timed). Prints one JSON line.
//   node … async-rollouts-child.ts DEMO_DIR URL[,URL…] K OUT_DIR
// URL 'local' samples with the trainer's own engine.
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { OpenAIPolicyEngine, type PolicyEngine } from '@flowgrpo/agent';
import {
  DecoderArtifacts,
  greedy,
  LocalPolicyEngine,
  readArtifactsManifest,
  samplingGraph,
} from '@flowgrpo/models';
import { evaluate, type GRPOConfigInput, GRPOTrainer } from '@flowgrpo/trainer';
import {
  DEMO_TASKS,
  demoAgent,
  demoReward,
  demoTrainingReward,
  questionRows,
} from '@flowgrpo/trainer/demo';
import { demoGrpoConfig, demoSettings, demoTaskSetup } from '../src/demo/pipeline.js';

const [demoDir, url, kArg, out] = process.argv.slice(2) as [string, string, string, string];
const k = Number(kArg);
const { seed } = JSON.parse(readFileSync(join(demoDir, 'results.json'), 'utf8')) as {
  seed: number;
};
const s = demoSettings('full');
const { almanac, grpoQuestions, testQuestions, base } = await demoTaskSetup(out, seed, s);
const sft = join(demoDir, 'artifacts', 'sft');
const tokenizer = base.tokenizer;

const rolloutEngine = new OpenAIPolicyEngine({
  model: 'sft',
  baseURLs: url.split(','),
  tokenizer: { encode: (t) => tokenizer.encode(t), decode: (ids) => tokenizer.decode(ids) },
  retry: { maxRetries: 0 },
});
const trainer = new GRPOTrainer({
  config: {
    ...demoGrpoConfig(join(out, 'grpo'), s, seed, DEMO_TASKS.default, grpoQuestions),
    // The phase alone: the demo's validation evaluations would add the trainer's greedy
    // evaluations to both sides' time; the last adapter is what is compared.
    eval_steps: 0,
    load_best_model_at_end: false,
    max_staleness: k,
    ...(process.env.FLOWGRPO_BENCH_ASYNC_STEPS && {
      max_steps: Number(process.env.FLOWGRPO_BENCH_ASYNC_STEPS),
    }),
    ...(process.env.FLOWGRPO_BENCH_ASYNC_CONFIG &&
      (JSON.parse(process.env.FLOWGRPO_BENCH_ASYNC_CONFIG) as GRPOConfigInput)),
    // One core is this process's machine.
    intra_op_threads: 1,
  },
  artifacts: sft,
  tokenizer,
  agent: (policy) => demoAgent(policy, almanac),
  reward: demoTrainingReward(DEMO_TASKS.default),
  trainDataset: questionRows(grpoQuestions),
  // URL 'local': the trainer's own engine samples (one process; to tell the two apart).
  ...(url !== 'local' && { rolloutEngine }),
  device: 'cpu',
});
const t0 = performance.now();
const cpu0 = process.cpuUsage();
const run = await trainer.train();
const phaseS = (performance.now() - t0) / 1000;
const cpu = process.cpuUsage(cpu0);
const trainerCpuS = (cpu.user + cpu.system) / 1e6;

const rows = readFileSync(join(out, 'grpo', 'metrics.jsonl'), 'utf8')
  .trim()
  .split('\n')
  .map((l) => JSON.parse(l) as Record<string, number>)
  .filter((r) => r['timing/rollout_s'] !== undefined);
const mean = (key: string) => rows.reduce((a, r) => a + (r[key] ?? 0), 0) / rows.length;

const artifacts = await DecoderArtifacts.open(sft, {
  graphs: [samplingGraph(readArtifactsManifest(sft), 'cpu')],
  device: 'cpu',
  intraOpThreads: 1,
});
const engine = new LocalPolicyEngine({ artifacts, tokenizer, model: 'grpo' });
await engine.updateAdapter({ name: 'grpo', path: run.checkpoint! });
const ev = await evaluate({
  agent: demoAgent(greedy(engine as PolicyEngine), almanac),
  dataset: questionRows(testQuestions),
  reward: demoReward(),
  name: 'grpo',
});
await artifacts.release();
console.log(
  JSON.stringify({
    k,
    seed,
    steps: run.globalStep,
    phaseS,
    // Per step: the sampling side (rollouts and their rewards) and the update side (π_old's
    // forward and the optimizer steps), and how long each side waited for the other.
    sampleS: mean('timing/rollout_s') + mean('timing/reward_s'),
    updateS: mean('timing/logprobs_s') + mean('timing/train_s'),
    waitRolloutS: mean('timing/wait_rollout_s'),
    waitTrainS: mean('timing/wait_train_s'),
    staleness: mean('async/staleness_mean'),
    accuracy: ev.accuracy,
    ci95: ev.accuracy_ci95,
    format: ev.format_compliance,
    n: testQuestions.length,
    trainerCpuS,
  }),
);
