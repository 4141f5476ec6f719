import { createHash, randomUUID } from 'node:crypto';
import { constants, createReadStream, existsSync, statSync } from 'node:fs';
import {
  copyFile,
  type FileHandle,
  open,
  readlink,
  rename,
  rm,
  symlink,
  writeFile,
} from 'node:fs/promises';
import { basename, dirname, join, relative } from 'node:path';
import { checkFolderInside, makeFolderInside, SymlinkRefusedError } from '../inside-folder.js';
import { snapshotFolder } from './cache.js';
import { withDownloadLock } from './download-lock.js';
import { HubError, HubIntegrityError, HubNetworkError } from './errors.js';
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

const { COPYFILE_EXCL, O_CREAT, O_NOFOLLOW, O_WRONLY } = constants;

const unquote = (etag: string) => etag.replace(/^W\//, '').replace(/^"|"$/g, '');

/**
 * The file's path in the snapshot, downloading it when the snapshot lacks it. Returns whether
 * bytes were downloaded (false: served from the cache). `file` comes from the revision's
 * listing, checked there (snapshot.ts); the folders written into are checked here on their real
 * paths, so that no link inside the cache carries a write out of it.
 */
export async function downloadHubFile(
  req: HubFileRequest,
): Promise<{ path: string; downloaded: boolean }> {
  const { settings, repo, file } = req;
  const target = join(snapshotFolder(req.repoFolder, req.commit), file);
  if (existsSync(target)) return { path: target, downloaded: false };
  const snapshotWhat = `the download of ${repo}@${req.commit}`;
  // Before any request: a folder that leads out of the cache is refused, not downloaded into.
  // Nothing is created yet: an empty snapshot folder would read as cached to Python's offline mode.
  await checkFolderInside(req.repoFolder, dirname(target), snapshotWhat);

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
  // The ETag names the blob file and is what the bytes are checked against: it must be the hash
  // the Hub sends (a git blob sha1, or an LFS file's sha256), never a path or an opaque tag
  // that would let any bytes in unchecked.
  if (!/^(?:[0-9a-f]{40}|[0-9a-f]{64})$/.test(etag))
    throw new HubIntegrityError(
      `the hub sent the ETag ${JSON.stringify(etag)} for ${repo}/${file}, which is no sha1 or sha256`,
      { repo },
      { hint: 'check HF_ENDPOINT: it must serve the Hugging Face Hub API' },
    );
  const sizeHeader = head.headers.get('x-linked-size') ?? head.headers.get('content-length');
  const size = sizeHeader === null ? undefined : Number(sizeHeader);
  const location = head.headers.get('location');
  const source = location ? new URL(location, url).href : url;

  const blobs = join(req.repoFolder, 'blobs');
  const blob = join(blobs, etag);
  // Where huggingface_hub keeps its <etag>.lock for this blob; ours is a file of its own beside it.
  const locksRoot = join(settings.cacheDir, '.locks');
  const locks = join(locksRoot, basename(req.repoFolder));
  await makeFolderInside(locksRoot, locks, 'the hub download');
  await makeFolderInside(req.repoFolder, blobs, 'the hub download');
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
      // Checked again right before the link is made: the download may have taken hours.
      await makeFolderInside(req.repoFolder, dirname(target), snapshotWhat);
      await linkBlob(blob, target);
      return fetched;
    },
    { log: req.log },
  );
  return { path: target, downloaded };
}

/** The first byte a 206 answer holds (`Content-Range: bytes <first>-<last>/<size>`). */
function rangeStart(res: Response): number | undefined {
  const m = /^bytes (\d+)-\d+\/(?:\d+|\*)$/.exec(res.headers.get('content-range') ?? '');
  return m ? Number(m[1]) : undefined;
}

/**
 * Downloads `source` into `partial`, continuing the bytes already there with a Range request,
 * as huggingface_hub's http_get does; a connection that breaks off is resumed from what reached
 * the file, up to ATTEMPTS requests. A server that ignores the Range (200) sends the whole file:
 * the part is dropped and the file written from its start; one that cannot serve it (416: the
 * part is as long as the file or longer, so not a prefix of it) is answered by starting over.
 */
async function fetchBlob(
  req: HubFileRequest,
  source: string,
  partial: string,
  size: number | undefined,
): Promise<void> {
  const { settings, repo, file } = req;
  // O_NOFOLLOW: a link placed at <hash>.incomplete is refused (ELOOP), never written through.
  let handle: FileHandle;
  try {
    handle = await open(partial, O_WRONLY | O_CREAT | O_NOFOLLOW, 0o644);
  } catch (e) {
    if ((e as NodeJS.ErrnoException).code !== 'ELOOP') throw e;
    throw new SymlinkRefusedError(
      {
        path: partial,
        target: await readlink(partial).catch(() => '?'),
        folder: dirname(partial),
        writer: `the download of ${repo}/${file}`,
      },
      { hint: 'remove the link; the next run downloads the file into the cache itself' },
    );
  }
  const bar = req.progress?.start(file, size ?? 0);
  try {
    for (let attempt = 1; ; attempt++) {
      const have = (await handle.stat()).size;
      if (size !== undefined && have === size) return;
      // The token goes to the hub only: a redirect to a CDN is signed already.
      const sameHost = new URL(source).host === new URL(settings.endpoint).host;
      const headers: Record<string, string> = sameHost ? authHeaders(settings) : {};
      if (have > 0) headers.range = `bytes=${have}-`;
      const res = await hubFetch(source, { headers }, repo, settings);
      const resumed = res.status === 206 && rangeStart(res) === have;
      if (res.status === 416 || (res.status === 206 && !resumed)) {
        // No bytes that continue the part: it is dropped, and the next request asks for all.
        await res.body?.cancel();
        await handle.truncate(0);
        if (attempt < ATTEMPTS) continue;
        throw new HubError(
          `the hub could not continue the download of ${repo}/${file} (HTTP ${res.status} to Range: bytes=${have}-)`,
          { repo },
          { hint: 'run the command again: the part was dropped, so the download starts over' },
        );
      }
      checkStatus(res, repo, `${repo}/${file}`, settings);
      // 206 from where the part ends: append; 200 (the whole file) starts over.
      let written = resumed ? have : 0;
      if (!resumed) await handle.truncate(0);
      bar?.update(written);
      try {
        if (!res.body) throw new Error('empty response body');
        // Each chunk is on disk before the next is read, so a cut loses nothing received.
        const reader = res.body.getReader();
        for (let chunk = await reader.read(); !chunk.done; chunk = await reader.read()) {
          await handle.write(chunk.value, 0, chunk.value.byteLength, written);
          written += chunk.value.byteLength;
          bar?.update(written);
        }
        if (size !== undefined && written < size)
          throw new Error(`the response ended after ${written} of ${size} bytes`);
        return;
      } catch (cause) {
        if (attempt < ATTEMPTS) continue;
        throw new HubNetworkError(
          `the download of ${repo}/${file} broke off after ${written}${size === undefined ? '' : ` of ${size}`} bytes (${(cause as Error).message}); the part is kept in ${partial}`,
          { repo },
          { cause, hint: 'run the command again: the download resumes where it stopped' },
        );
      }
    }
  } finally {
    bar?.stop();
    await handle.close();
  }
}

/** The file's size and hash must be the ones the hub announced; a wrong file is removed. */
async function verify(path: string, etag: string, size: number | undefined, req: HubFileRequest) {
  const actualSize = statSync(path).size;
  const algorithm = etag.length === 64 ? 'sha256' : 'sha1';
  const hash = createHash(algorithm);
  // A non-LFS file's ETag is its git blob id: sha1 of "blob <size>\0" and the bytes.
  if (algorithm === 'sha1') hash.update(`blob ${actualSize}\0`);
  for await (const chunk of createReadStream(path)) hash.update(chunk as Buffer);
  const actual = hash.digest('hex');
  const sizeWrong = size !== undefined && actualSize !== size;
  if (sizeWrong || actual !== etag) {
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
 * a copy, written beside under a name of its own (never through a link someone put there) and
 * renamed so that no reader sees half of it.
 */
async function linkBlob(blob: string, target: string): Promise<void> {
  await rm(target, { force: true });
  try {
    await symlink(relative(dirname(target), blob), target);
  } catch {
    const tmp = `${target}.${randomUUID()}.incomplete`;
    try {
      await copyFile(blob, tmp, COPYFILE_EXCL);
      await rename(tmp, target);
    } finally {
      await rm(tmp, { force: true });
    }
  }
}

/**
 * Records that `revision` points at `commit` (refs/<revision>; a revision with '/' is a nested
 * file, refs/pr/1), as Python's cache does: written beside and renamed, so that a reader never
 * sees half of it and a link placed at refs/<revision> is replaced, not written through. Both
 * names are checked already (repo-id.ts); the folders are checked here on their real paths.
 */
export async function writeRef(repoFolder: string, revision: string, commit: string) {
  if (revision === commit) return;
  const ref = join(repoFolder, 'refs', revision);
  await makeFolderInside(repoFolder, dirname(ref), 'the hub download');
  const tmp = `${ref}.${randomUUID()}.tmp`;
  try {
    await writeFile(tmp, commit, { flag: 'wx' });
    await rename(tmp, ref);
  } finally {
    await rm(tmp, { force: true });
  }
}
