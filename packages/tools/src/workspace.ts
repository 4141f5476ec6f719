import { lstatSync, realpathSync } from 'node:fs';
import { mkdtemp, readdir, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { isAbsolute, join, relative, resolve, sep } from 'node:path';
import { WorkspacePathError } from './errors.js';

export interface WorkspaceOptions {
  /** Directory the workspace is made in; default the OS temp dir. */
  parentDir?: string;
  /** Name prefix of the directory; default `flowgrpo-ws-`. */
  prefix?: string;
}

/**
 * A per-trajectory scratch directory. The python tool copies its files into the sandbox's tmpfs
 * workspace before each run and copies the workspace back after a run that ended on its own, so
 * files written in one call are there in the next (without isolation it is the working directory
 * and HOME). `cleanup()` removes it all.
 */
export class Workspace {
  readonly dir: string;
  #removed = false;

  private constructor(dir: string) {
    this.dir = dir;
  }

  static async create(options: WorkspaceOptions = {}): Promise<Workspace> {
    const parent = resolve(options.parentDir ?? tmpdir());
    const dir = await mkdtemp(join(parent, options.prefix ?? 'flowgrpo-ws-'));
    return new Workspace(dir);
  }

  get removed(): boolean {
    return this.#removed;
  }

  /**
   * Absolute path of `path` (a name a tool call gave, say) inside the workspace. Throws
   * WorkspacePathError when it would leave it: by its words (`..`, an absolute path), or through
   * a link already in the workspace that leads out of it or nowhere (a write through a dangling
   * link would create its target, wherever that is).
   */
  resolve(path: string): string {
    const full = resolve(this.dir, path);
    const outside = (p: string, root: string) => {
      const rel = relative(root, p);
      return rel === '..' || rel.startsWith(`..${sep}`) || isAbsolute(rel);
    };
    if (outside(full, this.dir))
      throw new WorkspacePathError(path, this.dir, 'is outside the workspace');
    const root = realpathSync(this.dir);
    let at = this.dir;
    for (const part of relative(this.dir, full).split(sep).filter(Boolean)) {
      at = join(at, part);
      let isLink: boolean;
      try {
        isLink = lstatSync(at).isSymbolicLink();
      } catch {
        break; // the rest does not exist yet: nothing there to lead anywhere
      }
      if (!isLink) continue;
      let target: string;
      try {
        target = realpathSync(at);
      } catch {
        throw new WorkspacePathError(
          path,
          this.dir,
          `goes through the link ${at}, which leads nowhere`,
        );
      }
      if (outside(target, root))
        throw new WorkspacePathError(
          path,
          this.dir,
          `goes through the link ${at} to ${target}, outside the workspace`,
        );
    }
    return full;
  }

  /** Relative paths of every file under the workspace, sorted. */
  async listFiles(): Promise<string[]> {
    const entries = await readdir(this.dir, { recursive: true, withFileTypes: true });
    return entries
      .filter((e) => e.isFile())
      .map((e) => relative(this.dir, join(e.parentPath, e.name)))
      .sort();
  }

  async cleanup(): Promise<void> {
    if (this.#removed) return;
    this.#removed = true;
    await rm(this.dir, { recursive: true, force: true, maxRetries: 3 });
  }

  async [Symbol.asyncDispose](): Promise<void> {
    await this.cleanup();
  }
}

/** Runs `fn` in a fresh workspace and removes it afterwards, whatever happens. */
export async function withWorkspace<T>(
  fn: (workspace: Workspace) => Promise<T>,
  options?: WorkspaceOptions,
): Promise<T> {
  const workspace = await Workspace.create(options);
  try {
    return await fn(workspace);
  } finally {
    await workspace.cleanup();
  }
}
