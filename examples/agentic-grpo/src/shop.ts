// The task: a shop assistant answers "Cost of 3 kg of pear?" with two tools, `price` and `calc`.
// Everything comes from a seed: the price list, which goods are imported (their supplier is too
// slow to answer within the tool timeout), and the questions. The right answer is qty × unit
// price, or `unavailable` when the price cannot be had.
import { createRng, type SampleRow } from '@flowgrpo/core';

/** Goods sold from the shop's own stock: their price comes back at once. */
export const LOCAL_GOODS = ['apple', 'pear', 'fig', 'plum', 'kiwi', 'lime', 'date', 'peach'];
/** Goods bought from an overseas supplier that takes seconds to quote (longer than the timeout). */
export const IMPORTED_GOODS = ['mango', 'durian', 'papaya'];

export const UNAVAILABLE = 'unavailable';

export interface Shop {
  seed: number;
  /** Unit price (coins per kg) of every good, local and imported. */
  prices: ReadonlyMap<string, number>;
  imported: ReadonlySet<string>;
}

export interface ShopQuestion {
  question: string;
  item: string;
  qty: number;
  imported: boolean;
  /** qty × price, or `unavailable` for an imported good. */
  answer: string;
}

export function createShop(seed: number): Shop {
  const rng = createRng(`shop:${seed}:prices`);
  const prices = new Map<string, number>();
  for (const item of [...LOCAL_GOODS, ...IMPORTED_GOODS]) prices.set(item, 2 + rng.int(8));
  return { seed, prices, imported: new Set(IMPORTED_GOODS) };
}

export function questionText(qty: number, item: string): string {
  return `Cost of ${qty} kg of ${item}?`;
}

/**
 * `count` questions; a share `importedShare` of them (at least one when the share is above 0)
 * ask about an imported good, spread evenly so that any few consecutive questions meet one.
 */
export function makeQuestions(
  shop: Shop,
  count: number,
  label: string,
  importedShare = 0.25,
): ShopQuestion[] {
  const rng = createRng(`shop:${shop.seed}:questions:${label}`);
  const nImported = importedShare > 0 ? Math.max(1, Math.round(count * importedShare)) : 0;
  const importedAt = new Set(
    Array.from({ length: nImported }, (_, k) => Math.floor((k * count) / nImported)),
  );
  return Array.from({ length: count }, (_, i) => {
    const imported = importedAt.has(i);
    const goods = imported ? IMPORTED_GOODS : LOCAL_GOODS;
    const item = goods[rng.int(goods.length)]!;
    const qty = 2 + rng.int(8);
    return {
      question: questionText(qty, item),
      item,
      qty,
      imported,
      answer: imported ? UNAVAILABLE : String(qty * shop.prices.get(item)!),
    };
  });
}

/** Questions as dataset rows (`result` is the ground truth the reward compares with). */
export function questionRows(questions: readonly ShopQuestion[]): SampleRow[] {
  return questions.map((q, i) => ({
    id: i,
    question: q.question,
    chain: '',
    result: q.answer,
    source: 'shop',
    extra_info: { ground_truth: q.answer, idx: i, item: q.item, qty: q.qty, imported: q.imported },
  }));
}
