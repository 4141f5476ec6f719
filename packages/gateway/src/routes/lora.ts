import type { GatewayContext, RouteRequest } from '../context.js';
import { GatewayError } from '../errors.js';
import { readJson } from '../http-util.js';
import { LoadLoraRequestSchema, parseBody, UnloadLoraRequestSchema } from '../wire.js';

// vLLM's runtime LoRA routes: POST /v1/load_lora_adapter and /v1/unload_lora_adapter, answered in
// vLLM's plain-text words; 404 when the gateway was made with `loraUpdates: false`.

function enabled(ctx: GatewayContext, r: RouteRequest): void {
  if (ctx.options.loraUpdates === false)
    throw new GatewayError(404, `Unknown request URL: POST ${r.path}`, { code: 'unknown_url' });
}

export async function loadLoraAdapter(ctx: GatewayContext, r: RouteRequest): Promise<void> {
  enabled(ctx, r);
  const b = parseBody(LoadLoraRequestSchema, await readJson(r, ctx.maxBody));
  await ctx.host.loadAdapter(b.lora_name, b.lora_path, { inplace: b.load_inplace === true });
  r.res
    .writeHead(200, { 'content-type': 'text/plain' })
    .end(`Success: LoRA adapter '${b.lora_name}' added successfully.`);
}

export async function unloadLoraAdapter(ctx: GatewayContext, r: RouteRequest): Promise<void> {
  enabled(ctx, r);
  const b = parseBody(UnloadLoraRequestSchema, await readJson(r, ctx.maxBody));
  await ctx.host.unloadAdapter(b.lora_name);
  r.res
    .writeHead(200, { 'content-type': 'text/plain' })
    .end(`Success: LoRA adapter '${b.lora_name}' removed successfully.`);
}
