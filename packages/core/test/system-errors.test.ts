import { mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import { createServer, type Server } from 'node:net';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { closestName, didYouMean, type FlowGrpoError, systemError } from '../src/index.js';
import { testDir } from './temp-dir.js';

// Real failing file-system and network calls, mapped to the typed errors a user reads: the code,
// the path the message names, and the fix.

const dir = testDir('system-errors');

/** The error `call` throws, mapped. */
function mapped(call: () => unknown, context?: { what?: string; path?: string }): FlowGrpoError {
  try {
    call();
  } catch (error) {
    const typed = systemError(error, context);
    if (!typed) throw error;
    return typed;
  }
  throw new Error('the call did not fail');
}

describe('systemError', () => {
  const file = join(dir, 'a-file');
  writeFileSync(file, 'x');

  it('a file where a folder belongs (ENOTDIR, EEXIST from mkdir) names the file', () => {
    for (const call of [
      () => mkdirSync(join(file, 'sub', 'deeper'), { recursive: true }),
      () => mkdirSync(file, { recursive: true }),
      () => writeFileSync(join(file, 'inside'), 'x'),
    ]) {
      const e = mapped(call, { what: 'output_dir' });
      expect(e.code).toBe('NOT_A_DIRECTORY');
      expect(e.message).toContain(`output_dir: `);
      expect(e.message).toContain(`${file} is a file, where a folder belongs`);
      expect(e.hint).toContain(file);
    }
  });

  it('a folder where a file belongs (EISDIR), a missing file (ENOENT)', () => {
    // A read names no path (it is of an open file): the caller names it.
    const isDir = mapped(() => readFileSync(dir), { what: '--config', path: dir });
    expect(isDir.code).toBe('IS_A_DIRECTORY');
    expect(isDir.message).toBe(`--config: ${dir} is a folder, where a file belongs`);
    expect(mapped(() => readFileSync(dir)).message).toBe(
      'a folder was given where a file belongs (read)',
    );
    const missing = mapped(() => readFileSync(join(dir, 'nope.json')));
    expect(missing.code).toBe('FILE_NOT_FOUND');
    expect(missing.message).toBe(`file not found: ${join(dir, 'nope.json')}`);
    expect(missing.hint).toBeTruthy();
  });

  it('a full disk names the path given when Node names none (a write to an open file)', () => {
    const e = systemError(
      Object.assign(new Error('ENOSPC'), { code: 'ENOSPC', syscall: 'write' }),
      {
        what: '--out',
        path: '/data/out',
      },
    );
    expect(e?.code).toBe('DISK_FULL');
    expect(e?.message).toBe('--out: /data/out: no space left on the device (write)');
    expect(e?.hint).toContain('df -h');
  });

  it('a port in use (EADDRINUSE)', async () => {
    const listen = (s: Server, port: number) =>
      new Promise<void>((ok, fail) => {
        s.once('error', fail);
        s.listen(port, '127.0.0.1', () => ok());
      });
    const first = createServer();
    await listen(first, 0);
    const port = (first.address() as { port: number }).port;
    const second = createServer();
    const error = await listen(second, port).then(
      () => undefined,
      (e: unknown) => e,
    );
    first.close();
    const e = systemError(error);
    expect(e?.code).toBe('ADDRESS_IN_USE');
    expect(e?.message).toContain(`127.0.0.1:${port}`);
  });

  it('leaves other errors alone', () => {
    expect(systemError(new TypeError('x'))).toBeUndefined();
    expect(systemError(Object.assign(new Error('x'), { code: 'ERR_SOMETHING' }))).toBeUndefined();
    expect(systemError('a string')).toBeUndefined();
  });
});

describe('closestName', () => {
  it('suggests a near name (a swap, a missing or extra letter), not a far one', () => {
    const keys = ['learning_rate', 'max_steps', 'max_turns', 'output_dir'];
    expect(closestName('learning_rat', keys)).toBe('learning_rate');
    expect(closestName('max_stpes', keys)).toBe('max_steps');
    expect(closestName('Output_Dir', keys)).toBe('output_dir');
    expect(closestName('temperature', keys)).toBeUndefined();
    expect(didYouMean('trian', ['train', 'eval'])).toBe(' (did you mean train?)');
    expect(didYouMean('zzz', ['train', 'eval'])).toBe('');
  });
});
