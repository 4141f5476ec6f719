// Which execution providers can run here, and why not. Probes that might take the process down
// (Dawn/Vulkan driver initialisation, CUDA library loading) run in a child process, once per
// process; their answers are cached.

import { execFile } from 'node:child_process';
import { existsSync } from 'node:fs';
import { createRequire } from 'node:module';
import { delimiter, dirname, join } from 'node:path';
import { DEFAULT_IR_VERSION, DEFAULT_OPSET, encodeModel, OnnxDataType } from '@flowgrpo/graph';
import * as ort from 'onnxruntime-node';
import { type Device, ExecutionProviderUnavailableError } from './errors.js';
import { softwareVulkanAdapter } from './vulkan-drivers.js';

export type DeviceRequest = 'auto' | Device;

export interface DeviceAvailability {
  device: Device;
  available: boolean;
  /** Why it is unavailable ('' when available). */
  reason: string;
  /** What to install to make it available ('' when available). */
  fix: string;
}

export const CUDA_FIX =
  'reinstall onnxruntime-node with its CUDA step on a machine with an NVIDIA GPU, CUDA 12 and ' +
  'cuDNN 9 (and access to api.nuget.org): in the flowgrpo repository ' +
  '`ONNXRUNTIME_NODE_INSTALL=cuda12 pnpm -r rebuild onnxruntime-node ' +
  '--config.dangerously-allow-all-builds=true`, in an npm app ' +
  '`ONNXRUNTIME_NODE_INSTALL=cuda12 npm rebuild onnxruntime-node` (docs/install.md); ' +
  'or use device "webgpu" or "cpu"';

export const WEBGPU_FIX =
  'install a Vulkan loader and a Vulkan driver: `apt-get install libvulkan1` plus your GPU ' +
  "vendor's Vulkan driver; without a GPU, Mesa's software lavapipe from Debian " +
  'bookworm-backports works (`apt-get install -t bookworm-backports mesa-vulkan-drivers`, Mesa ' +
  '>= 25; Debian 12\'s own Mesa 22 is rejected by Dawn); or use device "cpu"';

const requireHere = createRequire(import.meta.url);

/** Folder holding onnxruntime-node's native libraries (where the CUDA step puts its .so files). */
export function ortBinaryDir(): string {
  const main = requireHere.resolve('onnxruntime-node');
  return join(dirname(main), '..', 'bin', 'napi-v6', process.platform, process.arch);
}

/** The backends onnxruntime-node was built with (`bundled: false` ones need its install step). */
export function listBackends(): { name: string; bundled: boolean }[] {
  return ort.listSupportedBackends().map((b) => ({ name: b.name, bundled: b.bundled }));
}

function libraryDirs(): string[] {
  const fromEnv = (process.env.LD_LIBRARY_PATH ?? '').split(delimiter).filter(Boolean);
  return [
    ...fromEnv,
    '/usr/lib/x86_64-linux-gnu',
    '/usr/lib/aarch64-linux-gnu',
    '/lib/x86_64-linux-gnu',
    '/usr/lib64',
    '/usr/lib',
    '/usr/local/lib',
  ];
}

/** True when a Vulkan loader library is installed (a driver may still be missing). */
export function hasVulkanLoader(): boolean {
  if (process.platform !== 'linux') return true; // elsewhere Dawn uses Metal/D3D12: let it probe
  return libraryDirs().some((d) => existsSync(join(d, 'libvulkan.so.1')));
}

let probeModel: Uint8Array | undefined;
/** y = x + x over a float vector: tiny, and supported by every EP we probe. */
function probeModelBytes(): Uint8Array {
  probeModel ??= encodeModel({
    irVersion: DEFAULT_IR_VERSION,
    opsetImports: [{ domain: '', version: DEFAULT_OPSET }],
    producerName: 'flowgrpo-probe',
    producerVersion: '0',
    graph: {
      name: 'probe',
      nodes: [{ opType: 'Add', inputs: ['x', 'x'], outputs: ['y'] }],
      inputs: [{ name: 'x', elemType: OnnxDataType.FLOAT, shape: [4] }],
      outputs: [{ name: 'y', elemType: OnnxDataType.FLOAT, shape: [4] }],
      initializers: [],
    },
  });
  return probeModel;
}

// The child process: creates a session on the EP (no CPU fallback), runs y = x + x, reports JSON.
const PROBE_SOURCE = `
const ort = require(process.env.FLOWGRPO_ORT_PATH);
const ep = process.env.FLOWGRPO_PROBE_EP;
const model = Buffer.from(process.env.FLOWGRPO_PROBE_MODEL, 'base64');
const report = (r) => process.stdout.write('\\n@@probe ' + JSON.stringify(r) + '\\n');
(async () => {
  try {
    const s = await ort.InferenceSession.create(model, {
      executionProviders: [ep],
      logSeverityLevel: 3,
      extra: { session: { disable_cpu_ep_fallback: '1' } },
    });
    const out = await s.run({ x: new ort.Tensor('float32', Float32Array.from([1, 2, 3, 4]), [4]) });
    const y = Array.from(out.y.data);
    const ok = y.join(',') === '2,4,6,8';
    report({ ok, reason: ok ? '' : 'probe computed ' + y.join(',') + ' instead of 2,4,6,8' });
    await s.release();
    process.exit(0);
  } catch (e) {
    report({ ok: false, reason: String(e && e.message || e) });
    process.exit(0);
  }
})();
`;

export interface ProbeResult {
  ok: boolean;
  reason: string;
}

/**
 * Create a session on `ep` in a child process and run a tiny graph. Never throws; a crash of the
 * child (an abort inside a driver) becomes `ok: false` with the signal and stderr in `reason`.
 */
export function probeExecutionProvider(
  ep: 'cuda' | 'webgpu',
  timeoutMs = 60_000,
): Promise<ProbeResult> {
  return new Promise((resolve) => {
    execFile(
      process.execPath,
      ['-e', PROBE_SOURCE],
      {
        timeout: timeoutMs,
        maxBuffer: 4 << 20,
        env: {
          ...process.env,
          FLOWGRPO_ORT_PATH: requireHere.resolve('onnxruntime-node'),
          FLOWGRPO_PROBE_EP: ep,
          FLOWGRPO_PROBE_MODEL: Buffer.from(probeModelBytes()).toString('base64'),
        },
      },
      (error, stdout, stderr) => {
        const line = stdout.split('\n').find((l) => l.startsWith('@@probe '));
        if (line) {
          const r = JSON.parse(line.slice('@@probe '.length)) as ProbeResult;
          if (!r.ok) r.reason = withStderrHint(r.reason, stderr);
          resolve(r);
          return;
        }
        const how = error?.killed
          ? `timed out after ${timeoutMs} ms`
          : `crashed (${error?.signal ?? `exit code ${error?.code ?? '?'}`})`;
        resolve({ ok: false, reason: withStderrHint(`the ${ep} probe process ${how}`, stderr) });
      },
    );
  });
}

function withStderrHint(reason: string, stderr: string): string {
  const hint = stderr
    .split('\n')
    .map((l) => l.trim())
    .find((l) => /vulkan|cuda|cudnn|libcu|\.so/i.test(l));
  return hint && !reason.includes(hint) ? `${reason.trim()} (${hint})` : reason.trim();
}

const cache = new Map<Device, Promise<DeviceAvailability>>();

async function check(device: Device): Promise<DeviceAvailability> {
  const unavailable = (reason: string, fix: string) => ({ device, available: false, reason, fix });
  if (device === 'cpu') return { device, available: true, reason: '', fix: '' };
  if (device === 'cuda') {
    if (!existsSync(join(ortBinaryDir(), 'libonnxruntime_providers_cuda.so'))) {
      return unavailable(
        'onnxruntime-node was installed without its CUDA execution provider ' +
          '(libonnxruntime_providers_cuda.so is absent; CUDA is not bundled in the npm package)',
        CUDA_FIX,
      );
    }
    const r = await probeExecutionProvider('cuda');
    return r.ok
      ? { device, available: true, reason: '', fix: '' }
      : unavailable(r.reason, CUDA_FIX);
  }
  if (!listBackends().some((b) => b.name === 'webgpu' && b.bundled)) {
    return unavailable('this onnxruntime-node build has no WebGPU execution provider', WEBGPU_FIX);
  }
  if (!hasVulkanLoader()) {
    return unavailable('no Vulkan loader (libvulkan.so.1) is installed', WEBGPU_FIX);
  }
  const r = await probeExecutionProvider('webgpu');
  return r.ok
    ? { device, available: true, reason: '', fix: '' }
    : unavailable(r.reason, WEBGPU_FIX);
}

/** Whether `device` can run here (probed once per process, in a child process). */
export function deviceAvailability(device: Device): Promise<DeviceAvailability> {
  let p = cache.get(device);
  if (!p) {
    p = check(device);
    cache.set(device, p);
  }
  return p;
}

/** All three devices' availability. */
export function listDevices(): Promise<DeviceAvailability[]> {
  return Promise.all((['cuda', 'webgpu', 'cpu'] as const).map(deviceAvailability));
}

export interface DeviceChoice {
  device: Device;
  /** Why this device, one line (for the run's log: "device: cpu (auto: …)"). */
  why: string;
}

/**
 * The device a request resolves to, and why. 'auto' picks cuda, then webgpu on a hardware
 * adapter, then cpu (never throws): it never picks a software Vulkan driver (Mesa lavapipe,
 * SwiftShader), which answers the WebGPU probe but computes slower than the CPU EP — asking for
 * 'webgpu' explicitly uses one. An explicit device that cannot run throws
 * ExecutionProviderUnavailableError with the fix.
 */
export async function chooseDevice(request: DeviceRequest): Promise<DeviceChoice> {
  const software = softwareVulkanAdapter();
  if (request !== 'auto') {
    const a = await deviceAvailability(request);
    if (!a.available)
      throw new ExecutionProviderUnavailableError({
        device: request,
        reason: a.reason,
        fix: a.fix,
      });
    const on = request === 'webgpu' && software ? ` on the software adapter ${software}` : '';
    return { device: request, why: `asked for${on}` };
  }
  const skipped: string[] = [];
  const cuda = await deviceAvailability('cuda');
  if (cuda.available) return { device: 'cuda', why: 'auto: the CUDA execution provider works' };
  skipped.push('no CUDA execution provider');
  if (software) {
    skipped.push(
      `WebGPU would run on the software adapter ${software}, which auto never picks (device "webgpu" uses it)`,
    );
  } else {
    const webgpu = await deviceAvailability('webgpu');
    if (webgpu.available) return { device: 'webgpu', why: 'auto: a WebGPU (Vulkan) GPU answers' };
    skipped.push('no WebGPU adapter');
  }
  return { device: 'cpu', why: `auto: ${skipped.join('; ')}` };
}

/** The device a request resolves to (see chooseDevice). */
export async function resolveDevice(request: DeviceRequest): Promise<Device> {
  return (await chooseDevice(request)).device;
}
