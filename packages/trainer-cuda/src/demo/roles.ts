import { FlowRollout, type PolicyEngine, type PromptContext } from '@flowgrpo/agent';
import {
  type ChatMessage,
  emptyUsage,
  type GenerateObjectResult,
  type GenerateTextResult,
  type LLMEngine,
} from '@flowgrpo/core';
import { LLMJudge, type RewardFunction } from '@flowgrpo/reward';
import { createCalculatorTool, defineTool, type Tool } from '@flowgrpo/tools';
import { z } from 'zod';
import { formatCompliant } from '../eval/evaluate.js';
import { type Almanac, lookupAlmanac } from './almanac.js';
import { SUB_GOALS } from './task.js';

// The demo's fixed roles — executor, verifier, final-answer generator — and its judge, as
// rule-based LLMEngines: they read the very prompts an LLM would read and answer in the very
// schemas an LLM must answer in, so the FlowRollout, the LLMJudge and the trainer run exactly
// the code path of an app with real models. Only the planner is a model (the one being trained).
//
//   executor   grounds the planner's sub-goal into the tool's arguments: "year of the landmark"
//              names the question's landmark; "event in the year" takes the latest year a step
//              found (or the question's); "add the offset" adds the question's offset to that
//              year; any other sub-goal goes to the tool verbatim (the executor sees the steps)
//   verifier   never stops the run: the planner decides when it has the answer
//   generator  answers with the result of the last successful tool call
//   judge      normalised exact match of the candidate against the reference

/** A rule-based LLMEngine: `text` answers generateText, `object` answers generateObject. */
export class RuleEngine implements LLMEngine {
  readonly model: string;
  readonly #text: ((user: string, messages: ChatMessage[]) => string) | undefined;
  readonly #object: ((user: string, messages: ChatMessage[]) => unknown) | undefined;
  calls = 0;

  constructor(options: {
    model: string;
    text?: (user: string, messages: ChatMessage[]) => string;
    object?: (user: string, messages: ChatMessage[]) => unknown;
  }) {
    this.model = options.model;
    this.#text = options.text;
    this.#object = options.object;
  }

  async generateText(messages: ChatMessage[]): Promise<GenerateTextResult> {
    if (!this.#text) throw new Error(`${this.model} answers with objects only`);
    this.calls++;
    return {
      text: this.#text(userText(messages), messages),
      usage: emptyUsage(),
      finishReason: 'stop',
      model: this.model,
    };
  }

  async generateObject<T>(
    messages: ChatMessage[],
    schema: z.ZodType<T>,
  ): Promise<GenerateObjectResult<T>> {
    if (!this.#object) throw new Error(`${this.model} answers with text only`);
    this.calls++;
    const value = this.#object(userText(messages), messages);
    const object = schema.parse(value);
    return {
      object,
      rawText: JSON.stringify(value),
      usage: emptyUsage(),
      finishReason: 'stop',
      model: this.model,
    };
  }
}

function userText(messages: ChatMessage[]): string {
  return messages
    .filter((m) => m.role === 'user')
    .map((m) => m.content)
    .join('\n');
}

/** The value of a `Label: value` line of a prompt. */
export function field(text: string, label: string): string | undefined {
  const m = new RegExp(`^${label}: (.*)$`, 'm').exec(text);
  return m?.[1];
}

/** The JSON object after `label:` in a prompt (the memory of steps). */
export function jsonAfter(
  text: string,
  label: string,
): Record<string, { tool_name: string; result: unknown }> {
  const at = text.indexOf(label);
  if (at < 0) return {};
  const rest = text.slice(at + label.length).trim();
  if (!rest.startsWith('{')) return {};
  let depth = 0;
  for (let i = 0; i < rest.length; i++) {
    if (rest[i] === '{') depth++;
    else if (rest[i] === '}' && --depth === 0) {
      try {
        return JSON.parse(rest.slice(0, i + 1));
      } catch {
        return {};
      }
    }
  }
  return {};
}

/** The landmark a demo question is about (one pattern per question template). */
export function landmarkOf(question: string): string | undefined {
  const patterns = [
    /years after (.+?) was built\?$/,
    /in the year (.+?) was built\?$/,
    /^In which year was (.+?) built\?$/,
    /^In which town is (.+?)\?$/,
  ];
  for (const p of patterns) {
    const m = p.exec(question.trim());
    if (m) return m[1];
  }
  return undefined;
}

/** The tool input a sub-goal stands for, grounded in the question and the planner's data. */
export function groundSubGoal(
  tool: string,
  subGoal: string,
  question: string,
  steps: readonly { result: unknown }[],
): string {
  const goal = subGoal.trim().toLowerCase();
  const landmark = landmarkOf(question);
  // "the year" is the latest number a step found, else the year the question names.
  const found = steps
    .map((s) =>
      typeof s.result === 'string' && /^\d+$/.test(s.result.trim()) ? s.result.trim() : undefined,
    )
    .filter((x) => x !== undefined)
    .at(-1);
  const year = found ?? /\b\d{3,4}\b/.exec(question.replace(/\d+ years after/, ''))?.[0];
  const offset = /(\d+) years after/.exec(question)?.[1];
  if (tool === 'almanac' && goal === SUB_GOALS.year && landmark) return `year of ${landmark}`;
  if (tool === 'almanac' && goal === SUB_GOALS.town && landmark) return `town of ${landmark}`;
  if (tool === 'almanac' && goal === SUB_GOALS.event && year) return `event in ${year}`;
  // The offset goes onto the year found, else the question's own ("N years after 1835").
  if (tool === 'calculator' && goal === SUB_GOALS.add && year && offset) return `${year}+${offset}`;
  return subGoal.trim();
}

export const executorEngine = (): RuleEngine =>
  new RuleEngine({
    model: 'rules/executor',
    object(user) {
      const subGoal = field(user, 'Sub-goal') ?? '';
      const tool = (field(user, 'Tool') ?? '').trim();
      const steps = Object.values(jsonAfter(user, 'Steps taken and their results:'));
      const input = groundSubGoal(tool, subGoal, field(user, 'Question') ?? '', steps);
      return {
        analysis: 'The sub-goal, the question and the steps so far give the tool input.',
        explanation: `${tool} with "${input}"`,
        arguments: tool === 'calculator' ? { expression: input } : { query: input },
      };
    },
  });

export const verifierEngine = (): RuleEngine =>
  new RuleEngine({
    model: 'rules/verifier',
    object: () => ({
      analysis: 'The planner decides when the question is answered.',
      stop_signal: false,
    }),
  });

export const generatorEngine = (): RuleEngine =>
  new RuleEngine({
    model: 'rules/generator',
    text(user) {
      const steps = Object.values(jsonAfter(user, 'Steps taken and their results:'));
      const ok = steps.filter((s) => typeof s.result === 'string' && !s.result.startsWith('Error'));
      const last = ok.at(-1);
      return `The last successful step gives the answer.\nAnswer: ${last ? String(last.result) : 'unknown'}`;
    },
  });

const normalize = (s: string) =>
  s
    .toLowerCase()
    .replace(/[.,;:!?"'`*]/g, ' ')
    .replace(/\b(the|a|an)\b/g, ' ')
    .replace(/\s+/g, ' ')
    .trim();

/** The judge's engine: true when the candidate equals the reference after normalisation. */
export const judgeEngine = (): RuleEngine =>
  new RuleEngine({
    model: 'rules/judge',
    object(user) {
      const ref = /Reference answer\(s\):\n([\s\S]*?)\n\nCandidate answer:/.exec(user)?.[1] ?? '';
      const cand = /Candidate answer:\n([\s\S]*)$/.exec(user)?.[1] ?? '';
      const same = normalize(cand) !== '' && normalize(cand) === normalize(ref);
      return { analysis: same ? 'Same answer.' : 'Different answer.', true_false: same };
    },
  });

/** The demo's reward: the LLMJudge class over the rule-based judge engine (1 correct, 0 not). */
export function demoReward(): RewardFunction<object> {
  return new LLMJudge({
    engine: judgeEngine(),
    name: 'judge',
  }) as unknown as RewardFunction<object>;
}

/**
 * 1 when every planner turn parsed and the run ended with an answer (the evaluation's format
 * rate), else 0. A malformed final turn ends a rollout with the last tool result as its answer,
 * which the judge may still pass: without this term GRPO is paid as much for a broken reply.
 */
export function plannerFormatReward(): RewardFunction<object> {
  return {
    name: 'format',
    score: (input) => ({
      score: input.trajectory && formatCompliant(input.trajectory) ? 1 : 0,
      details: {},
    }),
  };
}

/**
 * The judge's score when every planner turn parsed and the run ended with an answer, else 0: a
 * malformed reply earns nothing, even when the final-answer generator still answers right from
 * the tools' last result. Both parts are logged (`rewards/judge/mean`, `rewards/format/mean`).
 */
export function formatGatedReward(): RewardFunction<object> {
  const judge = demoReward();
  const format = plannerFormatReward();
  return {
    name: 'judge×format',
    async score(input) {
      const f = (await format.score(input)).score;
      const j = (await judge.score(input)).score;
      return { score: j * f, details: { scores: { judge: j, format: f } } };
    },
  };
}

/**
 * The reward GRPO trains on: with `formatGate`, the judge's score only for a well-formed rollout
 * (formatGatedReward); else the judge alone. The evaluations always score with the judge alone,
 * so accuracy means the same in every row.
 */
export function demoTrainingReward(
  o: { formatGate?: boolean | undefined } = {},
): RewardFunction<object> {
  return o.formatGate ? formatGatedReward() : demoReward();
}

/** The almanac lookup tool (defined as any app would define one). */
export function almanacTool(almanac: Almanac): Tool {
  return defineTool({
    name: 'almanac',
    input: z
      .object({
        query: z
          .string()
          .min(1)
          .describe('"year of <landmark>", "town of <landmark>" or "event in <year>"'),
      })
      .describe(
        'Looks up a fact in the offline almanac: when a landmark was built, its town, or what happened in a year.',
      ),
    execute({ query }) {
      const hit = lookupAlmanac(almanac, query);
      if (hit === undefined) throw new Error(`no almanac entry for "${query}"`);
      return hit;
    },
  }) as Tool;
}

export function demoTools(almanac: Almanac): Tool[] {
  return [almanacTool(almanac), createCalculatorTool() as Tool];
}

/**
 * The tiny planner's prompt: the question, the steps so far one per line, and "Next:". Short on
 * purpose — every prompt token is computed at every turn of every rollout.
 */
export function demoPlannerPrompt(c: PromptContext): string {
  const lines = [`Q: ${c.question}`];
  Object.values(c.actions).forEach((a, i) => {
    const result = typeof a.result === 'string' ? a.result : JSON.stringify(a.result);
    lines.push(`${i + 1} ${a.tool_name}: ${a.sub_goal} -> ${result}`);
  });
  lines.push('Next:');
  return `${lines.join('\n')}\n`;
}

export interface DemoAgentOptions {
  maxTurns?: number;
  maxTokens?: number;
  temperature?: number;
  topP?: number;
}

/** The demo's FlowRollout around a planner policy: rule-based fixed roles, almanac + calculator. */
export function demoAgent(
  policy: PolicyEngine,
  almanac: Almanac,
  o: DemoAgentOptions = {},
): FlowRollout {
  return new FlowRollout({
    policy,
    engines: {
      executor: executorEngine(),
      verifier: verifierEngine(),
      generator: generatorEngine(),
    },
    tools: demoTools(almanac),
    maxTurns: o.maxTurns ?? 4,
    executorSeesMemory: true,
    plannerPrompt: (c) => demoPlannerPrompt(c),
    sampling: {
      maxTokens: o.maxTokens ?? 96,
      temperature: o.temperature ?? 1,
      topP: o.topP ?? 1,
    },
  });
}
