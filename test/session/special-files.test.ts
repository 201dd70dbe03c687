// Sockets, FIFOs and devices are left out of snapshots (SPEC §8): a restore leaves them alone.
import { execFileSync } from 'node:child_process';
import { lstat, readFile, rm, symlink } from 'node:fs/promises';
import { createServer } from 'node:net';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { sessionOn } from '../helpers/session.js';

describe('special files', () => {
  it('a rollback leaves a live FIFO or socket where the checkpoint had a file, a link or a folder', async () => {
    const { workspace, session } = await sessionOn({
      'fifo.txt': 'was a file\n',
      'sock/inner.txt': 'was a folder\n',
      'notes.txt': 'a\n',
    });
    await symlink('notes.txt', join(workspace, 'link'));
    await session.checkpoint('start');
    await rm(join(workspace, 'fifo.txt'));
    execFileSync('mkfifo', [join(workspace, 'fifo.txt')]);
    execFileSync('mkfifo', [join(workspace, 'link2')]);
    await rm(join(workspace, 'link'));
    execFileSync('mkfifo', [join(workspace, 'link')]);
    await rm(join(workspace, 'sock'), { recursive: true });
    const server = createServer();
    await new Promise<void>((resolve) => server.listen(join(workspace, 'sock'), resolve));
    try {
      await session.exec('echo b > notes.txt');
      const rollback = await session.rollback('start');
      expect(rollback.applied?.skipped.sort()).toEqual([
        'fifo.txt',
        'link',
        'sock',
        'sock/inner.txt',
      ]);
      expect((await lstat(join(workspace, 'fifo.txt'))).isFIFO()).toBe(true);
      expect((await lstat(join(workspace, 'link'))).isFIFO()).toBe(true);
      expect((await lstat(join(workspace, 'link2'))).isFIFO()).toBe(true);
      expect((await lstat(join(workspace, 'sock'))).isSocket()).toBe(true);
      expect(await readFile(join(workspace, 'notes.txt'), 'utf8')).toBe('a\n');
      // Undone, what it left alone is left alone again.
      expect(await session.undo(rollback.id as number)).toMatchObject({ status: 'undone' });
      expect(await readFile(join(workspace, 'notes.txt'), 'utf8')).toBe('b\n');
      expect((await lstat(join(workspace, 'sock'))).isSocket()).toBe(true);
    } finally {
      server.close();
    }
  }, 30_000);
});
