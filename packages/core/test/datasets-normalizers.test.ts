import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { sharedPath, skipWithoutShared } from '../../../test-utils/shared.js';
import { canonicalIntegerAnswer } from '../src/datasets/normalizers/aime.js';
import { cleanGoldenAnswers } from '../src/datasets/normalizers/golden-answers.js';
import { parseGsm8kAnswer } from '../src/datasets/normalizers/gsm8k.js';
import {
  DataFormatError,
  loadDataset,
  normalizeAime,
  normalizeDeepMath,
  normalizeGsm8k,
  normalizeHotpotQa,
  normalizeMath500,
  normalizeNq,
  normalizePlain,
  normalizeSearchR1,
  plainRowShape,
  SampleRowSchema,
  writeParquet,
} from '../src/index.js';

function expectRowError(run: () => unknown, pattern: RegExp): void {
  let error: unknown;
  try {
    run();
  } catch (e) {
    error = e;
  }
  expect(DataFormatError.isInstance(error)).toBe(true);
  expect((error as Error).message).toMatch(pattern);
}

describe('normalisers on hand-written rows', () => {
  it('GSM8K: result after ####, commas removed; calculator notes moved out of the chain', () => {
    // Hand derivation from the GSM8K format: "<<expr=value>>" notes precede the written value.
    const [row] = normalizeGsm8k(
      [
        {
          question: ' Q? ',
          answer: 'A is 40*27 = <<40*27=1080>>1,080.\nB = <<1+1=2>>2\n#### 1,080',
        },
      ],
      { startIdx: 7 },
    );
    expect(row).toEqual({
      id: 7,
      question: 'Q?',
      chain: 'A is 40*27 = 1,080.\nB = 2',
      result: '1080',
      source: 'gsm8k',
      extra_info: {
        ground_truth: '1080',
        idx: 7,
        calculations: ['40*27=1080', '1+1=2'],
        answer_raw: 'A is 40*27 = <<40*27=1080>>1,080.\nB = <<1+1=2>>2\n#### 1,080',
      },
    });
    expect(SampleRowSchema.parse(row)).toEqual(row);
    expect(parseGsm8kAnswer('no marker')).toBeUndefined();
    expectRowError(
      () => normalizeGsm8k([{ question: 'q', answer: 'x' }], { file: 'f.jsonl' }),
      /^f\.jsonl:row 0: gsm8k: .*####/,
    );
    expectRowError(
      () => normalizeGsm8k([{ q: 'x' }, { question: 'q' }]),
      /row 0: gsm8k: missing field question/,
    );
  });

  it("DeepMath: question/final_answer or Problem/Answer → source 'mathhard' (the seed's example)", () => {
    const rows = normalizeDeepMath([
      {
        question: 'Evaluate the limit',
        final_answer: '0',
        difficulty: 4.5,
        topic: 'Mathematics -> Precalculus -> Limits',
        r1_solution_1: 'long',
      },
      { Problem: 'P', Answer: 12 },
    ]);
    expect(rows[0]).toEqual({
      id: 0,
      question: 'Evaluate the limit',
      chain: '',
      result: '0',
      source: 'mathhard',
      extra_info: {
        ground_truth: '0',
        idx: 0,
        difficulty: 4.5,
        topic: 'Mathematics -> Precalculus -> Limits',
      },
    });
    expect(rows[1]).toMatchObject({
      id: 1,
      question: 'P',
      result: '12',
      extra_info: { ground_truth: '12', idx: 1 },
    });
    expectRowError(
      () => normalizeDeepMath([{ question: 'q', final_answer: '1' }, { question: 'q' }]),
      /row 1: deepmath: missing field final_answer or Answer/,
    );
  });

  it('golden answers of any shape become strings, null/NaN dropped (the seed’s NQ rules)', () => {
    expect(cleanGoldenAnswers(['2,718'])).toEqual(['2,718']);
    expect(
      cleanGoldenAnswers([
        ['a', null],
        [Number.NaN, 3],
      ]),
    ).toEqual(['a', '3']);
    expect(cleanGoldenAnswers('  single ')).toEqual(['single']);
    expect(cleanGoldenAnswers('   ')).toEqual([]);
    expect(cleanGoldenAnswers(42)).toEqual(['42']);
    expect(cleanGoldenAnswers(Number.NaN)).toEqual([]);
    expect(cleanGoldenAnswers(null)).toEqual([]);
    expect(cleanGoldenAnswers(new Float64Array([1.5, Number.NaN]))).toEqual(['1.5']);
    expect(cleanGoldenAnswers({ a: 1 })).toBeUndefined();
  });

  it("NQ (FlashRAG and NQ-open layouts): '?' appended, answers joined with '; '", () => {
    // The seed's FlashRAG example: train_0 → "total number of death row inmates in the us?", "2,718".
    const [flash, open, asked] = normalizeNq([
      {
        id: 'train_0',
        question: 'total number of death row inmates in the us ',
        golden_answers: ['2,718'],
      },
      { question: 'who wrote it', answer: ['Bobby Scott', 'Bob Russell'] },
      { question: 'already asked?', golden_answers: [['x'], 'y'] },
    ]);
    expect(flash).toEqual({
      id: 0,
      question: 'total number of death row inmates in the us?',
      chain: '',
      result: '2,718',
      source: 'nq',
      extra_info: {
        ground_truth: '2,718',
        idx: 0,
        golden_answers: ['2,718'],
        original_id: 'train_0',
      },
    });
    expect(open?.result).toBe('Bobby Scott; Bob Russell');
    expect(asked?.question).toBe('already asked?');
    expect(asked?.result).toBe('x; y');
    expectRowError(
      () => normalizeNq([{ question: 'q', golden_answers: [null] }]),
      /row 0: nq: .*no usable answer/,
    );
    expectRowError(
      () => normalizeNq([{ question: 'q' }]),
      /row 0: nq: missing field golden_answers/,
    );
    expectRowError(
      () => normalizeNq([{ question: 'q', golden_answers: [{ t: 1 }] }]),
      /not an answer list/,
    );
  });

  it('Search-R1: question and golden_answers, data_source kept and used as the source tag', () => {
    const [row, fallback] = normalizeSearchR1([
      {
        id: 'train_3',
        question: 'who sang it?',
        golden_answers: ['Foreigner'],
        data_source: 'nq',
        ability: 'fact-reasoning',
        reward_model: { ground_truth: { target: ['Foreigner'] }, style: 'rule' },
        extra_info: { index: 3, split: 'train' },
      },
      { question: 'q', reward_model: { ground_truth: { target: ['t1', 't2'] } } },
    ]);
    expect(row).toEqual({
      id: 0,
      question: 'who sang it?',
      chain: '',
      result: 'Foreigner',
      source: 'nq',
      extra_info: {
        ground_truth: 'Foreigner',
        idx: 0,
        golden_answers: ['Foreigner'],
        data_source: 'nq',
        original_id: 'train_3',
        ability: 'fact-reasoning',
        split: 'train',
      },
    });
    expect(fallback).toMatchObject({ question: 'q?', result: 't1; t2', source: 'search-r1' });
  });

  it('AIME: zero-padded answers become canonical numbers, the original is kept', () => {
    expect(canonicalIntegerAnswer('025')).toBe('25');
    expect(canonicalIntegerAnswer('000')).toBe('0');
    expect(canonicalIntegerAnswer(' 204 ')).toBe('204');
    expect(canonicalIntegerAnswer('-007')).toBe('-7');
    expect(canonicalIntegerAnswer('\\frac{1}{2}')).toBe('\\frac{1}{2}');
    const [row] = normalizeAime([
      { id: 67, problem: 'Find xy.', solution: 'S', answer: '025', url: 'u' },
    ]);
    expect(row).toEqual({
      id: 0,
      question: 'Find xy.',
      chain: 'S',
      result: '25',
      source: 'aime',
      extra_info: { ground_truth: '25', idx: 0, answer_raw: '025', original_id: '67', url: 'u' },
    });
    expectRowError(
      () => normalizeAime([{ problem: 'p', answer: ['1'] }]),
      /row 0: aime: field answer must be text/,
    );
  });

  it('MATH-500 and HotpotQA keep their metadata', () => {
    const [m] = normalizeMath500([
      {
        problem: 'P',
        solution: 'S',
        answer: ' \\frac{1}{2} ',
        subject: 'Algebra',
        level: 3,
        unique_id: 'test/algebra/1.json',
      },
    ]);
    expect(m).toMatchObject({
      result: '\\frac{1}{2}',
      chain: 'S',
      source: 'math500',
      extra_info: { subject: 'Algebra', level: 3, unique_id: 'test/algebra/1.json' },
    });
    const [h] = normalizeHotpotQa([
      {
        _id: 'x1',
        question: 'Q',
        answer: 'A',
        supporting_facts: [
          ['T', 0],
          ['U', 2],
        ],
        type: 'bridge',
        level: 'hard',
        context: [],
      },
    ]);
    expect(h?.extra_info).toEqual({
      ground_truth: 'A',
      idx: 0,
      supporting_facts: [
        { title: 'T', sent_id: 0 },
        { title: 'U', sent_id: 2 },
      ],
      original_id: 'x1',
      type: 'bridge',
      level: 'hard',
    });
    expectRowError(
      () => normalizeHotpotQa([{ question: 'Q', answer: 'A', supporting_facts: [[0, 'T']] }]),
      /supporting_facts\[0\]/,
    );
    expectRowError(() => normalizeMath500(['just a string']), /row 0: math500: expected an object/);
  });
});

describe('loadDataset on generated files', () => {
  it('reads a DeepMath-layout Parquet (Problem/Answer spelling) and a GSM8K JSONL', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'flowgrpo-load-'));
    try {
      const parquet = join(dir, 'deepmath.parquet');
      await writeParquet(parquet, [
        {
          Problem: 'Evaluate 2+2',
          Answer: '4',
          difficulty: 1.5,
          topic: 'Arithmetic',
          r1_solution_1: 'x'.repeat(5000),
        },
        {
          Problem: 'Evaluate 3*3',
          Answer: '9',
          difficulty: 2.5,
          topic: 'Arithmetic',
          r1_solution_1: 'y',
        },
      ]);
      const rows = await loadDataset(parquet, 'deepmath', { startIdx: 100 });
      expect(rows).toEqual([
        {
          id: 100,
          question: 'Evaluate 2+2',
          chain: '',
          result: '4',
          source: 'mathhard',
          extra_info: { ground_truth: '4', idx: 100, difficulty: 1.5, topic: 'Arithmetic' },
        },
        {
          id: 101,
          question: 'Evaluate 3*3',
          chain: '',
          result: '9',
          source: 'mathhard',
          extra_info: { ground_truth: '9', idx: 101, difficulty: 2.5, topic: 'Arithmetic' },
        },
      ]);
      const jsonl = join(dir, 'gsm.jsonl');
      writeFileSync(
        jsonl,
        '{"question":"q","answer":"a <<1+1=2>>2\\n#### 2"}\n\n{"question":"r"}\n',
      );
      // The bad row is the second row and the file's line 3 (line 2 is blank): the message
      // names the line, as an editor numbers it, and no row beside it.
      const error = await loadDataset(jsonl, 'gsm8k').catch((e: unknown) => e);
      expect(DataFormatError.isInstance(error)).toBe(true);
      expect((error as DataFormatError).file).toBe(jsonl);
      expect((error as DataFormatError).line).toBe(3);
      expect((error as DataFormatError).row).toBeUndefined();
      expect((error as Error).message).toBe(
        `${jsonl}:line 3: gsm8k: missing field answer (fields present: question)`,
      );
      expect(await loadDataset(jsonl, 'gsm8k', { limit: 1 })).toMatchObject([{ result: '2' }]);
      await expect(loadDataset(join(dir, 'x.csv'), 'gsm8k')).rejects.toThrow(/unknown extension/);
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });
});

describe.skipIf(skipWithoutShared('real data sets'))(
  'normalisers on the real files in ../shared/data',
  () => {
    it('GSM8K: 7,473 train / 1,319 test rows; answers read from the raw lines', async () => {
      const train = await loadDataset(sharedPath('data', 'gsm8k', 'train.jsonl'), 'gsm8k');
      const test = await loadDataset(sharedPath('data', 'gsm8k', 'test.jsonl'), 'gsm8k');
      expect(train).toHaveLength(7473);
      expect(test).toHaveLength(1319);
      // test line 1 ends "#### 18" after two notes <<16-3-4=9>> and <<9*2=18>>.
      expect(test[0]).toMatchObject({
        result: '18',
        chain:
          'Janet sells 16 - 3 - 4 = 9 duck eggs a day.\nShe makes 9 * 2 = $18 every day at the farmer’s market.',
        extra_info: { calculations: ['16-3-4=9', '9*2=18'] },
      });
      expect(test[2]?.result).toBe('70000');
      // train line 1 ends "#### 72"; train line 346 ends "#### 1,080".
      expect(train[0]?.result).toBe('72');
      expect(train[345]?.result).toBe('1080');
      for (const r of [...train, ...test]) expect(r.result).toMatch(/^-?\d+(\.\d+)?$/);
    });

    it('NQ-open dev: 3,610 rows', async () => {
      const rows = await loadDataset(sharedPath('data', 'nq-open', 'dev.jsonl'), 'nq');
      expect(rows).toHaveLength(3610);
      // dev line 1: {"question": "when was the last time anyone was on the moon", "answer": ["14 December 1972 UTC", "December 1972"]}
      expect(rows[0]).toMatchObject({
        question: 'when was the last time anyone was on the moon?',
        result: '14 December 1972 UTC; December 1972',
      });
      expect(rows.every((r) => r.question.endsWith('?'))).toBe(true);
    });

    it('Search-R1 NQ: 1,000 test / 5,000 train rows from the nested Parquet', async () => {
      const test = await loadDataset(
        sharedPath('data', 'search-r1-nq', 'test-1000.parquet'),
        'search-r1',
      );
      const train = await loadDataset(
        sharedPath('data', 'search-r1-nq', 'train-5000.parquet'),
        'search-r1',
      );
      expect(test).toHaveLength(1000);
      expect(train).toHaveLength(5000);
      expect(train[0]).toMatchObject({
        question: 'total number of death row inmates in the us?',
        result: '2,718',
        source: 'nq',
        extra_info: { data_source: 'nq', original_id: 'train_0', split: 'train' },
      });
      const limited = await loadDataset(
        sharedPath('data', 'search-r1-nq', 'test-1000.parquet'),
        'search-r1',
        { limit: 3 },
      );
      expect(limited).toEqual(test.slice(0, 3));
    });

    it('HotpotQA: 500 rows with type, level and supporting facts', async () => {
      const rows = await loadDataset(
        sharedPath('data', 'hotpotqa', 'dev-distractor-500.jsonl'),
        'hotpotqa',
      );
      expect(rows).toHaveLength(500);
      expect(rows[0]).toMatchObject({
        question:
          'What government position was held by the woman who portrayed Corliss Archer in the film Kiss and Tell?',
        result: 'Chief of Protocol',
        extra_info: {
          original_id: '5a8c7595554299585d9e36b6',
          type: 'bridge',
          level: 'hard',
          supporting_facts: [
            { title: 'Kiss and Tell (1945 film)', sent_id: 0 },
            { title: 'Shirley Temple', sent_id: 0 },
            { title: 'Shirley Temple', sent_id: 1 },
          ],
        },
      });
    });

    it('AIME 2024: 30 rows; the zero-padded "025" (id 67) becomes "25"', async () => {
      const rows = await loadDataset(sharedPath('data', 'aime24', 'test.jsonl'), 'aime');
      expect(rows).toHaveLength(30);
      expect(rows[0]).toMatchObject({
        result: '204',
        extra_info: { original_id: '60', answer_raw: '204' },
      });
      expect(rows[7]).toMatchObject({
        result: '25',
        extra_info: { original_id: '67', answer_raw: '025' },
      });
      expect(
        rows
          .filter((r) => r.extra_info.answer_raw !== r.result)
          .map((r) => r.extra_info.answer_raw),
      ).toEqual(['025', '073', '023', '045', '033', '080', '055']);
    });

    it('MATH-500: 500 rows with subject, level and unique_id', async () => {
      const rows = await loadDataset(sharedPath('data', 'math500', 'test.jsonl'), 'math500');
      expect(rows).toHaveLength(500);
      expect(rows[0]).toMatchObject({
        question:
          'Convert the point $(0,3)$ in rectangular coordinates to polar coordinates.  Enter your answer in the form $(r,\\theta),$ where $r > 0$ and $0 \\le \\theta < 2 \\pi.$',
        result: '\\left( 3, \\frac{\\pi}{2} \\right)',
        extra_info: { subject: 'Precalculus', level: 2, unique_id: 'test/precalculus/807.json' },
      });
    });
  },
);

describe('plain rows: {question, answer}, TRL prompt/completion and messages', () => {
  it('takes the reference from answer; GSM8K "#### N" makes N the reference, the rest the chain', () => {
    const rows = normalizePlain([
      { question: ' What is 2+3? ', answer: ' 5 ' },
      {
        id: 'q7',
        question: 'Twice 1,040 plus 40?',
        answer: 'Twice is <<2*1040=2080>>2080.\n#### 2,120',
      },
    ]);
    expect(rows.map((r) => SampleRowSchema.parse(r))).toEqual([
      {
        id: 0,
        question: 'What is 2+3?',
        chain: '',
        result: '5',
        source: 'plain',
        extra_info: { ground_truth: '5', idx: 0 },
      },
      {
        id: 1,
        question: 'Twice 1,040 plus 40?',
        chain: 'Twice is 2080.',
        result: '2120',
        source: 'plain',
        extra_info: {
          ground_truth: '2120',
          idx: 1,
          original_id: 'q7',
          answer_raw: 'Twice is <<2*1040=2080>>2080.\n#### 2,120',
        },
      },
    ]);
  });

  it("TRL's prompt (+ completion or answer) and messages: the last user turn asks", () => {
    const rows = normalizePlain([
      { prompt: 'What is 6*7?', completion: '6*7 = 42\n#### 42' },
      {
        prompt: [
          { role: 'system', content: 'Be brief.' },
          { role: 'user', content: 'Capital of France?' },
        ],
        completion: [{ role: 'assistant', content: 'Paris' }],
      },
      { prompt: 'Name a prime.', completion: 'I think 9.', answer: 7 },
      {
        messages: [
          { role: 'user', content: 'Hi' },
          { role: 'assistant', content: 'Hello' },
          { role: 'user', content: 'What is 1+1?' },
          { role: 'assistant', content: 'It is 2.\n#### 2' },
        ],
      },
    ]);
    expect(rows.map((r) => [r.question, r.result, r.chain])).toEqual([
      ['What is 6*7?', '42', '6*7 = 42'],
      ['Capital of France?', 'Paris', ''],
      ['Name a prime.', '7', ''],
      ['What is 1+1?', '2', 'It is 2.'],
    ]);
    expect(plainRowShape({ question: 'q' })).toBe('question');
    expect(plainRowShape({ prompt: [] })).toBe('prompt');
    expect(plainRowShape({ messages: [] })).toBe('messages');
    expect(plainRowShape({ extra_info: {} })).toBeUndefined();
  });

  it('a row without a question or without a reference answer names the row and what it lacks', () => {
    expectRowError(
      () => normalizePlain([{ question: 'a', answer: '1' }, { question: 'b' }]),
      /^row 1: plain: no reference answer: a \{question, answer\} row needs 'answer'$/,
    );
    expectRowError(
      () => normalizePlain([{ prompt: 'p' }]),
      /row 0: plain: no reference answer: a 'prompt' row needs 'answer' or 'completion'/,
    );
    expectRowError(
      () => normalizePlain([{ messages: [{ role: 'assistant', content: 'x' }] }]),
      /row 0: plain: messages has no user message/,
    );
    expectRowError(
      () => normalizePlain([{ text: 'hello' }]),
      /row 0: plain: no 'question', 'prompt' or 'messages' \(fields present: text\)/,
    );
  });

  it('loadDataset reads plain rows from Parquet (TRL messages as a list of structs)', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'flowgrpo-plain-'));
    try {
      const file = join(dir, 'plain.parquet');
      await writeParquet(file, [
        {
          messages: [
            { role: 'user', content: 'What is 3*3?' },
            { role: 'assistant', content: '#### 9' },
          ],
        },
        {
          messages: [
            { role: 'user', content: 'What is 2*2?' },
            { role: 'assistant', content: '#### 4' },
          ],
        },
      ]);
      const rows = await loadDataset(file, 'plain');
      expect(rows.map((r) => [r.question, r.extra_info.ground_truth, r.extra_info.idx])).toEqual([
        ['What is 3*3?', '9', 0],
        ['What is 2*2?', '4', 1],
      ]);
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });
});
