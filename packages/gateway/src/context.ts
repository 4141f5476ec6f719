import { randomUUID, timingSafeEqual } from 'node:crypto';
import type { IncomingMessage, ServerResponse } from 'node:http';
import type { PolicyEngine } from '@flowgrpo/agent';
import type { SamplingWarner, Tokenizer } from '@flowgrpo/models';
import { badRequest, GatewayError } from './errors.js';
import type { PolicyGatewayOptions, RolloutBinding } from './gateway.js';
import type { PolicyHost } from './policy-host.js';
import { RolloutRecorder } from './recorder.js';
import { Slots } from './slots.js';

// What every route of the gateway shares: the policy host and its tokenizer, the recorder, the
// generation slots, the rollouts bound to a trainer's engines, the server's options and its API
// key. One object made once per gateway (createGatewayContext); the route files take it as their
// first argument instead of closing over a server-sized function.

export const ROLLOUT_HEADER = 'x-flowgrpo-rollout-id';
export const ROLLOUT_ID = /^[A-Za-z0-9._:@-]{1,200}$/;

export interface GatewayContext {
  readonly options: PolicyGatewayOptions;
  readonly host: PolicyHost;
  readonly tokenizer: Tokenizer;
  readonly recorder: RolloutRecorder;
  /** Largest request body, in bytes. */
  readonly maxBody: number;
  readonly slots: Slots;
  /** Rollouts a trainer routes to its own engines (bindRollout). */
  readonly bindings: Map<string, RolloutBinding>;
  /** rolloutSampling's warnings, one set per model. */
  readonly warners: Map<string, SamplingWarner>;
  /** Whether the request carries the API key (always, when the gateway has none). */
  authorized(req: IncomingMessage): boolean;
  /** The engine serving `model` for calls of `rolloutId` (its binding's first); 404 when none. */
  engineFor(model: string, rolloutId: string): PolicyEngine;
}

/** One request as a route handler sees it. */
export interface RouteRequest {
  readonly req: IncomingMessage;
  readonly res: ServerResponse;
  /** The path with any /rollouts/<id> prefix taken off. */
  readonly path: string;
  /** The rollout id the /rollouts/<id> prefix named. */
  readonly fromPath: string | undefined;
  /** The path pattern's captures (decoded). */
  readonly params: readonly string[];
  /** Aborted when the client goes away before the reply has ended. */
  readonly signal: AbortSignal;
}

/** The rollout a call belongs to, and whether the client named it (rolloutSampling applies). */
export interface RolloutRef {
  rolloutId: string;
  named: boolean;
}

export function createGatewayContext(o: PolicyGatewayOptions): GatewayContext {
  const host = o.host;
  const bindings = new Map<string, RolloutBinding>();
  const key = o.apiKey === undefined ? undefined : Buffer.from(o.apiKey);
  return {
    options: o,
    host,
    tokenizer: host.tokenizer,
    recorder: o.recorder ?? new RolloutRecorder(),
    maxBody: o.maxBodyBytes ?? 8 * 2 ** 20,
    slots: new Slots(o.maxConcurrency ?? 256, o.maxQueue ?? 4096),
    bindings,
    warners: new Map(),
    authorized(req) {
      if (!key) return true;
      const m = /^Bearer\s+(.+)$/i.exec(req.headers.authorization ?? '');
      const given = Buffer.from(m?.[1]?.trim() ?? '');
      return given.length === key.length && timingSafeEqual(given, key);
    },
    engineFor(model, rolloutId) {
      const engine = bindings.get(rolloutId)?.engines?.[model] ?? host.engine(model);
      if (!engine)
        throw new GatewayError(
          404,
          `The model \`${model}\` does not exist or you do not have access to it.`,
          { type: 'invalid_request_error', param: 'model', code: 'model_not_found' },
        );
      return engine;
    },
  };
}

/** The rollout a request belongs to: header, /rollouts/<id> path, metadata, else its own. */
export function rolloutOf(r: RouteRequest, body: unknown): RolloutRef {
  const header = r.req.headers[ROLLOUT_HEADER];
  const meta = (body as { metadata?: { rollout_id?: unknown } } | undefined)?.metadata?.rollout_id;
  const id =
    (typeof header === 'string' ? header : undefined) ??
    r.fromPath ??
    (typeof meta === 'string' ? meta : undefined);
  if (id === undefined) return { rolloutId: `call-${randomUUID()}`, named: false };
  if (!ROLLOUT_ID.test(id))
    throw badRequest(
      'a rollout id is 1-200 characters of letters, digits and ._:@-',
      ROLLOUT_HEADER,
    );
  return { rolloutId: id, named: true };
}
