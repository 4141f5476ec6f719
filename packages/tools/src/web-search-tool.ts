import type { LLMEngine } from '@flowgrpo/core';
import { z } from 'zod';
import { synthesizeAnswer } from './rag.js';
import type { SearchHit, SearchProvider } from './search.js';
import {
  failureResult,
  successResult,
  type Tool,
  type ToolContext,
  type ToolResult,
} from './tool.js';

export type SearchResultStyle = 'numbered' | 'search-r1' | 'areal';

/**
 * Hits as text for a model. `numbered`: "1. Title (url)\ntext"; `search-r1`: "Doc 1(Title: X) text"
 * (Search-R1's `<information>` body); `areal`: `<p title="X">\ntext\n</p>` blocks (the AReaL
 * search agent's `<information>` body).
 */
export function formatSearchHits(
  hits: readonly SearchHit[],
  style: SearchResultStyle = 'numbered',
): string {
  if (hits.length === 0) return 'No results.';
  switch (style) {
    case 'search-r1':
      return hits.map((h, i) => `Doc ${i + 1}(Title: ${h.title}) ${h.text}`).join('\n');
    case 'areal':
      return hits.map((h) => `<p title="${h.title}">\n${h.text}\n</p>`).join('\n\n');
    default:
      return hits
        .map((h, i) => `${i + 1}. ${h.title}${h.url ? ` (${h.url})` : ''}\n${h.text}`)
        .join('\n\n');
  }
}

export interface WebSearchToolOptions {
  provider: SearchProvider;
  /** When given, the tool answers the query from the results instead of listing them. */
  engine?: LLMEngine;
  name?: string;
  /** Results when the input gives none; default 5. */
  defaultResults?: number;
  maxResults?: number;
  style?: SearchResultStyle;
}

export interface WebSearchToolInput {
  query: string;
  num_results?: number | undefined;
}

export function createWebSearchTool(options: WebSearchToolOptions): Tool<WebSearchToolInput> {
  const maxResults = options.maxResults ?? 10;
  const defaultResults = options.defaultResults ?? 5;
  return {
    name: options.name ?? 'Web_Search_Tool',
    description: options.engine
      ? 'Searches the web for the query and answers it from the top results.'
      : 'Searches the web for the query and returns the top results (title, URL, snippet).',
    inputSchema: z.object({
      query: z.string().min(1, 'query must not be empty'),
      num_results: z.number().int().min(1).max(maxResults).optional(),
    }),
    metadata: {
      version: '1.0.0',
      inputTypes: {
        query: 'str - what to search for',
        num_results: `int, optional - number of results (default ${defaultResults}, at most ${maxResults})`,
      },
      outputType: options.engine
        ? 'str - an answer grounded in the results'
        : 'str - numbered results',
      limitations: [
        `Results come from ${options.provider.name}; snippets are short and may be outdated.`,
        'Only suitable for general information search.',
      ],
      bestPractices: [
        'Use concise, keyword-rich questions.',
        'Follow up with the web RAG tool on a result URL for details.',
      ],
      examples: [
        { input: { query: 'capital of Australia' }, description: 'A general fact' },
        {
          input: { query: 'latest stable Node.js release', num_results: 3 },
          description: 'Three results only',
        },
      ],
      requiresLlm: options.engine !== undefined,
    },
    async execute(input: WebSearchToolInput, context: ToolContext): Promise<ToolResult> {
      const start = performance.now();
      try {
        const hits = await options.provider.search(input.query, {
          topK: input.num_results ?? defaultResults,
          ...(context.signal && { signal: context.signal }),
        });
        if (options.engine && hits.length > 0) {
          const answer = await synthesizeAnswer(
            options.engine,
            input.query,
            hits.map((h) => ({ text: `${h.title}${h.url ? ` (${h.url})` : ''}: ${h.text}` })),
            context.signal,
          );
          return successResult(answer, start);
        }
        return successResult(formatSearchHits(hits, options.style), start);
      } catch (error) {
        return failureResult(error, start);
      }
    },
  };
}
