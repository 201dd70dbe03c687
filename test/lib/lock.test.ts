import { spawn } from 'node:child_process';
import { readdir, readFile, writeFile } from 'node:fs/promises';
import { hostname } from 'node:os';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import {
  acquireLock,
  isHolderAlive,
  isHolderStopped,
  type LockHolder,
  type LockWait,
  withLock,
} from '../../src/lib/index.js';
import { holdLockInChild, ROOT, runNode } from '../helpers/processes.js';
import { makeTempDirectory } from '../helpers/temp.js';

const CHILD = join(ROOT, 'test/helpers/lock-child.mjs');

async function deadPid(): Promise<number> {
  const child = await new Promise<number>((resolve) => {
    const process = spawn('true');
    process.on('exit', () => resolve(process.pid ?? 0));
  });
  return child;
}

async function writeStaleLock(path: string): Promise<LockHolder> {
  const holder: LockHolder = {
    pid: await deadPid(),
    host: hostname(),
    acquiredAt: new Date().toISOString(),
    token: `dead${Math.random().toString(16).slice(2)}`,
  };
  await writeFile(path, JSON.stringify(holder));
  return holder;
}

describe('acquireLock', () => {
  it('writes the holder record, and removes the lock file on release', async () => {
    const directory = await makeTempDirectory();
    const path = join(directory, 'x.lock');
    const lock = await acquireLock(path, { purpose: 'testing' });
    const record = JSON.parse(await readFile(path, 'utf8')) as LockHolder;
    expect(record).toMatchObject({
      pid: process.pid,
      host: hostname(),
      purpose: 'testing',
      token: lock.holder.token,
    });
    await lock.release();
    expect(await readdir(directory)).toEqual([]);
  });

  it('makes a second taker in the same process wait until the first releases', async () => {
    const directory = await makeTempDirectory();
    const path = join(directory, 'x.lock');
    const order: string[] = [];
    const first = await acquireLock(path);
    const second = withLock(path, async () => {
      order.push('second');
    });
    await new Promise((resolve) => setTimeout(resolve, 50));
    order.push('first releases');
    await first.release();
    await second;
    expect(order).toEqual(['first releases', 'second']);
  });

  it('fails with LOCK_HELD, naming the holder, while a live process holds it, and changes nothing', async () => {
    const directory = await makeTempDirectory();
    const path = join(directory, 'x.lock');
    const child = await holdLockInChild(path);
    try {
      const before = await readFile(path, 'utf8');
      const error = await acquireLock(path, { timeoutMs: 200 }).catch((caught: unknown) => caught);
      expect(error).toMatchObject({ code: 'LOCK_HELD', data: { holder: { pid: child.pid } } });
      expect(String(error)).toContain(`process ${child.pid}`);
      expect(String(error)).toContain('holding for a test');
      expect(await readFile(path, 'utf8')).toBe(before);
    } finally {
      child.kill('SIGKILL');
    }
  });

  it.runIf(process.platform === 'linux')(
    'tells a waiter who holds the lock after a second, and again when the holder stops: resuming it is what helps',
    async () => {
      const directory = await makeTempDirectory();
      const path = join(directory, 'x.lock');
      const child = await holdLockInChild(path);
      try {
        const waits: LockWait[] = [];
        const started = Date.now();
        const waiting = acquireLock(path, {
          timeoutMs: 4000,
          onWait: (wait) => waits.push(wait),
        }).catch((caught: unknown) => caught);
        await expect.poll(() => waits.length, { timeout: 3000 }).toBe(1);
        expect(Date.now() - started).toBeGreaterThanOrEqual(1000);
        expect(waits[0]).toMatchObject({ path, isStopped: false, holder: { pid: child.pid } });
        expect(waits[0]?.message).toContain(`held by process ${child.pid}`);
        expect(waits[0]?.message).toContain('holding for a test');
        expect(waits[0]?.message).not.toContain('kill -CONT');

        child.kill('SIGSTOP');
        await expect.poll(() => waits.length, { timeout: 2000 }).toBe(2);
        expect(waits[1]).toMatchObject({ isStopped: true });
        expect(waits[1]?.message).toContain(`kill -CONT ${child.pid}`);
        expect(isHolderStopped(waits[1]?.holder as LockHolder)).toBe(true);

        // Still stopped when the wait ends: the error says what to do about it.
        const error = await waiting;
        expect(error).toMatchObject({ code: 'LOCK_HELD', data: { isStopped: true } });
        expect(String(error)).toContain(`kill -CONT ${child.pid}`);
        child.kill('SIGCONT');
        await expect
          .poll(() => isHolderStopped(waits[1]?.holder as LockHolder), { timeout: 2000 })
          .toBe(false);
      } finally {
        child.kill('SIGKILL');
      }
    },
  );

  it('takes over the lock of a holder that was killed', async () => {
    const directory = await makeTempDirectory();
    const path = join(directory, 'x.lock');
    const child = await holdLockInChild(path);
    child.kill('SIGKILL');
    await new Promise((resolve) => child.once('exit', resolve));
    const lock = await acquireLock(path, { timeoutMs: 2000 });
    expect(JSON.parse(await readFile(path, 'utf8'))).toMatchObject({ pid: process.pid });
    await lock.release();
  });

  it('sees through pid reuse: a live pid with another start time is a dead holder', () => {
    const holder: LockHolder = {
      pid: process.pid,
      host: hostname(),
      acquiredAt: '',
      token: 't',
      processStart: '1',
    };
    expect(isHolderAlive(holder)).toBe(false);
    expect(isHolderAlive({ ...holder, processStart: undefined } as unknown as LockHolder)).toBe(
      true,
    );
    expect(isHolderAlive({ ...holder, host: 'another-host' })).toBe(true);
  });

  it("keeps mutual exclusion when 4 processes race to take over a dead holder's lock", async () => {
    const directory = await makeTempDirectory();
    const path = join(directory, 'x.lock');
    const counter = join(directory, 'counter');
    await writeFile(counter, '0');
    await writeStaleLock(path);
    const runs = await Promise.all(
      Array.from({ length: 4 }, () => runNode([CHILD, 'count', path, counter, '40'])),
    );
    for (const run of runs) expect(run).toMatchObject({ code: 0, stderr: '' });
    expect(await readFile(counter, 'utf8')).toBe('160');
  });

  it('never lets two racing takers hold the lock at once, over many stale-lock rounds', async () => {
    const directory = await makeTempDirectory();
    const path = join(directory, 'x.lock');
    const log = join(directory, 'log');
    for (let round = 0; round < 8; round++) {
      await writeStaleLock(path);
      // Every process starts its attempt at the same instant, so all of them see the dead holder.
      const startAt = String(Date.now() + 400);
      await Promise.all(
        Array.from({ length: 4 }, () => runNode([CHILD, 'once', path, log, '15', startAt])),
      );
    }
    const intervals = (await readFile(log, 'utf8'))
      .trim()
      .split('\n')
      .map((line) => line.split(' ').map(Number) as [number, number])
      .sort((a, b) => a[0] - b[0]);
    expect(intervals).toHaveLength(32);
    for (let index = 1; index < intervals.length; index++) {
      expect(intervals[index]?.[0]).toBeGreaterThanOrEqual(intervals[index - 1]?.[1] ?? 0);
    }
  }, 60_000);
});
