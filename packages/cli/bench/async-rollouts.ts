// `pnpm bench` for asynchronous rollouts (issue #34): two machines on this one. A `flowgrpo
// serve` of the demo's SFT model, pinned to CPU 1, samples the demo's GRPO rollouts (LoRA
// adapters hot-loaded through vLLM's /v1/load_lora_adapter); the trainer, pinned to CPU 0,
// updates. The demo's GRPO phase (seed 1, 60 steps of 8 questions × 8 rollouts) runs at
// max_staleness 0, 1 and 2, in rounds (below) against the same server.
//
// Reported per run: the phase's wall time and steps per hour, the speed-up over the synchronous
// run, and that speed-up as a share of the bound the run's own phase times allow: with sampling S
// and updating U seconds per step, overlapping them at best turns S + U into max(S, U), so the
// bound is (S + U) / max(S, U). The held-out accuracy of each run's last
// adapter (360 questions, 95% Wilson intervals) says whether the stale samples cost learning.
//
// This machine's speed drifts by tens of percent over minutes (the same server and config
// sampled at 1.9 and 3.1 s a step minutes apart: docs/performance.md), more than the effect
// measured. So the three runs go in rounds — 0, 1, 2, then 0, 1, 2 again — and each speed-up is
// taken against the synchronous run of its own round; the rounds' spread is the figure's error.
// No run's schedule depends on timing, so the second round's accuracies should repeat the
// first's (a token can differ only at a near-tie, where a row's logits move in the last bits with
// its batch-mates): a check, not a second sample.
//
// The SFT model: FLOWGRPO_BENCH_DEMO=<a `flowgrpo demo` folder> (its results.json names the
// seed), else `flowgrpo demo --seed 1` is run once into node_modules/.cache (about 8 minutes).
// FLOWGRPO_BENCH_ASYNC_STEPS=N shortens each run to N steps (a try of the bench, not a figure);
// FLOWGRPO_BENCH_ASYNC_ROUNDS=N runs the three N times (default 2);
// FLOWGRPO_BENCH_ASYNC_SEEDS=1,2,3 runs the learning check across GRPO seeds instead (below);
// FLOWGRPO_BENCH_ASYNC_CONFIG='{"vllm_importance_sampling_mode": "token_mask"}' adds GRPO keys;
// FLOWGRPO_BENCH_ASYNC_URLS=http://a:8000/v1,http://b:8000/v1 samples on those servers instead
// (a vLLM fleet serving the demo's SFT checkpoint as `sft`: docs/scaling.md), no local server.
import { type ChildProcess, execFileSync, spawn } from 'node:child_process';
import { once } from 'node:events';
import { existsSync, mkdirSync, readFileSync, rmSync } from 'node:fs';
import { cpus } from 'node:os';
import { join } from 'node:path';
import { LORA_TARGET_MODULES, readArtifactsManifest } from '@flowgrpo/models';
import { runDemo } from '../src/demo/pipeline.js';

const pkg = join(import.meta.dirname, '..');
const cache = join(pkg, 'node_modules', '.cache', 'flowgrpo-bench-async');
const node = [process.execPath, '--conditions=@flowgrpo/source', '--import', 'tsx'];

console.log(`## Asynchronous rollouts: trainer on CPU 0, \`flowgrpo serve\` on CPU 1\n`);
const hasTaskset = (() => {
  try {
    execFileSync('taskset', ['-c', '0', 'true']);
    return true;
  } catch {
    return false;
  }
})();
if (cpus().length < 2 || !hasTaskset) {
  console.log(
    `skipped: needs 2 CPUs and taskset (have ${cpus().length} CPUs${hasTaskset ? '' : ', no taskset'})`,
  );
  process.exit(0);
}

const demo = process.env.FLOWGRPO_BENCH_DEMO ?? join(cache, 'demo');
/** The demo folder's SFT artifacts, readable by this version (a format change makes them stale). */
const readable = () => {
  try {
    readArtifactsManifest(join(demo, 'artifacts', 'sft'));
    return existsSync(join(demo, 'results.json'));
  } catch {
    return false;
  }
};
if (!readable()) {
  if (process.env.FLOWGRPO_BENCH_DEMO) {
    console.log(
      `skipped: ${demo} has no demo results or SFT artifacts this version reads; run \`flowgrpo demo --seed 1 --out ${demo}\` again`,
    );
    process.exit(0);
  }
  console.log(`running \`flowgrpo demo --seed 1\` into ${demo} for its SFT model …`);
  await runDemo({ seed: 1, outDir: demo });
}

/** Runs a child to its end, pinned to `cpu`; its last stdout line is JSON. */
async function pinned<T>(cpu: number, argv: string[], env: NodeJS.ProcessEnv = {}): Promise<T> {
  const child = spawn('taskset', ['-c', String(cpu), ...node, ...argv], {
    stdio: ['ignore', 'pipe', 'inherit'],
    env: { ...process.env, ...env },
  });
  let out = '';
  child.stdout.on('data', (d: Buffer) => (out += d));
  const [code] = (await once(child, 'exit')) as [number | null];
  if (code !== 0) throw new Error(`${argv[0]} exited with ${code}`);
  return JSON.parse(out.trim().split('\n').at(-1)!) as T;
}

/** `flowgrpo serve` of the demo's SFT model on `cpu`; resolves with its base URL. */
async function serve(cpu: number): Promise<{ url: string; server: ChildProcess }> {
  const bin = join(pkg, 'src', 'bin.ts');
  const server = spawn(
    'taskset',
    [
      '-c',
      String(cpu),
      ...node,
      bin,
      'serve',
      '--model',
      join(demo, 'artifacts', 'sft'),
      '--tokenizer',
      join(demo, 'models', 'base'),
      '--served-model-name',
      'sft',
      '--lora-r',
      '16',
      '--lora-alpha',
      '32',
      '--lora-targets',
      LORA_TARGET_MODULES.join(','),
      '--threads',
      '1',
      '--port',
      '0',
    ],
    { stdio: ['ignore', 'pipe', 'inherit'] },
  );
  let seen = '';
  for await (const chunk of server.stdout!) {
    seen += String(chunk);
    const m = /listening on (\S+)/.exec(seen);
    if (m) return { url: m[1]!, server };
  }
  throw new Error(`flowgrpo serve exited before listening: ${seen}`);
}

/** CPU seconds a process has used (utime + stime of /proc/<pid>/stat). */
function cpuSeconds(pid: number): number {
  const fields = readFileSync(`/proc/${pid}/stat`, 'utf8').split(') ')[1]!.split(' ');
  return (Number(fields[11]) + Number(fields[12])) / 100; // USER_HZ is 100 on Linux
}

interface Run {
  k: number;
  steps: number;
  phaseS: number;
  sampleS: number;
  updateS: number;
  waitRolloutS: number;
  waitTrainS: number;
  staleness: number;
  accuracy: number;
  ci95: [number, number];
  format: number;
  n: number;
  /** CPU seconds the trainer process used in the phase (its update and the agents' loop). */
  trainerCpuS: number;
  /** CPU seconds the server used in the phase. */
  serverCpuS?: number;
}

const pct = (x: number) => `${(100 * x).toFixed(1)}%`;

// The learning check across seeds (FLOWGRPO_BENCH_ASYNC_SEEDS=1,2,3): one run's accuracy is one
// draw of a GRPO phase whose outcome can fork on the rollouts' seed (docs/performance.md), so
// k = 1 is compared with k = 0 seed by seed. Each seed's two runs go side by side, one per core,
// with the trainer's own engine: the schedule (which adapter samples which batch) is the served
// runs', so the staleness is the same; the server's batching only moves logits in their last
// bits. Their times are no measure here (the rounds below are).
const seedList = process.env.FLOWGRPO_BENCH_ASYNC_SEEDS;
if (seedList) {
  console.log(
    "### Learning across GRPO seeds: max_staleness 0 and 1 side by side, one core each, the trainer's own engine\n",
  );
  const seeds = seedList.split(',').map(Number);
  if (seeds.some((x) => !Number.isInteger(x)))
    throw new Error(`FLOWGRPO_BENCH_ASYNC_SEEDS must be integers, got ${seedList}`);
  console.log(
    "| GRPO seed | max_staleness 0 [95% CI] | max_staleness 1 [95% CI] | k = 1 within k = 0's interval |",
  );
  console.log(`|${' --- |'.repeat(4)}`);
  /**
   * One GRPO run at `seed` and max_staleness k, on CPU k. The seed goes through the child's
   * FLOWGRPO_BENCH_ASYNC_CONFIG (beside any keys given there), so the task, its questions and the
   * SFT model stay the demo's.
   */
  const seeded = (seed: number, k: 0 | 1) => {
    const out = join(cache, `seed-${seed}-k${k}`);
    rmSync(out, { recursive: true, force: true });
    mkdirSync(out, { recursive: true });
    const config = JSON.parse(process.env.FLOWGRPO_BENCH_ASYNC_CONFIG ?? '{}') as object;
    return pinned<Run>(
      k,
      [join(pkg, 'bench', 'async-rollouts-child.ts'), demo, 'local', String(k), out],
      { FLOWGRPO_BENCH_ASYNC_CONFIG: JSON.stringify({ ...config, seed }) },
    );
  };
  const cell = (r: Run) => `${pct(r.accuracy)} [${pct(r.ci95[0])}, ${pct(r.ci95[1])}]`;
  const diffs: number[] = [];
  for (const seed of seeds) {
    const [k0, k1] = await Promise.all([seeded(seed, 0), seeded(seed, 1)]);
    const within = k1.accuracy >= k0.ci95[0] && k1.accuracy <= k0.ci95[1];
    diffs.push(k1.accuracy - k0.accuracy);
    console.log(`| ${seed} | ${cell(k0)} | ${cell(k1)} | ${within ? 'yes' : '**no**'} |`);
  }
  if (diffs.length > 1) {
    const mean = diffs.reduce((a, b) => a + b, 0) / diffs.length;
    const sd = Math.sqrt(diffs.reduce((a, d) => a + (d - mean) ** 2, 0) / (diffs.length - 1));
    console.log(
      `\nk = 1 − k = 0 over ${diffs.length} seeds: mean ${(100 * mean).toFixed(1)} points, standard deviation ${(100 * sd).toFixed(1)} points.`,
    );
  }
  process.exit(0);
}

const rounds = Number(process.env.FLOWGRPO_BENCH_ASYNC_ROUNDS ?? 2);
if (!Number.isInteger(rounds) || rounds < 1)
  throw new Error(
    `FLOWGRPO_BENCH_ASYNC_ROUNDS must be a positive integer, got ${process.env.FLOWGRPO_BENCH_ASYNC_ROUNDS}`,
  );
const fleet = process.env.FLOWGRPO_BENCH_ASYNC_URLS;
const { url, server } = fleet ? { url: fleet, server: undefined } : await serve(1);
const runs: (Run & { round: number })[] = [];
try {
  for (let round = 1; round <= rounds; round++)
    for (const k of [0, 1, 2]) {
      const out = join(cache, `run-k${k}`);
      rmSync(out, { recursive: true, force: true });
      mkdirSync(out, { recursive: true });
      const before = server ? cpuSeconds(server.pid!) : 0;
      const run = await pinned<Run>(0, [
        join(pkg, 'bench', 'async-rollouts-child.ts'),
        demo,
        url,
        String(k),
        out,
      ]);
      runs.push({
        ...run,
        round,
        ...(server && { serverCpuS: cpuSeconds(server.pid!) - before }),
      });
    }
} finally {
  server?.kill('SIGTERM');
}

/** (S + U) / max(S, U): what overlapping sampling S and updating U per step can give at best. */
const boundOf = (r: Run) => (r.sampleS + r.updateS) / Math.max(r.sampleS, r.updateS);
/** The speed-up of `r` over the synchronous run of its own round. */
const speedupOf = (r: Run & { round: number }) =>
  runs.find((s) => s.round === r.round && s.k === 0)!.phaseS / r.phaseS;
console.log(
  '| round | max_staleness | steps | phase (s) | steps/hour | speed-up | sampling S (s/step) | update U (s/step) | bound (S+U)/max(S,U) | speed-up / bound | trainer waited for rollouts (s/step) | CPU busy: trainer / server | staleness (mean) | held-out accuracy [95% CI] | format |',
);
console.log(`|${' --- |'.repeat(15)}`);
for (const r of runs) {
  const speedup = speedupOf(r);
  console.log(
    `| ${r.round} | ${r.k} | ${r.steps} | ${r.phaseS.toFixed(0)} | ${((3600 * r.steps) / r.phaseS).toFixed(0)} | ${speedup.toFixed(2)}× | ${r.sampleS.toFixed(2)} | ${r.updateS.toFixed(2)} | ${boundOf(r).toFixed(2)}× | ${pct(speedup / boundOf(r))} | ${r.waitRolloutS.toFixed(2)} | ${pct(r.trainerCpuS / r.phaseS)} / ${r.serverCpuS === undefined ? '–' : pct(r.serverCpuS / r.phaseS)} | ${r.staleness.toFixed(2)} | ${pct(r.accuracy)} [${pct(r.ci95[0])}, ${pct(r.ci95[1])}] | ${pct(r.format)} |`,
  );
}
if (rounds > 1) {
  console.log(
    '\n| max_staleness | speed-up, each round | speed-up / bound, each round | accuracy, each round |',
  );
  console.log(`|${' --- |'.repeat(4)}`);
  for (const k of [1, 2]) {
    const ks = runs.filter((r) => r.k === k);
    console.log(
      `| ${k} | ${ks.map((r) => `${speedupOf(r).toFixed(2)}×`).join(', ')} | ${ks.map((r) => pct(speedupOf(r) / boundOf(r))).join(', ')} | ${ks.map((r) => pct(r.accuracy)).join(', ')} |`,
    );
  }
}
console.log(
  "\nS: rollouts and their rewards; U: π_old's forward and the optimizer step (the synchronous run takes π_old from the update's own forward, so its U has no separate pass). Each run's bound is from its own S and U; its speed-up is over the synchronous run of its round.",
);
