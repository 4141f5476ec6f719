// The shop's tool environment, one per rollout (the seed's `tool_env_factory()` per trajectory):
//
//   price {item}        the price service. Local goods: answered at once, with a verbose product
//                       sheet (~1 KB) after the price — the long output the agent cuts down.
//                       Imported goods: the overseas supplier takes 10 s to quote, far past the
//                       tool timeout, so the call ends as a TOOL_TIMEOUT observation.
//   calc {expression}   the calculator.
//
// Both tools append each call to calls.log in the rollout's own workspace (a temp directory the
// TagAgent creates per rollout and removes after it) and report what they found there, so the
// example can check that parallel rollouts never saw each other's files.
import { appendFileSync, readFileSync } from 'node:fs';
import { setTimeout as sleep } from 'node:timers/promises';
import { createRng } from '@flowgrpo/core';
import {
  createCalculatorTool,
  defineTool,
  type Tool,
  ToolError,
  type ToolResult,
  type Workspace,
} from '@flowgrpo/tools';
import { z } from 'zod';
import type { Shop } from './shop.js';

/** An item the shop does not sell (the model asked for something else). */
export class UnknownGoodError extends ToolError {
  static override readonly code = 'UNKNOWN_GOOD';
  readonly item: string;
  constructor(item: string) {
    super(`the shop sells no '${item}'`, { toolName: 'price' });
    this.item = item;
  }
}

/** What a tool saw of its workspace on one call. */
export interface WorkspaceVisit {
  tool: string;
  /** The workspace directory (undefined when the agent runs without workspaces). */
  dir: string | undefined;
  /** This rollout's tool calls so far, this one included. */
  callNumber: number;
  /** Lines in the workspace's calls.log after this call: equal to callNumber when isolated. */
  journalLines: number;
}

export interface ShopEnvironmentOptions {
  /** How long the overseas supplier takes to quote (default 10 s: always past the timeout). */
  supplierDelayMs?: number;
  /** Called on every tool call with what the tool saw of its workspace. */
  onVisit?: (visit: WorkspaceVisit) => void;
}

/** The verbose product sheet the price service returns after the price (deterministic). */
export function productSheet(shop: Shop, item: string): string {
  const rng = createRng(`shop:${shop.seed}:sheet:${item}`);
  const stores = ['north', 'south', 'east', 'west', 'harbour', 'station', 'market', 'airport'];
  const stock = stores.map((s) => `${s} ${rng.int(90)} kg`).join(', ');
  const reviews = Array.from(
    { length: 6 },
    (_, i) =>
      `review ${i + 1}: ${1 + rng.int(5)}/5 "${['fresh', 'ripe', 'sweet', 'fine', 'ok'][rng.int(5)]} ${item}"`,
  ).join('; ');
  return (
    `${item}: ${shop.prices.get(item)} coins/kg; grade A; origin ${shop.imported.has(item) ? 'overseas' : 'local farms'}; ` +
    `stock by store: ${stock}; delivery: next day within the city, 2-4 days elsewhere; ` +
    `storage: keep cool and dry, away from direct sunlight; allergens: none known; ` +
    `${reviews}; price history (coins/kg, last 8 weeks): ${Array.from({ length: 8 }, () => 2 + rng.int(8)).join(', ')}; ` +
    `returns accepted within 7 days with receipt; loyalty points: 1 per coin spent.`
  );
}

/** The tools of one rollout. */
export function createShopTools(shop: Shop, o: ShopEnvironmentOptions = {}): Tool[] {
  let calls = 0;
  // Synchronous file I/O on purpose: a fast tool then finishes before any timer can fire, so the
  // timeout only ever stops the supplier, however loaded the machine is.
  const journal = (tool: string, line: string, workspace: Workspace | undefined) => {
    calls++;
    let lines = 0;
    if (workspace) {
      const path = workspace.resolve('calls.log');
      appendFileSync(path, `${tool} ${line}\n`);
      lines = readFileSync(path, 'utf8').split('\n').filter(Boolean).length;
    }
    o.onVisit?.({ tool, dir: workspace?.dir, callNumber: calls, journalLines: lines });
  };

  const price = defineTool({
    name: 'price',
    description: 'The price per kg of a good, with its product sheet.',
    input: z.object({ item: z.string().min(1).describe('the good, e.g. "pear"') }),
    async execute({ item }, context) {
      journal('price', item, context.workspace);
      const key = item.trim().toLowerCase();
      if (!shop.prices.has(key)) throw new UnknownGoodError(key);
      if (shop.imported.has(key)) {
        // The supplier answers eventually; the registry's timeout aborts this wait long before.
        await sleep(o.supplierDelayMs ?? 10_000, undefined, {
          ...(context.signal && { signal: context.signal }),
        });
      }
      return productSheet(shop, key);
    },
  });

  const calculator = createCalculatorTool({ name: 'calc' });
  const calc: Tool = {
    ...calculator,
    async execute(input: unknown, context): Promise<ToolResult> {
      const { expression } = input as { expression: string };
      journal('calc', expression, context.workspace);
      return calculator.execute({ expression }, context);
    },
  } as Tool;
  return [price as Tool, calc];
}
