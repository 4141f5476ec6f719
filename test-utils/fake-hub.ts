// A stand-in for the Hugging Face Hub's HTTP API on 127.0.0.1, serving repos from bytes the test
// gives it: the revision API (/api/{models,datasets}/{repo}/revision/{rev}), file resolution
// (/{repo}/resolve/{rev}/{file}, /datasets/{repo}/resolve/…) with the hub's headers — ETag (git
// blob sha1) for small files, a 302 to /lfs/<sha256> with X-Linked-Etag / X-Linked-Size for LFS
// files —, Range requests, gated repos (401 without the token) and injected faults: a connection
// cut mid-file, or wrong bytes — and a held response, so that a test can order two clients
// without racing them. Every request is recorded so tests can count them.
import { createHash } from 'node:crypto';
import { createServer, type IncomingMessage, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';

export interface FakeHubRepo {
  type: 'model' | 'dataset';
  repo: string;
  /** 40-hex commit the `main` revision points at. */
  commit: string;
  files: Record<string, Uint8Array | string>;
  /** Requests without `Authorization: Bearer <token>` are refused with 401. */
  token?: string;
}

export interface FakeHubRequest {
  method: string;
  path: string;
  range: string | undefined;
}

export type FakeHubFault = 'cut' | 'corrupt';

export interface FakeHub {
  url: string;
  requests: FakeHubRequest[];
  /** Requests that sent file bytes (GETs of a file or an LFS object). */
  downloads(): FakeHubRequest[];
  /** The next GET of `file` (a repo path) is cut mid-way or sends wrong bytes. */
  fault(file: string, kind: FakeHubFault): void;
  /**
   * The next GET of `file`'s bytes waits, nothing sent, until `release()`; `arrived` resolves
   * when that request has come.
   */
  hold(file: string): { arrived: Promise<void>; release(): void };
  close(): Promise<void>;
}

const LFS = /\.(safetensors|parquet)$/;
const bytesOf = (v: Uint8Array | string) =>
  typeof v === 'string' ? Buffer.from(v) : Buffer.from(v.buffer, v.byteOffset, v.byteLength);
const sha256 = (b: Buffer) => createHash('sha256').update(b).digest('hex');
const gitSha1 = (b: Buffer) =>
  createHash('sha1').update(`blob ${b.length}\0`).update(b).digest('hex');

export async function startFakeHub(repos: FakeHubRepo[]): Promise<FakeHub> {
  const requests: FakeHubRequest[] = [];
  const faults = new Map<string, FakeHubFault>();
  const holds = new Map<string, { came: () => void; released: Promise<void> }>();
  const lfs = new Map<string, { file: string; bytes: Buffer }>();
  for (const r of repos)
    for (const [file, v] of Object.entries(r.files)) {
      const b = bytesOf(v);
      if (LFS.test(file)) lfs.set(sha256(b), { file, bytes: b });
    }

  const find = (type: string, repo: string) =>
    repos.find((r) => r.type === type && r.repo === repo);
  const refused = (r: FakeHubRepo, req: IncomingMessage) =>
    r.token !== undefined && req.headers.authorization !== `Bearer ${r.token}`;

  const sendBytes = async (
    req: IncomingMessage,
    res: ServerResponse,
    file: string,
    whole: Buffer,
  ) => {
    const held = req.method === 'GET' ? holds.get(file) : undefined;
    if (held) {
      holds.delete(file);
      held.came();
      await held.released;
    }
    const fault = faults.get(file);
    faults.delete(file);
    let bytes = fault === 'corrupt' ? Buffer.from(whole.map((x) => x ^ 0xff)) : whole;
    const range = /^bytes=(\d+)-$/.exec(req.headers.range ?? '');
    const start = range ? Number(range[1]) : 0;
    bytes = bytes.subarray(start);
    res.writeHead(range ? 206 : 200, {
      'content-length': String(bytes.length),
      ...(range && { 'content-range': `bytes ${start}-${whole.length - 1}/${whole.length}` }),
    });
    if (req.method === 'HEAD') return res.end();
    if (fault === 'cut') {
      // Half the bytes, then the connection drops: the client sees a body that ends too soon.
      res.write(bytes.subarray(0, Math.floor(bytes.length / 2)), () => res.socket?.destroy());
      return;
    }
    res.end(bytes);
  };

  const server = createServer((req, res) => {
    const path = decodeURIComponent(new URL(req.url ?? '/', 'http://x').pathname);
    requests.push({ method: req.method ?? 'GET', path, range: req.headers.range });
    const api = /^\/api\/(models|datasets)\/([^/]+\/[^/]+)\/revision\/(.+)$/.exec(path);
    if (api) {
      const r = find(api[1] === 'models' ? 'model' : 'dataset', api[2] ?? '');
      if (!r || (api[3] !== 'main' && api[3] !== r.commit)) return res.writeHead(404).end();
      if (refused(r, req)) return res.writeHead(401).end();
      res.writeHead(200, { 'content-type': 'application/json' });
      return res.end(
        JSON.stringify({
          id: r.repo,
          sha: r.commit,
          siblings: Object.keys(r.files).map((rfilename) => ({ rfilename })),
        }),
      );
    }
    const resolve = /^\/(datasets\/)?([^/]+\/[^/]+)\/resolve\/([^/]+)\/(.+)$/.exec(path);
    if (resolve) {
      const r = find(resolve[1] ? 'dataset' : 'model', resolve[2] ?? '');
      const file = resolve[4] ?? '';
      const value = r?.files[file];
      if (!r || value === undefined || (resolve[3] !== 'main' && resolve[3] !== r.commit))
        return res.writeHead(404).end();
      if (refused(r, req)) return res.writeHead(401).end();
      const bytes = bytesOf(value);
      res.setHeader('x-repo-commit', r.commit);
      if (LFS.test(file)) {
        const oid = sha256(bytes);
        res.writeHead(302, {
          location: `/lfs/${oid}`,
          'x-linked-etag': `"${oid}"`,
          'x-linked-size': String(bytes.length),
          etag: `"${gitSha1(Buffer.from(`oid sha256:${oid}`))}"`,
        });
        return res.end();
      }
      res.setHeader('etag', `"${gitSha1(bytes)}"`);
      return sendBytes(req, res, file, bytes);
    }
    const object = /^\/lfs\/([0-9a-f]{64})$/.exec(path);
    const blob = object ? lfs.get(object[1] ?? '') : undefined;
    if (blob) return sendBytes(req, res, blob.file, blob.bytes);
    res.writeHead(404).end();
  });
  await new Promise<void>((ok) => server.listen(0, '127.0.0.1', ok));
  const { port } = server.address() as AddressInfo;
  return {
    url: `http://127.0.0.1:${port}`,
    requests,
    downloads: () =>
      requests.filter(
        (r) => r.method === 'GET' && (r.path.startsWith('/lfs/') || r.path.includes('/resolve/')),
      ),
    fault: (file, kind) => faults.set(file, kind),
    hold: (file) => {
      let came = () => {};
      let release = () => {};
      const arrived = new Promise<void>((ok) => {
        came = ok;
      });
      const released = new Promise<void>((ok) => {
        release = ok;
      });
      holds.set(file, { came, released });
      return { arrived, release };
    },
    close: () =>
      new Promise<void>((ok) => {
        server.closeAllConnections();
        server.close(() => ok());
      }),
  };
}
