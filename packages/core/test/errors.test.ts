import { describe, expect, it } from 'vitest';
import { ConfigError, DataFormatError, FlowGrpoError, ValidationError } from '../src/index.js';

describe('FlowGrpoError', () => {
  it('carries a stable code and recognises subclasses across copies', () => {
    const e = new DataFormatError('bad json', { file: 'a.jsonl', line: 3 });
    expect(e.code).toBe('DATA_FORMAT_ERROR');
    expect(e.message).toBe('a.jsonl:line 3: bad json');
    expect(e.line).toBe(3);
    expect(DataFormatError.isInstance(e)).toBe(true);
    expect(FlowGrpoError.isInstance(e)).toBe(true);
    expect(ConfigError.isInstance(e)).toBe(false);
    expect(ValidationError.isInstance(new Error('x'))).toBe(false);
    // A structurally identical object from "another copy" of the package is recognised.
    const foreign = Object.assign(new Error('x'), {
      [Symbol.for('flowgrpo.error')]: true,
      codes: ['DATA_FORMAT_ERROR', 'FLOWGRPO_ERROR'],
    });
    expect(DataFormatError.isInstance(foreign)).toBe(true);
    expect(e.name).toBe('DataFormatError');
  });

  it('keeps the cause', () => {
    const cause = new SyntaxError('Unexpected token');
    const e = new ConfigError('bad config', { key: 'lr' }, { cause });
    expect(e.cause).toBe(cause);
    expect(e.key).toBe('lr');
  });
});
