// Execution-provider discovery against the real onnxruntime-node install: what it bundles, and
// what the child-process probes find on this machine.

import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import {
  deviceAvailability,
  hasGpuDeviceNode,
  hasVulkanLoader,
  listBackends,
  listDevices,
  probeExecutionProvider,
  softwareVulkanAdapter,
  vulkanDrivers,
} from '../src/runtime/index.js';

describe('execution providers', () => {
  it('onnxruntime-node 1.30 bundles cpu and webgpu; cuda comes from its install step', () => {
    const backends = Object.fromEntries(listBackends().map((b) => [b.name, b.bundled]));
    expect(backends.cpu).toBe(true);
    expect(backends.webgpu).toBe(true);
    expect(backends.cuda).toBe(false);
  });

  it('cpu is always available; every unavailable device says why and how to fix it', async () => {
    const all = await listDevices();
    expect(all.map((d) => d.device)).toEqual(['cuda', 'webgpu', 'cpu']);
    expect(all[2]).toEqual({ device: 'cpu', available: true, reason: '', fix: '' });
    for (const d of all.filter((x) => !x.available)) {
      expect(d.reason.length).toBeGreaterThan(10);
      expect(d.fix.length).toBeGreaterThan(10);
    }
    // Probed once per process: a second ask returns the same answer without probing again.
    expect(await deviceAvailability('webgpu')).toBe(await deviceAvailability('webgpu'));
  });

  it('probing WebGPU happens in a child process and never takes this process down', async () => {
    const r = await probeExecutionProvider('webgpu', 30_000);
    expect(typeof r.ok).toBe('boolean');
    if (!hasVulkanLoader()) {
      // Dawn finds no adapter without a Vulkan loader: the child reports it, we are still here.
      expect(r.ok).toBe(false);
      expect(r.reason).toMatch(/adapter|vulkan/i);
    }
  });
});

describe('software Vulkan drivers (auto never picks them)', () => {
  const root = mkdtempSync(join(tmpdir(), 'flowgrpo-vulkan-'));
  afterAll(() => rmSync(root, { recursive: true, force: true }));
  const icd = (dir: string, name: string, library: string) => {
    mkdirSync(dir, { recursive: true });
    writeFileSync(
      join(dir, name),
      JSON.stringify({ file_format_version: '1.0.0', ICD: { library_path: library } }),
    );
  };
  // A machine of our own: its driver manifests (as VK_DRIVER_FILES names them) and its /dev.
  const machine = (name: string, drivers: [string, string][], devices: string[]) => {
    const dir = join(root, name);
    for (const [file, lib] of drivers) icd(join(dir, 'icd.d'), file, lib);
    mkdirSync(join(dir, 'dev'), { recursive: true });
    for (const d of devices) {
      mkdirSync(join(dir, 'dev', d, '..'), { recursive: true });
      writeFileSync(join(dir, 'dev', d), '');
    }
    return { env: { VK_DRIVER_FILES: join(dir, 'icd.d') }, dev: join(dir, 'dev') };
  };
  const linux = 'linux' as const;

  it('lavapipe alone, or beside hardware drivers without a GPU, is a software adapter', () => {
    const lvp: [string, string] = ['lvp_icd.json', 'libvulkan_lvp.so'];
    const radeon: [string, string] = ['radeon_icd.json', 'libvulkan_radeon.so'];
    const alone = machine('alone', [lvp], []);
    expect(vulkanDrivers(alone.env).map((d) => [d.library, d.software])).toEqual([
      ['libvulkan_lvp.so', 'Mesa lavapipe'],
    ]);
    expect(softwareVulkanAdapter({ ...alone, platform: linux })).toBe(
      'Mesa lavapipe (libvulkan_lvp.so)',
    );
    // Debian's mesa-vulkan-drivers installs every Mesa driver; without /dev/dri none finds a GPU.
    const noGpu = machine('no-gpu', [lvp, radeon], []);
    expect(hasGpuDeviceNode(noGpu.dev)).toBe(false);
    expect(softwareVulkanAdapter({ ...noGpu, platform: linux })).toBe(
      'Mesa lavapipe (libvulkan_lvp.so)',
    );
    const swiftshader = machine(
      'swiftshader',
      [['vk_swiftshader_icd.json', './libvk_swiftshader.so']],
      [],
    );
    expect(softwareVulkanAdapter({ ...swiftshader, platform: linux })).toBe(
      'SwiftShader (./libvk_swiftshader.so)',
    );
  });

  it('a hardware driver with a GPU device node, or no software driver, is not', () => {
    const lvp: [string, string] = ['lvp_icd.json', 'libvulkan_lvp.so'];
    const amd = machine(
      'amd',
      [lvp, ['radeon_icd.json', 'libvulkan_radeon.so']],
      ['dri/renderD128'],
    );
    expect(hasGpuDeviceNode(amd.dev)).toBe(true);
    expect(softwareVulkanAdapter({ ...amd, platform: linux })).toBeUndefined();
    const nvidia = machine('nvidia', [lvp, ['nvidia_icd.json', 'libGLX_nvidia.so.0']], ['nvidia0']);
    expect(softwareVulkanAdapter({ ...nvidia, platform: linux })).toBeUndefined();
    const none = machine('none', [], []);
    expect(softwareVulkanAdapter({ ...none, platform: linux })).toBeUndefined();
    // Off Linux, Dawn uses Metal / D3D12: nothing to read.
    expect(
      softwareVulkanAdapter({ ...machine('mac', [lvp], []), platform: 'darwin' }),
    ).toBeUndefined();
  });

  it('an unreadable manifest is skipped, as the Vulkan loader skips it', () => {
    const m = machine('broken', [['lvp_icd.json', 'libvulkan_lvp.so']], []);
    writeFileSync(join(root, 'broken', 'icd.d', 'zz_broken.json'), '{not json');
    expect(vulkanDrivers(m.env)).toHaveLength(1);
  });
});
