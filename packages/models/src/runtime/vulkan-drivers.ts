// Whether WebGPU would run on a software Vulkan driver (Mesa lavapipe, SwiftShader): a CPU
// rasteriser that answers the WebGPU probe but computes slower than ONNX Runtime's own CPU EP.
// ONNX Runtime does not report Dawn's adapter, so this reads what the Vulkan loader reads: the
// driver manifests (ICD json files, each naming its driver library), and whether the machine has
// a GPU device node for a hardware driver to open. A hardware driver without its device finds no
// adapter, and Dawn then falls back to the software one.

import { existsSync, readdirSync, readFileSync, statSync } from 'node:fs';
import { homedir } from 'node:os';
import { delimiter, join } from 'node:path';

export interface VulkanDriver {
  /** The manifest (ICD json) that names it. */
  manifest: string;
  /** Its `ICD.library_path`. */
  library: string;
  /** The software rasteriser it is ('Mesa lavapipe', 'SwiftShader'), or undefined for hardware. */
  software: string | undefined;
}

const SOFTWARE_DRIVERS: [RegExp, string][] = [
  [/vulkan_lvp|lvp_icd/i, 'Mesa lavapipe'],
  [/swiftshader/i, 'SwiftShader'],
];

/** The folders and files the Vulkan loader reads driver manifests from, in its order. */
function manifestPlaces(env: NodeJS.ProcessEnv): string[] {
  const list = (v: string | undefined) => (v ?? '').split(delimiter).filter(Boolean);
  // VK_DRIVER_FILES (VK_ICD_FILENAMES before loader 1.3.207) replaces the search entirely.
  const only = list(env.VK_DRIVER_FILES ?? env.VK_ICD_FILENAMES);
  if (only.length > 0) return [...only, ...list(env.VK_ADD_DRIVER_FILES)];
  const configDirs = list(env.XDG_CONFIG_DIRS ?? '/etc/xdg');
  const dataHome = env.XDG_DATA_HOME ?? join(env.HOME ?? homedir(), '.local', 'share');
  const dataDirs = list(env.XDG_DATA_DIRS ?? '/usr/local/share:/usr/share');
  return [
    ...list(env.VK_ADD_DRIVER_FILES),
    ...configDirs.map((d) => join(d, 'vulkan', 'icd.d')),
    '/etc/vulkan/icd.d',
    join(dataHome, 'vulkan', 'icd.d'),
    ...dataDirs.map((d) => join(d, 'vulkan', 'icd.d')),
  ];
}

function readDriver(manifest: string): VulkanDriver | undefined {
  try {
    const json = JSON.parse(readFileSync(manifest, 'utf8')) as { ICD?: { library_path?: unknown } };
    const library = json.ICD?.library_path;
    if (typeof library !== 'string') return undefined;
    const software = SOFTWARE_DRIVERS.find(([re]) => re.test(library) || re.test(manifest))?.[1];
    return { manifest, library, software };
  } catch {
    return undefined; // a manifest the loader cannot read either
  }
}

/** The Vulkan drivers installed, as the loader would find them (one per manifest). */
export function vulkanDrivers(env: NodeJS.ProcessEnv = process.env): VulkanDriver[] {
  const drivers: VulkanDriver[] = [];
  const seen = new Set<string>();
  for (const place of manifestPlaces(env)) {
    if (!existsSync(place)) continue;
    const files = statSync(place).isDirectory()
      ? readdirSync(place)
          .filter((n) => n.endsWith('.json'))
          .sort()
          .map((n) => join(place, n))
      : [place];
    for (const f of files) {
      if (seen.has(f)) continue;
      seen.add(f);
      const d = readDriver(f);
      if (d) drivers.push(d);
    }
  }
  return drivers;
}

/**
 * True when a hardware Vulkan driver has a device to open here: a DRM render node (Mesa's
 * drivers, virtio-gpu), NVIDIA's device files, or WSL's GPU paravirtualisation device.
 */
export function hasGpuDeviceNode(dev = '/dev'): boolean {
  const has = (dir: string, re: RegExp) => {
    try {
      return readdirSync(dir).some((n) => re.test(n));
    } catch {
      return false;
    }
  };
  return has(join(dev, 'dri'), /^renderD\d+$/) || has(dev, /^(nvidia\d+|dxg)$/);
}

/**
 * The software rasteriser WebGPU would run on here ('Mesa lavapipe (libvulkan_lvp.so)'), or
 * undefined when a hardware driver has a GPU to drive (or off Linux, where Dawn uses Metal or
 * D3D12 and this cannot be told from files).
 */
export function softwareVulkanAdapter(
  o: { env?: NodeJS.ProcessEnv; dev?: string; platform?: NodeJS.Platform } = {},
): string | undefined {
  if ((o.platform ?? process.platform) !== 'linux') return undefined;
  const drivers = vulkanDrivers(o.env ?? process.env);
  const software = drivers.find((d) => d.software);
  if (!software) return undefined;
  const hardware = drivers.some((d) => !d.software) && hasGpuDeviceNode(o.dev);
  return hardware ? undefined : `${software.software} (${software.library})`;
}
