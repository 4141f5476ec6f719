// A stand-in for the Hugging Face Hub's HTTP API on 127.0.0.1, serving repos from bytes the test
// gives it: the revision API (/api/{models,datasets}/{repo}/revision/{rev}, the revision
// URL-encoded as huggingface_hub sends it), file resolution (/{repo}/resolve/{rev}/{file},
// /datasets/{repo}/resolve/…) with the hub's headers — ETag (git blob sha1) for small files, a
// 302 to /lfs/<sha256> with X-Linked-Etag / X-Linked-Size for LFS files —, Range requests (206,
// or 416 past the end, as HTTP servers answer), gated repos (401 without the token), a hostile
// hub (a commit id, file names or ETags of the test's choosing) and
// injected faults: a connection cut after a given number of bytes, wrong bytes, a Range ignored —
// and a held response, so that a test can order two clients without racing them. Every request
// is recorded so tests can count them.
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
  /** Revisions besides `main` (a tag, `feature/x`, `refs/pr/1`) and the commit each points at. */
  refs?: Record<string, string>;
  /** A hostile hub: the revision API answers this as the commit (`sha`) instead of `commit`. */
  answerSha?: string;
  /** A hostile hub: the revision API lists these names (`rfilename`) instead of the files'. */
  answerFiles?: string[];
  /** A hostile hub: the ETag (X-Linked-Etag for LFS files) sent for a file instead of its hash. */
  answerEtags?: Record<string, string>;
}

export interface FakeHubRequest {
  method: string;
  /** The path, percent-decoded. */
  path: string;
  /** The path and query as the client sent them (percent-encoded). */
  url: string;
  range: string | undefined;
}

/**
 * `corrupt`: the bytes are flipped; `ignore-range`: a Range request is answered 200 with the
 * whole file, as a server without Range support does.
 */
export type FakeHubFault = 'corrupt' | 'ignore-range';

export interface FakeHub {
  url: string;
  requests: FakeHubRequest[];
  /** Requests that sent file bytes (GETs of a file or an LFS object). */
  downloads(): FakeHubRequest[];
  /** The next GET of `file` (a repo path) gets the fault. */
  fault(file: string, kind: FakeHubFault): void;
  /**
   * A GET of `file` sends `bytes` bytes of its answer, then waits for `when` (default: at once)
   * and drops the connection. Several cuts of one file apply to its next GETs in turn.
   */
  cut(file: string, bytes: number, when?: Promise<void>): void;
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
  const cuts = new Map<string, { bytes: number; when: Promise<void> }[]>();
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
    const cut = req.method === 'GET' ? cuts.get(file)?.shift() : undefined;
    const bytes = fault === 'corrupt' ? Buffer.from(whole.map((x) => x ^ 0xff)) : whole;
    const range = /^bytes=(\d+)-$/.exec(req.headers.range ?? '');
    const start = range && fault !== 'ignore-range' ? Number(range[1]) : undefined;
    if (start !== undefined && start >= whole.length) {
      res.writeHead(416, { 'content-range': `bytes */${whole.length}` });
      return res.end();
    }
    const body = bytes.subarray(start ?? 0);
    res.writeHead(start === undefined ? 200 : 206, {
      'content-length': String(body.length),
      ...(start !== undefined && {
        'content-range': `bytes ${start}-${whole.length - 1}/${whole.length}`,
      }),
    });
    if (req.method === 'HEAD') return res.end();
    if (cut) {
      // Some bytes, then the connection drops: the client sees a body that ends too soon.
      res.write(body.subarray(0, cut.bytes), () => {
        void cut.when.then(() => res.socket?.destroy());
      });
      return;
    }
    res.end(body);
  };

  const server = createServer((req, res) => {
    const url = req.url ?? '/';
    const raw = new URL(url, 'http://x').pathname;
    const path = decodeURIComponent(raw);
    requests.push({ method: req.method ?? 'GET', path, url, range: req.headers.range });
    // The revision is one URL segment (a '/' in it arrives as %2F), decoded after the match.
    const api = /^\/api\/(models|datasets)\/([^/]+\/[^/]+)\/revision\/([^/]+)$/.exec(raw);
    if (api) {
      const r = find(api[1] === 'models' ? 'model' : 'dataset', api[2] ?? '');
      const revision = decodeURIComponent(api[3] ?? '');
      const commit =
        revision === 'main' || revision === r?.commit ? r?.commit : r?.refs?.[revision];
      if (!r || commit === undefined) return res.writeHead(404).end();
      if (refused(r, req)) return res.writeHead(401).end();
      res.writeHead(200, { 'content-type': 'application/json' });
      return res.end(
        JSON.stringify({
          id: r.repo,
          sha: r.answerSha ?? commit,
          siblings: (r.answerFiles ?? Object.keys(r.files)).map((rfilename) => ({ rfilename })),
        }),
      );
    }
    const resolve = /^\/(datasets\/)?([^/]+\/[^/]+)\/resolve\/([^/]+)\/(.+)$/.exec(path);
    if (resolve) {
      const r = find(resolve[1] ? 'dataset' : 'model', resolve[2] ?? '');
      const file = resolve[4] ?? '';
      const value = r?.files[file];
      const known =
        resolve[3] === 'main' ||
        resolve[3] === r?.commit ||
        Object.values(r?.refs ?? {}).includes(resolve[3] ?? '');
      if (!r || value === undefined || !known) return res.writeHead(404).end();
      if (refused(r, req)) return res.writeHead(401).end();
      const bytes = bytesOf(value);
      res.setHeader('x-repo-commit', r.commit);
      if (LFS.test(file)) {
        const oid = sha256(bytes);
        res.writeHead(302, {
          location: `/lfs/${oid}`,
          'x-linked-etag': `"${r.answerEtags?.[file] ?? oid}"`,
          'x-linked-size': String(bytes.length),
          etag: `"${gitSha1(Buffer.from(`oid sha256:${oid}`))}"`,
        });
        return res.end();
      }
      res.setHeader('etag', `"${r.answerEtags?.[file] ?? gitSha1(bytes)}"`);
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
    cut: (file, bytes, when = Promise.resolve()) => {
      cuts.set(file, [...(cuts.get(file) ?? []), { bytes, when }]);
    },
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
