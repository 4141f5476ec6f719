import type { GatewayContext, RouteRequest } from '../context.js';
import { GatewayError } from '../errors.js';
import { readJson, sendJson } from '../http-util.js';
import type { RecordedRollout } from '../recorder.js';
import { parseBody, RewardRequestSchema } from '../wire.js';

// The recording, over HTTP: GET /v1/rollouts (ids and sizes), GET /v1/rollouts/{id} (every call
// token-exactly), POST /v1/rollouts/{id}/reward, DELETE /v1/rollouts/{id}.

const rolloutJson = (r: RecordedRollout) => ({
  id: r.id,
  object: 'rollout',
  created_at: r.createdAt,
  in_flight: r.inFlight,
  ...(r.reward !== undefined && { reward: r.reward }),
  ...(r.roleRewards && { role_rewards: r.roleRewards }),
  ...(r.finalAnswer !== undefined && { final_answer: r.finalAnswer }),
  calls: r.calls.map((c) => ({
    index: c.index,
    model: c.model,
    endpoint: c.endpoint,
    prompt_token_ids: Array.from(c.promptTokens),
    token_ids: Array.from(c.completionTokens),
    logprobs: Array.from(c.logprobs),
    text: c.text,
    ...(c.toolCalls && { tool_calls: c.toolCalls }),
    finish_reason: c.finishReason,
    started_at: c.startedAt,
    timings: c.timings,
  })),
});

const missing = (id: string) =>
  new GatewayError(404, `no rollout '${id}' has been recorded`, {
    param: 'rollout_id',
    code: 'rollout_not_found',
  });

export function listRollouts({ recorder }: GatewayContext, r: RouteRequest): void {
  sendJson(r.res, 200, {
    object: 'list',
    data: recorder.ids().map((id) => {
      const x = recorder.get(id)!;
      return {
        id,
        calls: x.calls.length,
        in_flight: x.inFlight,
        ...(x.reward !== undefined && { reward: x.reward }),
      };
    }),
  });
}

export function getRollout({ recorder }: GatewayContext, r: RouteRequest): void {
  const id = r.params[0]!;
  const x = recorder.get(id);
  if (!x) throw missing(id);
  sendJson(r.res, 200, rolloutJson(x));
}

export function deleteRollout({ recorder }: GatewayContext, r: RouteRequest): void {
  const id = r.params[0]!;
  if (!recorder.delete(id)) throw missing(id);
  sendJson(r.res, 200, { id, object: 'rollout', deleted: true });
}

export async function rewardRollout(ctx: GatewayContext, r: RouteRequest): Promise<void> {
  const id = r.params[0]!;
  const b = parseBody(RewardRequestSchema, await readJson(r, ctx.maxBody));
  const x = ctx.recorder.setReward(id, {
    reward: b.reward,
    ...(b.role_rewards && { roleRewards: b.role_rewards }),
    ...(b.final_answer !== undefined && { finalAnswer: b.final_answer }),
    ...(b.details && { details: b.details }),
    ...(b.group_id !== undefined && { groupId: b.group_id }),
  });
  if (!x) throw missing(id);
  sendJson(r.res, 200, { id, object: 'rollout.reward', reward: b.reward, calls: x.calls.length });
}
