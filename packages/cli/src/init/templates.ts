import type { Rng } from '@flowgrpo/core';
import type { TinyQwen2Options } from '@flowgrpo/models';
import { agentProgramRow, flowPlannerRows, type PlainRow, tagAgentRow } from './sft-rows.js';
import type { ProblemSplits } from './word-problems.js';

// The starting points `flowgrpo init` writes. Each template is a folder of the package
// (templates/<name>/: its run configs, README and, for the gateway, the agent program); init adds
// the data (word-problems.ts: GSM8K-style {question, answer} rows from the seed), data/sft.jsonl
// (the teacher's logs, made with the prompt the template's agent sends: sft-rows.ts) and the
// model. Each one's printed commands learn on 2 CPU cores within minutes: SFT on the teacher's
// logs, GRPO from the SFT model, and an evaluation of the untrained, SFT and GRPO models on the
// held-out rows (the figures each README shows).

export const TEMPLATE_NAMES = ['math-tags', 'flow-planner', 'gateway-agent'] as const;
export type TemplateName = (typeof TEMPLATE_NAMES)[number];

/** The tiny model's shape (createTinyQwen2), without the seed. */
export type TinyShape = Omit<TinyQwen2Options, 'seed'>;

export interface Template {
  summary: string;
  /** The model init creates: big enough for the template's task, small enough for minutes. */
  model: TinyShape;
  /** Questions init generates: the teacher's, GRPO's, the held-out ones. */
  rows: ProblemSplits<number>;
  /**
   * The SFT rows of one training row (the teacher's rollout); `files` are the template's own
   * (grpo.json, prompt.txt), `rng` the teacher's.
   */
  sftRows(row: PlainRow, files: ReadonlyMap<string, string>, rng: Rng): object[];
  /**
   * The next commands, in order, each with what it does. `files` are the template's own (the
   * checkpoints' steps come from its configs), `tokenizer` is the folder of the tokenizer (the
   * model init made, or --model), `model` the model SFT starts from.
   */
  commands(
    files: ReadonlyMap<string, string>,
    tokenizer: string,
    model: string,
  ): (readonly [command: string, what: string])[];
}

/** Seeded model weights as the demo initialises them (docs/demo.md, "Scale of the seeded model"). */
const SEEDED = { ropeTheta: 10_000, initializerRange: 0.02, embeddingInitRange: 0.2 } as const;

/** The SFT checkpoint every template's GRPO starts from: sft.json's last. */
const sftModel = (files: ReadonlyMap<string, string>) =>
  `runs/sft/checkpoint-${configValue<number>(files, 'sft.json', ['max_steps'])}`;

/** A key of the template's JSON file (init reads its own configs, so the commands match them). */
function configValue<T>(files: ReadonlyMap<string, string>, file: string, path: string[]): T {
  let value: unknown = JSON.parse(files.get(file) ?? '{}');
  for (const key of path) value = (value as Record<string, unknown> | undefined)?.[key];
  if (value === undefined) throw new Error(`templates: ${file} has no ${path.join('.')}`);
  return value as T;
}

/** SFT → GRPO → the untrained model's eval → SFT against GRPO → export: the trainer templates. */
function trainerCommands(
  files: ReadonlyMap<string, string>,
  model: string,
  what: { grpo: string },
): (readonly [string, string])[] {
  const sft = sftModel(files);
  const grpo = `runs/grpo/checkpoint-${configValue<number>(files, 'grpo.json', ['max_steps'])}`;
  return [
    ['flowgrpo train --config sft.json', `1. SFT on the teacher's logs (every weight) → ${sft}`],
    ['flowgrpo train --config grpo.json', `2. ${what.grpo} → ${grpo} (a LoRA adapter)`],
    [
      `flowgrpo eval --config grpo.json --data data/eval.jsonl --model ${model} --out eval-untrained.json`,
      '3. held-out accuracy of the untrained model',
    ],
    [
      `flowgrpo eval --config grpo.json --data data/eval.jsonl --base --adapter grpo=${grpo} --out eval.json`,
      '4. held-out accuracy: the SFT model (base) against it + the GRPO adapter',
    ],
    [
      `flowgrpo export --model ${sft} --adapter ${grpo} --out merged --merge`,
      '5. one HF model folder with the adapter merged in',
    ],
  ];
}

export const TEMPLATES: Record<TemplateName, Template> = {
  'math-tags': {
    summary: 'the tag agent (<tool_call>, <answer>) with a calculator on math word problems',
    model: {
      hiddenSize: 128,
      layers: 2,
      heads: 8,
      kvHeads: 4,
      intermediateSize: 256,
      maxPositionEmbeddings: 1024,
      ...SEEDED,
    },
    rows: { logs: 1000, train: 500, eval: 150 },
    sftRows: (row, files, rng) => [
      tagAgentRow(row, configValue(files, 'grpo.json', ['agent', 'system_prompt']), rng),
    ],
    commands: (files, _tokenizer, model) =>
      trainerCommands(files, model, {
        grpo: 'GRPO: the tag agent with the calculator, rewarded by the answer',
      }),
  },
  'flow-planner': {
    summary:
      'the Flow planner (FlowRollout: the policy plans; executor, verifier and answer rule-based offline, or on your server)',
    model: {
      hiddenSize: 64,
      layers: 2,
      heads: 4,
      kvHeads: 2,
      intermediateSize: 128,
      maxPositionEmbeddings: 1024,
      ...SEEDED,
    },
    rows: { logs: 1000, train: 500, eval: 150 },
    sftRows: (row, files, rng) =>
      flowPlannerRows(row, configValue(files, 'grpo.json', ['agent', 'max_turns']), rng),
    commands: (files, _tokenizer, model) =>
      trainerCommands(files, model, {
        grpo: 'Flow-GRPO of the planner (the fixed roles offline: README.md)',
      }),
  },
  'gateway-agent': {
    summary: 'your own agent program (agent.ts, the openai SDK) trained through the policy gateway',
    model: {
      hiddenSize: 64,
      layers: 2,
      heads: 4,
      kvHeads: 2,
      intermediateSize: 128,
      maxPositionEmbeddings: 1024,
      ...SEEDED,
    },
    rows: { logs: 1000, train: 500, eval: 150 },
    sftRows: (row, files, rng) => [
      agentProgramRow(row, (files.get('prompt.txt') ?? '').trim(), rng),
    ],
    commands: (files, tokenizer, model) => {
      const sft = sftModel(files);
      const adapter = 'runs/gateway/adapters/policy';
      return [
        [
          'flowgrpo train --config sft.json',
          `1. SFT on the teacher's logs (every weight) → ${sft}`,
        ],
        ['npm install', "   the agent program's packages (openai, tsx)"],
        [
          `flowgrpo serve --model ${sft} --tokenizer ${tokenizer} --train serve-train.json`,
          '2. the gateway, training "policy" from the rewards agent.ts posts (leave it running)',
        ],
        [
          'npx tsx agent.ts',
          '   in a second terminal: episodes, rewards, GRPO updates; then stop the server (Ctrl-C)',
        ],
        [
          `flowgrpo serve --model ${sft} --tokenizer ${tokenizer} --served-model-name sft --lora policy=${adapter}`,
          '3. the SFT model ("sft") and the trained adapter ("policy") side by side',
        ],
        [
          'npx tsx agent.ts --eval',
          '   in the second terminal: held-out accuracy of both (eval.json); then stop the server',
        ],
        [
          `flowgrpo serve --model ${model} --tokenizer ${tokenizer} --served-model-name untrained`,
          '4. the untrained model',
        ],
        [
          'npx tsx agent.ts --eval',
          '   in the second terminal: adds it to the table of eval.json; then stop the server',
        ],
        [
          `flowgrpo export --model ${sft} --adapter ${adapter} --out merged --merge`,
          '5. one HF model folder with the adapter merged in',
        ],
      ];
    },
  },
};
