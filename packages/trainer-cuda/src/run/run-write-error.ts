import { basename } from 'node:path';
import { FlowGrpoError } from '@flowgrpo/core';
import { listCheckpoints } from './checkpoint.js';

// A run that cannot write its output_dir (a full disk, a quota, a read-only mount, permissions)
// stops with an error that says where, what is safe (the last complete checkpoint) and how to go
// on, instead of Node's bare `ENOSPC: no space left on device, write`.

const REASONS: Record<string, string> = {
  ENOSPC: 'no space left on the device',
  EDQUOT: 'disk quota exceeded',
  EFBIG: 'file too large for the file system',
  EACCES: 'permission denied',
  EPERM: 'operation not permitted',
  EROFS: 'read-only file system',
};

export class RunWriteError extends FlowGrpoError {
  static override readonly code = 'RUN_WRITE_FAILED';
  /** The output_dir. */
  readonly dir: string;
  /** The file or folder being written. */
  readonly path: string;
  /** The OS error code (ENOSPC, EACCES, …). */
  readonly reason: string;
  /** The newest complete checkpoint, if any. */
  readonly lastCheckpoint: string | undefined;
  constructor(
    fields: { dir: string; path: string; reason: string; lastCheckpoint: string | undefined },
    options?: { cause?: unknown },
  ) {
    const last = fields.lastCheckpoint;
    super(
      `cannot write ${fields.path}: ${REASONS[fields.reason] ?? fields.reason} (${fields.reason}); the run stopped — ${last ? `its last complete checkpoint is ${last}` : 'it has no complete checkpoint yet'}`,
      {
        ...options,
        hint: last
          ? `free space or fix permissions in ${fields.dir}, then continue from ${basename(last)}: flowgrpo train --config … --resume (resume_from_checkpoint: true)`
          : `free space or fix permissions in ${fields.dir}, then start the run again`,
      },
    );
    this.dir = fields.dir;
    this.path = fields.path;
    this.reason = fields.reason;
    this.lastCheckpoint = last;
  }
}

/** The RunWriteError for `error` when it is a file system's refusal, else `error` as it is. */
export function asRunWriteError(error: unknown, dir: string, path: string): unknown {
  if (RunWriteError.isInstance(error)) return error;
  // The OS error may sit under a library's own error (a writer that wraps what it caught).
  let reason: string | undefined;
  for (let e = error; e && typeof e === 'object' && !reason; e = (e as Error).cause) {
    const code = (e as { code?: unknown }).code;
    if (typeof code === 'string' && code in REASONS) reason = code;
  }
  if (!reason) return error;
  return new RunWriteError(
    { dir, path, reason, lastCheckpoint: listCheckpoints(dir).at(-1)?.dir },
    { cause: error },
  );
}
