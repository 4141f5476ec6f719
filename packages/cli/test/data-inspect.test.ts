import { mkdtempSync, readdirSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { runCli } from '../src/main.js';
import { captureIO } from './support.js';
import { grpoConfig, questionRows, tinyModel, writeConfig, writeJsonl } from './train-fixtures.js';

// `flowgrpo data inspect` on the files a real run writes: a one-step GRPO run of the tiny model
// on plain {question, answer} rows (so plain data trains too), then `flowgrpo eval --out`; each
// file is inspected and said what it is.

const tmp = mkdtempSync(join(tmpdir(), 'flowgrpo-cli-inspect-'));
afterAll(() => rmSync(tmp, { recursive: true, force: true }));
const run = join(tmp, 'run-grpo');
let plain: string;
let trainLog: string;

beforeAll(async () => {
  const model = await tinyModel(join(tmp, 'tiny'));
  plain = writeJsonl(join(tmp, 'plain.jsonl'), [
    { question: 'What is 1 + 2?', answer: '1 + 2 = 3\n#### 3' },
    { question: 'What is 2 + 2?', answer: '4' },
  ]);
  const cfg = writeConfig(
    join(tmp, 'grpo.json'),
    grpoConfig(tmp, model, { train_file: plain, max_steps: 1, max_completion_length: 4 }),
  );
  const io = captureIO(tmp);
  expect(await runCli(['train', '--config', cfg], io), io.err).toBe(0);
  trainLog = io.err;
  const evalIO = captureIO(tmp);
  const evalArgs = ['eval', '--model', model, '--data', plain, '--agent', 'tag', '--max-turns'];
  const out = ['--max-tokens', '4', '--out', join(tmp, 'eval.json')];
  expect(await runCli([...evalArgs, '1', ...out], evalIO), evalIO.err).toBe(0);
}, 240_000);

async function inspect(file: string, rows = '1'): Promise<string> {
  const io = captureIO(tmp);
  expect(await runCli(['data', 'inspect', file, '--rows', rows], io), io.err).toBe(0);
  return io.out;
}

describe('flowgrpo data inspect reads what flowgrpo writes', () => {
  it('GRPO trained on plain {question, answer} rows, and said it detected them', () => {
    expect(trainLog).toContain(`data: ${plain}: plain rows (question + answer)`);
  });

  it("the trainer's rollouts Parquet: trajectories, groups, reward, stop reasons", async () => {
    const file = join(run, 'rollouts', readdirSync(join(run, 'rollouts'))[0]!);
    const lines = (await inspect(file)).trim().split('\n');
    expect(lines[0]).toMatch(/^rollouts \(trajectories/);
    // queries_per_step 2 × num_generations 2.
    expect(lines[1]).toBe('4 trajectories');
    expect(lines[2]).toMatch(/^fields: .*trajectoryIndex.*rowType/);
    expect(lines[3]).toBe('groups of questions: 2');
    expect(lines[4]).toMatch(/^reward: mean \d\.\d{3}, ≥ 1 in \d$/);
    const first = JSON.parse(lines.at(-1)!) as Record<string, unknown>;
    expect(['What is 1 + 2?', 'What is 2 + 2?']).toContain(first.question);
    expect(['3', '4']).toContain(first.groundTruth);
  });

  it('metrics.jsonl: the steps and the headline metrics', async () => {
    const out = await inspect(join(run, 'metrics.jsonl'), '0');
    expect(out).toMatch(/^training metrics \(metrics\.jsonl\)\n\d+ rows\nfields: .*step/);
    expect(out).toMatch(/^steps 1 → 1 \(\d+ lines\)$/m);
    expect(out).toMatch(/^reward: \S+ → \S+$/m);
  });

  it("eval's --out JSON: one line per policy", async () => {
    const out = await inspect(join(tmp, 'eval.json'));
    expect(out).toMatch(
      /^eval results \(flowgrpo eval --out\)\n1 policies\nfields: model, data, n, reward, results\nquestions: 2\nbase: accuracy \d+\.\d% of 2, reward mean \d\.\d{3}\n$/,
    );
  });

  it('the data files: plain rows, SampleRows, and the run config', async () => {
    expect(await inspect(plain, '0')).toBe(
      'plain rows {question, answer} (GRPO / eval data, data_format "plain")\n2 rows\n' +
        'fields: question, answer\n',
    );
    const samples = writeJsonl(join(tmp, 'samples.jsonl'), questionRows(3));
    expect(await inspect(samples, '0')).toMatch(
      /^SampleRows \(GRPO \/ eval data\)\n3 rows\nfields: id, question, chain, result, source, extra_info\nrows per source:\n\s+even\s+2\n\s+odd\s+1\n$/,
    );
    expect(await inspect(join(run, 'config.json'), '0')).toMatch(/^grpo run config\n1 rows\n/);
  });
});
