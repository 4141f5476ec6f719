import { defineConfig } from 'vitest/config';
import { projects } from './vitest.workspace.js';

export default defineConfig({
  test: {
    projects,
    // Print each skipped test's reason (e.g. ../shared absent) in the summary.
    reporters: ['default'],
  },
});
