import { existsSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it, vi } from 'vitest';
import { makeTempDirectory } from '../helpers/temp.js';

// A disk that fails to unlink (EIO): node:fs as the lock sees it, with unlinkSync failing while
// `failing` is set.
const state = vi.hoisted(() => ({ failing: false }));
vi.mock('node:fs', async (original) => {
  const fs = await original<typeof import('node:fs')>();
  return {
    ...fs,
    unlinkSync: (path: Parameters<typeof fs.unlinkSync>[0]) => {
      if (state.failing) {
        throw Object.assign(new Error(`EIO: i/o error, unlink '${String(path)}'`), {
          code: 'EIO',
        });
      }
      fs.unlinkSync(path);
    },
  };
});

const { acquireLock, withLock } = await import('../../src/lib/index.js');

describe('a lock on a disk that fails to remove files', () => {
  it("never replaces the work's error or result, and this process takes its own leftover lock back", async () => {
    const directory = await makeTempDirectory();
    for (const [name, work] of [
      ['failed.lock', async () => Promise.reject(new Error('the work failed'))],
      ['done.lock', async () => 'done'],
    ] as const) {
      const path = join(directory, name);
      state.failing = true;
      const outcome = withLock(path, work);
      if (name === 'failed.lock') await expect(outcome).rejects.toThrow('the work failed');
      else expect(await outcome).toBe('done');
      state.failing = false;
      expect(existsSync(path)).toBe(true);
      // The leftover names this live process, yet it is taken over at once, not waited on.
      const lock = await acquireLock(path, { timeoutMs: 200 });
      await lock.release();
      expect(existsSync(path)).toBe(false);
    }
  });
});
