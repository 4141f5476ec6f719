import { createHash } from 'node:crypto';
import { appendFile, mkdir, readFile } from 'node:fs/promises';
import { dirname } from 'node:path';
import { z } from 'zod';
import { consoleRewardLogger, type RewardLogger } from './logger.js';

/** The judge's structured verdict (the seeds' AnswerVerification). */
export const JudgeVerdictSchema = z.object({
  analysis: z.string(),
  true_false: z.boolean(),
});
export type JudgeVerdict = z.infer<typeof JudgeVerdictSchema>;

export interface VerdictKeyParts {
  model: string;
  promptVersion: string;
  question: string;
  answer: string;
  groundTruth: string | readonly string[];
}

/**
 * sha256 (hex) of the JSON array [model, promptVersion, question, answer, groundTruth]: the JSON
 * encoding keeps field boundaries unambiguous, so ("ab", "c") and ("a", "bc") differ.
 */
export function verdictKey(parts: VerdictKeyParts): string {
  const payload = JSON.stringify([
    parts.model,
    parts.promptVersion,
    parts.question,
    parts.answer,
    parts.groundTruth,
  ]);
  return createHash('sha256').update(payload, 'utf8').digest('hex');
}

const CacheLineSchema = JudgeVerdictSchema.extend({
  key: z.string().regex(/^[0-9a-f]{64}$/),
  model: z.string().optional(),
  promptVersion: z.string().optional(),
});

export interface VerdictCacheStats {
  hits: number;
  misses: number;
  /** Entries read from the file when opened. */
  loaded: number;
  /** File lines that were not valid entries (logged, then ignored). */
  skippedLines: number;
  /** Appends to the file that failed (logged; the entry stays in memory). */
  writeErrors: number;
}

/**
 * Judge verdicts by content hash, in memory and, when given a path, appended to a JSONL file that
 * is read back on `open` (a later line for the same key wins). Only real verdicts are stored,
 * never fallbacks, so a judge outage is retried on the next run.
 */
export class VerdictCache {
  readonly path: string | undefined;
  readonly stats: VerdictCacheStats = {
    hits: 0,
    misses: 0,
    loaded: 0,
    skippedLines: 0,
    writeErrors: 0,
  };
  private readonly entries = new Map<string, JudgeVerdict>();
  private readonly logger: RewardLogger;
  private writes: Promise<void> = Promise.resolve();

  private constructor(path: string | undefined, logger: RewardLogger) {
    this.path = path;
    this.logger = logger;
  }

  /** An in-memory cache. */
  static memory(logger: RewardLogger = consoleRewardLogger): VerdictCache {
    return new VerdictCache(undefined, logger);
  }

  /** A cache persisted to `path` (JSONL), loading what the file already holds. */
  static async open(
    path: string,
    logger: RewardLogger = consoleRewardLogger,
  ): Promise<VerdictCache> {
    const cache = new VerdictCache(path, logger);
    let text: string;
    try {
      text = await readFile(path, 'utf8');
    } catch (e) {
      if ((e as NodeJS.ErrnoException).code === 'ENOENT') return cache;
      throw e;
    }
    const lines = text.split('\n');
    lines.forEach((line, i) => {
      if (line.trim() === '') return;
      let parsed: unknown;
      try {
        parsed = JSON.parse(line);
      } catch {
        parsed = undefined;
      }
      const entry = CacheLineSchema.safeParse(parsed);
      if (!entry.success) {
        cache.stats.skippedLines++;
        // A torn last line is what a crash mid-append leaves; anything else is worth a look too.
        logger.warn('verdict cache: unreadable line skipped', { path, line: i + 1 });
        return;
      }
      const { analysis, true_false } = entry.data;
      cache.entries.set(entry.data.key, { analysis, true_false });
    });
    cache.stats.loaded = cache.entries.size;
    return cache;
  }

  get size(): number {
    return this.entries.size;
  }

  get(key: string): JudgeVerdict | undefined {
    const v = this.entries.get(key);
    if (v) this.stats.hits++;
    else this.stats.misses++;
    return v;
  }

  has(key: string): boolean {
    return this.entries.has(key);
  }

  set(
    key: string,
    verdict: JudgeVerdict,
    meta: { model?: string; promptVersion?: string } = {},
  ): void {
    this.entries.set(key, { analysis: verdict.analysis, true_false: verdict.true_false });
    const path = this.path;
    if (path === undefined) return;
    const line = `${JSON.stringify({ key, ...meta, analysis: verdict.analysis, true_false: verdict.true_false })}\n`;
    // Appends are chained so lines never interleave and `flush` can wait for all of them.
    this.writes = this.writes.then(async () => {
      try {
        await mkdir(dirname(path), { recursive: true });
        await appendFile(path, line, 'utf8');
      } catch (e) {
        this.stats.writeErrors++;
        this.logger.warn('verdict cache: append failed', { path, error: String(e) });
      }
    });
  }

  /** Resolves when every append so far has reached the file. */
  flush(): Promise<void> {
    return this.writes;
  }
}
