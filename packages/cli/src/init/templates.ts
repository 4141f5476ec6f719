import type { ChatMessage } from '@flowgrpo/core';
import { agentProgramRow, flowPlannerRow, type PlainRow, tagAgentRow } from './sft-rows.js';

// The starting points `flowgrpo init` writes. Each template is a folder of the package
// (templates/<name>/: its run configs, README and, for the gateway, the agent program) plus the
// shared data (templates/data/: GSM8K-style {question, answer} rows); init adds data/sft.jsonl,
// made from the training rows with the prompt the template's agent sends, and the model.

export const TEMPLATE_NAMES = ['math-tags', 'flow-planner', 'gateway-agent'] as const;
export type TemplateName = (typeof TEMPLATE_NAMES)[number];

export interface Template {
  summary: string;
  /** One SFT row per training row; `files` are the template's own (prompt.txt, grpo.json). */
  sftRow(row: PlainRow, files: ReadonlyMap<string, string>): { messages: ChatMessage[] };
  /**
   * The next commands, in order, each with what it does; the first runs in minutes on a CPU.
   * `tokenizer` is the folder of the tokenizer (the model init made, or --model).
   */
  commands(tokenizer: string): (readonly [command: string, what: string])[];
}

/** The SFT checkpoint every template's second step starts from (sft.json: max_steps 80). */
const SFT_MODEL = 'runs/sft/checkpoint-80';
const SFT_STEP = [
  'flowgrpo train --config sft.json',
  `1. SFT on data/sft.jsonl (every weight) → ${SFT_MODEL}`,
] as const;

function grpoMaxTurns(files: ReadonlyMap<string, string>): number {
  const grpo = JSON.parse(files.get('grpo.json') ?? '{}') as { agent?: { max_turns?: number } };
  return grpo.agent?.max_turns ?? 2;
}

export const TEMPLATES: Record<TemplateName, Template> = {
  'math-tags': {
    summary:
      'the tag agent (<think>, <tool_call>, <answer>) with a calculator on math word problems',
    sftRow: (row) => tagAgentRow(row),
    commands: () => [
      SFT_STEP,
      [
        'flowgrpo train --config grpo.json',
        '2. GRPO: the tag agent with the calculator, rewarded by the answer',
      ],
      [
        'flowgrpo eval --config grpo.json --base --adapter grpo=runs/grpo/checkpoint-10 --out eval.json',
        '3. held-out accuracy: the SFT model against it + the GRPO adapter',
      ],
      [
        `flowgrpo export --model ${SFT_MODEL} --adapter runs/grpo/checkpoint-10 --out merged --merge`,
        '4. one HF model folder with the adapter merged in',
      ],
    ],
  },
  'flow-planner': {
    summary:
      'the Flow planner (FlowRollout: the policy plans; executor, verifier and answer on an OpenAI-compatible server)',
    sftRow: (row, files) => flowPlannerRow(row, grpoMaxTurns(files)),
    commands: () => [
      SFT_STEP,
      [
        'flowgrpo train --config grpo.json',
        "2. Flow-GRPO of the planner (first serve the fixed roles' model at agent.engine.base_url: README.md)",
      ],
      [
        'flowgrpo eval --config grpo.json --base --adapter grpo=runs/grpo/checkpoint-10 --out eval.json',
        '3. held-out accuracy: the SFT planner against it + the GRPO adapter',
      ],
      [
        `flowgrpo export --model ${SFT_MODEL} --adapter runs/grpo/checkpoint-10 --out merged --merge`,
        '4. one HF model folder with the adapter merged in',
      ],
    ],
  },
  'gateway-agent': {
    summary: 'your own agent program (agent.ts, the openai SDK) trained through the policy gateway',
    sftRow: (row, files) => agentProgramRow(row, (files.get('prompt.txt') ?? '').trim()),
    commands: (tokenizer) => [
      SFT_STEP,
      ['npm install', "   the agent program's packages (openai, tsx)"],
      [
        `flowgrpo serve --model ${SFT_MODEL} --tokenizer ${tokenizer} --train serve-train.json`,
        '2. the gateway, training "policy" from the rewards agent.ts posts (leave it running)',
      ],
      ['npx tsx agent.ts', '   in a second terminal: episodes against the gateway, rewards posted'],
      [
        `flowgrpo serve --model ${SFT_MODEL} --tokenizer ${tokenizer} --lora policy=runs/gateway/adapters/policy`,
        '3. serve the trained adapter (after stopping the first server), then: npx tsx agent.ts --eval',
      ],
      [
        `flowgrpo export --model ${SFT_MODEL} --adapter runs/gateway/adapters/policy --out merged --merge`,
        '4. one HF model folder with the adapter merged in',
      ],
    ],
  },
};
