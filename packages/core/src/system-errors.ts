import { existsSync, statSync } from 'node:fs';
import { dirname } from 'node:path';
import { FileNotFoundError, FlowGrpoError, type FlowGrpoErrorOptions } from './errors.js';

// Node's system errors (ENOENT, ENOTDIR, EACCES, ENOSPC, EADDRINUSE, …) as typed FlowGrpoErrors.
// A user who gives a file where a folder belongs, or runs out of disk, should read which path and
// what to do, not `Error: ENOTDIR: not a directory, mkdir '…'` and a stack trace. Code that knows
// what the path was for catches these where they happen and says so (`what`); the CLI maps any
// that still reach it with the same function, as a net.

/** A file-system call failed for a reason the user can fix; names the path. */
export class FileSystemError extends FlowGrpoError {
  static override readonly code: string = 'FILESYSTEM_ERROR';
  /** The path the call was about. */
  readonly path: string | undefined;
  /** Node's error code (ENOTDIR, EACCES, …). */
  readonly errno: string | undefined;
  constructor(
    message: string,
    fields: { path?: string | undefined; errno?: string | undefined } = {},
    options?: FlowGrpoErrorOptions,
  ) {
    super(message, options);
    this.path = fields.path;
    this.errno = fields.errno;
  }
}

/** A file sits where a folder belongs (ENOTDIR, or EEXIST from mkdir). */
export class NotADirectoryError extends FileSystemError {
  static override readonly code = 'NOT_A_DIRECTORY';
}

/** A folder sits where a file belongs (EISDIR). */
export class IsADirectoryError extends FileSystemError {
  static override readonly code = 'IS_A_DIRECTORY';
}

/** No permission to read or write the path (EACCES, EPERM). */
export class PermissionDeniedError extends FileSystemError {
  static override readonly code = 'PERMISSION_DENIED';
}

/** The disk (or the user's quota) is full (ENOSPC, EDQUOT). */
export class DiskFullError extends FileSystemError {
  static override readonly code = 'DISK_FULL';
}

/** The path is on a read-only file system (EROFS). */
export class ReadOnlyFileSystemError extends FileSystemError {
  static override readonly code = 'READ_ONLY_FILESYSTEM';
}

/** A server could not listen: the address is taken (EADDRINUSE) or not this machine's. */
export class AddressInUseError extends FlowGrpoError {
  static override readonly code = 'ADDRESS_IN_USE';
}

interface ErrnoLike {
  code?: unknown;
  path?: unknown;
  dest?: unknown;
  syscall?: unknown;
  address?: unknown;
  port?: unknown;
}

/** The first existing ancestor of `path` (itself included) that is not a folder, if any. */
function fileInTheWay(path: string): string | undefined {
  for (let p = path; ; p = dirname(p)) {
    if (existsSync(p)) return statSync(p).isDirectory() ? undefined : p;
    if (dirname(p) === p) return undefined;
  }
}

/**
 * `error` as a typed FlowGrpoError when it is one of Node's system errors a user can fix, else
 * undefined. `what` says what the path was for ("output_dir", "--out"), and `path` where the
 * call was writing when Node's error does not say (a write to an open file names no path).
 */
export function systemError(
  error: unknown,
  context: { what?: string; path?: string } = {},
): FlowGrpoError | undefined {
  if (typeof error !== 'object' || error === null || FlowGrpoError.isInstance(error))
    return undefined;
  const e = error as ErrnoLike;
  if (typeof e.code !== 'string') return undefined;
  const errno = e.code;
  const what = context.what;
  const path = typeof e.path === 'string' ? e.path : context.path;
  const dest = typeof e.dest === 'string' ? e.dest : undefined;
  const syscall = typeof e.syscall === 'string' ? e.syscall : 'access';
  const subject = [what, path].filter(Boolean).join(': ') || `a file (${syscall})`;
  const fields = { path, errno };
  const cause = { cause: error };
  switch (errno) {
    case 'ENOENT':
      if (!path) return undefined;
      return new FileNotFoundError(path, {
        ...cause,
        hint: `check the path${what ? ` of ${what}` : ''} (relative paths resolve against the working directory)`,
      });
    case 'ENOTDIR':
    case 'EEXIST': {
      // EEXIST is "a folder was expected" only for mkdir; for a rename/copy target, it is in use.
      const blocking = path ? fileInTheWay(errno === 'EEXIST' ? path : dirname(path)) : undefined;
      if (errno === 'EEXIST' && syscall !== 'mkdir' && !blocking)
        return new FileSystemError(`${subject} already exists (${syscall})`, fields, {
          ...cause,
          hint: 'remove it or choose another path',
        });
      const file = blocking ?? path;
      return new NotADirectoryError(
        file === path
          ? `${subject} is a file, where a folder belongs`
          : `${subject}: ${file} is a file, where a folder belongs`,
        fields,
        { ...cause, hint: `remove or rename the file ${file}, or choose another folder` },
      );
    }
    case 'EISDIR':
      return new IsADirectoryError(
        path || what
          ? `${subject} is a folder, where a file belongs`
          : `a folder was given where a file belongs (${syscall})`,
        fields,
        { ...cause, hint: 'give the path of a file inside it, or choose another path' },
      );
    case 'EACCES':
    case 'EPERM':
      return new PermissionDeniedError(
        `${subject}: permission denied (${syscall}${dest ? ` → ${dest}` : ''})`,
        fields,
        { ...cause, hint: 'check its permissions (ls -ld), or choose a path you can write to' },
      );
    case 'ENOSPC':
    case 'EDQUOT':
      return new DiskFullError(
        `${subject}: no space left on the device${errno === 'EDQUOT' ? ' (disk quota)' : ''} (${syscall})`,
        fields,
        {
          ...cause,
          hint: 'free some space there (df -h shows how much is left) or write elsewhere',
        },
      );
    case 'EROFS':
      return new ReadOnlyFileSystemError(`${subject} is on a read-only file system`, fields, {
        ...cause,
        hint: 'choose a folder on a writable disk',
      });
    case 'ENAMETOOLONG':
      return new FileSystemError(`${subject}: the name is too long`, fields, {
        ...cause,
        hint: 'choose a shorter path',
      });
    case 'EADDRINUSE':
    case 'EADDRNOTAVAIL': {
      const at = `${typeof e.address === 'string' ? e.address : ''}:${typeof e.port === 'number' ? e.port : ''}`;
      return new AddressInUseError(
        errno === 'EADDRINUSE'
          ? `cannot listen on ${at}: the port is already in use`
          : `cannot listen on ${at}: that address is not one of this machine's`,
        {
          ...cause,
          hint:
            errno === 'EADDRINUSE'
              ? 'stop the process using it, or pick another port (--port 0 picks a free one)'
              : 'use 127.0.0.1, 0.0.0.0, or an address of this machine (ip addr)',
        },
      );
    }
    default:
      return undefined;
  }
}
