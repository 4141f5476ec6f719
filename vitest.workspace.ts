// The single list of test projects. Vitest 4 no longer reads this file by itself:
// vitest.config.ts imports `projects` from here.
import type { TestProjectInlineConfiguration } from 'vitest/config';

// Resolve sibling workspace packages from their TypeScript sources (see each package.json's
// "@flowgrpo/source" export condition), so tests never need a build first.
const sourceConditions = ['@flowgrpo/source', 'module', 'node', 'development|production'];

function pkg(
  name: string,
  dir: string,
  extra: { testTimeout?: number } = {},
): TestProjectInlineConfiguration {
  return {
    extends: true,
    resolve: { conditions: sourceConditions },
    ssr: { resolve: { conditions: sourceConditions, externalConditions: ['@flowgrpo/source'] } },
    test: {
      name,
      root: dir,
      include: ['test/**/*.test.ts', 'src/**/*.test.ts'],
      testTimeout: extra.testTimeout ?? 20_000,
      // beforeAll hooks build artifacts and train (cli eval/export run a whole `flowgrpo train`):
      // the same limit as the tests, not vitest's 10 s, which a busy machine could exceed.
      hookTimeout: extra.testTimeout ?? 20_000,
    },
  };
}

export const projects: TestProjectInlineConfiguration[] = [
  pkg('core', 'packages/core'),
  pkg('graph', 'packages/graph', { testTimeout: 60_000 }),
  pkg('grpo', 'packages/grpo-math'),
  pkg('reward', 'packages/reward-judge'),
  pkg('tools', 'packages/tools'),
  pkg('agent', 'packages/agent-solver'),
  pkg('models', 'packages/models', { testTimeout: 120_000 }),
  pkg('gateway', 'packages/gateway', { testTimeout: 120_000 }),
  pkg('trainer', 'packages/trainer-cuda', { testTimeout: 120_000 }),
  pkg('cli', 'packages/cli', { testTimeout: 120_000 }),
  pkg('viewer', 'packages/viewer', { testTimeout: 120_000 }),
  pkg('examples', 'examples/autodiff-mlp', { testTimeout: 120_000 }),
  // The policy gateway examples' quick paths: real agent frameworks trained through the gateway.
  ...['agent-openai-agents', 'agent-vercel-ai'].map((name) =>
    pkg(`example-${name}`, `examples/${name}`, { testTimeout: 180_000 }),
  ),
  // Each example's --quick path (examples/<name>/test), one project per example. The timeout only
  // guards against a hang: agentic-grpo's --quick, the longest, more than doubles with another
  // training run beside it (docs/performance.md, "Test durations"), and CI machines may be busier
  // still.
  ...['solver', 'data-prep', 'gsm8k-calculator', 'search-agent', 'agentic-grpo', 'lora-sft'].map(
    (name) => pkg(`example-${name}`, `examples/${name}`, { testTimeout: 600_000 }),
  ),
  // The guides' snippets equal regions of docs/snippets/*.ts (which `pnpm typecheck` compiles),
  // and the API reference script runs.
  pkg('docs', 'docs', { testTimeout: 180_000 }),
  // The GPU measurement's bundle (scripts/gpu/bundle.sh, ~40 MiB: xz of node and ORT, cached in
  // node_modules/.cache) and its --cpu-smoke run, the first bundle the longest (docs/
  // performance.md, "Test durations"); the timeout only guards against a hang.
  {
    extends: true,
    resolve: { conditions: sourceConditions },
    ssr: { resolve: { conditions: sourceConditions, externalConditions: ['@flowgrpo/source'] } },
    test: {
      name: 'gpu-bundle',
      root: 'scripts/gpu',
      include: ['test/*.test.ts'],
      testTimeout: 600_000,
      hookTimeout: 600_000,
    },
  },
  // Builds and packs the packages, installs them with npm into an app under the OS temp dir and
  // runs it (README "Use it in your app"): minutes on a cold npm cache or a slow disk, hence the
  // timeout, which only guards against a hang.
  {
    extends: true,
    test: {
      name: 'app',
      root: 'test-app',
      include: ['*.test.ts'],
      testTimeout: 600_000,
      hookTimeout: 600_000,
    },
  },
];
