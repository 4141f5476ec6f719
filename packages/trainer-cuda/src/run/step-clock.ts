// One training step's bookkeeping: the seconds each phase took (timing/*_s in metrics.jsonl)
// and where the step started, since logging, evaluation and saving fire when a step crosses a
// multiple of their interval (a batch of num_iterations updates advances several steps at once).

export class StepClock {
  /** Seconds per phase ('rollout', 'reward', 'logprobs', 'train', 'sync'). */
  readonly seconds: Record<string, number> = {};
  readonly #startStep: number;

  constructor(startStep: number) {
    this.#startStep = startStep;
  }

  /** Runs `f`, adding its duration to `phase`. */
  async time<T>(phase: string, f: () => Promise<T>): Promise<T> {
    const s = performance.now();
    try {
      return await f();
    } finally {
      this.seconds[phase] = (this.seconds[phase] ?? 0) + (performance.now() - s) / 1000;
    }
  }

  /** Whether going from the start step to `now` crossed a multiple of `every` (0: never). */
  crossed(every: number, now: number): boolean {
    return every > 0 && Math.floor(now / every) > Math.floor(this.#startStep / every);
  }
}
