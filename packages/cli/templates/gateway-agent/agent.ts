// An agent program written with the openai SDK, trained through the flowgrpo gateway.
// `flowgrpo serve --model runs/sft/checkpoint-80 --train serve-train.json` serves the policy
// (model "policy") and records every call token-exactly; this program runs episodes against it —
// each episode under its own rollout id, in the base URL — and posts each episode's reward with
// the task it solved (group_id). Every queries_per_step complete groups of num_generations
// episodes make one GRPO update, and the gateway then serves the new adapter.
//   npx tsx agent.ts            train: rounds of episodes until the server's max_steps are done
//   npx tsx agent.ts --eval     held-out accuracy on data/eval.jsonl (greedy, no rollout id)
import { readFileSync } from 'node:fs';
import OpenAI from 'openai';

const gateway = process.env.GATEWAY_URL ?? 'http://127.0.0.1:8000';
const model = process.env.MODEL ?? 'policy';
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

/** The agent itself: one call, the model's reply is the answer. Yours can be anything. */
async function solve(baseURL: string, question: string): Promise<string> {
  const openai = new OpenAI({ baseURL, apiKey: process.env.FLOWGRPO_API_KEY ?? 'EMPTY' });
  const r = await openai.chat.completions.create({
    model,
    messages: [
      { role: 'system', content: systemPrompt },
      { role: 'user', content: question },
    ],
    max_tokens: 16,
  });
  return (r.choices[0]?.message.content ?? '').trim();
}

async function postReward(id: string, reward: number, groupId: string, answer: string) {
  const r = await fetch(`${gateway}/v1/rollouts/${id}/reward`, {
    method: 'POST',
    headers: {
      'content-type': 'application/json',
      ...(process.env.FLOWGRPO_API_KEY && {
        authorization: `Bearer ${process.env.FLOWGRPO_API_KEY}`,
      }),
    },
    body: JSON.stringify({ reward, group_id: groupId, final_answer: answer }),
  });
  if (!r.ok) throw new Error(`POST reward for ${id}: ${r.status} ${await r.text()}`);
}

if (process.argv.includes('--eval')) {
  const held = rows('data/eval.jsonl');
  let right = 0;
  for (const row of held)
    if ((await solve(`${gateway}/v1`, row.question)) === reference(row)) right++;
  console.log(`eval accuracy: ${right}/${held.length}`);
} else {
  const train = rows('data/train.jsonl');
  const perRound = config.queries_per_step;
  for (let round = 0; round < config.max_steps; round++) {
    const episodes: Promise<void>[] = [];
    for (let q = 0; q < perRound; q++) {
      const index = (round * perRound + q) % train.length;
      const row = train[index]!;
      for (let g = 0; g < config.num_generations; g++) {
        const id = `r${round}-q${index}-g${g}`;
        episodes.push(
          solve(`${gateway}/rollouts/${id}/v1`, row.question).then((answer) =>
            postReward(id, answer === reference(row) ? 1 : 0, `q${index}`, answer),
          ),
        );
      }
    }
    await Promise.all(episodes);
    console.log(`round ${round + 1}/${config.max_steps}: ${episodes.length} episodes rewarded`);
  }
}
