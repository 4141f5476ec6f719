import { readFileSync } from 'node:fs';
import { arch, cpus } from 'node:os';
import * as ort from 'onnxruntime-node';

// Which CPU ran a result, and which of ONNX Runtime's float kernels it gets. ORT's MLAS library
// picks its GEMM and elementwise kernels by the CPU's instruction set when it loads (on x86-64:
// AVX-512F, else AVX2 with FMA3, else AVX, else SSE2; AMX only for int8/bf16 matrix work), and
// kernels of different widths sum in different orders: the same seed can round differently on
// another CPU. A result that may move with that is recorded with the machine it came from.

/** The instruction set whose float kernels MLAS uses, from the CPU's feature flags. */
export type KernelIsa = 'avx512f' | 'avx2' | 'avx' | 'sse2' | 'neon' | 'unknown';

export interface CpuKernelInfo {
  /** The CPU's model name (os.cpus()). */
  cpu: string;
  /** The instruction set of ORT's float kernels on this CPU (MLAS's dispatch order). */
  isa: KernelIsa;
  /** AMX tiles present (used by ORT for int8/bf16 matrix products, not for float32 graphs). */
  amx: boolean;
  /** onnxruntime-node's version. */
  onnxruntime: string;
}

/** MLAS's float-kernel choice for a set of /proc/cpuinfo flags (x86-64) or the architecture. */
export function kernelIsa(flags: ReadonlySet<string>, architecture: string): KernelIsa {
  if (architecture === 'arm64') return 'neon';
  if (architecture !== 'x64') return 'unknown';
  if (flags.has('avx512f')) return 'avx512f';
  if (flags.has('avx2') && flags.has('fma')) return 'avx2';
  if (flags.has('avx')) return 'avx';
  if (flags.has('sse2')) return 'sse2';
  return 'unknown';
}

/** The first processor's feature flags from /proc/cpuinfo (empty where there is none). */
function cpuFlags(): Set<string> {
  try {
    const line = /^flags\s*:\s*(.*)$/m.exec(readFileSync('/proc/cpuinfo', 'utf8'))?.[1] ?? '';
    return new Set(line.split(/\s+/).filter(Boolean));
  } catch {
    return new Set();
  }
}

/** This machine's CPU, its ORT float kernels and ORT's version. */
export function cpuKernelInfo(): CpuKernelInfo {
  const flags = cpuFlags();
  return {
    cpu: cpus()[0]?.model.trim() || 'unknown',
    isa: kernelIsa(flags, arch()),
    amx: flags.has('amx_tile'),
    onnxruntime: ort.env.versions.node ?? ort.env.versions.common,
  };
}
