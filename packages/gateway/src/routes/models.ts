import type { GatewayContext, RouteRequest } from '../context.js';
import { GatewayError } from '../errors.js';
import { sendJson } from '../http-util.js';

// GET /v1/models and /v1/models/{id}: the host's models and adapters, and the models a trainer
// bound to its rollouts (as vLLM lists a LoRA model with its parent); GET /health.

function modelList({ host, bindings }: GatewayContext) {
  const seen = new Map(host.models().map((m) => [m.id, m]));
  for (const b of bindings.values())
    for (const id of Object.keys(b.engines ?? {}))
      if (!seen.has(id)) seen.set(id, { id, parent: host.baseModel });
  return [...seen.values()].map((m) => ({
    id: m.id,
    object: 'model',
    created: 0,
    owned_by: 'flowgrpo',
    root: m.path ?? m.id,
    parent: m.parent ?? null,
    ...(host.maxContext !== undefined && { max_model_len: host.maxContext }),
  }));
}

export function listModels(ctx: GatewayContext, r: RouteRequest): void {
  sendJson(r.res, 200, { object: 'list', data: modelList(ctx) });
}

export function getModel(ctx: GatewayContext, r: RouteRequest): void {
  const id = r.params[0]!;
  const m = modelList(ctx).find((x) => x.id === id);
  if (!m)
    throw new GatewayError(404, `The model '${id}' does not exist`, {
      param: 'model',
      code: 'model_not_found',
    });
  sendJson(r.res, 200, m);
}

/** Up and answering: 200 with no body, any method, no API key needed. */
export function health(_ctx: GatewayContext, r: RouteRequest): void {
  r.res.writeHead(200).end();
}
