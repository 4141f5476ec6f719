import { type HostTensor, tensor, toTypedArray } from '@flowgrpo/graph';
import * as ort from 'onnxruntime-node';

// The bridge between @flowgrpo/graph's host tensors (what the reference evaluator computes and
// constants are made of: float64 storage whatever the dtype) and onnxruntime feeds/outputs.

/** A graph HostTensor as an onnxruntime tensor of its own dtype (a feed for session.run). */
export function toOrtTensor(t: HostTensor): ort.Tensor {
  if (t.dtype === 'bfloat16')
    throw new RangeError('onnxruntime-node has no bfloat16 tensors: cast to float32 or float16');
  return new ort.Tensor(t.dtype, toTypedArray(t) as never, [...t.shape]);
}

/** An onnxruntime host tensor (not a gpu-buffer one) as a graph HostTensor. */
export function fromOrtTensor(t: ort.Tensor): HostTensor {
  if (t.location !== 'cpu' && t.location !== 'cpu-pinned')
    throw new RangeError(`cannot read a ${t.location} tensor on the host; request a CPU output`);
  const data = t.data as ArrayLike<number | bigint | boolean>;
  return tensor(t.type as HostTensor['dtype'], [...t.dims], Array.from(data, Number));
}
