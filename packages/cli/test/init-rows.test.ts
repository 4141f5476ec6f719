import type { PolicyEngine, TagAgent } from '@flowgrpo/agent';
import { createRng } from '@flowgrpo/core';
import { HfTokenizer, type HfTokenizerConfig } from '@flowgrpo/models';
import { describe, expect, it } from 'vitest';
import {
  agentProgramRow,
  flowPlannerRows,
  misremembered,
  tagAgentRow,
  teacherMove,
  workedStep,
} from '../src/init/sft-rows.js';
import { fitTokenizer } from '../src/init/tokenizer.js';
import { PROBLEM_KINDS, type WordProblem, wordProblems } from '../src/init/word-problems.js';
import { agentFactory, policyTokenizer } from '../src/run-agent.js';
import { AgentSchema } from '../src/run-config.js';

// What `flowgrpo init` generates, checked against its own rules and against the real agents:
// the word problems (GSM8K's format; no held-out pair of numbers in training), the teacher's
// moves, the tokenizer (digits and tags one token each; text round-trips), and that an SFT row is
// token for token what the template's agent shows the model and wants back — the agents run here
// on a policy that replays the teacher's reply, and their recorded sequences are compared.

const splits = wordProblems(1, { logs: 300, train: 150, eval: 60 });
const { logs: train, eval: held } = splits;

describe('the word problems', () => {
  it("GSM8K's format, the three kinds in turn, no (kind, A, B) in two splits", () => {
    const key = (r: WordProblem) => `${r.kind}:${workedStep(r).expression}`;
    expect(train.map((r) => r.kind).slice(0, 6)).toEqual([...PROBLEM_KINDS, ...PROBLEM_KINDS]);
    for (const r of [...train, ...splits.train, ...held]) {
      const { expression, result } = workedStep(r);
      // The note's arithmetic, redone here: A op B = the reference after ####.
      const [a, op, b] = /^(\d+)([-+*])(\d+)$/.exec(expression)!.slice(1) as [
        string,
        string,
        string,
      ];
      const value = op === '+' ? +a + +b : op === '-' ? +a - +b : +a * +b;
      expect(r.answer).toMatch(new RegExp(`<<${expression.replace(/[*+]/g, '\\$&')}=${value}>>`));
      expect(result).toBe(String(value));
      // Both numbers at the end of the question, two digits each.
      expect(r.question).toMatch(new RegExp(` ${a} \\D+ ${b} \\w+\\?$`));
      expect([a.length, b.length]).toEqual([2, 2]);
    }
    // Each split's keys, and all of them together, are distinct: no pair in two splits.
    const all = [...train, ...splits.train, ...held].map(key);
    expect(new Set(all).size).toBe(all.length);
  });

  it('the same seed gives the same rows; another seed others', () => {
    expect(wordProblems(1, { logs: 300, train: 150, eval: 60 })).toEqual(splits);
    expect(wordProblems(2, { logs: 300, train: 150, eval: 60 }).logs[0]).not.toEqual(train[0]);
  });
});

describe('the teacher', () => {
  it('the calculator on every sum and difference; a product from memory (wrong) or with it', () => {
    const rng = createRng('teacher-test');
    let fromMemory = 0;
    for (const r of train) {
      const move = teacherMove(r, rng);
      if (r.kind !== 'mul') expect(move.tool).toBe(true);
      if (move.tool) expect(move.result).toBe(workedStep(r).result);
      else {
        fromMemory++;
        expect(move.answer).toBe(misremembered(workedStep(r).result));
        expect(move.answer).not.toBe(workedStep(r).result);
      }
    }
    // MEMORY_RATE 0.8 of the 100 products: a binomial count well inside [60, 95].
    expect(fromMemory).toBeGreaterThan(60);
    expect(fromMemory).toBeLessThan(95);
  });

  it('misremembered: the result rounded to tens, or 10 more when it is a multiple of 10', () => {
    expect(misremembered('645')).toBe('650');
    expect(misremembered('671')).toBe('670');
    expect(misremembered('650')).toBe('660');
  });
});

const sample = train.slice(0, 30);
const SYSTEM =
  'Use the calculator: <tool_call>{"name": "calculator", "arguments": {}}</tool_call>.';
const rows = {
  tag: sample.map((r) => tagAgentRow(r, SYSTEM, createRng(1))),
  flow: sample.flatMap((r) => flowPlannerRows(r, 2, createRng(1))),
  program: sample.map((r) => agentProgramRow(r, 'Name the operation.', createRng(1))),
};
const corpus = [
  ...rows.tag.map((r) => r.messages.map((m) => m.content).join('\n')),
  ...rows.flow.map((r) => r.prompt + r.completion),
];
const fitted = fitTokenizer(corpus, { merges: 200 });
const tokenizer = new HfTokenizer(
  fitted.tokenizerJson,
  fitted.tokenizerConfig as HfTokenizerConfig,
);

describe('the template tokenizer', () => {
  it('each digit and each tag one token, the ChatML ids of the byte tokenizer, text round-trips', () => {
    const text =
      '<tool_call>{"expression": "57+68"}</tool_call>\n<tool_response>\n125\n</tool_response>';
    const ids = Array.from(tokenizer.encode(text));
    const pieces = ids.map((id) => tokenizer.decode([id]));
    for (const piece of ['<tool_call>', '</tool_call>', '<tool_response>', '5', '7', '+', '1'])
      expect(pieces).toContain(piece);
    expect(pieces.filter((p) => /\d/.test(p)).every((p) => /^\d$/.test(p))).toBe(true);
    expect(tokenizer.decode(ids)).toBe(text);
    // Merged words: fewer tokens than bytes.
    const q = sample[0]!.question;
    expect(tokenizer.encode(q).length).toBeLessThan(q.length / 2);
    expect(tokenizer.decode(Array.from(tokenizer.encode(q)))).toBe(q);
    expect(tokenizer.tokenToId('<|im_start|>')).toBe(257);
    expect(tokenizer.eosTokenId).toBe(258);
    expect(fitted.vocabSize).toBeGreaterThan(259 + 8);
  });
});

/** A policy that replies `replies` in turn (as token ids of this tokenizer), recording prompts. */
function replaying(replies: string[]) {
  const prompts: number[][] = [];
  const policy: PolicyEngine = {
    model: 'teacher',
    tokenizer: policyTokenizer(tokenizer),
    async generate(request) {
      const prompt = request.promptTokens
        ? Array.from(request.promptTokens)
        : request.prompt !== undefined
          ? Array.from(tokenizer.encode(request.prompt))
          : Array.from(
              tokenizer.encode(
                tokenizer.applyChatTemplate!(request.messages!, { addGenerationPrompt: true }),
              ),
            );
      prompts.push(prompt);
      const text = replies.shift() ?? '';
      const ids = Array.from(tokenizer.encode(text));
      // As LocalPolicyEngine returns a stop string: its ids kept, the text cut before it.
      const stop = request.stop?.find((s) => text.endsWith(s));
      return {
        text: stop ? text.slice(0, -stop.length) : text,
        promptTokens: Int32Array.from(prompt),
        actionTokens: Int32Array.from(ids),
        actionLogprobs: new Float32Array(ids.length).fill(-1),
        finishReason: 'stop' as const,
      };
    },
  };
  return { policy, prompts };
}

describe('an SFT row is what the agent shows the model and wants back', () => {
  it('math-tags: the chat-templated row is the tag agent’s whole sequence', async () => {
    const spec = AgentSchema.parse({
      type: 'tag',
      tools: ['calculator'],
      max_turns: 2,
      system_prompt: SYSTEM,
    });
    for (const [i, row] of rows.tag.entries()) {
      const reply = row.messages[2]!.content;
      // The agent's actions: the reply cut after each closing tag the agent stops at.
      const actions = reply
        .match(/[\s\S]*?<\/(?:tool_call|answer)>/g)!
        .map((a) => a.replace(/^\n<tool_response>\n\d+\n<\/tool_response>\n/, ''));
      const { policy } = replaying(actions);
      const agent = agentFactory(
        spec,
        { maxTurns: 2, maxTokens: 48, temperature: 1, topP: 1 },
        {},
      )(policy) as TagAgent;
      const t = await agent.run(sample[i]!.question);
      const sequence = t.segments!.flatMap((s) => Array.from(s.tokens));
      const rendered = tokenizer.applyChatTemplate!(row.messages, { addGenerationPrompt: false });
      // The template closes the turn with <|im_end|>\n, which the agent leaves to the stop.
      expect(tokenizer.decode(sequence, { skipSpecialTokens: false })).toBe(
        rendered.replace(/<\|im_end\|>\n$/, ''),
      );
      expect(sequence).toEqual(Array.from(tokenizer.encode(rendered)).slice(0, sequence.length));
    }
  });

  it('flow-planner: each prompt-completion row is a planner turn of the offline Flow agent', async () => {
    const spec = AgentSchema.parse({
      type: 'flow',
      tools: ['calculator'],
      max_turns: 2,
      planner_prompt: 'compact',
    });
    let at = 0;
    for (const problem of sample) {
      const first = rows.flow[at]!;
      const turns = first.completion.includes('calculator') ? [first, rows.flow[at + 1]!] : [first];
      at += turns.length;
      const { policy, prompts } = replaying(turns.map((r) => r.completion));
      const agent = agentFactory(
        spec,
        { maxTurns: 2, maxTokens: 48, temperature: 1, topP: 1 },
        {},
      )(policy);
      const t = await agent.run(problem.question);
      expect(prompts.map((p) => tokenizer.decode(p, { skipSpecialTokens: false }))).toEqual(
        turns.map((r) => r.prompt),
      );
      // The teacher's answer: the calculator's result, or its answer from memory.
      const move = teacherMove(problem, createRng(1));
      expect(t.finalAnswer).toBe(move.tool ? move.result : move.answer);
    }
    expect(at).toBe(rows.flow.length);
  });

  it('gateway-agent: the program’s system prompt, the question, the operation or "answer N"', () => {
    for (const [i, row] of rows.program.entries()) {
      expect(row.messages.map((m) => m.role)).toEqual(['system', 'user', 'assistant']);
      expect(row.messages[1]!.content).toBe(sample[i]!.question);
      expect(row.messages[2]!.content).toMatch(/^(add|subtract|multiply|answer \d+)$/);
    }
  });
});
