import { existsSync } from 'node:fs';
import { writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { ToolError } from '../src/errors.js';
import { Workspace, withWorkspace } from '../src/workspace.js';

describe('Workspace', () => {
  it('creates a private temp dir, resolves paths inside it only, and removes it', async () => {
    const ws = await Workspace.create({ prefix: 'flowgrpo-test-' });
    expect(existsSync(ws.dir)).toBe(true);
    expect(ws.resolve('a/b.txt')).toBe(join(ws.dir, 'a', 'b.txt'));
    expect(() => ws.resolve('../escape.txt')).toThrow(ToolError);
    expect(() => ws.resolve('/etc/passwd')).toThrow(/outside the workspace/);
    await writeFile(ws.resolve('f.txt'), 'x');
    expect(await ws.listFiles()).toEqual(['f.txt']);
    await ws.cleanup();
    expect(existsSync(ws.dir)).toBe(false);
    await ws.cleanup(); // idempotent
  });

  it('withWorkspace removes the dir even when the callback throws', async () => {
    let dir = '';
    await expect(
      withWorkspace(async (ws) => {
        dir = ws.dir;
        throw new Error('boom');
      }),
    ).rejects.toThrow('boom');
    expect(dir).not.toBe('');
    expect(existsSync(dir)).toBe(false);
  });
});
