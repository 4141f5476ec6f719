import { createHash } from 'node:crypto';
import { createReadStream, createWriteStream, existsSync, statSync } from 'node:fs';
import { copyFile, mkdir, rename, rm, symlink, writeFile } from 'node:fs/promises';
import { basename, dirname, join, relative } from 'node:path';
import { Readable } from 'node:stream';
import { pipeline } from 'node:stream/promises';
import { snapshotFolder } from './cache.js';
import { withDownloadLock } from './download-lock.js';
import { HubIntegrityError, HubNetworkError } from './errors.js';
import { authHeaders, checkStatus, hubFetch } from './http.js';
import type { HubRepoType } from './repo-id.js';
import type { HubSettings } from './settings.js';

// One file from the hub into the cache, as huggingface_hub does it: a HEAD (redirects not
// followed) gives the file's hash (X-Linked-Etag for LFS files: their sha256; ETag otherwise:
// the git blob sha1) and size; the bytes go to blobs/<hash>.incomplete, resumed with a Range
// request when a download broke off (here or in Python), are checked against the hash, then
// renamed to blobs/<hash> and linked from snapshots/<commit>/<file>. One process at a time does
// that for a blob (a lock file under <cache>/.locks/, download-lock.ts); the others wait for it
// and then find the blob there.

/** A progress reporter: the trainer's `Progress` (cli-progress bars) has this shape. */
export interface HubProgress {
  start(label: string, total: number): { update(value: number): void; stop(): void };
}

export interface HubFileRequest {
  settings: HubSettings;
  type: HubRepoType;
  repo: string;
  /** The commit (resolved from the revision already). */
  commit: string;
  /** Path of the file inside the repo. */
  file: string;
  /** The repo's cache folder. */
  repoFolder: string;
  progress?: HubProgress | undefined;
  /** Says when this process waits for another one downloading the same blob. */
  log?: ((line: string) => void) | undefined;
}

/** Attempts at one file: a connection that breaks mid-file resumes where it stopped. */
const ATTEMPTS = 3;

export function resolveUrl(settings: HubSettings, type: HubRepoType, repo: string, rev: string) {
  const prefix = type === 'dataset' ? 'datasets/' : '';
  return (file: string) =>
    `${settings.endpoint}/${prefix}${repo}/resolve/${encodeURIComponent(rev)}/${file.split('/').map(encodeURIComponent).join('/')}`;
}

const unquote = (etag: string) => etag.replace(/^W\//, '').replace(/^"|"$/g, '');

/**
 * The file's path in the snapshot, downloading it when the snapshot lacks it. Returns whether
 * bytes were downloaded (false: served from the cache).
 */
export async function downloadHubFile(
  req: HubFileRequest,
): Promise<{ path: string; downloaded: boolean }> {
  const { settings, repo, file } = req;
  // File names come from the hub's listing (and a model's index): one that climbs out of the
  // snapshot folder would write over the user's files.
  if (file.startsWith('/') || file.split(/[\\/]/).some((part) => part === '..' || part === ''))
    throw new HubIntegrityError(
      `${repo} lists a file named ${JSON.stringify(file)}, which is no path inside the repo; it was not downloaded`,
      { repo },
      { hint: 'check HF_ENDPOINT: it must serve the Hugging Face Hub API' },
    );
  const target = join(snapshotFolder(req.repoFolder, req.commit), file);
  if (existsSync(target)) return { path: target, downloaded: false };

  const url = resolveUrl(settings, req.type, repo, req.commit)(file);
  const head = await hubFetch(
    url,
    { method: 'HEAD', redirect: 'manual', headers: authHeaders(settings) },
    repo,
    settings,
  );
  checkStatus(head, repo, `${repo}/${file}`, settings);
  const etagHeader = head.headers.get('x-linked-etag') ?? head.headers.get('etag');
  if (!etagHeader)
    throw new HubIntegrityError(
      `the hub sent no ETag for ${repo}/${file}, so its bytes cannot be checked`,
      { repo },
      { hint: 'check HF_ENDPOINT: it must serve the Hugging Face Hub API' },
    );
  const etag = unquote(etagHeader);
  // The ETag names the blob file: it must be a plain name (a hash), never a path.
  if (!/^[A-Za-z0-9_-][A-Za-z0-9._-]*$/.test(etag))
    throw new HubIntegrityError(
      `the hub sent the ETag ${JSON.stringify(etag)} for ${repo}/${file}, which is no hash`,
      { repo },
      { hint: 'check HF_ENDPOINT: it must serve the Hugging Face Hub API' },
    );
  const sizeHeader = head.headers.get('x-linked-size') ?? head.headers.get('content-length');
  const size = sizeHeader === null ? undefined : Number(sizeHeader);
  const location = head.headers.get('location');
  const source = location ? new URL(location, url).href : url;

  const blob = join(req.repoFolder, 'blobs', etag);
  // Where huggingface_hub keeps its <etag>.lock for this blob; ours is a file of its own beside it.
  const locks = join(settings.cacheDir, '.locks', basename(req.repoFolder));
  await mkdir(locks, { recursive: true });
  await mkdir(dirname(blob), { recursive: true });
  const downloaded = await withDownloadLock(
    join(locks, `${etag}.flowgrpo.lock`),
    async () => {
      // Looked at again under the lock: the process that held it before may have fetched it.
      let fetched = false;
      if (!existsSync(blob)) {
        await fetchBlob(req, source, `${blob}.incomplete`, size);
        await verify(`${blob}.incomplete`, etag, size, req);
        await rename(`${blob}.incomplete`, blob);
        fetched = true;
      }
      await mkdir(dirname(target), { recursive: true });
      await linkBlob(blob, target);
      return fetched;
    },
    { log: req.log },
  );
  return { path: target, downloaded };
}

/** Downloads `source` into `partial`, resuming what is there; retries a broken connection. */
async function fetchBlob(
  req: HubFileRequest,
  source: string,
  partial: string,
  size: number | undefined,
): Promise<void> {
  const { settings, repo, file } = req;
  const bar = req.progress?.start(file, size ?? 0);
  try {
    for (let attempt = 1; ; attempt++) {
      const have = existsSync(partial) ? statSync(partial).size : 0;
      if (size !== undefined && have === size) return;
      // The token goes to the hub only: a redirect to a CDN is signed already.
      const sameHost = new URL(source).host === new URL(settings.endpoint).host;
      const headers: Record<string, string> = sameHost ? authHeaders(settings) : {};
      if (have > 0) headers.range = `bytes=${have}-`;
      const res = await hubFetch(source, { headers }, repo, settings);
      checkStatus(res, repo, `${repo}/${file}`, settings);
      // 206: the server resumed; 200: it sent the whole file again, so start over.
      const append = res.status === 206;
      let received = append ? have : 0;
      bar?.update(received);
      try {
        const counter = new TransformStream<Uint8Array, Uint8Array>({
          transform(chunk, out) {
            received += chunk.byteLength;
            bar?.update(received);
            out.enqueue(chunk);
          },
        });
        if (!res.body) throw new Error('empty response body');
        await pipeline(
          Readable.fromWeb(
            res.body.pipeThrough(counter) as import('node:stream/web').ReadableStream,
          ),
          createWriteStream(partial, { flags: append ? 'a' : 'w' }),
        );
        return;
      } catch (cause) {
        if (attempt < ATTEMPTS) continue;
        throw new HubNetworkError(
          `the download of ${repo}/${file} broke off after ${received}${size === undefined ? '' : ` of ${size}`} bytes (${(cause as Error).message}); the part is kept in ${partial}`,
          { repo },
          { cause, hint: 'run the command again: the download resumes where it stopped' },
        );
      }
    }
  } finally {
    bar?.stop();
  }
}

/** The file's size and hash must be the ones the hub announced; a wrong file is removed. */
async function verify(path: string, etag: string, size: number | undefined, req: HubFileRequest) {
  const actualSize = statSync(path).size;
  const algorithm = /^[0-9a-f]{64}$/.test(etag)
    ? 'sha256'
    : /^[0-9a-f]{40}$/.test(etag)
      ? 'sha1'
      : undefined;
  let actual: string | undefined;
  if (algorithm) {
    const hash = createHash(algorithm);
    // A non-LFS file's ETag is its git blob id: sha1 of "blob <size>\0" and the bytes.
    if (algorithm === 'sha1') hash.update(`blob ${actualSize}\0`);
    for await (const chunk of createReadStream(path)) hash.update(chunk as Buffer);
    actual = hash.digest('hex');
  }
  const sizeWrong = size !== undefined && actualSize !== size;
  if (sizeWrong || (actual !== undefined && actual !== etag)) {
    await rm(path, { force: true });
    throw new HubIntegrityError(
      `${req.repo}/${req.file}: the downloaded bytes do not match the hub's ${sizeWrong ? `size (${actualSize} bytes, expected ${size})` : `${algorithm} (${actual}, expected ${etag})`}; the file was discarded`,
      { repo: req.repo },
      {
        hint: 'run the command again to download it afresh; if it recurs, check HF_ENDPOINT or a proxy',
      },
    );
  }
}

/**
 * snapshots/<commit>/<file> → ../../blobs/<etag>, relative as Python makes it; where links fail,
 * a copy, written beside and renamed so that no reader sees half of it.
 */
async function linkBlob(blob: string, target: string): Promise<void> {
  await rm(target, { force: true });
  try {
    await symlink(relative(dirname(target), blob), target);
  } catch {
    await copyFile(blob, `${target}.incomplete`);
    await rename(`${target}.incomplete`, target);
  }
}

/** Records that `revision` points at `commit` (refs/<revision>), as Python's cache does. */
export async function writeRef(repoFolder: string, revision: string, commit: string) {
  if (revision === commit) return;
  const ref = join(repoFolder, 'refs', revision);
  await mkdir(dirname(ref), { recursive: true });
  await writeFile(ref, commit);
}
