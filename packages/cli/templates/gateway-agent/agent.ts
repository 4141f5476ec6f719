// An agent program written with the openai SDK, trained through the flowgrpo gateway.
// `flowgrpo serve --model runs/sft/checkpoint-150 --tokenizer model --train serve-train.json`
// serves the policy (model "policy") and records every call token-exactly; this program runs
// episodes against it — each episode under its own rollout id, in the base URL — and posts each
// episode's reward with the task it solved (group_id). Every queries_per_step complete groups of
// num_generations episodes make one GRPO update, and the gateway then serves the new adapter.
//   npx tsx agent.ts            train: one round of episodes per update, max_steps rounds
//   npx tsx agent.ts --eval     every model the server serves, greedily, on data/eval.jsonl;
//                               the results join eval.json and the table of all of them prints
import { existsSync, readFileSync, writeFileSync } from 'node:fs';
import OpenAI from 'openai';

const gateway = process.env.GATEWAY_URL ?? 'http://127.0.0.1:8000';
const apiKey = process.env.FLOWGRPO_API_KEY ?? 'EMPTY';
const systemPrompt = readFileSync('prompt.txt', 'utf8').trim();
const config = JSON.parse(readFileSync('serve-train.json', 'utf8')) as {
  max_steps: number;
  queries_per_step: number;
  num_generations: number;
};

interface Row {
  question: string;
  answer: string;
}
const rows = (file: string): Row[] =>
  readFileSync(file, 'utf8')
    .split('\n')
    .filter((line) => line.trim() !== '')
    .map((line) => JSON.parse(line) as Row);
/** GSM8K's reference: the number after "####". */
const reference = (row: Row) => row.answer.slice(row.answer.lastIndexOf('####') + 4).trim();

/** The arithmetic the agent does itself, on the question's numbers in their order. */
const OPERATIONS: Record<string, (a: number, b: number) => number> = {
  add: (a, b) => a + b,
  subtract: (a, b) => a - b,
  multiply: (a, b) => a * b,
};

/**
 * The agent: the model names the operation the question needs, which the program applies to the
 * question's numbers, or answers outright ("answer 480"). Yours can be anything — more calls,
 * tools, other models — as long as its calls go through the gateway's base URL.
 */
async function solve(baseURL: string, model: string, question: string): Promise<string> {
  const openai = new OpenAI({ baseURL, apiKey });
  const r = await openai.chat.completions.create({
    model,
    messages: [
      { role: 'system', content: systemPrompt },
      { role: 'user', content: question },
    ],
    max_tokens: 8,
    // The gateway samples a trained role at serve-train.json's temperature inside a rollout;
    // outside one (the evaluation) this is what it uses: greedy.
    temperature: 0,
  });
  const reply = (r.choices[0]?.message.content ?? '').trim();
  const operation = OPERATIONS[reply];
  const [a, b] = (question.match(/\d+/g) ?? []).map(Number);
  if (!operation || a === undefined || b === undefined) return reply.replace(/^answer\s*/, '');
  return String(operation(a, b));
}

async function postReward(id: string, reward: number, groupId: string, answer: string) {
  const r = await fetch(`${gateway}/v1/rollouts/${id}/reward`, {
    method: 'POST',
    headers: { 'content-type': 'application/json', authorization: `Bearer ${apiKey}` },
    body: JSON.stringify({ reward, group_id: groupId, final_answer: answer }),
  });
  if (!r.ok) throw new Error(`POST reward for ${id}: ${r.status} ${await r.text()}`);
}

/** Runs `tasks` with at most `limit` at once. */
async function inBatches<T>(tasks: (() => Promise<T>)[], limit: number): Promise<T[]> {
  const out: T[] = [];
  for (let i = 0; i < tasks.length; i += limit)
    out.push(...(await Promise.all(tasks.slice(i, i + limit).map((task) => task()))));
  return out;
}

/** The 95% Wilson score interval of k right out of n (what flowgrpo eval reports). */
function wilson(k: number, n: number): [number, number] {
  const z = 1.959963984540054;
  const p = k / n;
  const centre = (p + (z * z) / (2 * n)) / (1 + (z * z) / n);
  const half = (z * Math.sqrt((p * (1 - p)) / n + (z * z) / (4 * n * n))) / (1 + (z * z) / n);
  return [Math.max(0, centre - half), Math.min(1, centre + half)];
}

interface Result {
  model: string;
  n: number;
  right: number;
  ci95: [number, number];
}

async function evaluate(): Promise<void> {
  const held = rows('data/eval.jsonl');
  const listed = (await new OpenAI({ baseURL: `${gateway}/v1`, apiKey }).models.list()).data;
  const results: Record<string, Result> = existsSync('eval.json')
    ? (JSON.parse(readFileSync('eval.json', 'utf8')) as Record<string, Result>)
    : {};
  for (const { id: model } of listed) {
    const answers = await inBatches(
      held.map((row) => () => solve(`${gateway}/v1`, model, row.question)),
      16,
    );
    const right = answers.filter((a, i) => a === reference(held[i]!)).length;
    results[model] = { model, n: held.length, right, ci95: wilson(right, held.length) };
  }
  writeFileSync('eval.json', `${JSON.stringify(results, null, 2)}\n`);
  const pct = (x: number) => (100 * x).toFixed(1);
  for (const r of Object.values(results))
    console.log(
      `${r.model.padEnd(10)} ${pct(r.right / r.n).padStart(5)}% [${pct(r.ci95[0])}, ${pct(r.ci95[1])}]  (${r.right}/${r.n})`,
    );
  const [sft, policy] = [results.sft, results.policy];
  if (sft && policy) {
    const apart = policy.ci95[0] > sft.ci95[1] || sft.ci95[0] > policy.ci95[1];
    const points = (100 * (policy.right / policy.n - sft.right / sft.n)).toFixed(1);
    console.log(
      `policy − sft: ${points} points${apart ? '' : ', inconclusive: the 95% intervals overlap'}`,
    );
  }
}

async function train(): Promise<void> {
  const train = rows('data/train.jsonl');
  const perRound = config.queries_per_step;
  for (let round = 0; round < config.max_steps; round++) {
    const episodes: Promise<number>[] = [];
    for (let q = 0; q < perRound; q++) {
      const index = (round * perRound + q) % train.length;
      const row = train[index]!;
      for (let g = 0; g < config.num_generations; g++) {
        const id = `r${round}-q${index}-g${g}`;
        episodes.push(
          solve(`${gateway}/rollouts/${id}/v1`, 'policy', row.question).then(async (answer) => {
            const reward = answer === reference(row) ? 1 : 0;
            await postReward(id, reward, `q${index}`, answer);
            return reward;
          }),
        );
      }
    }
    const rewards = await Promise.all(episodes);
    const mean = rewards.reduce((a, b) => a + b, 0) / rewards.length;
    console.log(`round ${round + 1}/${config.max_steps}: reward ${mean.toFixed(3)}`);
  }
}

await (process.argv.includes('--eval') ? evaluate() : train());
