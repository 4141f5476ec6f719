import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import type { PolicyEngine } from '@flowgrpo/agent';
import type { TrainingSampling } from '@flowgrpo/models';
import { createGatewayContext, ROLLOUT_HEADER, ROLLOUT_ID } from './context.js';
import { errorBody } from './errors.js';
import { refuseBody, sendJson } from './http-util.js';
import type { PolicyHost } from './policy-host.js';
import type { RecordedCall, RolloutRecorder } from './recorder.js';
import { dispatch, type Route } from './router.js';
import { chatCompletions } from './routes/chat-completions.js';
import { completions } from './routes/completions.js';
import { loadLoraAdapter, unloadLoraAdapter } from './routes/lora.js';
import { getModel, health, listModels } from './routes/models.js';
import { responses } from './routes/responses.js';
import { deleteRollout, getRollout, listRollouts, rewardRollout } from './routes/rollouts.js';

// `flowgrpo serve`: an OpenAI-compatible HTTP server over a policy host (local artifacts or
// upstream vLLM/SGLang) that records every call token-exactly (recorder.ts). node:http, no
// framework: the surface is a dozen routes, and owning the socket lets the gateway stream SSE
// token by token, abort a generation whose client went away, and bound bodies and concurrency
// itself. This file makes the shared context (context.ts), holds the route table (one file per
// route family in routes/, matched by router.ts), and starts and stops the server.
//
// Every route also answers under /rollouts/{id}/…: an agent whose base URL is
// `<gateway>/rollouts/<id>/v1` has all its calls recorded under rollout <id> with no other
// change to its code.

export { ROLLOUT_HEADER };

/** Every route the gateway serves. */
const ROUTES: readonly Route[] = [
  { method: '*', path: '/health', open: true, handle: health },
  { method: '*', path: '/v1/health', open: true, handle: health },
  { method: 'GET', path: '/v1/models', handle: listModels },
  { method: 'GET', path: /^\/v1\/models\/(.+)$/, handle: getModel },
  // messages → chat template (+ tools) → ids → policy; SSE token by token too
  { method: 'POST', path: '/v1/chat/completions', handle: chatCompletions },
  // text or token ids → policy
  { method: 'POST', path: '/v1/completions', handle: completions },
  // the Responses API's input items → the chat path
  { method: 'POST', path: '/v1/responses', handle: responses },
  // vLLM's runtime LoRA routes
  { method: 'POST', path: '/v1/load_lora_adapter', handle: loadLoraAdapter },
  { method: 'POST', path: '/v1/unload_lora_adapter', handle: unloadLoraAdapter },
  // the recording
  { method: 'GET', path: '/v1/rollouts', handle: listRollouts },
  { method: 'GET', path: /^\/v1\/rollouts\/([^/]+)$/, handle: getRollout },
  { method: 'DELETE', path: /^\/v1\/rollouts\/([^/]+)$/, handle: deleteRollout },
  { method: 'POST', path: /^\/v1\/rollouts\/([^/]+)\/reward$/, handle: rewardRollout },
];

export interface PolicyGatewayOptions {
  host: PolicyHost;
  /** Interface to listen on (default 127.0.0.1: nothing beyond this machine). */
  hostname?: string | undefined;
  /** Port (default 0: any free port; `url` says which). */
  port?: number | undefined;
  /** When set, every route but /health needs `Authorization: Bearer <apiKey>`. */
  apiKey?: string | undefined;
  /** Largest request body (default 8 MiB). */
  maxBodyBytes?: number | undefined;
  /** Generations running at once (default 256); more wait in a queue. */
  maxConcurrency?: number | undefined;
  /** Requests waiting for a generation slot (default 4096); more get 429. */
  maxQueue?: number | undefined;
  /** max_tokens when a request leaves it out (default 1024, and never past the context). */
  defaultMaxTokens?: number | undefined;
  /** Variables every chat template render gets (e.g. { enable_thinking: false }). */
  chatTemplateVariables?: Record<string, unknown> | undefined;
  /** Where calls are recorded (default: a new RolloutRecorder). */
  recorder?: RolloutRecorder | undefined;
  /** Serve /v1/load_lora_adapter and /v1/unload_lora_adapter (default true). */
  loraUpdates?: boolean | undefined;
  /** Called once per recorded call. */
  onCall?: ((rolloutId: string, call: RecordedCall) => void) | undefined;
  /**
   * The sampling a trainer imposes on a model's calls that belong to a named rollout (a rollout
   * id in the header, the /rollouts/<id> path or metadata: the calls it may train on), or
   * undefined for none. Temperature and top_p are replaced and the token limit capped, whatever
   * the request asked (one FLOWGRPO_SAMPLING_OVERRIDE warning per model and setting); calls
   * outside a rollout (a held-out evaluation, plain serving) sample as asked.
   */
  rolloutSampling?: (model: string) => TrainingSampling | undefined;
}

/** How calls of one rollout are served: engines per model name (the trainer's policy), a seed. */
export interface RolloutBinding {
  engines?: Record<string, PolicyEngine>;
  /** Calls without a `seed` sample with one derived from this and the call's index. */
  seed?: number | string;
}

export interface PolicyGateway {
  /** http://127.0.0.1:<port> */
  readonly url: string;
  /** `url` + /v1: what an OpenAI client takes as its base URL. */
  readonly baseURL: string;
  readonly port: number;
  readonly host: PolicyHost;
  readonly recorder: RolloutRecorder;
  /** A base URL that records every call under rollout `id` (no header needed). */
  rolloutBaseURL(id: string): string;
  /** Routes the calls of rollout `id` as `binding` says until the returned function is called. */
  bindRollout(id: string, binding: RolloutBinding): () => void;
  /** Stops listening and waits for open requests to finish. */
  close(): Promise<void>;
}

export async function createPolicyGateway(options: PolicyGatewayOptions): Promise<PolicyGateway> {
  const ctx = createGatewayContext(options);
  // Refused bodies still being read before their connection closes (refuseBody); close() ends them.
  const lingering = new Set<() => void>();
  const handle = (req: IncomingMessage, res: ServerResponse) => {
    const abort = new AbortController();
    res.on('close', () => {
      if (!res.writableEnded) abort.abort(new Error('the client closed the connection'));
    });
    dispatch(ROUTES, ctx, req, res, abort.signal).catch((error) => {
      if (res.headersSent) {
        // Mid-stream: an error event, then the end of the stream.
        if (!res.writableEnded) {
          res.write(`data: ${JSON.stringify(errorBody(error).body)}\n\n`);
          res.end();
        }
        return;
      }
      if (res.destroyed) return;
      const { status, body } = errorBody(error);
      if (status !== 413) return sendJson(res, status, body);
      const finish = refuseBody(req, res, status, body);
      lingering.add(finish);
      res.once('close', () => lingering.delete(finish));
    });
  };
  // Idle keep-alive connections stay open until the client closes them (keepAliveTimeout 0; TCP
  // keep-alive finds peers that vanished). With Node's 5 s default, a client whose event loop was
  // blocked longer — the trainer's update, in this process or the client's — sends its next
  // request on a pooled connection in the same turn as this server's timer closes it, and the
  // request dies with ECONNRESET before any route sees it (test/keep-alive.test.ts).
  const server: Server = createServer({ keepAlive: true }, handle);
  server.keepAliveTimeout = 0;
  // Without this listener Node answers `Expect: 100-continue` itself, before any route has seen
  // the request; readJson sends the 100 once the declared size is within the limit.
  server.on('checkContinue', handle);
  const hostname = options.hostname ?? '127.0.0.1';
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(options.port ?? 0, hostname, () => {
      server.off('error', reject);
      resolve();
    });
  });
  const port = (server.address() as AddressInfo).port;
  const shown = hostname.includes(':') ? `[${hostname}]` : hostname;
  const url = `http://${shown === '0.0.0.0' ? '127.0.0.1' : shown}:${port}`;

  return {
    url,
    baseURL: `${url}/v1`,
    port,
    host: ctx.host,
    recorder: ctx.recorder,
    rolloutBaseURL: (id: string) => {
      if (!ROLLOUT_ID.test(id)) throw new RangeError(`invalid rollout id '${id}'`);
      return `${url}/rollouts/${encodeURIComponent(id)}/v1`;
    },
    bindRollout(id, binding) {
      ctx.bindings.set(id, binding);
      return () => {
        if (ctx.bindings.get(id) === binding) ctx.bindings.delete(id);
      };
    },
    close: () =>
      new Promise<void>((resolve) => {
        server.close(() => resolve());
        for (const finish of lingering) finish();
        server.closeIdleConnections?.();
      }),
  };
}
