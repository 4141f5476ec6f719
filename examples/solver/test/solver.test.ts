// The solver example against the project's scripted OpenAI-compatible server (a real HTTP
// server on 127.0.0.1): the printed trace, the offline Wikipedia, and the local planner path.
import { execFile } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { afterAll, describe, expect, it } from 'vitest';
import { sharedPath, skipWithoutShared } from '../../../test-utils/shared.js';
import { scriptedServer } from '../src/scripted-server.js';
import { loadPassages, runSolverExample, SEED_QUERY } from '../src/solve.js';

const tmp = mkdtempSync(join(tmpdir(), 'flowgrpo-example-solver-'));
afterAll(() => rmSync(tmp, { recursive: true, force: true }));
const repoRoot = join(import.meta.dirname, '..', '..', '..');

describe('solver example on the scripted server', () => {
  it('prints analysis, plans, tool commands, results, verifier decisions and the answer', async () => {
    const server = await scriptedServer();
    const lines: string[] = [];
    try {
      // A two-passage corpus stands in for the offline Wikipedia (no ../shared needed here).
      const r = await runSolverExample({
        baseURL: server.baseURL,
        model: 'test-model',
        passages: [
          { id: '1', title: 'AD 144', text: 'Events of the year 144.' },
          { id: '2', title: 'Rome', text: 'Rome is a city.' },
        ],
        maxSteps: 3,
        log: (l) => lines.push(l),
      });
      // The script (src/scripted-server.ts): calculator, then Wikipedia, stop at the 2nd check.
      expect(r.stopReason).toBe('verifier_stop');
      expect(r.steps).toBe(2);
      expect(r.finalAnswer).toBe('144 AD');
      const out = lines.join('\n');
      const order = [
        `Query: ${SEED_QUERY}`,
        '==> Step 0: query analysis',
        '==> Step 1: plan',
        '  tool: calculator',
        '  command: calculator({"expression":"12^2"})',
        ': 144', // the calculator really ran: 12^2 = 144
        '  verifier: CONTINUE',
        '==> Step 2: plan',
        '  tool: Wikipedia_RAG_Search_Tool',
        '"title":"AD 144"', // BM25 over the offline passages found the year's page
        '  verifier: STOP',
        '==> Final answer',
        'Answer: 144 AD',
      ];
      let at = 0;
      for (const piece of order) {
        const i = out.indexOf(piece, at);
        expect(i, piece).toBeGreaterThanOrEqual(0);
        at = i + piece.length;
      }
      // Every role reached the server: analyzer, planner ×2, executor ×2, verifier ×2, the
      // Wikipedia tool's title selection and answer, the generator.
      expect(server.requests.length).toBeGreaterThanOrEqual(9);
    } finally {
      await server.close();
    }
  });

  it('runs the planner on a local model (tiny, untrained) inside FlowRollout', async () => {
    const server = await scriptedServer();
    const lines: string[] = [];
    try {
      const r = await runSolverExample({
        baseURL: server.baseURL,
        model: 'test-model',
        passages: [{ id: '1', title: 'AD 144', text: 'Events of the year 144.' }],
        maxSteps: 2,
        local: 'tiny',
        workDir: join(tmp, 'local'),
        plannerTokens: 24,
        log: (l) => lines.push(l),
      });
      // The untrained planner writes bytes, not a NextStep: the seed's fallback is a final
      // answer (stop 'parse_error'), written by the generator on the server.
      const turns = r.trajectory!.turns!;
      expect(turns.length).toBeGreaterThanOrEqual(1);
      expect(turns[0]!.actionTokens.length).toBeGreaterThan(0);
      expect(turns[0]!.actionLogprobs).toHaveLength(turns[0]!.actionTokens.length);
      expect(lines.join('\n')).toMatch(/planner turn on the local model: \d+ tokens/);
      expect(r.finalAnswer).toBe('144 AD');
    } finally {
      await server.close();
    }
  });
});

describe.skipIf(skipWithoutShared('solver --quick (offline Wikipedia in ../shared/data)'))(
  'solver --quick through `pnpm example`',
  () => {
    it('reads the HotpotQA paragraphs as the offline Wikipedia and prints the trace', async () => {
      expect(
        (await loadPassages(sharedPath('data', 'hotpotqa', 'dev-distractor-500.jsonl'), 'hotpotqa'))
          .length,
      ).toBe(4947);
      const { stdout } = await promisify(execFile)(
        process.execPath,
        [join(repoRoot, 'scripts', 'example.mjs'), 'solver', '--quick'],
        { cwd: tmp, env: { ...process.env, INIT_CWD: tmp, OPENAI_BASE_URL: '' }, timeout: 100_000 },
      );
      expect(stdout).toContain("using the project's scripted OpenAI-compatible test server");
      expect(stdout).toMatch(/offline BM25 over 4947 passages/);
      expect(stdout).toContain('command: calculator({"expression":"12^2"})');
      expect(stdout).toMatch(/Answer: 144 AD\n/);
    }, 120_000);
  },
);
