import { rmSync } from 'node:fs';
import type { PolicyEngine } from '@flowgrpo/agent';
import type { LoraParams } from '@flowgrpo/models';

// The policy versions a remote rollout engine serves at once, for max_staleness ≥ 1 with a
// `rolloutEngine`. A server holds one adapter per name, and the batches sampled ahead of the update
// come from adapters older than the one the trainer holds, so each version a batch (or an
// evaluation) is sampled from is its own adapter on the servers:
//
//   save     the version's LoRA tensors as a PEFT folder, adapters/step-<global_step> — the folder
//            the synchronous loop hot-loads — kept while the version is loaded (vLLM reads it
//            again when the adapter was evicted from its CPU cache)
//   load     on every server behind the balancer, under flowgrpo-policy-v<global_step>; a server
//            that fails it fails the acquire, so its batch (and the step waiting for it) fails
//            with the engine's own error, and nothing samples from another adapter in its stead
//   bind     the engine the batch's agent samples with names that version in every request
//            (withAdapter), whatever is loaded after it
//   unload   on every server once the last batch or evaluation using it has released it; then
//            its folder is removed (only these folders, which this class wrote)

/** An engine that serves several named adapters at once (PolicyEngine's optional trio). */
export type VersionedEngine = PolicyEngine &
  Required<Pick<PolicyEngine, 'loadAdapter' | 'unloadAdapter' | 'withAdapter'>>;

export function servesVersions(engine: PolicyEngine): engine is VersionedEngine {
  return (
    typeof engine.loadAdapter === 'function' &&
    typeof engine.unloadAdapter === 'function' &&
    typeof engine.withAdapter === 'function'
  );
}

/** The adapter name of the policy version of global_step `step` on the servers. */
export function versionName(step: number): string {
  return `flowgrpo-policy-v${step}`;
}

export interface ServedVersionsOptions {
  engine: VersionedEngine;
  /** The PEFT folder of the version of global_step `step` (adapters/step-<step>). */
  folder: (step: number) => string;
  /** Writes `params` as a PEFT folder at `dir`. */
  save: (dir: string, params: LoraParams) => Promise<void>;
}

interface Version {
  /** Batches and evaluations holding it. */
  users: number;
  /** The engine bound to it, once saved and loaded on every server. */
  ready: Promise<PolicyEngine>;
}

export class ServedVersions {
  readonly #o: ServedVersionsOptions;
  readonly #versions = new Map<number, Version>();
  /** Unloads under way: a version acquired again waits for its unload (and folder removal). */
  readonly #leaving = new Map<number, Promise<void>>();

  constructor(o: ServedVersionsOptions) {
    this.#o = o;
  }

  /** The global_steps of the versions held now. */
  get held(): number[] {
    return [...this.#versions.keys()];
  }

  /**
   * The engine bound to version `step` (its tensors `params`), saved and loaded on every server
   * first unless it is held already; the caller holds it until release(step).
   */
  acquire(step: number, params: LoraParams): Promise<PolicyEngine> {
    let v = this.#versions.get(step);
    if (!v) {
      const ready = this.#load(step, params);
      v = { users: 0, ready };
      this.#versions.set(step, v);
      // A version that failed to load is forgotten, so that nothing is held (or unloaded) for it.
      ready.catch(() => {
        if (this.#versions.get(step)?.ready === ready) this.#versions.delete(step);
      });
    }
    v.users++;
    return v.ready;
  }

  /** One holder of version `step` less; the last one unloads it and removes its folder. */
  async release(step: number): Promise<void> {
    const v = this.#versions.get(step);
    if (!v) return;
    if (--v.users > 0) return;
    this.#versions.delete(step);
    const leaving = (async () => {
      await this.#o.engine.unloadAdapter(versionName(step));
      rmSync(this.#o.folder(step), { recursive: true, force: true });
    })();
    this.#leaving.set(step, leaving);
    try {
      await leaving;
    } finally {
      if (this.#leaving.get(step) === leaving) this.#leaving.delete(step);
    }
  }

  /** Unloads every version still held (the run's end: batches sampled past it are discarded). */
  async releaseAll(): Promise<void> {
    for (const [step, v] of [...this.#versions]) {
      v.users = 1;
      await this.release(step);
    }
  }

  async #load(step: number, params: LoraParams): Promise<PolicyEngine> {
    await this.#leaving.get(step)?.catch(() => {});
    const dir = this.#o.folder(step);
    await this.#o.save(dir, params);
    await this.#o.engine.loadAdapter({ name: versionName(step), path: dir }, { mode: 'add' });
    return this.#o.engine.withAdapter(versionName(step));
  }
}
