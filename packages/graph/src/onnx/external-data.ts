// Resolve a model's external tensors back to inline bytes (inspection, tests, re-export).

import { closeSync, openSync, readSync } from 'node:fs';
import { resolve, sep } from 'node:path';
import { OnnxDecodeError } from './errors.js';
import type { OnnxGraph, OnnxModel, OnnxTensor } from './model.js';

/** Read the bytes of one external tensor from the folder its model lives in. */
export function readExternalTensor(t: OnnxTensor, dir: string): Uint8Array {
  if (!t.external) throw new OnnxDecodeError(`tensor "${t.name}" has no external data`);
  const root = resolve(dir);
  const file = resolve(root, t.external.location);
  // Same rule as ONNX Runtime: external data may not point outside the model's folder.
  if (!file.startsWith(root + sep)) {
    throw new OnnxDecodeError(`tensor "${t.name}": external location escapes ${root}`);
  }
  const out = new Uint8Array(t.external.length);
  const fd = openSync(file, 'r');
  try {
    let done = 0;
    while (done < out.byteLength) {
      const n = readSync(fd, out, done, out.byteLength - done, t.external.offset + done);
      if (n === 0) {
        throw new OnnxDecodeError(
          `tensor "${t.name}": ${file} ends before offset ${t.external.offset} + ${t.external.length}`,
        );
      }
      done += n;
    }
  } finally {
    closeSync(fd);
  }
  return out;
}

/** A copy of `model` whose external initializers (subgraphs included) carry their bytes inline. */
export function inlineExternalData(model: OnnxModel, dir: string): OnnxModel {
  const fix = (g: OnnxGraph): OnnxGraph => ({
    ...g,
    initializers: g.initializers.map((t) =>
      t.external
        ? { name: t.name, dataType: t.dataType, dims: t.dims, rawData: readExternalTensor(t, dir) }
        : t,
    ),
    nodes: g.nodes.map((n) =>
      n.attributes
        ? {
            ...n,
            attributes: Object.fromEntries(
              Object.entries(n.attributes).map(([k, a]) =>
                a.type === 'graph' ? [k, { type: 'graph' as const, value: fix(a.value) }] : [k, a],
              ),
            ),
          }
        : n,
    ),
  });
  return { ...model, graph: fix(model.graph) };
}
