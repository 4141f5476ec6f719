// The run lifecycle every trainer opens its output_dir with (HF's rules, a lock, overwrite that
// loses nothing, typed write failures), failed rollouts counted and fatal when a run of steps
// fails whole, and reward functions that return what is not a reward — on the tiny GRPO setup.
import { spawn, spawnSync } from 'node:child_process';
import { createHash } from 'node:crypto';
import {
  cpSync,
  existsSync,
  mkdirSync,
  mkdtempSync,
  readdirSync,
  readFileSync,
  rmSync,
  statSync,
  utimesSync,
  writeFileSync,
} from 'node:fs';
import { hostname, tmpdir } from 'node:os';
import { join, relative } from 'node:path';
import type { PolicyEngine } from '@flowgrpo/agent';
import { ConfigError, NotADirectoryError, readTrajectoriesParquet } from '@flowgrpo/core';
import { readArtifactsManifest } from '@flowgrpo/models';
import type { RewardFunction } from '@flowgrpo/reward';
import * as ort from 'onnxruntime-node';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { demoAgent } from '../src/demo/index.js';
import {
  claimOutputDir,
  listCheckpoints,
  type Progress,
  RolloutsFailedError,
  RunLock,
  RunLockedError,
} from '../src/index.js';
import { silentProgress } from '../src/run/progress.js';
import { RunLifecycle } from '../src/run/run-lifecycle.js';
import { LOCK_FILE } from '../src/run/run-lock.js';
import { RunWriteError } from '../src/run/run-write-error.js';
import { tinyConfig, tinySetup, tinyTrainer } from './support/tiny-grpo.js';

const root = mkdtempSync(join(tmpdir(), 'flowgrpo-run-lifecycle-'));
afterAll(() => rmSync(root, { recursive: true, force: true }));

/** Every file under `dir` (but the lock) with a hash of its bytes: what a user would lose. */
function snapshot(dir: string): Record<string, string> {
  const out: Record<string, string> = {};
  const walk = (d: string) => {
    for (const name of readdirSync(d)) {
      const p = join(d, name);
      if (statSync(p).isDirectory()) walk(p);
      else if (name !== LOCK_FILE)
        out[relative(dir, p)] = createHash('sha256').update(readFileSync(p)).digest('hex');
    }
  };
  walk(dir);
  return out;
}

// A finished run (2 steps, a checkpoint each) that every re-run below must leave as it was.
const finished = join(root, 'finished');
let finishedFiles: Record<string, string>;
let almanac: Awaited<ReturnType<typeof tinySetup>>['almanac'];
beforeAll(async () => {
  ({ almanac } = await tinySetup(root));
  await (await tinyTrainer(root, tinyConfig(finished, { max_steps: 2, save_steps: 1 }))).train();
  finishedFiles = snapshot(finished);
}, 180_000);

/**
 * Options under which every rollout fails for real: the agent asks for 600 new tokens, which
 * with the prompt do not fit the graphs' 512 positions (the generator refuses each request).
 */
const tooLong = () => ({
  config: { max_completion_length: 600 },
  agent: (policy: PolicyEngine) => demoAgent(policy, almanac, { maxTokens: 600, maxTurns: 2 }),
});

/** A progress reporter that keeps its lines. */
const logTo = (lines: string[]): Progress => ({ ...silentProgress, log: (l) => lines.push(l) });

/** A copy of the finished run to try a re-run on. */
function copyOfFinished(name: string): string {
  const dir = join(root, name);
  cpSync(finished, dir, { recursive: true });
  return dir;
}

describe('output_dir: HF rules and the run lock', () => {
  it('a fresh run into a finished run refuses, naming resume_from_checkpoint and overwrite_output_dir', async () => {
    expect(listCheckpoints(finished).map((c) => c.step)).toEqual([1, 2]);
    const trainer = await tinyTrainer(root, tinyConfig(finished, { max_steps: 2 }));
    const error = await trainer.train().catch((e: unknown) => e);
    expect(ConfigError.isInstance(error)).toBe(true);
    const e = error as ConfigError;
    expect(e.key).toBe('output_dir');
    expect(e.message).toContain('checkpoint-1, checkpoint-2');
    expect(e.message).toContain('resume_from_checkpoint');
    expect(e.message).toContain('overwrite_output_dir');
    expect(e.hint).toContain('--resume');
    expect(e.hint).toContain('--overwrite');
    expect(snapshot(finished)).toEqual(finishedFiles);
    expect(existsSync(join(finished, LOCK_FILE))).toBe(false);
  });

  it('resume and overwrite together are refused', () => {
    const e = (() => {
      try {
        claimOutputDir({
          output_dir: join(root, 'both'),
          resume_from_checkpoint: true,
          overwrite_output_dir: true,
          trainer: 'grpo',
        });
      } catch (error) {
        return error;
      }
    })();
    expect(ConfigError.isInstance(e)).toBe(true);
    expect((e as ConfigError).key).toBe('overwrite_output_dir');
  });

  it('a resume_from_checkpoint path that is no checkpoint is refused before anything, naming the ones there are', () => {
    const dir = copyOfFinished('resume-typo');
    const before = snapshot(dir);
    const e = (() => {
      try {
        claimOutputDir({
          output_dir: dir,
          resume_from_checkpoint: join(dir, 'checkpoint-99'),
          overwrite_output_dir: false,
          trainer: 'grpo',
        });
      } catch (error) {
        return error;
      }
    })();
    expect(ConfigError.isInstance(e)).toBe(true);
    expect((e as ConfigError).key).toBe('resume_from_checkpoint');
    expect((e as ConfigError).message).toContain('checkpoint-99');
    expect((e as ConfigError).hint).toMatch(/checkpoint-\d/);
    expect(snapshot(dir)).toEqual(before);
    expect(existsSync(join(dir, LOCK_FILE))).toBe(false);
  });

  it('an output_dir that is a file, or under a file, is NotADirectoryError naming it', () => {
    const file = join(root, 'a-file');
    writeFileSync(file, 'x');
    for (const dir of [file, join(file, 'run')]) {
      let error: unknown;
      try {
        claimOutputDir({
          output_dir: dir,
          resume_from_checkpoint: false,
          overwrite_output_dir: false,
          trainer: 'grpo',
        });
      } catch (e) {
        error = e;
      }
      expect(NotADirectoryError.isInstance(error), dir).toBe(true);
      expect((error as NotADirectoryError).message).toContain(dir);
      expect((error as NotADirectoryError).hint).toBeTruthy();
    }
    expect(readFileSync(file, 'utf8')).toBe('x');
  });

  it('a second run into a locked output_dir refuses at once with RUN_LOCKED', async () => {
    const dir = join(root, 'locked');
    mkdirSync(dir);
    const held = RunLock.acquire(dir, { trainer: 'grpo', command: 'flowgrpo train --config a' });
    try {
      const trainer = await tinyTrainer(root, tinyConfig(dir, { max_steps: 1 }));
      const error = await trainer.train().catch((e: unknown) => e);
      expect(RunLockedError.isInstance(error)).toBe(true);
      expect((error as RunLockedError).message).toContain(`pid ${process.pid}`);
      expect((error as RunLockedError).message).toContain('flowgrpo train --config a');
      expect(readdirSync(dir)).toEqual([LOCK_FILE]); // nothing written
    } finally {
      held.release();
    }
    expect(existsSync(join(dir, LOCK_FILE))).toBe(false);
  });

  it('a lock left by a dead process is taken over; one from another host is not judged', () => {
    const dir = join(root, 'stale');
    mkdirSync(dir);
    // A pid that was alive and is no more: a child that has exited.
    const dead = spawnSync(process.execPath, ['-e', '0']).pid!;
    const lock = (pid: number, host: string) =>
      writeFileSync(
        join(dir, LOCK_FILE),
        JSON.stringify({ pid, host, started_at: 'then', trainer: 'grpo', command: 'x' }),
      );
    lock(dead, hostname());
    const logs: string[] = [];
    const taken = RunLock.acquire(dir, { trainer: 'grpo', log: (l) => logs.push(l) });
    expect(logs.join('\n')).toContain(`pid ${dead}`);
    expect(JSON.parse(readFileSync(join(dir, LOCK_FILE), 'utf8')).pid).toBe(process.pid);
    taken.release();

    const refusal = () => {
      try {
        RunLock.acquire(dir, { trainer: 'grpo' }).release();
      } catch (e) {
        return e as RunLockedError;
      }
      throw new Error('the lock was taken');
    };
    lock(dead, 'another-host.example');
    expect(refusal().hint).toContain(join(dir, LOCK_FILE));

    // Empty: a run between creating its lock and writing it — theirs while it is fresh; a kill
    // at that moment leaves it empty for good, and an old empty lock is taken over.
    writeFileSync(join(dir, LOCK_FILE), '');
    expect(refusal().holder).toBeUndefined();
    const old = new Date(Date.now() - 60_000);
    utimesSync(join(dir, LOCK_FILE), old, old);
    RunLock.acquire(dir, { trainer: 'grpo' }).release();
    expect(existsSync(join(dir, LOCK_FILE))).toBe(false);
  });
});

describe('overwrite_output_dir loses nothing', () => {
  it('a re-run that fails before its first checkpoint leaves the earlier run as it was', async () => {
    const dir = copyOfFinished('overwrite-fails');
    const before = snapshot(dir);
    const trainer = await tinyTrainer(
      root,
      tinyConfig(dir, { max_steps: 4, overwrite_output_dir: true, ...tooLong().config }),
      { extra: { agent: tooLong().agent } },
    );
    const error = await trainer.train().catch((e: unknown) => e);
    expect(RolloutsFailedError.isInstance(error)).toBe(true);
    expect(snapshot(dir)).toEqual(before);
    expect(readdirSync(dir).filter((n) => n.startsWith('.flowgrpo'))).toEqual([]);
  }, 120_000);

  it('killed with SIGKILL before its first checkpoint: the next open puts the earlier run back', async () => {
    const dir = copyOfFinished('overwrite-killed');
    const before = snapshot(dir);
    const marker = join(root, 'overwrite-holding');
    const child = spawn(
      process.execPath,
      [
        '--conditions=@flowgrpo/source',
        '--import',
        'tsx',
        join(import.meta.dirname, 'support', 'tiny-grpo.ts'),
        root,
        dir,
        '0',
        marker,
        'overwrite',
      ],
      { stdio: 'ignore' },
    );
    const exited = new Promise<NodeJS.Signals | null>((r) => child.on('exit', (_c, s) => r(s)));
    while (!existsSync(marker)) {
      if (child.exitCode !== null) throw new Error(`the child exited with ${child.exitCode}`);
      await new Promise((r) => setTimeout(r, 50));
    }
    child.kill('SIGKILL');
    expect(await exited).toBe('SIGKILL');
    // Killed mid-run: the earlier run is set aside, nothing of it deleted.
    expect(listCheckpoints(dir)).toEqual([]);
    expect(readdirSync(dir)).toContain('.flowgrpo-previous-run');

    const logs: string[] = [];
    claimOutputDir({
      output_dir: dir,
      resume_from_checkpoint: true,
      overwrite_output_dir: false,
      trainer: 'grpo',
      log: (l) => logs.push(l),
    }).release();
    expect(logs.join('\n')).toContain('putting the earlier run back');
    expect(snapshot(dir)).toEqual(before);
  }, 120_000);

  it('a re-run that writes its first checkpoint replaces the earlier run', async () => {
    const dir = copyOfFinished('overwrite-ok');
    const logs: string[] = [];
    const r = await (
      await tinyTrainer(root, tinyConfig(dir, { max_steps: 1, overwrite_output_dir: true }), {
        extra: {
          progress: logTo(logs),
        },
      })
    ).train();
    expect(r.globalStep).toBe(1);
    expect(listCheckpoints(dir).map((c) => c.step)).toEqual([1]);
    expect(readdirSync(dir).filter((n) => n.startsWith('.flowgrpo'))).toEqual([]);
    expect(readdirSync(join(dir, 'rollouts'))).toEqual(['step-000001.parquet']);
    expect(r.metrics.map((m) => m.step)).toEqual([1]);
    expect(logs.join('\n')).toContain('set aside');
  }, 120_000);
});

describe('failed rollouts are never silent', () => {
  it('counts failures by code in metrics and on the step line; stops after max_failed_rollout_steps', async () => {
    const dir = join(root, 'all-failing');
    const logs: string[] = [];
    const trainer = await tinyTrainer(
      root,
      tinyConfig(dir, { max_steps: 5, max_failed_rollout_steps: 2, ...tooLong().config }),
      {
        extra: {
          agent: tooLong().agent,
          progress: logTo(logs),
        },
      },
    );
    const error = await trainer.train().catch((e: unknown) => e);
    expect(RolloutsFailedError.isInstance(error)).toBe(true);
    expect((error as Error).message).toContain('8/8 rollouts failed');
    expect((error as Error).message).toContain('exceeds the 512 positions');
    const metrics = readFileSync(join(dir, 'metrics.jsonl'), 'utf8')
      .trim()
      .split('\n')
      .map((l) => JSON.parse(l) as Record<string, number>);
    expect(metrics.map((m) => m.step)).toEqual([1, 2]); // stopped after 2 steps, not 5
    for (const m of metrics) {
      expect(m['rollouts/failed']).toBe(8);
      const byCode = Object.entries(m).filter(([k]) => k.startsWith('rollouts/failed/'));
      expect(byCode).toHaveLength(1);
      expect(byCode[0]![1]).toBe(8);
    }
    const stepLines = logs.filter((l) => l.startsWith('step '));
    expect(stepLines).toHaveLength(2);
    for (const l of stepLines) {
      expect(l).toContain('8/8 rollouts failed');
      expect(l).toContain('exceeds the 512 positions');
    }
    // The failed rollouts are kept for inspection, and the stopped run has its report.
    expect(readdirSync(join(dir, 'rollouts'))).toHaveLength(2);
    const report = readFileSync(join(dir, 'report.html'), 'utf8');
    expect(report).toContain('class="failures"');
    expect(report).toContain('CONTEXT_LENGTH_EXCEEDED');
  }, 120_000);

  it('some failing rollouts are counted and the run goes on', async () => {
    const dir = join(root, 'some-failing');
    let calls = 0;
    const r = await (
      await tinyTrainer(root, tinyConfig(dir, { max_steps: 2 }), {
        wrapAgent: (a) => ({
          run(question, context) {
            if (calls++ % 4 === 0) throw new RangeError('the tool server is down');
            return a.run(question, context);
          },
        }),
      })
    ).train();
    expect(r.globalStep).toBe(2);
    for (const m of r.metrics.filter((x) => x.reward !== undefined)) {
      expect(m['rollouts/failed']).toBe(2);
      expect(m['rollouts/failed/RangeError']).toBe(2);
    }
  }, 120_000);
});

describe('reward results are checked', () => {
  const invalid: [string, unknown][] = [
    ['undefined', undefined],
    ['a number', 1],
    ['a string', 'good'],
    ['a string score', { score: '1' }],
    ['a NaN score', { score: Number.NaN }],
    ['non-object details', { score: 1, details: 'x' }],
  ];
  it.each(invalid)(
    'a reward returning %s scores 0 with a typed error on the rollout',
    async (_name, value) => {
      const dir = join(root, `reward-${_name.replace(/\W+/g, '-')}`);
      const reward: RewardFunction<object> = {
        name: 'faulty',
        score: () => value as { score: number; details: object },
      };
      const r = await (
        await tinyTrainer(root, tinyConfig(dir, { max_steps: 1 }), { extra: { reward } })
      ).train();
      expect(r.globalStep).toBe(1);
      const rows = await readTrajectoriesParquet(
        join(dir, 'rollouts', readdirSync(join(dir, 'rollouts'))[0]!),
      );
      expect(rows.length).toBeGreaterThan(0);
      for (const t of rows) {
        expect(t.reward).toBe(0);
        const e = (t.metadata as { rewardError?: { code: string; message: string } }).rewardError;
        expect(e?.code).toBe('INVALID_REWARD');
        expect(e?.message).toContain("reward 'faulty' returned");
      }
    },
    60_000,
  );

  it('{score} without details is a valid reward', async () => {
    const dir = join(root, 'reward-no-details');
    const reward: RewardFunction<object> = {
      name: 'bare',
      score: (input) => ({ score: input.finalAnswer.length > 0 ? 1 : 0 }) as never,
    };
    const r = await (
      await tinyTrainer(root, tinyConfig(dir, { max_steps: 1 }), { extra: { reward } })
    ).train();
    expect(r.globalStep).toBe(1);
    expect(Number.isFinite(r.metrics[0]!['rewards/bare/mean'])).toBe(true);
  }, 60_000);
});

describe('a full disk while saving', () => {
  /** A 4 MiB tmpfs for `name`, or the test skipped (with the reason) where mounting is refused. */
  function smallDisk(name: string, ctx: { skip: () => void }): string {
    const mnt = join(root, name);
    mkdirSync(mnt);
    const mount = spawnSync('mount', ['-t', 'tmpfs', '-o', 'size=4m', 'tmpfs', mnt]);
    if (mount.status !== 0) {
      console.log(`skipped: cannot mount a tmpfs here (${String(mount.stderr).trim()})`);
      ctx.skip();
    }
    return mnt;
  }
  /** Fills the disk of `mnt` to the last byte. */
  function fill(mnt: string): void {
    const chunk = Buffer.alloc(64 * 1024, 1);
    const small = Buffer.alloc(512, 1);
    const f = join(mnt, 'filler');
    for (const c of [chunk, small])
      try {
        for (;;) writeFileSync(f, c, { flag: 'a' });
      } catch {
        // full (at this granularity)
      }
  }

  it('writing the rollouts: a RunWriteError naming the folder and the last complete checkpoint', async (ctx) => {
    const mnt = smallDisk('tmpfs-rollouts', ctx);
    try {
      const dir = join(mnt, 'run');
      // After step 1's checkpoint, a file fills the disk: step 2's writes find no space.
      const trainer = await tinyTrainer(root, tinyConfig(dir, { max_steps: 3, save_steps: 1 }), {
        extra: { onLog: (m) => m.step === 2 && fill(mnt) },
      });
      const error = await trainer.train().catch((e: unknown) => e);
      expect(RunWriteError.isInstance(error)).toBe(true);
      const e = error as RunWriteError;
      expect(e.reason).toBe('ENOSPC');
      expect(e.dir).toBe(dir);
      expect(e.lastCheckpoint).toBe(join(dir, 'checkpoint-1'));
      expect(e.message).toContain('checkpoint-1');
      expect(e.hint).toContain('--resume');
      expect(listCheckpoints(dir).map((c) => c.step)).toEqual([1]);
      expect(readdirSync(dir).filter((n) => n.includes('.tmp'))).toEqual([]);
      expect(readdirSync(join(dir, 'rollouts'))).toEqual(['step-000001.parquet']);
      expect(existsSync(join(dir, LOCK_FILE))).toBe(false);
    } finally {
      spawnSync('umount', [mnt]);
    }
  }, 120_000);

  it('saving a checkpoint: no half-written checkpoint, the earlier ones as they were', async (ctx) => {
    const mnt = smallDisk('tmpfs-checkpoint', ctx);
    try {
      const dir = join(mnt, 'run');
      cpSync(finished, dir, { recursive: true });
      const life = await RunLifecycle.open({
        output_dir: dir,
        resume_from_checkpoint: true,
        overwrite_output_dir: false,
        trainer: 'grpo',
        modelConfig: readArtifactsManifest(join(root, 'artifacts')).config,
      });
      const before = snapshot(dir);
      const ck = life.resumed!;
      // The next checkpoint of the resumed run, from what was loaded (real tensors, real sizes).
      const params = Object.fromEntries(
        [...ck.params].map(([k, p]) => [k, new ort.Tensor('float32', p, ck.optimizer.m[k]!.dims)]),
      );
      fill(mnt);
      const error = await life
        .saveCheckpoint(
          {
            config: readArtifactsManifest(join(root, 'artifacts')).config,
            lora: ck.lora,
            state: { step: 3, params, m: ck.optimizer.m, v: ck.optimizer.v },
            trainer: { ...ck.trainer, global_step: 3 },
          },
          { limit: 0 },
        )
        .catch((e: unknown) => e);
      life.close();
      expect(RunWriteError.isInstance(error)).toBe(true);
      const e = error as RunWriteError;
      expect(e.reason).toBe('ENOSPC');
      expect(e.path).toBe(join(dir, 'checkpoint-3'));
      expect(e.lastCheckpoint).toBe(join(dir, 'checkpoint-2'));
      expect(readdirSync(dir).filter((n) => n.includes('checkpoint-3'))).toEqual([]);
      expect(snapshot(dir)).toEqual(before);
    } finally {
      spawnSync('umount', [mnt]);
    }
  }, 120_000);
});
