import type { LLMEngine } from '@flowgrpo/core';
import { z } from 'zod';
import { type ChunkOptions, chunkText } from './chunk-text.js';
import type { EmbedFunction } from './embeddings.js';
import { rankChunks, referenceBlock, synthesizeAnswer } from './rag.js';
import type { SearchHit, WikipediaBackend } from './search.js';
import {
  failureResult,
  type JsonValue,
  successResult,
  type Tool,
  type ToolContext,
  type ToolResult,
} from './tool.js';

export interface WikipediaToolOptions extends ChunkOptions {
  /** MediaWikiClient for the live site, LocalCorpus offline. */
  backend: WikipediaBackend;
  /** Picks relevant titles and writes each page's answer; without one: top titles, raw passages. */
  engine?: LLMEngine;
  embed?: EmbedFunction;
  name?: string;
  /** Search results considered; default 10. */
  searchResults?: number;
  /** Pages read; default 3. */
  maxPages?: number;
  /** Passages per page given to the answer; default 5. */
  topK?: number;
}

export interface WikipediaToolInput {
  query: string;
}

const Selection = z.object({
  matched_queries: z.array(z.string()),
  matched_query_ids: z.array(z.number().int()),
});

async function selectTitles(
  engine: LLMEngine | undefined,
  query: string,
  hits: SearchHit[],
  maxPages: number,
  signal: AbortSignal | undefined,
): Promise<string[]> {
  const fallback = hits.slice(0, maxPages).map((h) => h.title);
  if (!engine) return fallback;
  const candidates = hits.map((h, i) => `${i}. ${h.title}`).join('\n');
  try {
    const { object } = await engine.generateObject(
      [
        {
          role: 'user',
          content:
            `Question: ${query}\n\nWikipedia search returned these page titles:\n${candidates}\n\n` +
            `Pick at most ${maxPages} titles whose pages most likely answer the question. Return ` +
            'their titles in matched_queries and their numbers in matched_query_ids.',
        },
      ],
      Selection,
      { temperature: 0, schemaName: 'select_relevant_queries', ...(signal && { signal }) },
    );
    const titles = new Set<string>();
    for (const id of object.matched_query_ids) {
      const hit = hits[id];
      if (hit) titles.add(hit.title);
    }
    const known = new Map(hits.map((h) => [h.title.toLowerCase(), h.title]));
    for (const t of object.matched_queries) {
      const title = known.get(t.toLowerCase());
      if (title) titles.add(title);
    }
    const picked = [...titles].slice(0, maxPages);
    return picked.length > 0 ? picked : fallback.slice(0, 1);
  } catch {
    // As in the seed: a failed selection falls back to the first search result.
    return fallback.slice(0, 1);
  }
}

/**
 * The seeds' Wikipedia RAG tool: search → (LLM) pick up to 3 relevant titles → read each page →
 * rank its passages for the question → (LLM) answer per page. Output
 * `{query, relevant_pages: [{title, url, retrieved_information} | {title, url, error}]}`.
 */
export function createWikipediaTool(options: WikipediaToolOptions): Tool<WikipediaToolInput> {
  const maxPages = options.maxPages ?? 3;
  return {
    name: options.name ?? 'Wikipedia_RAG_Search_Tool',
    description:
      'Searches Wikipedia for the query, reads the most relevant pages and returns grounded ' +
      'information from each.',
    inputSchema: z.object({ query: z.string().min(1, 'query must not be empty') }),
    metadata: {
      version: '1.0.0',
      inputTypes: { query: 'str - a specific question or topic to look up on Wikipedia' },
      outputType:
        'dict - {query, relevant_pages: [{title, url, retrieved_information}]} (or an error per page)',
      limitations: [
        'Wikipedia only; answers are as accurate as the articles.',
        'Which pages are read depends on the search ranking and the page selection.',
      ],
      bestPractices: [
        'Ask specific, targeted questions naming the entity (person, place, work).',
        'For multi-hop questions look up one entity per call.',
        "Trust the 'relevant_pages' results over memory.",
      ],
      examples: [
        {
          input: { query: 'Who was the first woman to win a Nobel Prize?' },
          description: 'A factual question answered from Wikipedia',
        },
      ],
      requiresLlm: options.engine !== undefined,
    },
    async execute(input: WikipediaToolInput, context: ToolContext): Promise<ToolResult> {
      const start = performance.now();
      const signal = context.signal;
      try {
        const hits = await options.backend.search(input.query, {
          topK: options.searchResults ?? 10,
          ...(signal && { signal }),
        });
        if (hits.length === 0) {
          return failureResult(new Error(`No Wikipedia results for '${input.query}'`), start);
        }
        const titles = await selectTitles(options.engine, input.query, hits, maxPages, signal);
        const urls = new Map(hits.map((h) => [h.title, h.url]));
        const relevantPages: { [key: string]: JsonValue }[] = [];
        for (const title of titles) {
          const url = urls.get(title) ?? '';
          try {
            const [page] = await options.backend.getPages([title], { ...(signal && { signal }) });
            if (!page) {
              relevantPages.push({ title, url, error: 'Page not found' });
              continue;
            }
            const chunks = chunkText(page.text, {
              chunkSize: options.chunkSize ?? 1000,
              overlap: options.overlap ?? 200,
            });
            const top = await rankChunks(input.query, chunks, {
              topK: options.topK ?? 5,
              embed: options.embed,
              signal,
            });
            const info =
              top.length === 0
                ? 'The page has no text.'
                : options.engine
                  ? await synthesizeAnswer(options.engine, input.query, top, signal)
                  : referenceBlock(top);
            relevantPages.push({
              title: page.title,
              url: page.url ?? url,
              retrieved_information: info,
            });
          } catch (error) {
            if (signal?.aborted) throw error;
            relevantPages.push({
              title,
              url,
              error: error instanceof Error ? error.message : String(error),
            });
          }
        }
        return successResult({ query: input.query, relevant_pages: relevantPages }, start);
      } catch (error) {
        return failureResult(error, start);
      }
    },
  };
}
