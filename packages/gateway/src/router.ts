import type { IncomingMessage, ServerResponse } from 'node:http';
import type { GatewayContext, RouteRequest } from './context.js';
import { GatewayError } from './errors.js';

// The gateway's route table: method + path → handler. A path is a string or a pattern whose
// captures become the request's params (URL-decoded). Every route also answers under
// /rollouts/{id}/…, the id then naming the call's rollout. Routes need the API key unless they
// say `open`; a known path asked with another method is 405, an unknown one 404.

export interface Route {
  /** An HTTP method, or '*' for any. */
  method: string;
  path: string | RegExp;
  /** Answered without the API key (health checks). */
  open?: boolean;
  handle(ctx: GatewayContext, r: RouteRequest): void | Promise<void>;
}

/** A path segment decoded; a malformed %-escape is the client's mistake (400), not ours (500). */
function decodeSegment(segment: string): string {
  try {
    return decodeURIComponent(segment);
  } catch {
    throw new GatewayError(400, `the URL path has a malformed %-escape: '${segment}'`, {
      code: 'invalid_url',
    });
  }
}

function matchPath(route: Route, path: string): string[] | undefined {
  if (typeof route.path === 'string') return route.path === path ? [] : undefined;
  const m = route.path.exec(path);
  return m ? m.slice(1).map(decodeSegment) : undefined;
}

/** Finds the request's route and runs it; throws the GatewayError the server answers with. */
export async function dispatch(
  routes: readonly Route[],
  ctx: GatewayContext,
  req: IncomingMessage,
  res: ServerResponse,
  signal: AbortSignal,
): Promise<void> {
  const url = new URL(req.url ?? '/', 'http://gateway');
  let path = url.pathname.replace(/\/+$/, '') || '/';
  let fromPath: string | undefined;
  const scoped = /^\/rollouts\/([^/]+)(\/.*)$/.exec(path);
  if (scoped) {
    fromPath = decodeSegment(scoped[1]!);
    path = scoped[2]!;
  }
  const method = req.method ?? 'GET';
  const matches = routes.flatMap((route) => {
    const params = matchPath(route, path);
    return params ? [{ route, params }] : [];
  });
  const found = matches.find((m) => m.route.method === method || m.route.method === '*');
  if (!found?.route.open && !ctx.authorized(req))
    throw new GatewayError(
      401,
      'Incorrect API key provided. Send it as "Authorization: Bearer <key>".',
      { code: 'invalid_api_key' },
    );
  if (!found) {
    if (matches.length > 0)
      throw new GatewayError(
        405,
        `${method} is not allowed on ${path}; use ${matches.map((m) => m.route.method).join(' or ')}`,
        { code: 'method_not_allowed' },
      );
    throw new GatewayError(404, `Unknown request URL: ${method} ${url.pathname}`, {
      code: 'unknown_url',
    });
  }
  await found.route.handle(ctx, { req, res, path, fromPath, params: found.params, signal });
}
