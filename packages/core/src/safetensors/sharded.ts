import { access, readFile, rename, rm, writeFile } from 'node:fs/promises';
import { basename, dirname, join } from 'node:path';
import { dtypeByteSize, shapeSize, type Tensor } from '../dtype.js';
import { SafetensorsError } from './errors.js';
import type { SafetensorsTensorInfo } from './header.js';
import { openSafetensors, type SafetensorsFile, type SafetensorsReader } from './read.js';
import {
  type TensorSource,
  type TensorSources,
  tensorSourceEntries,
  writeSafetensors,
} from './write.js';

// Sharded checkpoints as transformers / huggingface_hub write them: `model.safetensors.index.json`
// = { "metadata": { "total_size": <sum of tensor bytes> }, "weight_map": { name: shard file } }
// next to `model-00001-of-0000N.safetensors`, ... A model that fits one shard is a single
// `model.safetensors` with no index.

export interface SafetensorsIndex {
  metadata: Record<string, string | number>;
  weight_map: Record<string, string>;
}

export function safetensorsIndexName(prefix = 'model'): string {
  return `${prefix}.safetensors.index.json`;
}

/** Reads and validates a `*.safetensors.index.json`. */
export async function readSafetensorsIndex(path: string): Promise<SafetensorsIndex> {
  const text = await readFile(path, 'utf8');
  let parsed: unknown;
  try {
    parsed = JSON.parse(text);
  } catch (cause) {
    throw new SafetensorsError(
      `index is not valid JSON: ${(cause as Error).message}`,
      { file: path, reason: 'invalid_json' },
      { cause },
    );
  }
  const obj = parsed as { metadata?: unknown; weight_map?: unknown } | null;
  if (typeof obj !== 'object' || obj === null || Array.isArray(obj)) {
    throw new SafetensorsError('index is not a JSON object', {
      file: path,
      reason: 'invalid_json',
    });
  }
  const map = obj.weight_map;
  if (typeof map !== 'object' || map === null || Array.isArray(map)) {
    throw new SafetensorsError('index has no weight_map object', {
      file: path,
      reason: 'invalid_header',
    });
  }
  for (const [name, shard] of Object.entries(map)) {
    if (typeof shard !== 'string' || shard === '' || shard !== basename(shard)) {
      // Shards must sit next to the index; a path would let an index point anywhere.
      throw new SafetensorsError(
        `weight_map entry must be a file name, got ${JSON.stringify(shard)}`,
        {
          file: path,
          tensor: name,
          reason: 'invalid_header',
        },
      );
    }
  }
  const metadata = obj.metadata ?? {};
  if (typeof metadata !== 'object' || metadata === null || Array.isArray(metadata)) {
    throw new SafetensorsError('index metadata must be an object', {
      file: path,
      reason: 'invalid_header',
    });
  }
  return {
    metadata: metadata as Record<string, string | number>,
    weight_map: map as Record<string, string>,
  };
}

export interface ShardedSafetensors extends SafetensorsReader {
  readonly indexPath: string;
  readonly index: SafetensorsIndex;
  /** The shard file (name) that holds `name`. */
  shardOf(name: string): string;
}

/**
 * Opens a sharded checkpoint through its index. Every shard is opened and its header checked
 * up front, so a missing shard or a tensor the index promises but a shard lacks fails here.
 */
export async function openShardedSafetensors(indexPath: string): Promise<ShardedSafetensors> {
  const index = await readSafetensorsIndex(indexPath);
  const dir = dirname(indexPath);
  const shards = new Map<string, SafetensorsFile>();
  try {
    for (const shard of new Set(Object.values(index.weight_map))) {
      try {
        shards.set(shard, await openSafetensors(join(dir, shard)));
      } catch (e) {
        if ((e as NodeJS.ErrnoException).code === 'ENOENT') {
          throw new SafetensorsError(
            `shard '${shard}' listed in the index does not exist`,
            { file: indexPath, reason: 'missing_shard' },
            { cause: e },
          );
        }
        throw e;
      }
    }
    for (const [name, shard] of Object.entries(index.weight_map)) {
      if (!shards.get(shard)!.has(name)) {
        throw new SafetensorsError(`index maps the tensor to '${shard}', which does not hold it`, {
          file: indexPath,
          tensor: name,
          reason: 'missing_tensor',
        });
      }
    }
  } catch (e) {
    await Promise.all([...shards.values()].map((s) => s.close()));
    throw e;
  }
  return new ShardedReader(indexPath, index, shards);
}

class ShardedReader implements ShardedSafetensors {
  readonly metadata: Record<string, string | number>;

  constructor(
    readonly indexPath: string,
    readonly index: SafetensorsIndex,
    private readonly shards: Map<string, SafetensorsFile>,
  ) {
    this.metadata = index.metadata;
  }

  names(): string[] {
    // Shard order, then data order within each shard.
    const out: string[] = [];
    for (const [shard, f] of this.shards) {
      for (const n of f.names()) if (this.index.weight_map[n] === shard) out.push(n);
    }
    return out;
  }

  has(name: string): boolean {
    return Object.hasOwn(this.index.weight_map, name);
  }

  shardOf(name: string): string {
    if (!this.has(name)) {
      throw new SafetensorsError('no such tensor in the index', {
        file: this.indexPath,
        tensor: name,
        reason: 'missing_tensor',
      });
    }
    return this.index.weight_map[name]!;
  }

  private file(name: string): SafetensorsFile {
    return this.shards.get(this.shardOf(name))!;
  }

  info(name: string): SafetensorsTensorInfo {
    return this.file(name).info(name);
  }

  readBytes(name: string): Promise<Uint8Array> {
    return this.file(name).readBytes(name);
  }

  read(name: string): Promise<Tensor> {
    return this.file(name).read(name);
  }

  async close(): Promise<void> {
    await Promise.all([...this.shards.values()].map((s) => s.close()));
  }

  [Symbol.asyncDispose](): Promise<void> {
    return this.close();
  }
}

async function exists(path: string): Promise<boolean> {
  try {
    await access(path);
    return true;
  } catch {
    return false;
  }
}

/**
 * Opens the weights of a model folder: `<prefix>.safetensors.index.json` when present,
 * otherwise the single `<prefix>.safetensors`.
 */
export async function openSafetensorsModel(
  dir: string,
  options: { prefix?: string } = {},
): Promise<SafetensorsReader> {
  const prefix = options.prefix ?? 'model';
  const indexPath = join(dir, safetensorsIndexName(prefix));
  if (await exists(indexPath)) return openShardedSafetensors(indexPath);
  return openSafetensors(join(dir, `${prefix}.safetensors`));
}

/** HF's default `max_shard_size` ("5GB", decimal). */
export const DEFAULT_MAX_SHARD_BYTES = 5_000_000_000;

export interface WriteShardedOptions {
  /** Largest shard, in tensor bytes (default 5 GB). A larger tensor gets a shard of its own. */
  maxShardSize?: number;
  /** File name prefix (default 'model'). */
  prefix?: string;
  /** `__metadata__` of every shard; default { format: 'pt' }, which transformers checks for. */
  metadata?: Record<string, string>;
}

export interface WrittenShardedSafetensors {
  /** Shard file names, in order. */
  files: string[];
  /** The index, or undefined when everything fit in one `<prefix>.safetensors`. */
  index: SafetensorsIndex | undefined;
}

/**
 * Splits tensors into shards the way huggingface_hub does (in the given order, starting a new
 * shard when the next tensor would push the current one past `maxShardSize`) and writes them
 * with their index. Shard sizes count tensor bytes, not headers.
 */
export async function writeShardedSafetensors(
  dir: string,
  tensors: TensorSources,
  options: WriteShardedOptions = {},
): Promise<WrittenShardedSafetensors> {
  const maxShard = options.maxShardSize ?? DEFAULT_MAX_SHARD_BYTES;
  const prefix = options.prefix ?? 'model';
  const metadata = options.metadata ?? { format: 'pt' };
  if (!(maxShard > 0)) {
    throw new RangeError(`maxShardSize must be positive, got ${maxShard}`);
  }
  const shards: [string, TensorSource][][] = [];
  let current: [string, TensorSource][] = [];
  let currentSize = 0;
  let total = 0;
  const seen = new Set<string>();
  for (const entry of tensorSourceEntries(tensors)) {
    if (seen.has(entry[0])) {
      throw new SafetensorsError('duplicate tensor name', {
        file: dir,
        tensor: entry[0],
        reason: 'invalid_header',
      });
    }
    seen.add(entry[0]);
    const size = shapeSize(entry[1].shape) * dtypeByteSize(entry[1].dtype);
    if (current.length > 0 && currentSize + size > maxShard) {
      shards.push(current);
      current = [];
      currentSize = 0;
    }
    current.push(entry);
    currentSize += size;
    total += size;
  }
  if (current.length > 0 || shards.length === 0) shards.push(current);

  const indexPath = join(dir, safetensorsIndexName(prefix));
  if (shards.length === 1) {
    const file = `${prefix}.safetensors`;
    await writeSafetensors(join(dir, file), shards[0]!, { metadata });
    // A stale index from an earlier sharded save would shadow the new single file.
    await rm(indexPath, { force: true });
    return { files: [file], index: undefined };
  }
  const n = String(shards.length).padStart(5, '0');
  const files: string[] = [];
  const weightMap: Record<string, string> = {};
  for (let i = 0; i < shards.length; i++) {
    const file = `${prefix}-${String(i + 1).padStart(5, '0')}-of-${n}.safetensors`;
    await writeSafetensors(join(dir, file), shards[i]!, { metadata });
    files.push(file);
    for (const [name] of shards[i]!) weightMap[name] = file;
  }
  const sortedMap: Record<string, string> = {};
  for (const name of Object.keys(weightMap).sort()) sortedMap[name] = weightMap[name]!;
  const index: SafetensorsIndex = { metadata: { total_size: total }, weight_map: sortedMap };
  const tmp = `${indexPath}.tmp-${process.pid}`;
  await writeFile(tmp, `${JSON.stringify(index, null, 2)}\n`);
  await rename(tmp, indexPath);
  return { files, index };
}
