// Snippets of packages/reward-judge/README.md (compiled by the test command).
import type {
  RewardFunction as PublishedRewardFunction,
  RewardInput,
  RewardResult,
} from '@flowgrpo/reward';

// #region reward-function
interface RewardFunction<D extends object = Record<string, unknown>> {
  readonly name: string; // the trainer logs rewards/<name>/mean
  score(input: RewardInput): RewardResult<D> | Promise<RewardResult<D>>;
}
// RewardInput: { question, groundTruth: string | string[], finalAnswer, completion?, trajectory? }
// RewardResult: { score: number, details: D }
// #endregion reward-function

// The README's declaration is the package's, member for member (a compile error otherwise).
type Equal<A, B> =
  (<T>() => T extends A ? 1 : 2) extends <T>() => T extends B ? 1 : 2 ? true : false;
export const sameRewardFunction: Equal<
  RewardFunction<{ f1: number }>,
  PublishedRewardFunction<{ f1: number }>
> = true;
