import * as ort from 'onnxruntime-node';
import type { DecoderArtifacts } from '../artifacts/decoder-artifacts.js';
import type { DecoderConfig } from '../models/config.js';
import {
  pastKeyName,
  pastValueName,
  presentKeyName,
  presentValueName,
} from '../models/graph/decoder-graph.js';
import type { ValueSpec } from '../runtime/feeds.js';
import type { SessionWorker, WorkerSession } from '../runtime/session-worker.js';

// Where the step-by-step generator (step-generator.ts) runs the standard prefill and decode
// graphs: sessions of opened artifacts on this thread, the KV cache coming back here after each
// step; or a decode session in a worker thread, the cache staying there (on the GPU with WebGPU).

/** Last-position logits, with the run's outputs (its `present.*` cache) when the backend returns them. */
export type CachedLogits = Float32Array & { cache?: Record<string, ort.Tensor> };

/** Where the graphs run: sessions on this thread, or a decode session in a worker thread. */
export interface GenerationBackend {
  /** Input specs of the graph used for steps (for the LoRA feeds). */
  readonly inputs: readonly ValueSpec[];
  /** Runs the prompt from an empty cache; returns [B, vocab] last-position logits. */
  start(feeds: Record<string, ort.Tensor>, batch: number): Promise<Float32Array>;
  /** One step with the cache of the previous call. */
  step(feeds: Record<string, ort.Tensor>): Promise<Float32Array>;
  /** Calls that share a cache must not interleave. */
  readonly exclusive: boolean;
  /**
   * Keeps only batch rows `keep` (in order) of the last call's logits and cache: finished rows
   * leave the batch. Backends that cannot reach the cache leave this out.
   */
  compact?(logits: Float32Array, keep: readonly number[]): Float32Array;
  release(): Promise<void>;
}

function emptyPast(config: DecoderConfig, batch: number): Record<string, ort.Tensor> {
  const feeds: Record<string, ort.Tensor> = {};
  const dims = [batch, config.numKeyValueHeads, 0, config.headDim];
  for (let l = 0; l < config.numHiddenLayers; l++) {
    feeds[pastKeyName(l)] = new ort.Tensor('float32', new Float32Array(0), dims);
    feeds[pastValueName(l)] = new ort.Tensor('float32', new Float32Array(0), dims);
  }
  return feeds;
}

/** Sessions of an opened artifacts directory; the KV cache goes through this thread. */
export function localBackend(artifacts: DecoderArtifacts): GenerationBackend {
  // Looked up when used: artifacts opened with the generate graph alone never need it.
  const session = () => artifacts.session('decode');
  // Per generate call: a closure over that call's cache (calls may interleave).
  return {
    get inputs() {
      return session().inputs;
    },
    exclusive: false,
    async start(feeds, batch) {
      // Without a prefill session the decode graph prefills from an empty (length-0) cache:
      // the same numbers, and one copy of the weights in ORT instead of two.
      const prefill = artifacts.sessions.prefill;
      const decode = session();
      const r = prefill
        ? await prefill.run(feeds)
        : await decode.run({ ...emptyPast(artifacts.config, batch), ...feeds });
      return Object.assign(r.outputs.logits!.data as Float32Array, { cache: r.outputs });
    },
    async step(feeds) {
      const r = await session().run(feeds);
      return Object.assign(r.outputs.logits!.data as Float32Array, { cache: r.outputs });
    },
    compact(logits, keep) {
      const cache = (logits as CachedLogits).cache!;
      const V = artifacts.config.vocabSize;
      const kept = new Float32Array(keep.length * V);
      keep.forEach((b, i) => {
        kept.set(logits.subarray(b * V, (b + 1) * V), i * V);
      });
      const out: Record<string, ort.Tensor> = {};
      for (const [name, t] of Object.entries(cache)) {
        if (!name.startsWith('present.')) continue;
        const [, ...rest] = t.dims; // [B, kvHeads, S, d]
        const row = rest.reduce((a, d) => a * d, 1);
        const src = t.data as Float32Array;
        const data = new Float32Array(keep.length * row);
        keep.forEach((b, i) => {
          data.set(src.subarray(b * row, (b + 1) * row), i * row);
        });
        out[name] = new ort.Tensor('float32', data, [keep.length, ...rest]);
      }
      return Object.assign(kept, { cache: out });
    },
    async release() {},
  };
}

/** A decode session in a SessionWorker: the KV cache stays in the worker (on the GPU with WebGPU). */
export function workerBackend(
  session: WorkerSession,
  config: DecoderConfig,
  owned?: SessionWorker,
): GenerationBackend {
  return {
    inputs: session.inputs,
    exclusive: true,
    async start(feeds, batch) {
      // Explicit empty past overrides what the worker carried from the previous sequence.
      const out = await session.run({ ...emptyPast(config, batch), ...feeds });
      return out.logits!.data as Float32Array;
    },
    async step(feeds) {
      const out = await session.run(feeds);
      return out.logits!.data as Float32Array;
    },
    async release() {
      await session.release();
      await owned?.terminate();
    },
  };
}

/** The decode graph's past inputs from the last run's cache (local backends carry it here). */
export function pastOf(logits: CachedLogits, config: DecoderConfig): Record<string, ort.Tensor> {
  const feeds: Record<string, ort.Tensor> = {};
  const cache = logits.cache;
  if (cache)
    for (let l = 0; l < config.numHiddenLayers; l++) {
      feeds[pastKeyName(l)] = cache[presentKeyName(l)]!;
      feeds[pastValueName(l)] = cache[presentValueName(l)]!;
    }
  return feeds;
}
