import { z } from 'zod';

// The common row schema every dataset is normalised to (the seeds' combined training set):
// `result` is the ground-truth answer as a string, `chain` a reasoning placeholder ('' when the
// source has none), `extra_info` the source's metadata with at least the ground truth and the
// row's index in its source.
export const SampleRowExtraInfoSchema = z
  .object({
    ground_truth: z.string(),
    idx: z.number().int().nonnegative(),
  })
  .catchall(z.unknown());

export const SampleRowSchema = z.object({
  id: z.number().int().nonnegative(),
  question: z.string(),
  chain: z.string(),
  result: z.string(),
  source: z.string(),
  extra_info: SampleRowExtraInfoSchema,
});

export type SampleRow = z.infer<typeof SampleRowSchema>;
