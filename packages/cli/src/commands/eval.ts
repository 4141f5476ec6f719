import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { basename, join, resolve } from 'node:path';
import { trajectoryToJson, writeOutputFile } from '@flowgrpo/core';
import {
  DecoderArtifacts,
  greedy,
  LocalPolicyEngine,
  type LoraConfig,
  type LoraParams,
  loadDecoderConfig,
  loadLoraAdapter,
  readArtifactsManifest,
} from '@flowgrpo/models';
import {
  accuracyDifference,
  comparisonTable,
  type EvalResult,
  evaluate,
  formatAccuracyDifference,
  parseConfig,
} from '@flowgrpo/trainer';
import {
  type CliIO,
  type Command,
  numberOption,
  type ParsedArgs,
  stringOption,
  UsageError,
} from '../command.js';
import { resolveDataArg, resolveModelArg, resolveRunSources } from '../hub-names.js';
import { ensureArtifacts, modelKind, resolveTokenizer } from '../model-artifacts.js';
import { preflight } from '../preflight.js';
import { agentFactory, rewardFunction } from '../run-agent.js';
import {
  AgentSchema,
  type AgentSpec,
  DEVICES,
  type DeviceName,
  type Endpoint,
  type EvalRunConfig,
  loadEvalConfig,
  REWARDS,
  type RewardName,
} from '../run-config.js';
import { readQueryRows } from '../run-data.js';
import { cliProgress, interruptSignal } from '../run-progress.js';
import { terminalSafe } from '../terminal-text.js';
import { requireFolder } from '../user-paths.js';

const usage = `Usage:
  flowgrpo eval --model PATH --data FILE [--adapter [NAME=]PATH]... [--base] [options]
  flowgrpo eval --config run.json --adapter grpo=runs/x/checkpoint-200 --base

Evaluates policies inside their agent, each question once with greedy decoding, and prints them
side by side: accuracy with a 95% Wilson interval, format compliance, turns, tool calls, tool
errors, completion tokens, time; then each policy's difference in accuracy points from the first,
called inconclusive when the two 95% intervals overlap. Failed rollouts count as wrong and are
counted by error code; when every rollout of a policy fails there is no accuracy to report:
ROLLOUTS_FAILED, exit 1. The model, tokenizer, data, device, tools and the agent's first prompts
(they must fit the model's positions with --max-tokens to spare) are checked first, every problem
reported at once.

  --model PATH          HF model folder, artifacts directory or hub model org/name[@revision]
                        (default: the config's model)
  --tokenizer PATH      folder with tokenizer.json or a hub model (default: the model folder)
  --data FILE           SampleRows or plain {question, answer} rows (.jsonl / .parquet), or a
                        hub data set org/name[@revision] (default: the config's eval_file)
  --dataset-config C    with a hub --data: the data set's config (gsm8k: main)
  --split S             with a hub --data: the split (default test)
  --data-format F       sample_rows, plain or a raw layout: gsm8k, nq, aime, math500, … (default:
                        SampleRows or plain rows, detected from the first row)
  --adapter [NAME=]PATH a PEFT adapter folder or a checkpoint-<step> folder; repeat to compare
                        several (NAME defaults to the folder's name)
  --base                also evaluate the base model (the default when no --adapter is given)
  --config FILE         a train run config: its agent, reward, judge, tokenizer, model,
                        eval_file, max_positions, max_completion_length and max_turns are the
                        defaults here
  --agent flow|tag      the agent (flow: its fixed roles on --base-url and --engine-model, else
                        rule-based offline stand-ins for them)
  --tools LIST          comma-separated tool names (default calculator for flow, none for tag)
  --max-turns N         policy turns per question (default 5)
  --max-tokens N        tokens per policy turn (default 256)
  --reward R            exact_match (default) | f1 | math | judge
  --base-url URL        OpenAI-compatible endpoint of the fixed roles (and the judge)
  --engine-model NAME   the model served there
  --api-key-env VAR     environment variable holding that endpoint's API key
  --limit N             the first N rows only
  --concurrency N       rollouts at once (default 32)
  --seed N              rollout seeds start here (default 0)
  --device D            cpu | auto | cuda | webgpu (default cpu; auto never picks a software
                        Vulkan driver such as lavapipe)
  --out FILE            write the results as JSON (never over the data, nor into the model,
                        tokenizer or an adapter folder)
  --trajectories        with --out: every rollout too (turns, token ids, answers)`;

interface PolicySpec {
  name: string;
  adapter?: { path: string; lora: LoraConfig; params: LoraParams };
}

const loraKey = (l: LoraConfig | undefined) =>
  l
    ? JSON.stringify([
        l.r,
        l.alpha,
        [...l.targetModules].sort(),
        l.useRslora ?? false,
        l.layers ?? null,
      ])
    : 'none';

function intOption(args: ParsedArgs, name: string): number | undefined {
  const n = numberOption(args, name);
  if (n !== undefined && (!Number.isInteger(n) || n < 1))
    throw new UsageError(`--${name} must be a positive whole number, got ${n}`);
  return n;
}

/** The agent spec: the config's, with the command line's choices on top. */
function agentSpec(args: ParsedArgs, rc: EvalRunConfig | undefined): AgentSpec {
  const fromConfig = rc?.kind === 'grpo' ? rc.run.agent : undefined;
  const baseUrl = stringOption(args, 'base-url');
  const engineModel = stringOption(args, 'engine-model');
  if ((baseUrl === undefined) !== (engineModel === undefined))
    throw new UsageError('--base-url and --engine-model go together');
  const type = stringOption(args, 'agent') ?? fromConfig?.type ?? (baseUrl ? 'flow' : undefined);
  if (type === undefined) throw new UsageError('--agent flow or --agent tag is needed');
  if (type !== 'flow' && type !== 'tag')
    throw new UsageError(`--agent must be flow or tag, got '${type}'`);
  const raw: Record<string, unknown> =
    fromConfig && fromConfig.type === type ? { ...fromConfig } : { type };
  const tools = stringOption(args, 'tools');
  if (tools !== undefined)
    raw.tools = tools
      .split(',')
      .map((t) => t.trim())
      .filter(Boolean);
  const maxTurns = intOption(args, 'max-turns');
  if (maxTurns !== undefined) raw.max_turns = maxTurns;
  if (baseUrl)
    raw.engine = {
      base_url: baseUrl,
      model: engineModel,
      ...(stringOption(args, 'api-key-env') && { api_key_env: stringOption(args, 'api-key-env') }),
    };
  return parseConfig(AgentSchema, raw, 'flowgrpo eval');
}

/** `--adapter` values: NAME=PATH or PATH. */
function adapterArgs(args: ParsedArgs, cwd: string): { name: string; path: string }[] {
  const v = args.values.adapter;
  const list = v === undefined ? [] : Array.isArray(v) ? v : [v];
  return list.map((item) => {
    if (typeof item !== 'string') throw new UsageError('--adapter needs a value');
    const eq = item.indexOf('=');
    const [name, path] = eq > 0 ? [item.slice(0, eq), item.slice(eq + 1)] : [undefined, item];
    const abs = resolve(cwd, path);
    requireFolder(abs, '--adapter');
    return { name: name ?? basename(abs), path: abs };
  });
}

async function evalPolicies(args: ParsedArgs, io: CliIO): Promise<number> {
  const configFile = stringOption(args, 'config');
  const given = configFile ? loadEvalConfig(configFile, io.cwd) : undefined;
  const modelArg = stringOption(args, 'model');
  const dataArg = stringOption(args, 'data');
  const tokArg = stringOption(args, 'tokenizer');
  // Hub names fetched into the HF cache; an option given replaces the config's key first, so
  // nothing the run will not use is downloaded.
  const rc: EvalRunConfig | undefined =
    given &&
    ({
      ...given,
      run: await resolveRunSources(
        {
          ...given.run,
          train_file: undefined,
          ...(modelArg && { model: modelArg }),
          ...(tokArg && { tokenizer: tokArg }),
          ...(dataArg && { eval_file: undefined }),
        },
        io,
      ),
    } as EvalRunConfig);
  const model = rc ? rc.run.model : modelArg && (await resolveModelArg(modelArg, io, '--model'));
  if (!model) throw new UsageError('--model (or --config) is required');
  const data = dataArg
    ? await resolveDataArg(dataArg, io, '--data', {
        config: stringOption(args, 'dataset-config'),
        split: stringOption(args, 'split') ?? 'test',
      })
    : rc?.run.eval_file;
  if (!data) throw new UsageError('--data (or a --config with eval_file) is required');
  const tokenizerPath = rc
    ? rc.run.tokenizer
    : tokArg && (await resolveModelArg(tokArg, io, '--tokenizer'));
  // The run's positions: a model trained with a raised max_positions is evaluated with them too.
  const maxPositions = rc?.run.max_positions;
  // Undefined when nobody asked: the default (cpu), which preflight does not announce.
  const device = (stringOption(args, 'device') ?? rc?.run.device) as DeviceName | undefined;
  if (device !== undefined && !(DEVICES as readonly string[]).includes(device))
    throw new UsageError(`--device must be ${DEVICES.join(', ')}, got '${device}'`);
  const reward = (stringOption(args, 'reward') ??
    (rc?.kind === 'grpo' ? rc.run.reward : 'exact_match')) as RewardName;
  if (!(REWARDS as readonly string[]).includes(reward))
    throw new UsageError(`--reward must be ${REWARDS.join(', ')}, got '${reward}'`);
  const agent = agentSpec(args, rc);
  const judge: Endpoint | undefined =
    (rc?.kind === 'grpo' ? rc.run.judge : undefined) ?? agent.engine;
  const limit = intOption(args, 'limit');
  const concurrency = intOption(args, 'concurrency') ?? 32;
  const seed = numberOption(args, 'seed') ?? 0;
  const out = stringOption(args, 'out');
  const keep = args.values.trajectories === true;
  if (keep && !out) throw new UsageError('--trajectories goes with --out');
  const dataFormat =
    stringOption(args, 'data-format') ?? (rc?.kind === 'grpo' ? rc.run.data_format : undefined);

  const sampling = {
    maxTurns: rc?.kind === 'grpo' ? rc.config.max_turns : 5,
    maxTokens:
      intOption(args, 'max-tokens') ??
      (rc?.kind === 'grpo' ? rc.config.max_completion_length : 256),
    temperature: 0,
    topP: 1,
  };
  const adapters = adapterArgs(args, io.cwd);
  // Every check before a graph is built; 'auto' resolved once, here.
  const chosen = await preflight(
    {
      model,
      tokenizer: tokenizerPath,
      maxPositions,
      device,
      data: [
        { key: dataArg ? '--data' : 'eval_file', path: data, kind: 'query', format: dataFormat },
      ],
      agent: { spec: agent, sampling },
      reward: { name: reward, judge },
      ...(out && { outputFile: { key: '--out', path: resolve(io.cwd, out) } }),
      inputs: adapters.map((a) => ({ key: `--adapter ${a.name}`, path: a.path })),
    },
    io,
  );

  const rows = await readQueryRows(data, dataFormat, dataArg ? '--data' : 'eval_file', (line) =>
    io.stderr(`${line}\n`),
  );
  const dataset = limit === undefined ? rows : rows.slice(0, limit);
  const kind = modelKind(model);
  const decoderConfig =
    kind === 'hf' ? await loadDecoderConfig(model) : readArtifactsManifest(model).config;
  const policies: PolicySpec[] = [];
  if (args.values.base === true || adapters.length === 0) policies.push({ name: 'base' });
  for (const a of adapters) {
    const { lora, params } = await loadLoraAdapter(a.path, decoderConfig);
    policies.push({ name: a.name, adapter: { path: a.path, lora, params } });
  }
  const names = new Set<string>();
  for (const p of policies) {
    if (names.has(p.name))
      throw new UsageError(`two policies are named '${p.name}'; name them: --adapter NAME=PATH`);
    names.add(p.name);
  }
  const rewardFn = rewardFunction(reward, judge, io.env);
  const factory = agentFactory(agent, sampling, io.env);

  // Policies that share a LoRA shape share one build of the decode graph (a HF folder is built
  // once per shape; the base model rides along with LoRA scale 0). An artifacts directory is
  // used for all of them and must match each adapter.
  const groups = new Map<string, PolicySpec[]>();
  for (const p of policies) {
    const k = kind === 'artifacts' ? 'artifacts' : loraKey(p.adapter?.lora);
    groups.set(k, [...(groups.get(k) ?? []), p]);
  }
  const none = groups.get('none');
  if (none && groups.size > 1) {
    groups.delete('none');
    const first = groups.values().next().value!;
    first.unshift(...none);
  }

  const progress = cliProgress(io);
  const interrupt = interruptSignal(io);
  const tmp = kind === 'hf' ? await mkdtemp(join(tmpdir(), 'flowgrpo-eval-')) : undefined;
  const results = new Map<string, EvalResult>();
  try {
    let g = 0;
    for (const group of groups.values()) {
      const lora = group.find((p) => p.adapter)?.adapter?.lora;
      const { dir, manifest } = await ensureArtifacts(model, join(tmp ?? '', `group-${g++}`), {
        ...(lora && { lora }),
        ...(maxPositions !== undefined && { maxPositions }),
        graphs: ['decode'],
      });
      const tokenizer = await resolveTokenizer(model, tokenizerPath, manifest.config.vocabSize);
      const artifacts = await DecoderArtifacts.open(dir, {
        graphs: ['decode'],
        device: chosen.device,
      });
      try {
        const engine = new LocalPolicyEngine({ artifacts, tokenizer, model: 'policy' });
        for (const p of group) {
          if (p.adapter) await engine.updateAdapter({ name: p.name, path: p.adapter.path });
          else {
            engine.generator.setLora(undefined);
            engine.adapter = undefined;
          }
          const bar = progress.start(`eval ${p.name}`, dataset.length);
          const r = await evaluate({
            agent: factory(greedy(engine)),
            dataset,
            reward: rewardFn,
            concurrency,
            seed,
            name: p.name,
            signal: interrupt.signal,
            onProgress: (done, _n, correct) => bar.update(done, { acc: correct / done }),
            keepTrajectories: keep,
          });
          bar.stop();
          // Every rollout failing is an error (ROLLOUTS_FAILED); some failing is said here.
          if (r.rollouts_failed)
            io.stderr(
              `${p.name}: ${r.rollouts_failed}/${r.n} rollouts failed (${Object.entries(
                r.rollouts_failed_by_code ?? {},
              )
                .map(([code, n]) => `${code} ×${n}`)
                .join(', ')}); they count as wrong\n`,
            );
          results.set(p.name, r);
        }
      } finally {
        await artifacts.release();
      }
    }
  } catch (e) {
    // Ctrl-C: the policies evaluated so far are still worth printing.
    if (!interrupt.signal.aborted) throw e;
  } finally {
    interrupt.dispose();
    if (tmp) await rm(tmp, { recursive: true, force: true });
  }
  const ordered = policies.flatMap((p) => results.get(p.name) ?? []);
  if (ordered.length > 0) io.stdout(`${terminalSafe(comparisonTable(ordered))}\n`);
  // Each policy against the first (the base model when --base): the difference in accuracy
  // points, called inconclusive when the 95% intervals overlap.
  for (const r of ordered.slice(1))
    io.stdout(`${formatAccuracyDifference(accuracyDifference(r, ordered[0]!))}\n`);
  if (interrupt.signal.aborted) {
    io.stderr(`interrupted: ${ordered.length} of ${policies.length} policies evaluated\n`);
    return 130;
  }
  if (out) {
    const path = resolve(io.cwd, out);
    const results = ordered.map(({ trajectories, ...r }) => ({
      ...r,
      ...(trajectories && { trajectories: trajectories.map(trajectoryToJson) }),
    }));
    // The table is printed above; what could not be written is named with the fix.
    await writeOutputFile(
      path,
      `${JSON.stringify({ model, data, n: dataset.length, reward, results }, null, 2)}\n`,
      '--out',
    );
    io.stderr(`results: ${path}\n`);
  }
  return 0;
}

export const evalCommand: Command = {
  name: 'eval',
  summary: 'evaluate a base model and LoRA adapters side by side on a dataset',
  usage,
  options: {
    model: { type: 'string' },
    'dataset-config': { type: 'string' },
    split: { type: 'string' },
    tokenizer: { type: 'string' },
    data: { type: 'string' },
    'data-format': { type: 'string' },
    adapter: { type: 'string', multiple: true },
    base: { type: 'boolean' },
    config: { type: 'string' },
    agent: { type: 'string' },
    tools: { type: 'string' },
    'max-turns': { type: 'string' },
    'max-tokens': { type: 'string' },
    reward: { type: 'string' },
    'base-url': { type: 'string' },
    'engine-model': { type: 'string' },
    'api-key-env': { type: 'string' },
    limit: { type: 'string' },
    concurrency: { type: 'string' },
    seed: { type: 'string' },
    device: { type: 'string' },
    out: { type: 'string' },
    trajectories: { type: 'boolean' },
  },
  run: (args, io) => evalPolicies(args, io),
};
