import { readdirSync, statSync } from 'node:fs';
import { join } from 'node:path';
import { DataFormatError, readTrajectoriesParquet, type Trajectory } from '@flowgrpo/core';
import type { Tokenizer } from '@flowgrpo/models';
import { UsageError } from './command.js';

// `flowgrpo data sft-from-rollouts`: the successful rollouts a run recorded become SFT rows in
// TRL's prompt-completion format, with the prompt exactly as the policy saw it (already rendered
// with the chat template), so SFT on them teaches the very text GRPO will sample from. A Flow
// trajectory gives one row per planner turn (`promptText` → `text`); a tag-agent trajectory, which
// is recorded as tokens, gives one row (its prompt segment → everything after it, tool outputs
// included), decoded with the model's tokenizer.

/** One SFT row in TRL's prompt-completion format (what `flowgrpo train` with trainer sft reads). */
export interface SftRow {
  prompt: string;
  completion: string;
}

/** What a conversion found: rows written, trajectories kept and skipped. */
export interface SftConversion {
  rows: SftRow[];
  files: string[];
  trajectories: number;
  kept: number;
}

/** The rollouts Parquet files of `source`: the file itself, or a run folder's `rollouts/*.parquet`. */
export function rolloutFiles(source: string): string[] {
  if (!statSync(source).isDirectory()) return [source];
  const dir = join(source, 'rollouts');
  let names: string[] = [];
  try {
    names = readdirSync(dir).filter((n) => n.endsWith('.parquet'));
  } catch {
    // No rollouts folder: the same answer as an empty one, below.
  }
  if (names.length === 0)
    throw new DataFormatError(
      'no rollouts/*.parquet in this folder',
      { file: source },
      { hint: 'give a run folder that GRPO training wrote (output_dir), or one rollouts .parquet' },
    );
  // step-2 before step-10: the order the run wrote them.
  const step = (n: string) => Number(/(\d+)/.exec(n)?.[1] ?? 0);
  return names.sort((a, b) => step(a) - step(b) || a.localeCompare(b)).map((n) => join(dir, n));
}

/**
 * SFT rows from the trajectories of `files` whose reward is at least `minReward`. A tag-agent
 * trajectory needs `tokenizer` (its text is recorded as token ids).
 */
export async function sftFromRollouts(
  files: readonly string[],
  minReward: number,
  tokenizer: Tokenizer | undefined,
): Promise<SftConversion> {
  const rows: SftRow[] = [];
  let trajectories = 0;
  let kept = 0;
  for (const file of files) {
    for (const t of await readTrajectoriesParquet(file)) {
      trajectories++;
      if ((t.reward ?? Number.NEGATIVE_INFINITY) < minReward || t.stopReason === 'error') continue;
      const before = rows.length;
      rows.push(...trajectoryRows(t, tokenizer));
      if (rows.length > before) kept++;
    }
  }
  return { rows, files: [...files], trajectories, kept };
}

function trajectoryRows(t: Trajectory, tokenizer: Tokenizer | undefined): SftRow[] {
  if (t.turns && t.turns.length > 0)
    return t.turns.flatMap((u) =>
      u.promptText !== undefined && u.text !== undefined && u.parsed !== false
        ? [{ prompt: u.promptText, completion: u.text }]
        : [],
    );
  const segments = t.segments ?? [];
  const at = segments.findIndex((s) => s.kind !== 'prompt');
  if (at <= 0) return [];
  if (!tokenizer)
    throw new UsageError(
      'these rollouts were recorded as token ids (the tag agent): --tokenizer names the ' +
        'folder with the tokenizer.json that decodes them (the model folder of the run)',
    );
  const ids = (from: number, to: number) => segments.slice(from, to).flatMap((s) => [...s.tokens]);
  return [
    {
      prompt: tokenizer.decode(ids(0, at)),
      completion: tokenizer.decode(ids(at, segments.length)),
    },
  ];
}
