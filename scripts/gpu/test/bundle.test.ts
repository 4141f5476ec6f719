// The GPU measurement bundle, built and run here: scripts/gpu/bundle.sh into a temp folder, its
// size against the device tool's 64 MiB, then `run.sh --cpu-smoke` — the GPU run's steps on the
// CPU EP (and on Mesa lavapipe's WebGPU when it is installed, flagged as a software adapter) at
// the tiny shape — and the fields of the results.json it writes. The Python side runs what this
// machine has (the numpy fidelity reference; torch/transformers/PEFT are reported skipped).
import { spawnSync } from 'node:child_process';
import { mkdtempSync, readdirSync, readFileSync, rmSync, statSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { refuseWebgpu } from '../../../packages/trainer-cuda/bench/gpu/probes.js';
import {
  gpuMemoryDuring,
  initResults,
  readResults,
  recordStep,
} from '../../../packages/trainer-cuda/bench/gpu/results.js';

const root = join(import.meta.dirname, '..', '..', '..');
const tmp = mkdtempSync(join(tmpdir(), 'flowgrpo-gpu-bundle-'));
afterAll(() => rmSync(tmp, { recursive: true, force: true }));

const has = (cmd: string) => spawnSync('sh', ['-c', `command -v ${cmd}`]).status === 0;
const missing =
  process.platform !== 'linux' || process.arch !== 'x64'
    ? `the bundle is for x86-64 Linux (this is ${process.platform}-${process.arch})`
    : !has('xz')
      ? 'xz is not installed (apt-get install xz-utils)'
      : !has('python3')
        ? 'python3 is not installed'
        : undefined;
if (missing) console.log(`gpu bundle tests skipped: ${missing}`);

function du(dir: string): number {
  let n = 0;
  for (const e of readdirSync(dir, { withFileTypes: true })) {
    const p = join(dir, e.name);
    n += e.isDirectory() ? du(p) : statSync(p).size;
  }
  return n;
}

describe.skipIf(missing !== undefined)('scripts/gpu/bundle.sh and run.sh --cpu-smoke', () => {
  const bundle = join(tmp, 'bundle');
  const out = join(tmp, 'out');
  let built: ReturnType<typeof spawnSync>;
  let smoke: ReturnType<typeof spawnSync>;
  beforeAll(() => {
    built = spawnSync('bash', [join(root, 'scripts', 'gpu', 'bundle.sh'), bundle], {
      cwd: root,
      encoding: 'utf8',
    });
    if (built.status === 0)
      smoke = spawnSync('bash', [join(bundle, 'run.sh'), '--cpu-smoke', out], {
        encoding: 'utf8',
        env: { ...process.env, TMPDIR: tmp },
      });
  });

  it('bundles into at most 64 MiB: node, the CLI, the steps, ORT, the Python side', () => {
    expect(built.status, String(built.stderr)).toBe(0);
    const bytes = du(bundle);
    expect(bytes).toBeLessThanOrEqual(64 * 2 ** 20);
    for (const f of [
      'node.xz',
      'run.sh',
      'vkinfo.py',
      'torch_side.py',
      'numpy_qwen2.py',
      'shapes.json',
      'app/flowgrpo.js',
      'app/measure.js',
      'app/session-worker-main.js',
      'app/node_modules/onnxruntime-node/bin/napi-v6/linux/x64/libonnxruntime.so.1.xz',
      'app/node_modules/onnxruntime-node/bin/napi-v6/linux/x64/onnxruntime_binding.node',
    ])
      expect(statSync(join(bundle, f)).size, f).toBeGreaterThan(0);
    const manifest = JSON.parse(readFileSync(join(bundle, 'manifest.json'), 'utf8'));
    expect(manifest.onnxruntimeNode).toBe('1.30.0');
    // The Vulkan loaders come from apt; without a reachable mirror the bundle says so instead.
    if (manifest.vulkanDebs.length === 0) {
      console.log(`Vulkan loader packages not bundled: ${manifest.notes.join('; ')}`);
      expect(manifest.notes.join(' ')).toMatch(/Vulkan loader packages not bundled/);
    } else expect(manifest.vulkanDebs.some((d: string) => d.startsWith('libvulkan1_'))).toBe(true);
  });

  it('runs every step on the CPU and records each one in results.json', () => {
    expect(smoke?.status, `${smoke?.stdout}\n${smoke?.stderr}`).toBe(0);
    const r = readResults(join(out, 'results.json'));
    expect(r.format).toBe('flowgrpo-gpu-measurement');
    expect(r.mode).toBe('cpu-smoke');
    const s = r.steps;
    // The bundled node unpacked and ran the steps.
    expect(s.env!.ok).toBe(true);
    expect(s.env!.node).toBe(process.version);
    expect(s.env!.onnxruntimeNode).toBe('1.30.0');
    expect(s.env!.cli).toMatch(/^flowgrpo/);

    // The adapter is listed; a software one is never taken for the GPU.
    expect(Array.isArray(s.adapter!.vulkanDevices)).toBe(true);
    expect(s.adapter!.adapterIsHardware).toBe(false);

    // WebGPU steps run where a Vulkan device answers (lavapipe here), else say why they skipped.
    if (!s.adapter!.ok)
      for (const k of ['decode', 'train'])
        expect(s[`ours-${k}-tiny-webgpu`]!.skipped).toMatch(/webgpu unavailable/);
    for (const dev of ['cpu', ...(s.adapter!.ok ? ['webgpu'] : [])]) {
      const decode = s[`ours-decode-tiny-${dev}`]!;
      expect(decode.ok, JSON.stringify(decode)).toBe(true);
      const rows = decode.decode as { batch: number; tokensPerSecond: number }[];
      expect(rows.map((x) => x.batch)).toEqual([1, 4]);
      for (const x of rows) expect(x.tokensPerSecond).toBeGreaterThan(0);
      const train = s[`ours-train-tiny-${dev}`]!;
      expect(train.ok, JSON.stringify(train)).toBe(true);
      expect(train.tokensPerSecond).toBeGreaterThan(0);
      expect(Number.isFinite(train.firstLoss)).toBe(true);
      if (dev === 'webgpu') expect(decode.softwareAdapter).toBe(true);
      // The build switches measured beside it: the same step, its artifacts built the other way.
      for (const [v, dtype, ckpt] of [
        ['fp16', 'float16', false],
        ['ckpt', 'float32', true],
      ] as const) {
        const t = s[`ours-train-tiny-${dev}-${v}`]!;
        expect(t.ok, JSON.stringify(t)).toBe(true);
        expect(t.baseWeightsDtype).toBe(dtype);
        expect(t.gradientCheckpointing).toBe(ckpt);
        expect(t.tokensPerSecond).toBeGreaterThan(0);
        // The reference is the float32 step of the same run (same random weights, same rows).
        // float16 projections move the first loss by their rounding alone (measured 5e-7 here,
        // 1.7e-5 at 0.5B on the H200); recomputation by nothing (measured equal to the bit).
        if (ckpt) expect(t.firstLoss).toBeCloseTo(train.firstLoss as number, 5);
        else
          expect(Math.abs((t.firstLoss as number) - (train.firstLoss as number))).toBeLessThan(
            1e-3,
          );
      }
    }
    expect(readFileSync(join(out, 'summary.txt'), 'utf8')).toMatch(/LoRA train step tok\/s, fp16/);

    // The profile of a decode and a train step, when WebGPU is there (else skipped, with why).
    const profile = s['profile-tiny-webgpu']!;
    if (profile.skipped) console.log(`profile skipped: ${profile.skipped}`);
    else {
      expect(profile.ok, JSON.stringify(profile)).toBe(true);
      const train = profile.trainStep as { runs: number; gpuKernels: { top: unknown[] } };
      expect(train.runs).toBe(3);
      expect(train.gpuKernels.top.length).toBeGreaterThan(0);
    }

    // Fidelity: our folder and logits, compared by the Python side with what it has.
    expect(s['fidelity-ours']!.ok).toBe(true);
    const cmp = s['fidelity-compare']!;
    if (cmp.skipped) console.log(`fidelity comparison skipped: ${cmp.skipped}`);
    else {
      expect(cmp.ok, JSON.stringify(cmp)).toBe(true);
      const logits = cmp.logits as Record<string, { relNorm: number }>;
      const cpu = Object.entries(logits).find(([k]) => k.startsWith('cpu vs'))!;
      expect(cpu[1].relNorm).toBeLessThan(1e-5);
      expect(cmp.grads).toBeDefined();
    }

    // The Python side's steps either ran or say why not; the CUDA probe always reports.
    for (const name of ['ort-probe', 'torch-tiny'])
      expect(s[name]!.ok || typeof s[name]!.skipped === 'string', name).toBe(true);
    expect(s['cuda-probe']!.ok).toBe(true);
    expect(typeof s['cuda-probe']!.cudaLoads).toBe('boolean');

    expect(readFileSync(join(out, 'log.txt'), 'utf8')).toContain('=== ours-train-tiny-cpu');
    expect(readFileSync(join(out, 'summary.txt'), 'utf8')).toContain('## tiny');
  });

  it('a rerun with FLOWGRPO_GPU_STEPS runs only the steps it names, the rest recorded as not selected', () => {
    expect(built.status, String(built.stderr)).toBe(0);
    const again = join(tmp, 'out-again');
    const rerun = spawnSync('bash', [join(bundle, 'run.sh'), '--cpu-smoke', again], {
      encoding: 'utf8',
      env: { ...process.env, TMPDIR: tmp, FLOWGRPO_GPU_STEPS: 'env|ours-train-.*-cpu' },
    });
    expect(rerun.status, `${rerun.stdout}\n${rerun.stderr}`).toBe(0);
    const s = readResults(join(again, 'results.json')).steps;
    expect(s.env!.ok).toBe(true);
    expect(s['ours-train-tiny-cpu']!.ok).toBe(true);
    // Whole-name matches only: "env" does not select a step that merely contains it.
    for (const name of ['adapter', 'fidelity-ours', 'ours-decode-tiny-cpu', 'torch-tiny'])
      expect(s[name]!.skipped, name).toMatch(/^not selected \(FLOWGRPO_GPU_STEPS=/);
  });
});

describe('results.json records a step that failed', () => {
  const file = join(tmp, 'results.json');
  const base = { startMs: 1000, endMs: 3000, logTail: 'Segmentation fault' };
  it('a timeout with no output is an error carrying the log', () => {
    initResults(file, 'gpu');
    const r = recordStep(file, {
      ...base,
      name: 'x',
      outFile: join(tmp, 'absent.json'),
      exitCode: 124,
    });
    expect(r.ok).toBe(false);
    expect(r.error).toMatch(/timed out .*Segmentation fault/);
    expect(readResults(file).steps.x).toEqual(r);
  });
  it('figures followed by a non-zero exit are not a success', () => {
    const f = join(tmp, 'figures.json');
    writeFileSync(f, JSON.stringify({ ok: true, tokensPerSecond: 5 }));
    const r = recordStep(file, { ...base, name: 'y', outFile: f, exitCode: 1 });
    expect(r.ok).toBe(false);
    expect(r.tokensPerSecond).toBe(5);
  });
  it("takes the peak device memory inside the step's window", () => {
    const samples = join(tmp, 'gpumem.txt');
    writeFileSync(samples, '900 500\n1100 700\n2000 2500\n2900 900\n3100 9000\n');
    expect(gpuMemoryDuring(samples, 1000, 3000)).toEqual({
      peakMiB: 2500,
      baselineMiB: 500,
      samples: 3,
    });
  });
});

describe('the GPU run never reports a software adapter as the GPU', () => {
  const device = (name: string, type: string) => ({
    name,
    vendorId: 0x10de,
    deviceId: 0x2330,
    type,
    apiVersion: '1.4.0',
    driverVersion: 1,
  });
  const vk = (devices: unknown[]) => {
    const f = join(tmp, `vk-${devices.length}-${Math.random()}.json`);
    writeFileSync(f, JSON.stringify({ devices }));
    return f;
  };
  it('refuses when lavapipe/llvmpipe or SwiftShader is visible, by type or by name', () => {
    const nvidia = device('NVIDIA H100 80GB HBM3', 'discrete-gpu');
    expect(refuseWebgpu(vk([nvidia]), 'gpu')).toBeUndefined();
    expect(refuseWebgpu(vk([nvidia, device('llvmpipe (LLVM 15)', 'cpu')]), 'gpu')).toMatch(
      /software Vulkan adapter is visible \(llvmpipe/,
    );
    expect(refuseWebgpu(vk([device('SwiftShader Device', 'integrated-gpu')]), 'gpu')).toMatch(
      /SwiftShader/,
    );
    expect(refuseWebgpu(vk([]), 'gpu')).toMatch(/offers no device/);
    expect(refuseWebgpu(join(tmp, 'absent.json'), 'gpu')).toMatch(/no Vulkan device list/);
  });
  it('lets the CPU smoke run measure lavapipe (its figures are flagged instead)', () => {
    expect(refuseWebgpu(vk([device('llvmpipe (LLVM 15)', 'cpu')]), 'cpu-smoke')).toBeUndefined();
  });
});
