import { createReadStream, readFileSync, realpathSync, statSync } from 'node:fs';
import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { resolve, sep } from 'node:path';
import { AddressInUseError } from '@flowgrpo/core';
import { alarmEpisodes, episodeCharts } from './alarm-episodes.js';
import { chartSpecs } from './charts.js';
import { RunCache, summarize } from './run-cache.js';
import { RunReader } from './run-reader.js';
import { STATIC_NAMES, type StaticName, staticPath } from './static-files.js';
import { STOP_REASONS } from './stop-reasons.js';
import { trajectoryHtml } from './trajectory-html.js';

// `flowgrpo view`'s server: node:http, read-only. GET only (anything else is 405); the page and
// its scripts come from this package's static/ folder and uPlot's own file (nothing from the
// network; static-files.ts); the API reads the run directory through RunReader; /files/<path> serves a file of
// the run directory, confined to it (a `..` or a symbolic link out of it is 404).

export interface ViewerOptions {
  /** The run directory (a trainer's output_dir). */
  runDir: string;
  /** Default 127.0.0.1: loopback only. */
  host?: string;
  /** Default 0: a free port. */
  port?: number;
}

export interface Viewer {
  /** http://host:port/ */
  url: string;
  server: Server;
  close(): Promise<void>;
}

const TYPES: Record<string, string> = {
  js: 'text/javascript',
  css: 'text/css',
  html: 'text/html',
};

function send(res: ServerResponse, status: number, body: string, type: string): void {
  res.writeHead(status, {
    'content-type': `${type}; charset=utf-8`,
    'cache-control': 'no-store',
    'x-content-type-options': 'nosniff',
  });
  res.end(body);
}
const json = (res: ServerResponse, value: unknown, status = 200) =>
  send(res, status, JSON.stringify(value), 'application/json');
const notFound = (res: ServerResponse, what: string) =>
  json(res, { error: `${what} not found` }, 404);

/** `rel` inside `root` (after symbolic links), or undefined when it would leave it. */
function confined(root: string, rel: string): string | undefined {
  const path = resolve(root, rel);
  if (!path.startsWith(root + sep)) return undefined;
  try {
    const real = realpathSync(path);
    return real.startsWith(realpathSync(root) + sep) && statSync(real).isFile() ? real : undefined;
  } catch {
    return undefined;
  }
}

async function route(cache: RunCache, req: IncomingMessage, res: ServerResponse): Promise<void> {
  if (req.method !== 'GET' && req.method !== 'HEAD') {
    res.writeHead(405, { allow: 'GET, HEAD' });
    res.end('read-only');
    return;
  }
  const url = new URL(req.url ?? '/', 'http://viewer');
  const path = decodeURIComponent(url.pathname);
  const reader = cache.reader;
  if (path === '/')
    return send(res, 200, readFileSync(staticPath('index.html'), 'utf8'), 'text/html');
  if (path.startsWith('/static/')) {
    const name = path.slice('/static/'.length) as StaticName;
    if (!STATIC_NAMES.includes(name)) return notFound(res, path);
    const type = TYPES[name.slice(name.lastIndexOf('.') + 1)]!;
    return send(res, 200, readFileSync(staticPath(name), 'utf8'), type);
  }
  if (path === '/api/run')
    return json(res, {
      dir: reader.dir,
      config: reader.config() ?? null,
      checkpoints: reader.checkpoints(),
      rollouts: reader.rollouts().map((r) => r.step),
      tokenizer: cache.pieces().note,
      stopReasons: STOP_REASONS,
    });
  // Records from line `from` of the good ones; `skipped` counts the lines that were no record.
  if (path === '/api/metrics') {
    const from = Math.max(0, Number(url.searchParams.get('from') ?? 0) || 0);
    const { records, skipped } = reader.metrics();
    return json(res, {
      from,
      total: records.length,
      skipped,
      records: records.slice(from),
      charts: chartSpecs(records),
    });
  }
  if (path === '/api/alarms') {
    const { records } = reader.metrics();
    const charts = chartSpecs(records);
    return json(
      res,
      alarmEpisodes(records).map((e) => ({ ...e, charts: episodeCharts(e, charts) })),
    );
  }
  // /api/steps/<step>: the step's trajectories, summarized; /api/steps/<step>/<i>[,<j>…]: as HTML.
  const steps = /^\/api\/steps\/(\d+)(?:\/(\d+(?:,\d+)*))?$/.exec(path);
  if (steps) {
    const trajectories = await cache.step(Number(steps[1]));
    if (!trajectories) return notFound(res, `rollouts of step ${steps[1]}`);
    if (!steps[2]) return json(res, trajectories.map(summarize));
    const { pieces } = cache.pieces();
    const out: string[] = [];
    for (const i of steps[2].split(',').map(Number)) {
      const t = trajectories[i];
      if (!t) return notFound(res, `trajectory ${i} of step ${steps[1]}`);
      out.push(trajectoryHtml(t, i, pieces));
    }
    return json(res, { html: out });
  }
  // /api/question/<queryId>: the same question at every step that sampled it.
  const question = /^\/api\/question\/(.+)$/.exec(path);
  if (question) {
    const out: { step: number; index: number; reward: number | null; advantage: number | null }[] =
      [];
    for (const { step } of reader.rollouts()) {
      for (const [i, t] of ((await cache.step(step)) ?? []).entries())
        if (t.queryId === question[1]) {
          const s = summarize(t, i);
          out.push({ step, index: i, reward: s.reward, advantage: s.advantage });
        }
    }
    return json(res, out);
  }
  if (path.startsWith('/files/')) {
    const file = confined(reader.dir, path.slice('/files/'.length));
    if (!file) return notFound(res, path);
    res.writeHead(200, { 'content-type': 'application/octet-stream', 'cache-control': 'no-store' });
    createReadStream(file).pipe(res);
    return;
  }
  notFound(res, path);
}

/** Starts the viewer on `runDir`; resolves once it listens. */
export async function startViewer(o: ViewerOptions): Promise<Viewer> {
  const cache = new RunCache(new RunReader(resolve(o.runDir)));
  const server = createServer((req, res) => {
    route(cache, req, res).catch((e: unknown) => {
      // A rollouts file the trainer is replacing, or a damaged one: said on the page, not fatal.
      if (!res.headersSent) json(res, { error: e instanceof Error ? e.message : String(e) }, 500);
      else res.end();
    });
  });
  const host = o.host ?? '127.0.0.1';
  await new Promise<void>((ok, fail) => {
    server.once('error', (e: NodeJS.ErrnoException) =>
      fail(
        e.code === 'EADDRINUSE'
          ? new AddressInUseError(`port ${o.port} on ${host} is in use`, {
              hint: 'choose another with --port N, or --port 0 for any free one',
            })
          : e,
      ),
    );
    server.listen(o.port ?? 0, host, ok);
  });
  const { port } = server.address() as AddressInfo;
  const shown = host.includes(':') ? `[${host}]` : host;
  return {
    url: `http://${shown}:${port}/`,
    server,
    close: () =>
      new Promise<void>((ok) => {
        server.closeAllConnections();
        server.close(() => ok());
      }),
  };
}
