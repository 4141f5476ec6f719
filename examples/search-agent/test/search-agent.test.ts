// The search-agent example: the /retrieve server's protocol, and the --quick path end to end
// (server up, warm start, GRPO steps with timings, F1 table, server down).
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { ByteLevelTokenizer } from '@flowgrpo/models';
import { RetrievalServerProvider } from '@flowgrpo/tools';
import { afterAll, describe, expect, it } from 'vitest';
import { sharedPath, skipWithoutShared } from '../../../test-utils/shared.js';
import { startRetrievalServer } from '../src/retrieval-server.js';
import { runSearchAgent, type SearchAgentRunResult } from '../src/run.js';

const tmp = mkdtempSync(join(tmpdir(), 'flowgrpo-example-search-'));
afterAll(() => rmSync(tmp, { recursive: true, force: true }));

describe('the retrieval server (POST /retrieve)', () => {
  const passages = [
    { id: 'p1', title: 'Paris', text: 'Paris is the capital of France.' },
    { id: 'p2', title: 'Berlin', text: 'Berlin is the capital of Germany.' },
    { id: 'p3', title: 'Rome', text: 'Rome is the capital of Italy and was founded long ago.' },
  ];

  it('answers the AReaL / Search-R1 request shapes, with and without scores', async () => {
    const server = await startRetrievalServer({ passages });
    try {
      const post = (body: unknown) =>
        fetch(server.url, {
          method: 'POST',
          headers: { 'content-type': 'application/json' },
          body: JSON.stringify(body),
        });
      const plain = (await (
        await post({ queries: ['capital of Germany', 'Italy'], topk: 2, return_scores: false })
      ).json()) as { result: { id: string; contents: string; wikipedia_title: string }[][] };
      expect(plain.result).toHaveLength(2);
      expect(plain.result[0]![0]).toEqual({
        id: 'p2',
        contents: '"Berlin"\nBerlin is the capital of Germany.',
        wikipedia_title: 'Berlin',
      });
      expect(plain.result[1]![0]!.wikipedia_title).toBe('Rome');
      const scored = (await (
        await post({ queries: ['France'], topk: 1, return_scores: true })
      ).json()) as { result: { document: { id: string }; score: number }[][] };
      expect(scored.result[0]![0]!.document.id).toBe('p1');
      expect(scored.result[0]![0]!.score).toBeGreaterThan(0);
      // The client the agent's tool uses reads both shapes back as hits.
      const hits = await new RetrievalServerProvider({ url: server.url }).search('Paris France');
      expect(hits[0]).toMatchObject({ title: 'Paris', text: 'Paris is the capital of France.' });
      expect((await post({ queries: 'not a list' })).status).toBe(400);
      expect((await post({ queries: ['x'], topk: 0 })).status).toBe(400);
      expect(server.queries).toBe(4);
    } finally {
      await server.close();
    }
    await expect(fetch(server.url, { method: 'POST', body: '{}' })).rejects.toThrow();
  });
});

describe.skipIf(skipWithoutShared('search-agent --quick (HotpotQA in ../shared/data)'))(
  'search-agent --quick',
  () => {
    let result: SearchAgentRunResult;
    const lines: string[] = [];

    it('runs: server, warm start, GRPO steps with timings, F1 before/after', async () => {
      result = await runSearchAgent({
        sharedDir: sharedPath(),
        out: join(tmp, 'quick'),
        quick: true,
        log: (l) => lines.push(l),
      });
      const out = lines.join('\n');
      expect(out).toMatch(
        /retrieval server: http:\/\/127\.0\.0\.1:\d+\/retrieve \(BM25 over 4947 passages/,
      );
      // Two GRPO steps (the quick budget), each with its timings.
      const stepLines = lines.filter((l) => /^step \d+: reward\(F1\)/.test(l));
      expect(stepLines).toHaveLength(2);
      for (const l of stepLines) expect(l).toMatch(/rollout [\d.]+ s .* train [\d.]+ s/);
      expect(out).toMatch(/F1 on 8 held-out HotpotQA questions/);
      expect(result.scores.map((s) => s.name)).toEqual(['base', 'sft', 'grpo']);
      for (const s of result.scores) {
        expect(s.n).toBe(8);
        expect(s.f1).toBeGreaterThanOrEqual(0);
        expect(s.f1).toBeLessThanOrEqual(1);
      }
      expect(out).toContain('retrieval server stopped');
      // Stopped means stopped: nothing listens on its port any more.
      await expect(fetch(result.retrieverUrl, { method: 'POST', body: '{}' })).rejects.toThrow();
    });

    it('masks observations: <information> segments are never trained on', () => {
      const demo = result.demonstration!;
      const tok = new ByteLevelTokenizer();
      const observations = demo.segments!.filter((g) => g.kind === 'observation');
      expect(observations.length).toBeGreaterThan(0);
      for (const g of observations) expect(g.trainable).toBe(false);
      expect(observations.map((g) => tok.decode(g.tokens)).join('')).toContain('<information>');
      const actions = demo.segments!.filter((g) => g.kind === 'action');
      for (const g of actions) expect(g.trainable).toBe(true);
      expect(tok.decode(actions[0]!.tokens)).toMatch(/<search> .+ <\/search>$/);
      // The retrieval server answered the demonstrations' and the rollouts' searches.
      expect(result.retrieverQueries).toBeGreaterThan(0);
      for (const m of result.steps) {
        const ratio = Number(m.trainable_token_ratio);
        expect(ratio).toBeGreaterThan(0);
        expect(ratio).toBeLessThan(1);
      }
    });
  },
);
