// Watches rollouts as they run and counts what each feature of the seed's list did: tool calls
// (printed live), rollouts in flight at once, timeouts, cut tool outputs, workspaces (created,
// isolated, removed) and where the tokens went (trainable actions vs masked prompt and tool
// output). One FeatureTracker per phase; `takeStep()` hands over the counts since the last call.
import { existsSync } from 'node:fs';
import type { RolloutContext, TagAgentEvent } from '@flowgrpo/agent';
import type { Trajectory } from '@flowgrpo/core';
import type { RolloutListener } from './agent.js';
import type { WorkspaceVisit } from './environment.js';

export interface TimeoutRecord {
  rollout: string;
  tool: string;
  input: unknown;
  /** How long the call was allowed (the agent's tool timeout). */
  timeoutMs: number;
}

export interface TruncationRecord {
  rollout: string;
  tool: string;
  /** The tool's output, in tokens. */
  fullTokens: number;
  fullChars: number;
  /** What the model was shown (the body before the ' ...' marker). */
  kept: string;
}

export interface StepFeatures {
  rollouts: number;
  /** The most rollouts running at the same moment. */
  maxInFlight: number;
  toolCalls: number;
  /** Tool calls that ran while at least one other rollout was still generating or waiting. */
  overlappedCalls: number;
  timeouts: TimeoutRecord[];
  truncations: TruncationRecord[];
  /** Distinct workspace directories the tools ran in. */
  workspaces: string[];
  /** Of those, the ones still on disk after their rollout ended (0 when cleanup works). */
  workspacesLeft: number;
  /** Tool calls that found another rollout's calls in their workspace's journal. */
  isolationViolations: number;
  /** Tokens by segment kind over the finished trajectories. */
  tokens: { prompt: number; action: number; observation: number };
  answers: number;
}

function emptyStep(): StepFeatures {
  return {
    rollouts: 0,
    maxInFlight: 0,
    toolCalls: 0,
    overlappedCalls: 0,
    timeouts: [],
    truncations: [],
    workspaces: [],
    workspacesLeft: 0,
    isolationViolations: 0,
    tokens: { prompt: 0, action: 0, observation: 0 },
    answers: 0,
  };
}

export interface FeatureTrackerOptions {
  /** Counts tokens of tool outputs (the policy's tokenizer). */
  countTokens: (text: string) => number;
  maxObservationTokens: number;
  toolTimeoutMs: number;
  /** Print each tool call and answer as it happens (while this returns true). */
  live?: () => boolean;
  log?: (line: string) => void;
}

/** Short name of a rollout: q<query in batch>·r<index in group>, or its query id. */
export function rolloutLabel(c: RolloutContext): string {
  const q = /q-(\d+)$/.exec(c.groupId ?? '')?.[1];
  return q !== undefined ? `q${q}·r${c.index ?? 0}` : (c.queryId ?? '?');
}

const clip = (s: string, n: number) => (s.length <= n ? s : `${s.slice(0, n - 1)}…`);

export class FeatureTracker implements RolloutListener {
  readonly #o: FeatureTrackerOptions;
  #inFlight = 0;
  #step = emptyStep();
  readonly #dirs = new Set<string>();

  constructor(options: FeatureTrackerOptions) {
    this.#o = options;
  }

  get inFlight(): number {
    return this.#inFlight;
  }

  started(): void {
    this.#inFlight++;
    this.#step.maxInFlight = Math.max(this.#step.maxInFlight, this.#inFlight);
  }

  finished(_context: RolloutContext, trajectory: Trajectory | undefined): void {
    this.#inFlight--;
    this.#step.rollouts++;
    for (const g of trajectory?.segments ?? []) {
      const kind = g.kind === 'action' ? 'action' : g.kind === 'prompt' ? 'prompt' : 'observation';
      this.#step.tokens[kind] += g.tokens.length;
    }
    if (trajectory?.stopReason === 'answer') this.#step.answers++;
  }

  visit(_context: RolloutContext, v: WorkspaceVisit): void {
    if (v.dir) this.#dirs.add(v.dir);
    if (v.dir && v.journalLines !== v.callNumber) this.#step.isolationViolations++;
  }

  event(context: RolloutContext, e: TagAgentEvent): void {
    const o = this.#o;
    const live = o.live?.() ?? false;
    const log = o.log ?? console.log;
    const who = rolloutLabel(context).padEnd(7);
    if (e.type === 'observation') {
      this.#step.toolCalls++;
      // Counted when the tool has answered: this rollout is one of those in flight.
      if (this.#inFlight > 1) this.#step.overlappedCalls++;
      const input = JSON.stringify(e.input);
      const r = e.result;
      const others = `${this.#inFlight - 1} other rollout${this.#inFlight === 2 ? '' : 's'} running`;
      if (r && !r.ok && r.errorCode === 'TOOL_TIMEOUT') {
        this.#step.timeouts.push({
          rollout: rolloutLabel(context),
          tool: e.tool,
          input: e.input,
          timeoutMs: o.toolTimeoutMs,
        });
        if (live)
          log(
            `  ${who} ${e.tool} ${input} → TIMEOUT after ${o.toolTimeoutMs} ms: the model reads the error and goes on (${others})`,
          );
        return;
      }
      const full =
        r === undefined ? '' : typeof r.output === 'string' ? r.output : JSON.stringify(r.output);
      const fullTokens = o.countTokens(full);
      const body = /<tool_response>\n([\s\S]*)\n<\/tool_response>/.exec(e.text)?.[1] ?? e.text;
      if (r && fullTokens > o.maxObservationTokens) {
        const kept = body.replace(/ \.\.\.$/, '');
        this.#step.truncations.push({
          rollout: rolloutLabel(context),
          tool: e.tool,
          fullTokens,
          fullChars: full.length,
          kept,
        });
        if (live)
          log(
            `  ${who} ${e.tool} ${input} → ${full.length} chars, cut to ${o.maxObservationTokens} tokens: "${clip(kept, 60)} ..." (${others})`,
          );
        return;
      }
      if (live) log(`  ${who} ${e.tool} ${input} → "${clip(body.trim(), 60)}" (${others})`);
    } else if (e.type === 'end' && live) {
      log(
        `  ${who} ${e.stopReason === 'answer' ? `answer "${clip(e.finalAnswer, 40)}"` : `ended: ${e.stopReason}`}`,
      );
    }
  }

  /** The counts since the last call (workspace removal is checked now: rollouts have ended). */
  takeStep(): StepFeatures {
    const s = this.#step;
    s.workspaces = [...this.#dirs];
    s.workspacesLeft = s.workspaces.filter((d) => existsSync(d)).length;
    this.#step = emptyStep();
    this.#dirs.clear();
    return s;
  }
}

/** Trainable share of the tokens (actions / everything), 0 when there are none. */
export function trainableRatio(t: StepFeatures['tokens']): number {
  const all = t.prompt + t.action + t.observation;
  return all === 0 ? 0 : t.action / all;
}
