import { existsSync } from 'node:fs';
import { dirname, join, resolve } from 'node:path';
import {
  checkOutputFile,
  DataFormatError,
  downloadHubDataset,
  downloadHubFiles,
  downloadHubModel,
  prepareCombinedTrainSet,
  toJsonl,
  writeOutputFile,
} from '@flowgrpo/core';
import { loadTokenizer } from '@flowgrpo/models';
import { type Command, numberOption, stringOption, UsageError } from '../command.js';
import { describeFile } from '../inspect-file.js';
import { cliProgress } from '../run-progress.js';
import { rolloutFiles, sftFromRollouts } from '../sft-from-rollouts.js';
import { resolveDataDir } from '../shared-data.js';
import { terminalSafe, terminalSafeJson } from '../terminal-text.js';
import { requireFile, requireFolder } from '../user-paths.js';

// One help text per action: `flowgrpo data --help` shows them all, `flowgrpo data <action>
// --help` the one asked for. `show` is the former name of `inspect`, still accepted.
const ACTIONS = {
  prepare: `flowgrpo data prepare [--data-dir DIR] [--out DIR] [--seed N]
    Normalise the math + search training sets to SampleRows, combine, shuffle with the seed,
    re-index, and write DIR/combined_train.parquet and DIR/val.parquet (default out/data).
    The raw sets are read from --data-dir, else $FLOWGRPO_SHARED/data, else ../shared/data.`,
  fetch: `flowgrpo data fetch ORG/NAME[@REVISION] [--config C] [--split S] [--type dataset|model]
      [--file PATH]...
    Download a hub data set's split (default train; only that split's files) or, with
    --type model, a model's config, tokenizer and safetensors into the HF cache ($HF_HOME/hub,
    shared with Python's huggingface_hub) and print the local paths. --file names the repo's
    files to download instead, as hf_hub_download does (e.g. karpathy/tinyllamas --type model
    --file stories260K/stories260K.bin). Honours HF_ENDPOINT, HF_HOME / HF_HUB_CACHE, HF_TOKEN
    and HF_HUB_OFFLINE (docs/guides/hub.md).`,
  inspect: `flowgrpo data inspect FILE [--rows N]      (also: data show)
    Say what FILE is and holds: its kind, rows, fields, a summary and the first N rows
    (default 2). Reads any file flowgrpo reads or writes: SampleRows (rows per source), plain
    {question, answer} rows, TRL SFT rows, a run's rollouts/step-<n>.parquet, metrics.jsonl,
    eval/<name>.json, flowgrpo eval --out's JSON.`,
  'sft-from-rollouts': `flowgrpo data sft-from-rollouts ROLLOUTS.parquet|RUN_DIR --out FILE.jsonl
      [--min-reward R] [--tokenizer DIR] [--overwrite]
    Turn the recorded rollouts whose reward is >= R (default 1) into SFT rows in TRL's
    prompt-completion format, the prompt exactly as the policy saw it: one row per planner turn
    of a Flow rollout, one per tag-agent rollout (decoded with --tokenizer, the model folder).
    RUN_DIR reads every RUN_DIR/rollouts/*.parquet. flowgrpo train (trainer "sft") reads FILE.`,
} as const;
const ALIASES: Record<string, keyof typeof ACTIONS> = { show: 'inspect' };

function actionName(action: string): keyof typeof ACTIONS | undefined {
  if (action in ACTIONS) return action as keyof typeof ACTIONS;
  return ALIASES[action];
}

const usage = `Usage:\n${Object.values(ACTIONS)
  .map((text) => `  ${text.replaceAll('\n', '\n  ')}`)
  .join('\n')}`;

function table(counts: Record<string, number>): string {
  return Object.entries(counts)
    .sort(([a], [b]) => a.localeCompare(b))
    .map(
      ([source, n]) =>
        `    ${terminalSafe(source, { oneLine: true }).padEnd(12)} ${String(n).padStart(7)}`,
    )
    .join('\n');
}

export const dataCommand: Command = {
  name: 'data',
  summary:
    'prepare, fetch (from the hub) and inspect training data; turn successful rollouts into SFT rows',
  usage,
  actionUsage(action) {
    const name = actionName(action);
    return name === undefined ? undefined : `Usage:\n  ${ACTIONS[name].replaceAll('\n', '\n  ')}`;
  },
  options: {
    'data-dir': { type: 'string' },
    out: { type: 'string' },
    seed: { type: 'string' },
    rows: { type: 'string' },
    'min-reward': { type: 'string' },
    tokenizer: { type: 'string' },
    overwrite: { type: 'boolean' },
    config: { type: 'string' },
    split: { type: 'string' },
    type: { type: 'string' },
    file: { type: 'string', multiple: true },
  },
  async run(args, io) {
    const [given, file] = args.positionals;
    const action = given === undefined ? undefined : actionName(given);
    if (action === 'prepare') {
      const dataDir = resolveDataDir(io.cwd, io.env, stringOption(args, 'data-dir'));
      const outDir = resolve(io.cwd, stringOption(args, 'out') ?? 'out/data');
      // The two files are renamed into place: a link the user left there would be replaced.
      for (const name of ['combined_train.parquet', 'val.parquet'])
        checkOutputFile(join(outDir, name), '--out');
      const seedText = stringOption(args, 'seed');
      const seed = seedText === undefined ? undefined : Number(seedText);
      if (seed !== undefined && !Number.isSafeInteger(seed))
        throw new UsageError(`--seed must be an integer, got '${seedText}'`);
      io.stderr(`reading data sets from ${dataDir}\n`);
      const started = performance.now();
      const result = await prepareCombinedTrainSet({ dataDir, outDir, seed });
      const secs = ((performance.now() - started) / 1000).toFixed(1);
      io.stdout(
        `train: ${result.trainRows} rows → ${result.trainPath}\n${table(result.counts)}\n` +
          (result.valPath
            ? `validation: ${result.valRows} rows → ${result.valPath}\n${table(result.valCounts)}\n`
            : '') +
          `done in ${secs} s\n`,
      );
      return 0;
    }
    if (action === 'fetch') {
      if (!file) throw new UsageError(`data ${given} needs a hub name (org/name[@revision])`);
      const type = stringOption(args, 'type') ?? 'dataset';
      if (type !== 'dataset' && type !== 'model')
        throw new UsageError(`--type must be dataset or model, got '${type}'`);
      const options = {
        env: io.env,
        progress: cliProgress(io),
        log: (line: string) => io.stderr(`${line}\n`),
      };
      const named = args.values.file;
      if (Array.isArray(named) && named.length > 0) {
        if (args.values.config !== undefined || args.values.split !== undefined)
          throw new UsageError('--file names the files itself: leave out --config and --split');
        const got = await downloadHubFiles(file, named.map(String), { ...options, type });
        io.stderr(
          `${got.repo}@${got.commit}: ${got.downloaded.length} of ${got.files.length} files downloaded\n`,
        );
        for (const p of got.paths) io.stdout(`${p}\n`);
        return 0;
      }
      if (type === 'model') {
        const snap = await downloadHubModel(file, options);
        io.stderr(
          `${snap.repo}@${snap.commit}: ${snap.downloaded.length} of ${snap.files.length} files downloaded\n`,
        );
        io.stdout(`${snap.dir}\n`);
        return 0;
      }
      const split = stringOption(args, 'split') ?? 'train';
      const ds = await downloadHubDataset(file, {
        ...options,
        config: stringOption(args, 'config'),
        split,
      });
      io.stderr(
        `${ds.repo}@${ds.commit} split ${split}: ${ds.downloaded.length} of ${ds.files.length} files downloaded\n`,
      );
      for (const p of ds.paths) io.stdout(`${p}\n`);
      return 0;
    }
    if (action === 'inspect') {
      if (!file) throw new UsageError(`data ${given} needs a FILE`);
      const n = Number(stringOption(args, 'rows') ?? '2');
      if (!Number.isInteger(n) || n < 0) throw new UsageError('--rows must be a whole number');
      const path = resolve(io.cwd, file);
      requireFile(path, `data ${given} FILE`);
      const d = await describeFile(path, n);
      const safe = (text: string) => terminalSafe(text, { oneLine: true });
      io.stdout(
        `${safe(d.kind)}\n${d.rows} ${d.unit}\nfields: ${safe(d.fields.join(', ') || '(none)')}\n` +
          d.summary.map((line) => `${safe(line)}\n`).join(''),
      );
      for (const r of d.first) io.stdout(`${terminalSafeJson(r)}\n`);
      return 0;
    }
    if (action === 'sft-from-rollouts') {
      if (!file) throw new UsageError(`data ${given} needs ROLLOUTS.parquet or RUN_DIR`);
      const outArg = stringOption(args, 'out');
      if (!outArg) throw new UsageError(`data ${given} needs --out FILE.jsonl`);
      const source = resolve(io.cwd, file);
      if (!existsSync(source)) requireFile(source, `data ${given} ROLLOUTS.parquet|RUN_DIR`);
      const out = resolve(io.cwd, outArg);
      requireFolder(dirname(out), '--out (its folder)');
      // The user's file is never replaced unless they say so, and never written through a link.
      checkOutputFile(out, '--out');
      if (existsSync(out) && args.values.overwrite !== true)
        throw new UsageError(`--out ${out} exists`, {
          hint: 'pass --overwrite to replace it, or choose another --out',
        });
      const minReward = numberOption(args, 'min-reward') ?? 1;
      const tokArg = stringOption(args, 'tokenizer');
      const tokenizer = tokArg ? await loadTokenizer(resolve(io.cwd, tokArg)) : undefined;
      const c = await sftFromRollouts(rolloutFiles(source), minReward, tokenizer);
      if (c.rows.length === 0)
        throw new DataFormatError(
          `no rollout of ${c.trajectories} in ${c.files.length} file(s) has reward >= ${minReward}`,
          { file: source },
          { hint: 'lower --min-reward, or give the rollouts of a later step or a longer run' },
        );
      await writeOutputFile(out, toJsonl(c.rows), '--out');
      io.stdout(
        `${c.rows.length} SFT rows from ${c.kept} of ${c.trajectories} rollouts ` +
          `(reward >= ${minReward}, ${c.files.length} file(s)) → ${out}\n`,
      );
      return 0;
    }
    throw new UsageError(
      given === undefined
        ? 'data needs an action: prepare, fetch, inspect or sft-from-rollouts'
        : `unknown data action '${given}' (actions: prepare, fetch, inspect, sft-from-rollouts)`,
    );
  },
};
