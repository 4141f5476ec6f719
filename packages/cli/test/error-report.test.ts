import { ConfigError } from '@flowgrpo/core';
import { describe, expect, it } from 'vitest';
import { UsageError } from '../src/command.js';
import { debugRequested, reportError, withoutDebugFlag } from '../src/error-report.js';

// How an error is shown: `[CODE] message` and `fix: …`, exit 1; usage errors with the usage, exit
// 2; an unexpected error as INTERNAL_ERROR without its stack unless --debug asked for it.

describe('reportError', () => {
  it('a typed error: [CODE] message, the fix, exit 1, no stack', () => {
    const r = reportError(
      new ConfigError('run.json: max_steps: too small', {}, { hint: 'raise it' }),
      {
        debug: false,
      },
    );
    expect(r).toEqual({
      text: '[CONFIG_ERROR] run.json: max_steps: too small\nfix: raise it\n',
      exitCode: 1,
    });
  });

  it('a usage error: the usage follows, exit 2', () => {
    const r = reportError(new UsageError('--config is required'), {
      debug: false,
      usage: 'Usage: x',
    });
    expect(r).toEqual({ text: '[USAGE_ERROR] --config is required\n\nUsage: x\n', exitCode: 2 });
  });

  it('an unexpected error is INTERNAL_ERROR: the stack only with debug, causes included', () => {
    const error = new TypeError("Cannot read properties of undefined (reading 'x')", {
      cause: new RangeError('deeper'),
    });
    const plain = reportError(error, { debug: false });
    expect(plain.exitCode).toBe(1);
    expect(plain.text).toMatch(
      /^\[INTERNAL_ERROR\] Cannot read properties of undefined \(reading 'x'\)\nfix: run again with --debug/,
    );
    expect(plain.text).not.toMatch(/^\s+at /m);
    const debug = reportError(error, { debug: true });
    expect(debug.text).toMatch(/^TypeError: Cannot read/m);
    expect(debug.text).toMatch(/^\s+at /m);
    expect(debug.text).toContain('caused by:\nRangeError: deeper');
  });

  it('escape sequences in a message are shown escaped', () => {
    const r = reportError(new ConfigError('server said \x1b]52;c;eA==\x07'), { debug: false });
    expect(r.text).toBe('[CONFIG_ERROR] server said \\x1b]52;c;eA==\\x07\n');
  });
});

describe('--debug and FLOWGRPO_DEBUG', () => {
  it('--debug anywhere before `--`; FLOWGRPO_DEBUG unless empty, 0 or false', () => {
    expect(debugRequested(['train', '--debug'], {})).toBe(true);
    expect(debugRequested(['solve', '--', '--debug'], {})).toBe(false);
    expect(debugRequested(['train'], { FLOWGRPO_DEBUG: '1' })).toBe(true);
    for (const off of ['', '0', 'false'])
      expect(debugRequested(['train'], { FLOWGRPO_DEBUG: off })).toBe(false);
    expect(withoutDebugFlag(['train', '--debug', '--config', 'x', '--', '--debug'])).toEqual([
      'train',
      '--config',
      'x',
      '--',
      '--debug',
    ]);
  });
});
