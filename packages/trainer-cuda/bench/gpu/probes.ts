// What the machine is, before anything is timed: the environment, the WebGPU adapter, and
// whether onnxruntime-node can load a CUDA execution provider built for its version.
//
// The adapter: onnxruntime-node does not expose Dawn's adapter info, so scripts/gpu/vkinfo.py
// lists the Vulkan physical devices the loader offers under the same environment (name, vendor,
// type, driver); Dawn picks among exactly these. A CPU-type device (lavapipe/llvmpipe,
// SwiftShader) is a software adapter: the CPU smoke run flags it, and the GPU run refuses to
// report WebGPU figures while one is visible (it could be the one Dawn chose).

import { execFileSync } from 'node:child_process';
import { copyFileSync, existsSync, readdirSync, readFileSync } from 'node:fs';
import { cpus, totalmem } from 'node:os';
import { join } from 'node:path';
import {
  hasVulkanLoader,
  listBackends,
  ortBinaryDir,
  probeExecutionProvider,
} from '@flowgrpo/models';
import * as ort from 'onnxruntime-node';

/** The bundled CLI (flowgrpo.js beside this file in the bundle) starts here, ORT and all. */
function bundledCli(): { ok: boolean; detail: string } {
  const bin = join(import.meta.dirname, 'flowgrpo.js');
  if (!existsSync(bin)) return { ok: true, detail: 'not bundled (run from the sources)' };
  try {
    const help = execFileSync(process.execPath, [bin, '--help'], {
      encoding: 'utf8',
      timeout: 60_000,
    });
    return { ok: true, detail: help.split('\n')[0]! };
  } catch (e) {
    return { ok: false, detail: e instanceof Error ? e.message.slice(0, 1000) : String(e) };
  }
}

export function environment(mode: string): Record<string, unknown> {
  const cli = bundledCli();
  const smi = (() => {
    try {
      return execFileSync(
        'nvidia-smi',
        ['--query-gpu=name,driver_version,memory.total,clocks.max.sm', '--format=csv,noheader'],
        { encoding: 'utf8', timeout: 20_000 },
      ).trim();
    } catch (e) {
      return `nvidia-smi unavailable: ${e instanceof Error ? e.message.split('\n')[0] : String(e)}`;
    }
  })();
  return {
    ok: cli.ok,
    ...(cli.ok ? {} : { error: `the bundled flowgrpo CLI does not start: ${cli.detail}` }),
    cli: cli.detail,
    mode,
    node: process.version,
    onnxruntimeNode: ort.env.versions.node ?? ort.env.versions.common,
    backends: listBackends(),
    platform: `${process.platform}-${process.arch}`,
    cpus: cpus().length,
    cpuModel: cpus()[0]?.model ?? '?',
    memoryGiB: Math.round(totalmem() / 2 ** 30),
    gpu: smi,
    vulkanLoader: hasVulkanLoader(),
    vkDriverFiles: process.env.VK_DRIVER_FILES ?? null,
  };
}

export interface VulkanDevice {
  name: string;
  vendorId: number;
  deviceId: number;
  type: 'integrated-gpu' | 'discrete-gpu' | 'virtual-gpu' | 'cpu' | 'other';
  apiVersion: string;
  driverVersion: number;
}

/** Known software rasterisers, by name, in case one reports a GPU type. */
const SOFTWARE = /llvmpipe|lavapipe|swiftshader|softpipe/i;

export function isSoftware(d: VulkanDevice): boolean {
  return d.type === 'cpu' || SOFTWARE.test(d.name);
}

/** The adapter step: the Vulkan devices (from vkinfo.py's JSON) and a WebGPU EP probe. */
export async function adapter(vkinfoFile: string): Promise<Record<string, unknown>> {
  const vk = existsSync(vkinfoFile)
    ? (JSON.parse(readFileSync(vkinfoFile, 'utf8')) as { devices?: VulkanDevice[]; error?: string })
    : { error: `${vkinfoFile} was not written` };
  const devices = vk.devices ?? [];
  const software = devices.filter(isSoftware).map((d) => d.name);
  const hardware = devices.filter((d) => !isSoftware(d)).map((d) => d.name);
  const probe = hasVulkanLoader()
    ? await probeExecutionProvider('webgpu', 120_000)
    : { ok: false, reason: 'no Vulkan loader (libvulkan.so.1)' };
  return {
    ok: probe.ok,
    ...(probe.ok ? {} : { error: `WebGPU EP: ${probe.reason}` }),
    vulkanDevices: devices,
    ...(vk.error && { vulkanError: vk.error }),
    software,
    hardware,
    // The GPU run reports WebGPU figures only when every device the loader offers is hardware.
    adapterIsHardware: probe.ok && hardware.length > 0 && software.length === 0,
  };
}

/** Why WebGPU figures must not be reported as the GPU's, or undefined when they may. */
export function refuseWebgpu(vkinfoFile: string, mode: string): string | undefined {
  if (mode !== 'gpu') return undefined;
  if (!existsSync(vkinfoFile)) return 'no Vulkan device list (vkinfo.py did not run)';
  const devices = (JSON.parse(readFileSync(vkinfoFile, 'utf8')) as { devices?: VulkanDevice[] })
    .devices;
  if (!devices?.length) return 'the Vulkan loader offers no device';
  const soft = devices.filter(isSoftware);
  if (soft.length)
    return `a software Vulkan adapter is visible (${soft.map((d) => d.name).join(', ')}): Dawn could pick it`;
  return undefined;
}

/**
 * Can onnxruntime-node 1.30 load a CUDA EP? Copies the CUDA provider libraries found by
 * torch_side.py's ORT probe (the Python onnxruntime's package folder) next to our native
 * library — where onnxruntime looks for provider libraries — and runs the same child-process
 * probe `device: 'cuda'` runs. Reports; never fails the run.
 */
export async function cudaProbe(ortProbeFile: string): Promise<Record<string, unknown>> {
  const py = existsSync(ortProbeFile)
    ? (JSON.parse(readFileSync(ortProbeFile, 'utf8')) as {
        version?: string;
        providerLibraries?: string[];
      })
    : {};
  const libs = (py.providerLibraries ?? []).filter((p) =>
    /libonnxruntime_providers_(cuda|shared)\.so$/.test(p),
  );
  const dest = ortBinaryDir();
  const already = existsSync(join(dest, 'libonnxruntime_providers_cuda.so'));
  if (!already && !libs.some((p) => p.endsWith('libonnxruntime_providers_cuda.so'))) {
    return {
      ok: true,
      cudaLoads: false,
      reason: `no libonnxruntime_providers_cuda.so: not in onnxruntime-node's ${dest} and not in the Python onnxruntime ${py.version ?? '(absent)'}`,
      pythonProviderLibraries: py.providerLibraries ?? [],
    };
  }
  const copied: string[] = [];
  for (const lib of libs) {
    const to = join(dest, lib.split('/').at(-1)!);
    if (!existsSync(to)) {
      copyFileSync(lib, to);
      copied.push(lib);
    }
  }
  const probe = await probeExecutionProvider('cuda', 120_000);
  return {
    ok: true,
    cudaLoads: probe.ok,
    ...(probe.ok ? {} : { reason: probe.reason }),
    pythonOnnxruntime: py.version ?? null,
    copied,
    ortBinaryDir: dest,
    ortBinaryDirFiles: readdirSync(dest),
  };
}
