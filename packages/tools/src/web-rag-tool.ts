import type { LLMEngine } from '@flowgrpo/core';
import { z } from 'zod';
import { type ChunkOptions, chunkText } from './chunk-text.js';
import type { EmbedFunction } from './embeddings.js';
import type { FetchLike } from './http.js';
import { rankChunks, referenceBlock, synthesizeAnswer } from './rag.js';
import {
  failureResult,
  successResult,
  type Tool,
  type ToolContext,
  type ToolResult,
} from './tool.js';
import type { LookupAll } from './url-policy.js';
import { fetchWebPage } from './web-page.js';

export interface WebRagOptions extends ChunkOptions {
  name?: string;
  /** Writes the answer from the retrieved chunks; without one the tool returns the chunks. */
  engine?: LLMEngine;
  /** Ranks chunks by embedding cosine; without one BM25 ranks them. */
  embed?: EmbedFunction;
  /** Chunks kept for the answer; default 10 (as the seeds' web RAG tool). */
  topK?: number;
  fetch?: FetchLike;
  /** Let the tool read loopback/private/link-local hosts. Default false. */
  allowPrivateNetwork?: boolean;
  lookup?: LookupAll;
  /** Page download limit; default 2 MiB. */
  maxBytes?: number;
  /** Page download timeout; default 15 s. */
  fetchTimeoutMs?: number;
}

export interface WebRagInput {
  query: string;
  url: string;
}

export interface WebRagAnswer {
  url: string;
  title: string;
  answer: string;
  chunks: { text: string; score: number }[];
  truncated: boolean;
}

/** fetch → HTML to text → chunk → rank (embeddings or BM25) → synthesize with the LLM. */
export async function answerFromWebPage(
  query: string,
  url: string,
  options: WebRagOptions & { signal?: AbortSignal | undefined },
): Promise<WebRagAnswer> {
  const page = await fetchWebPage(url, {
    maxBytes: options.maxBytes ?? 2 * 1024 * 1024,
    timeoutMs: options.fetchTimeoutMs ?? 15_000,
    ...(options.fetch && { fetch: options.fetch }),
    ...(options.allowPrivateNetwork !== undefined && {
      allowPrivateNetwork: options.allowPrivateNetwork,
    }),
    ...(options.lookup && { lookup: options.lookup }),
    ...(options.signal && { signal: options.signal }),
  });
  const chunks = chunkText(page.text, {
    chunkSize: options.chunkSize ?? 1000,
    overlap: options.overlap ?? 200,
  });
  const top = await rankChunks(query, chunks, {
    topK: options.topK ?? 10,
    embed: options.embed,
    signal: options.signal,
  });
  const answer =
    top.length === 0
      ? 'The page has no readable text.'
      : options.engine
        ? await synthesizeAnswer(options.engine, query, top, options.signal)
        : referenceBlock(top);
  return {
    url: page.url,
    title: page.title,
    answer,
    chunks: top.map((c) => ({ text: c.text, score: c.score })),
    truncated: page.truncated,
  };
}

export function createWebRagTool(options: WebRagOptions = {}): Tool<WebRagInput> {
  return {
    name: options.name ?? 'Web_RAG_Search_Tool',
    description:
      'Answers a question from the content of one web page: downloads the URL, finds the passages ' +
      'most relevant to the question and summarizes them.',
    inputSchema: z.object({
      query: z.string().min(1, 'query must not be empty'),
      url: z.string().url('url must be an absolute http(s) URL'),
    }),
    metadata: {
      version: '1.0.0',
      inputTypes: {
        query: 'str - the question to answer from the page',
        url: 'str - the absolute http(s) URL of the page',
      },
      outputType: 'str - an answer grounded in the page (or its most relevant passages)',
      limitations: [
        'Reads static HTML or text only: pages built by JavaScript or behind a login come back empty.',
        'Private, loopback and link-local addresses are refused.',
        'Only the first part of very large pages is read.',
      ],
      bestPractices: [
        'Give a specific question and a text-rich page URL (an article, documentation, a Wikipedia page).',
        'Use a search tool first to find the URL.',
      ],
      examples: [
        {
          input: {
            query: 'When was the Eiffel Tower completed?',
            url: 'https://en.wikipedia.org/wiki/Eiffel_Tower',
          },
          description: 'Answer a factual question from one article',
        },
      ],
      requiresLlm: options.engine !== undefined,
    },
    async execute(input: WebRagInput, context: ToolContext): Promise<ToolResult> {
      const start = performance.now();
      try {
        const result = await answerFromWebPage(input.query, input.url, {
          ...options,
          signal: context.signal,
        });
        return successResult(result.answer, start, { truncated: result.truncated });
      } catch (error) {
        return failureResult(error, start);
      }
    },
  };
}
