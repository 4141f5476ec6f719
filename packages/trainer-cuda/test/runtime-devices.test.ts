// Execution-provider discovery against the real onnxruntime-node install: what it bundles, and
// what the child-process probes find on this machine.

import { describe, expect, it } from 'vitest';
import {
  deviceAvailability,
  hasVulkanLoader,
  listBackends,
  listDevices,
  probeExecutionProvider,
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
