// Write an OnnxModel to disk: large initializers go to a (possibly shared) external-data file,
// the protobuf streams its chunks to a temporary file that is renamed into place.

import { closeSync, mkdirSync, openSync, renameSync, rmSync } from 'node:fs';
import { join, resolve } from 'node:path';
import { encodeModelChunks } from './encode-model.js';
import { OnnxEncodeError } from './errors.js';
import type { OnnxAttributeValue, OnnxGraph, OnnxModel, OnnxNode, OnnxTensor } from './model.js';
import { WeightsFileWriter, writeAll } from './weights-file.js';

export interface WriteModelOptions {
  /** Folder of the .onnx file (created if missing). External data paths are relative to it. */
  dir: string;
  fileName: string;
  /** External-data file name inside `dir` when no shared `weights` writer is given. */
  externalDataFile?: string;
  /** Initializers with at least this many bytes go to external data (default 1024, like onnx). */
  sizeThreshold?: number;
  /**
   * A shared writer (for several graphs over one weights file). When absent and some tensor is
   * large enough, `dir/externalDataFile` is created (truncated), written and closed; doing that
   * twice for one file in one process throws, since the second call would cut the first graph's
   * weights out from under it: pass one shared writer to every call instead.
   */
  weights?: WeightsFileWriter;
}

/** External-data files this process created through writeModel's own (unshared) writer. */
const ownedWeightFiles = new Set<string>();

export interface WriteModelResult {
  /** Absolute path of the .onnx file. */
  path: string;
  /** Size of the protobuf itself. */
  protobufBytes: number;
  /** Initializers stored as external data, and their bytes (shared ones counted here too). */
  externalTensors: number;
  externalBytes: number;
  /** The model as written: externalized initializers carry `external` instead of `rawData`. */
  model: OnnxModel;
}

export const DEFAULT_SIZE_THRESHOLD = 1024;

export function writeModel(model: OnnxModel, options: WriteModelOptions): WriteModelResult {
  const dir = resolve(options.dir);
  mkdirSync(dir, { recursive: true });
  const threshold = options.sizeThreshold ?? DEFAULT_SIZE_THRESHOLD;
  const externalName = options.externalDataFile ?? 'weights.data';

  let weights = options.weights;
  const ownsWeights = weights === undefined;
  if (weights && resolve(dir, weights.location) !== resolve(weights.path)) {
    throw new OnnxEncodeError(
      `weights file ${weights.path} is not at "${weights.location}" relative to ${dir}; ` +
        'create the WeightsFileWriter inside the model folder (or pass its relative location)',
      { where: options.fileName },
    );
  }
  const stats = { tensors: 0, bytes: 0 };

  const externalize = (t: OnnxTensor): OnnxTensor => {
    if (t.rawData === undefined || t.rawData.byteLength < threshold) return t;
    if (!weights) {
      const file = join(dir, externalName);
      if (ownedWeightFiles.has(file)) {
        throw new OnnxEncodeError(
          `${file} was already written for another graph in this process; rewriting it would ` +
            'break that graph: pass one shared WeightsFileWriter as `weights` to every writeModel call',
          { where: options.fileName },
        );
      }
      ownedWeightFiles.add(file);
      weights = new WeightsFileWriter(file);
    }
    const external = weights.append(t.rawData);
    stats.tensors++;
    stats.bytes += external.length;
    return { name: t.name, dataType: t.dataType, dims: t.dims, external };
  };

  let written: OnnxModel;
  try {
    written = { ...model, graph: mapGraph(model.graph, externalize) };
  } finally {
    if (ownsWeights) weights?.close();
  }

  const { chunks, length } = encodeModelChunks(written);
  const path = join(dir, options.fileName);
  const tmp = `${path}.tmp-${process.pid}`;
  const fd = openSync(tmp, 'w');
  try {
    for (const c of chunks) writeAll(fd, c);
  } catch (e) {
    closeSync(fd);
    rmSync(tmp, { force: true });
    throw e;
  }
  closeSync(fd);
  renameSync(tmp, path);
  return {
    path,
    protobufBytes: length,
    externalTensors: stats.tensors,
    externalBytes: stats.bytes,
    model: written,
  };
}

/** Apply `f` to the initializers of a graph and of every subgraph attribute (If, Loop, Scan, …). */
function mapGraph(g: OnnxGraph, f: (t: OnnxTensor) => OnnxTensor): OnnxGraph {
  return {
    ...g,
    initializers: g.initializers.map(f),
    nodes: g.nodes.map((n) => mapNodeGraphs(n, f)),
  };
}

function mapNodeGraphs(n: OnnxNode, f: (t: OnnxTensor) => OnnxTensor): OnnxNode {
  if (!n.attributes) return n;
  let changed = false;
  const attributes: Record<string, OnnxAttributeValue> = {};
  for (const [k, a] of Object.entries(n.attributes)) {
    if (a.type === 'graph') {
      attributes[k] = { type: 'graph', value: mapGraph(a.value, f) };
      changed = true;
    } else {
      attributes[k] = a;
    }
  }
  return changed ? { ...n, attributes } : n;
}
