// A promise a test opens by hand. Replies scripted with `waitFor: gate.promise` are held on the
// server until the test has seen what it waits for (say, two requests in flight), so a test of
// concurrency observes it for certain instead of hoping a delay is long enough.

export interface Gate {
  readonly promise: Promise<void>;
  /** Opens the gate (again: no effect). */
  open(): void;
  readonly opened: boolean;
}

export function gate(): Gate {
  let resolve!: () => void;
  const promise = new Promise<void>((r) => {
    resolve = r;
  });
  let opened = false;
  return {
    promise,
    open() {
      opened = true;
      resolve();
    },
    get opened() {
      return opened;
    },
  };
}
