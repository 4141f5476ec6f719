import { mkdir, readdir, readFile, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import {
  openSafetensorsModel,
  openShardedSafetensors,
  readSafetensorsIndex,
  SafetensorsError,
  type TensorSource,
  writeSafetensors,
  writeShardedSafetensors,
} from '../src/index.js';
import { testDir } from './temp-dir.js';

const root = testDir('shard');

const f32 = (n: number, start: number): TensorSource => ({
  dtype: 'F32',
  shape: [n],
  data: Float32Array.from({ length: n }, (_, i) => start + i),
});

// Tensor byte sizes 40, 24, 16, 100, 8 with a 64-byte limit. Greedy in order:
// [a 40 + b 24 = 64] | [c 16] (c + d = 116 > 64) | [d 100, alone, over the limit] | [e 8].
const tensors: [string, TensorSource][] = [
  ['a', f32(10, 0)],
  ['b', f32(6, 100)],
  ['c', f32(4, 200)],
  ['d', f32(25, 300)],
  ['e', { dtype: 'I64', shape: [1], data: BigInt64Array.from([-5n]) }],
];

describe('sharded safetensors', () => {
  it('splits by max shard size and writes an HF-style index', async () => {
    const dir = join(root, 'sharded');
    await mkdir(dir);
    const out = await writeShardedSafetensors(dir, tensors, { maxShardSize: 64 });
    const names = [1, 2, 3, 4].map((i) => `model-0000${i}-of-00004.safetensors`);
    expect(out.files).toEqual(names);
    expect((await readdir(dir)).sort()).toEqual([...names, 'model.safetensors.index.json'].sort());
    const index = JSON.parse(await readFile(join(dir, 'model.safetensors.index.json'), 'utf8'));
    expect(index).toEqual({
      metadata: { total_size: 40 + 24 + 16 + 100 + 8 },
      weight_map: { a: names[0], b: names[0], c: names[1], d: names[2], e: names[3] },
    });
    expect(await readSafetensorsIndex(join(dir, 'model.safetensors.index.json'))).toEqual(index);

    await using model = await openSafetensorsModel(dir);
    expect(model.names()).toEqual(['a', 'b', 'c', 'd', 'e']);
    expect(model.metadata).toEqual({ total_size: 188 });
    expect(Array.from((await model.read('d')).data as Float32Array).slice(0, 3)).toEqual([
      300, 301, 302,
    ]);
    expect(Array.from((await model.read('e')).data as BigInt64Array)).toEqual([-5n]);
    expect(model.info('c')).toMatchObject({ dtype: 'F32', shape: [4], byteLength: 16 });
    expect(() => model.info('zzz')).toThrow(SafetensorsError);
  });

  it('writes a single model.safetensors without an index when everything fits', async () => {
    const dir = join(root, 'single');
    await mkdir(dir);
    // A stale index from an earlier sharded save must not survive.
    await writeFile(join(dir, 'model.safetensors.index.json'), '{"weight_map":{}}');
    const out = await writeShardedSafetensors(dir, tensors);
    expect(out).toEqual({ files: ['model.safetensors'], index: undefined });
    expect(await readdir(dir)).toEqual(['model.safetensors']);
    await using model = await openSafetensorsModel(dir);
    expect(model.metadata).toEqual({ format: 'pt' });
    expect(model.names().sort()).toEqual(['a', 'b', 'c', 'd', 'e']);
  });

  it('reports missing shards, tensors absent from their shard and malformed indexes', async () => {
    const dir = join(root, 'broken');
    await mkdir(dir);
    await writeSafetensors(join(dir, 's1.safetensors'), { a: f32(2, 0) });
    const idx = join(dir, 'model.safetensors.index.json');
    const put = (o: unknown) => writeFile(idx, typeof o === 'string' ? o : JSON.stringify(o));

    await put({ metadata: {}, weight_map: { a: 's1.safetensors', b: 's2.safetensors' } });
    await expect(openShardedSafetensors(idx)).rejects.toMatchObject({
      reason: 'missing_shard',
      file: idx,
    });
    await put({ metadata: {}, weight_map: { a: 's1.safetensors', b: 's1.safetensors' } });
    await expect(openShardedSafetensors(idx)).rejects.toMatchObject({
      reason: 'missing_tensor',
      tensor: 'b',
    });
    await put('{"weight_map": ');
    await expect(openShardedSafetensors(idx)).rejects.toMatchObject({ reason: 'invalid_json' });
    await put({ metadata: {} });
    await expect(openShardedSafetensors(idx)).rejects.toMatchObject({ reason: 'invalid_header' });
    await put({ weight_map: { a: '../s1.safetensors' } });
    await expect(openShardedSafetensors(idx)).rejects.toMatchObject({
      reason: 'invalid_header',
      tensor: 'a',
    });
  });

  it('rejects duplicate names across shards', async () => {
    const dir = join(root, 'dup');
    await mkdir(dir);
    await expect(
      writeShardedSafetensors(dir, [tensors[0]!, tensors[0]!], { maxShardSize: 40 }),
    ).rejects.toMatchObject({ reason: 'invalid_header', tensor: 'a' });
  });
});
