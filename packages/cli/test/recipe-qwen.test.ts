import {
  copyFileSync,
  existsSync,
  mkdtempSync,
  readFileSync,
  rmSync,
  writeFileSync,
} from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import {
  OpenAITestServer,
  type RecordedRequest,
  reply,
  type OpenAITestServer as Server,
  schemaResponder,
} from '@flowgrpo/agent/testing';
import { type ChatMessage, readTrajectoriesParquet } from '@flowgrpo/core';
import { createTinyQwen2, HfTokenizer } from '@flowgrpo/models';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { sharedPath, skipWithoutShared } from '../../../test-utils/shared.js';
import { runCli } from '../src/main.js';
import { captureIO } from './support.js';

// The Qwen2.5-1.5B Flow-GRPO recipe (docs/recipes/qwen2.5-1.5b-flow-grpo.json) run through
// `flowgrpo train` exactly as written, except for what a test must shrink or point elsewhere:
// the model is a tiny Qwen2 (hidden 16, 1 layer, GQA 2/1) written by createTinyQwen2 but with
// the REAL Qwen tokenizer and chat template (../shared/models/qwen3-tokenizer, vocabulary
// 151 936 rows as Qwen2.5's), the fixed roles and the judge are this project's OpenAI-compatible
// test server, 2 steps of 1 query × 2 rollouts, 2 planner turns of at most 8 tokens, LoRA r 2,
// CPU. Everything else — the Flow agent and its tools, the LLM judge reward, the loss, KL,
// clipping, filters, scheduler, checkpoints — is the recipe's. Then the recipe's vLLM variant
// (rollout.engine 'openai'): the planner is served by the same test server acting as vLLM
// (token ids + logprobs), the adapter saved and hot-loaded after every update.

const ROOT = join(dirname(fileURLToPath(import.meta.url)), '../../..');
const RECIPE = join(ROOT, 'docs/recipes/qwen2.5-1.5b-flow-grpo.json');
const skip = skipWithoutShared('the Qwen2.5 recipe test (needs the real Qwen tokenizer)');
const FIXED_MODEL = 'Qwen/Qwen2.5-7B-Instruct'; // the recipe's fixed-role model name
const SERVED_POLICY = 'qwen-tiny';
const KEY = 'test-key-123';

describe.skipIf(skip)('docs/recipes/qwen2.5-1.5b-flow-grpo through flowgrpo train', () => {
  const tmp = mkdtempSync(join(tmpdir(), 'flowgrpo-recipe-'));
  const modelDir = join(tmp, 'qwen-tiny');
  let server: Server;
  let tokenizer: HfTokenizer;
  // Planner replies of the served policy (vLLM variant): one NextStep naming a recipe tool.
  const plannerText = JSON.stringify({
    justification: 'A generalist can answer this.',
    context: '',
    sub_goal: 'Answer the question',
    tool_name: 'Generalist_Solution_Generator_Tool',
  });

  beforeAll(async () => {
    await createTinyQwen2(modelDir, {
      seed: 'recipe',
      hiddenSize: 16,
      layers: 1,
      heads: 2,
      kvHeads: 1,
      intermediateSize: 32,
      vocabSize: 151_936,
      maxPositionEmbeddings: 4096,
    });
    // The real tokenizer and chat template, and Qwen2.5-Instruct's special ids in the config.
    for (const f of ['tokenizer.json', 'tokenizer_config.json'])
      copyFileSync(sharedPath('models', 'qwen3-tokenizer', f), join(modelDir, f));
    const config = JSON.parse(readFileSync(join(modelDir, 'config.json'), 'utf8'));
    Object.assign(config, { bos_token_id: 151643, eos_token_id: 151645 });
    writeFileSync(join(modelDir, 'config.json'), JSON.stringify(config));
    writeFileSync(
      join(modelDir, 'generation_config.json'),
      JSON.stringify({ bos_token_id: 151643, eos_token_id: [151645, 151643] }),
    );
    tokenizer = await HfTokenizer.fromDir(modelDir);

    const row = (id: number, question: string, result: string, source: string) => ({
      id,
      question,
      chain: '',
      result,
      source,
      extra_info: { ground_truth: result, idx: id },
    });
    writeFileSync(
      join(tmp, 'train.jsonl'),
      `${[row(0, 'What is 6 times 7?', '42', 'math'), row(1, 'Who wrote Hamlet?', 'Shakespeare', 'nq')].map((r) => JSON.stringify(r)).join('\n')}\n`,
    );
    writeFileSync(
      join(tmp, 'val.jsonl'),
      `${JSON.stringify(row(0, 'What is 2 plus 3?', '5', 'math'))}\n`,
    );

    // Fixed roles and judge: answers built from the JSON schema each request carries, the judge
    // always saying "correct"; the served policy (vLLM variant): the planner reply as token ids
    // of the real tokenizer, the prompt ids rendered with its chat template — what vLLM returns
    // with return_token_ids and logprobs as token ids.
    const roles = schemaResponder({ answer: 'Answer: 42' });
    server = await OpenAITestServer.start({
      model: FIXED_MODEL,
      fallback: {
        chat: reply.dynamic((req: RecordedRequest) => {
          if (req.body.model !== FIXED_MODEL) return policyReply(req);
          if (req.body.response_format?.json_schema?.name === 'answer_verification')
            return reply.text(JSON.stringify({ analysis: 'Same answer.', true_false: true }));
          return reply.text(roles);
        }),
      },
    });
  });
  afterAll(async () => {
    await server?.close();
    rmSync(tmp, { recursive: true, force: true });
  });

  function policyReply(req: RecordedRequest) {
    const messages = (req.body.messages ?? []) as ChatMessage[];
    const prompt = tokenizer.applyChatTemplate!(messages, { addGenerationPrompt: true });
    const ids = [...tokenizer.encode(plannerText), 151645];
    return reply.tokens(plannerText, {
      ids,
      logprobs: ids.map((_, i) => -0.25 - 0.01 * i),
      promptIds: Array.from(tokenizer.encode(prompt)),
    });
  }

  /** The recipe, shrunk for a test (every other key is the recipe's own). */
  function shrunkRecipe(outputDir: string): Record<string, unknown> {
    const recipe = JSON.parse(readFileSync(RECIPE, 'utf8'));
    return {
      ...recipe,
      model: modelDir,
      base_model: undefined,
      train_file: join(tmp, 'train.jsonl'),
      eval_file: join(tmp, 'val.jsonl'),
      device: 'cpu',
      agent: {
        ...recipe.agent,
        max_turns: 2,
        engine: { ...recipe.agent.engine, base_url: server.baseURL },
      },
      output_dir: outputDir,
      max_steps: 2,
      queries_per_step: 1,
      num_generations: 2,
      max_completion_length: 8,
      max_turns: 2,
      rollout_concurrency: 2,
      warmup_steps: 1,
      save_steps: 1,
      eval_steps: 0,
      max_tokens_per_microbatch: 4096,
      lora: { ...recipe.lora, r: 2, lora_alpha: 4 },
      // Off here: every group of this test has equal rewards and a random tiny model never ends a
      // turn before the length limit, so the recipe's filters would leave an empty batch, which
      // GRPOTrainer cannot train on yet ("a step needs at least one micro-batch").
      filter_zero_variance_groups: false,
      mask_truncated_completions: false,
    };
  }

  function readMetrics(dir: string): Record<string, number>[] {
    return readFileSync(join(dir, 'metrics.jsonl'), 'utf8')
      .trim()
      .split('\n')
      .map((l) => JSON.parse(l));
  }

  it('trains 2 steps with local rollouts: metrics.jsonl, checkpoints, report.html', async () => {
    const out = join(tmp, 'run-local');
    const cfg = join(tmp, 'local.json');
    writeFileSync(cfg, JSON.stringify(shrunkRecipe(out)));
    const io = captureIO(tmp, { FIXED_ROLES_API_KEY: KEY });
    const code = await runCli(['train', '--config', cfg], io);
    expect(io.err).not.toMatch(/Error/);
    expect(code, io.err).toBe(0);
    const metrics = readMetrics(out);
    const steps = metrics.filter((m) => m.loss !== undefined);
    expect(steps.map((m) => m.step)).toEqual([1, 2]);
    for (const m of steps) {
      expect(Number.isFinite(m.loss)).toBe(true);
      expect(m.reward).toBe(1); // the scripted judge says "correct" to every answer
    }
    // The final evaluation on val.jsonl (1 row), logged with eval/ names.
    expect(metrics.some((m) => m['eval/accuracy'] !== undefined)).toBe(true);
    for (const step of [1, 2]) {
      const ck = join(out, `checkpoint-${step}`);
      for (const f of ['adapter_config.json', 'adapter_model.safetensors', 'trainer_state.json'])
        expect(existsSync(join(ck, f)), `${ck}/${f}`).toBe(true);
    }
    expect(readFileSync(join(out, 'report.html'), 'utf8')).toContain('<svg');
    expect(io.out).toContain(`checkpoint: ${join(out, 'checkpoint-2')}`);
    // The planner saw the Flow prompt through the real Qwen chat template: 2 rollouts, each
    // prompt starting with <|im_start|> (id 151644 in tokenizer.json) and ending with the
    // assistant header the template adds for generation.
    const rollouts = await readTrajectoriesParquet(join(out, 'rollouts', 'step-000001.parquet'));
    expect(rollouts).toHaveLength(2);
    const turn = rollouts[0]!.turns![0]!;
    expect(turn.promptTokens[0]).toBe(151644);
    expect(tokenizer.decode(turn.promptTokens)).toMatch(/<\|im_start\|>assistant\n$/);
    expect(turn.actionTokens.length).toBe(8); // max_completion_length: a random model never stops
    // The fixed roles and the judge reached the endpoint with the key from api_key_env.
    const fixed = server.requests.filter((r) => r.body.model === FIXED_MODEL);
    expect(fixed.length).toBeGreaterThan(0);
    expect(fixed.every((r) => r.headers.authorization === `Bearer ${KEY}`)).toBe(true);
    expect(
      fixed.some((r) => r.body.response_format?.json_schema?.name === 'answer_verification'),
    ).toBe(true);
  });

  it('trains 2 steps with rollouts on a vLLM-compatible server and hot-loaded adapters', async () => {
    const out = join(tmp, 'run-vllm');
    const cfg = join(tmp, 'vllm.json');
    const before = server.requests.length;
    writeFileSync(
      cfg,
      JSON.stringify({
        ...shrunkRecipe(out),
        // The recipe's vLLM variant (docs/recipes/qwen2.5-1.5b-flow-grpo.md).
        rollout: {
          engine: 'openai',
          base_urls: [server.baseURL],
          model: SERVED_POLICY,
          lora_routes: 'vllm',
        },
      }),
    );
    const io = captureIO(tmp, { FIXED_ROLES_API_KEY: KEY });
    const code = await runCli(['train', '--config', cfg], io);
    expect(io.err).not.toMatch(/Error/);
    expect(code, io.err).toBe(0);
    const steps = readMetrics(out).filter((m) => m.loss !== undefined);
    expect(steps.map((m) => m.step)).toEqual([1, 2]);
    // The served planner's tokens were trained on: the recomputed old log-probs differ from the
    // server's made-up ones, and the difference is logged.
    for (const m of steps) expect(m['logprob_mismatch/mean']).toBeGreaterThan(0);
    // The adapter of step 0, 1 and 2 was written and hot-loaded; generations then used it.
    const loads = server.requests
      .slice(before)
      .filter((r) => r.route === 'load_lora_adapter')
      .map((r) => String(r.body.lora_path));
    expect(loads).toEqual([0, 1, 2].map((s) => join(out, 'adapters', `step-${s}`)));
    for (const dir of loads) expect(existsSync(join(dir, 'adapter_model.safetensors'))).toBe(true);
    const planner = server.requests
      .slice(before)
      .filter((r) => r.route === 'chat' && r.body.model !== FIXED_MODEL);
    expect(planner.length).toBeGreaterThan(0);
    expect(planner.every((r) => r.body.model === 'flowgrpo-policy')).toBe(true);
    expect(existsSync(join(out, 'checkpoint-2', 'adapter_model.safetensors'))).toBe(true);
    expect(existsSync(join(out, 'report.html'))).toBe(true);
  });
});
