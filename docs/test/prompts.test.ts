// docs/guides/agent.md shows the agents' prompts rendered for an example question; this renders
// them again from the code (docs/snippets/agent-prompts.ts) and checks the guide shows exactly
// that text, so a changed prompt fails here until the guide is updated.
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { renderedPrompts } from '../snippets/agent-prompts.js';

const guide = readFileSync(join(import.meta.dirname, '..', 'guides', 'agent.md'), 'utf8');
const prompts = renderedPrompts();

describe('docs: the prompts in the agent guide are the code’s', () => {
  it('renders every public prompt', () => {
    expect(Object.keys(prompts).sort()).toEqual(
      [
        'analyzerMessages',
        'defaultTagPrompt',
        'executorMessages',
        'generatorMessages',
        'plannerMessages',
        'policyPlannerMessages',
        'verifierMessages',
      ].sort(),
    );
  });

  it.each(Object.entries(prompts))('%s is shown as rendered', (name, text) => {
    const marker = `<!-- rendered: docs/snippets/agent-prompts.ts ${name} -->`;
    expect(guide).toContain(marker);
    const after = guide.slice(guide.indexOf(marker) + marker.length);
    const block = /^\s*```text\n([\s\S]*?)\n```/.exec(after)?.[1];
    expect(block, `the \`\`\`text block after ${marker}`).toBe(text);
  });
});
