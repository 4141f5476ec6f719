import { readdirSync, readlinkSync } from 'node:fs';

// Leftover-process checks for the sandbox tests. The code under test prints the link of its own
// PID namespace (`os.readlink('/proc/self/ns/pid')`, e.g. "pid:[4026532871]"); namespace ids are
// the same seen from the host, so a host-side scan of /proc finds every process still in it.

/** Pids of the host processes whose PID namespace is `nsLink`. */
export function processesInNamespace(nsLink: string): number[] {
  const pids: number[] = [];
  for (const name of readdirSync('/proc')) {
    if (!/^\d+$/.test(name)) continue;
    try {
      if (readlinkSync(`/proc/${name}/ns/pid`) === nsLink) pids.push(Number(name));
    } catch {
      // exited meanwhile, or not ours to read
    }
  }
  return pids;
}

/** The first "pid:[N]" link printed by the code. */
export function namespaceOf(stdout: string): string {
  const m = /pid:\[\d+\]/.exec(stdout);
  if (!m) throw new Error(`no pid namespace in the output: ${stdout.slice(0, 200)}`);
  return m[0];
}

/** Python that prints its PID namespace first, flushed (see namespaceOf). */
export const PRINT_NS = "import os\nprint(os.readlink('/proc/self/ns/pid'), flush=True)\n";
