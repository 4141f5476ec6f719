import type { DecoderConfig, Device, LoraConfig, LoraParams } from '@flowgrpo/models';
import * as ort from 'onnxruntime-node';
import type { TrainStepState } from '../optimizer-step/train-step-runner.js';
import type { Targets, TrainRow } from './collate.js';
import type {
  LoraPolicyOptions,
  UpdateHyperParams,
  UpdateInputs,
  UpdateResult,
} from './lora-policy.js';

// The messages between WorkerLoraPolicy (policy-worker.ts) and its thread
// (policy-worker-main.ts). Everything crosses by structured clone; ort.Tensor is a class, so
// tensors cross as their type, dims and data.

export interface WireTensor {
  type: ort.Tensor.Type;
  dims: number[];
  data: ort.Tensor.DataType;
}

export const toWire = (t: ort.Tensor): WireTensor => ({
  type: t.type,
  dims: [...t.dims],
  data: t.data,
});
export const fromWire = (w: WireTensor): ort.Tensor =>
  new ort.Tensor(w.type as 'float32', w.data as Float32Array, w.dims);

export const mapRecord = <A, B>(r: Record<string, A>, f: (a: A) => B): Record<string, B> =>
  Object.fromEntries(Object.entries(r).map(([k, v]) => [k, f(v)]));

export interface WireState {
  step: number;
  m: Record<string, WireTensor>;
  v: Record<string, WireTensor>;
}

export type PolicyCall =
  | { op: 'open'; options: Omit<LoraPolicyOptions, 'state'> & { state?: WireState } }
  | {
      op: 'logprobs';
      rows: readonly TrainRow[];
      targets: Targets;
      options: { loraScale: number; temperature: number; maxTokensPerMicrobatch: number };
    }
  | {
      op: 'update';
      rows: readonly TrainRow[];
      targets: Targets;
      inputs: UpdateInputs;
      hp: UpdateHyperParams;
    }
  | { op: 'exportState' }
  | { op: 'release' };

/** What `open` answers: the policy's fixed facts and its starting adapter. */
export interface OpenedPolicy {
  config: DecoderConfig;
  lora: LoraConfig | undefined;
  paramSpecs: { name: string; shape: number[] }[];
  device: Device;
  step: number;
  params: LoraParams;
}

/** An update's result, with the adapter after it (unchanged when the step was skipped). */
export interface UpdatedPolicy {
  result: UpdateResult;
  params: LoraParams;
  step: number;
}

export interface WireTrainStepState {
  step: number;
  params: Record<string, WireTensor>;
  m: Record<string, WireTensor>;
  v: Record<string, WireTensor>;
}

export const stateToWire = (s: TrainStepState): WireTrainStepState => ({
  step: s.step,
  params: mapRecord(s.params, toWire),
  m: mapRecord(s.m, toWire),
  v: mapRecord(s.v, toWire),
});
export const stateFromWire = (s: WireTrainStepState): TrainStepState => ({
  step: s.step,
  params: mapRecord(s.params, fromWire),
  m: mapRecord(s.m, fromWire),
  v: mapRecord(s.v, fromWire),
});

export type PolicyReply =
  | { id: number; ok: true; value: unknown }
  | {
      id: number;
      ok: false;
      error: { name: string; message: string; hint?: string; stack?: string };
    };
