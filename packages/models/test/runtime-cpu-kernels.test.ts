// The instruction set of ONNX Runtime's float kernels, from a CPU's flags (runtime/cpu-kernels.ts).
// Expected values: MLAS's dispatch order in onnxruntime/core/mlas/lib/platform.cpp — AVX-512F
// kernels when the CPU has avx512f, else the FMA3 (AVX2) ones, else AVX, else SSE2. The flag lines
// are real /proc/cpuinfo excerpts: an AMD Zen 5 EPYC (this project's development machine) and an
// Intel Haswell-class Xeon.
import { describe, expect, it } from 'vitest';
import { cpuKernelInfo, kernelIsa } from '../src/index.js';

const zen5 =
  'fpu vme de pse tsc msr pae mce cx8 apic sep mtrr pge mca cmov pat pse36 clflush mmx fxsr sse sse2 ht syscall nx mmxext fxsr_opt pdpe1gb rdtscp lm rep_good nopl cpuid extd_apicid tsc_known_freq pni pclmulqdq ssse3 fma cx16 pcid sse4_1 sse4_2 x2apic movbe popcnt aes xsave avx f16c rdrand hypervisor lahf_lm cmp_legacy avx2 avx512f avx512dq avx512ifma avx512cd avx512bw avx512vl avx_vnni avx512_bf16 avx512vbmi avx512_vnni avx512_vp2intersect';
const haswell =
  'fpu vme de pse tsc msr pae mce cx8 apic sep mtrr pge mca cmov pat pse36 clflush mmx fxsr sse sse2 ss ht syscall nx pdpe1gb rdtscp lm constant_tsc rep_good nopl xtopology cpuid pni pclmulqdq ssse3 fma cx16 pcid sse4_1 sse4_2 x2apic movbe popcnt aes xsave avx f16c rdrand hypervisor lahf_lm abm bmi1 avx2 smep bmi2 erms invpcid';
const flags = (line: string) => new Set(line.split(' '));

describe('kernelIsa', () => {
  it("follows MLAS's dispatch order on x86-64", () => {
    expect(kernelIsa(flags(zen5), 'x64')).toBe('avx512f');
    expect(kernelIsa(flags(haswell), 'x64')).toBe('avx2');
    // AVX2 without FMA3 gets MLAS's AVX kernels (its AVX2 path is the FMA3 one).
    expect(kernelIsa(flags('sse2 avx avx2'), 'x64')).toBe('avx');
    expect(kernelIsa(flags('sse sse2'), 'x64')).toBe('sse2');
    expect(kernelIsa(new Set(), 'x64')).toBe('unknown');
    expect(kernelIsa(new Set(), 'arm64')).toBe('neon');
  });

  it("reports this machine's CPU and ORT's version", () => {
    const m = cpuKernelInfo();
    expect(m.cpu.length).toBeGreaterThan(0);
    expect(m.onnxruntime).toMatch(/^\d+\.\d+\.\d+/);
    expect(['avx512f', 'avx2', 'avx', 'sse2', 'neon', 'unknown']).toContain(m.isa);
  });
});
