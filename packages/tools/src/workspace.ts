import { mkdtemp, readdir, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { isAbsolute, join, relative, resolve, sep } from 'node:path';
import { ToolError } from './errors.js';

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

  /** Absolute path of `path` inside the workspace; throws if it would leave it. */
  resolve(path: string): string {
    const full = resolve(this.dir, path);
    const rel = relative(this.dir, full);
    if (rel === '' || (!rel.startsWith(`..${sep}`) && rel !== '..' && !isAbsolute(rel))) {
      return full;
    }
    throw new ToolError(`Path '${path}' is outside the workspace ${this.dir}`);
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
