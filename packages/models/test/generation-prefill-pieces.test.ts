// Which prefills run whole and how wide the pieces of the others are (prefill-pieces.ts). The
// pieces themselves are tested against one-run prefills in generation-fused.test.ts.
import { describe, expect, it } from 'vitest';
import { checkPrefillLimits, prefillWidth } from '../src/generation/prefill-pieces.js';

describe('prefill pieces', () => {
  it("runs whole up to 2^24 score elements per head (the demo's 64 rows of 512 positions)", () => {
    expect(prefillWidth(64, 512, {})).toBe(512);
    expect(prefillWidth(1, 4000, {})).toBe(4000);
    expect(prefillWidth(65, 512, {})).toBe(15); // 1024 tokens over 65 rows
  });

  it('cuts a larger batch into pieces of prefillChunkTokens tokens, one column at least', () => {
    // The gateway's 48 concurrent prompts of ~1,800 tokens: 21 columns of 48 rows per run.
    expect(prefillWidth(48, 1800, {})).toBe(21);
    expect(prefillWidth(48, 1800, { prefillChunkTokens: 4800 })).toBe(100);
    expect(prefillWidth(2000, 600, {})).toBe(1);
    expect(prefillWidth(4, 10, { prefillWholeScores: 0, prefillChunkTokens: 5 })).toBe(1);
    expect(prefillWidth(4, 10, { prefillWholeScores: 0, prefillChunkTokens: 1000 })).toBe(10);
  });

  it('refuses limits that admit nothing', () => {
    expect(() => checkPrefillLimits({ prefillChunkTokens: 0 })).toThrow(RangeError);
    expect(() => checkPrefillLimits({ prefillChunkTokens: 1.5 })).toThrow(RangeError);
    expect(() => checkPrefillLimits({ prefillWholeScores: -1 })).toThrow(RangeError);
    expect(() =>
      checkPrefillLimits({ prefillWholeScores: 0, prefillChunkTokens: 1 }),
    ).not.toThrow();
  });
});
