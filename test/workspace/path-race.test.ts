import { execFileSync } from 'node:child_process';
import { existsSync, lstatSync, realpathSync, writeFileSync } from 'node:fs';
import { mkdir, readdir, readFile, rename, rm, symlink, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { digestBytes, WorkspaceDirectories } from '../../src/lib/index.js';
import type { ObjectStore } from '../../src/store/index.js';
import { applyChanges } from '../../src/workspace/index.js';
import { fileToRead, storeFile } from '../../src/workspace/walk.js';
import { makeTempDirectory } from '../helpers/temp.js';
import { makeWorkspace } from '../helpers/workspace.js';

describe('paths that another process changes at the same time', () => {
  it('a path named through its opened parent stays in the directory that was checked', async () => {
    const workspace = await makeTempDirectory();
    const outside = await makeTempDirectory();
    await mkdir(join(workspace, 'd'));
    const directories = new WorkspaceDirectories(workspace);
    try {
      const at = directories.locate('d/f');
      // Between the check and the write, d becomes a link to a directory outside.
      await rename(join(workspace, 'd'), join(workspace, 'd.moved'));
      await symlink(outside, join(workspace, 'd'));
      writeFileSync(at, 'x');
      expect(await readdir(outside)).toEqual([]);
      expect(existsSync(join(workspace, 'd.moved', 'f'))).toBe(true);
      // Asked again, the link is refused.
      directories.forget('d');
      expect(() => directories.locate('d/f')).toThrow(/symbolic link "d"/);
    } finally {
      directories.close();
    }
  });

  it('an error names the real path, not the open directory it went through', async () => {
    const workspace = await makeTempDirectory();
    await mkdir(join(workspace, 'd'));
    const directories = new WorkspaceDirectories(workspace);
    try {
      const at = directories.locate('d/missing/f');
      expect(at).toMatch(/^\/proc\/self\/fd\/\d+\/missing\/f$/);
      let caught: unknown;
      try {
        writeFileSync(at, 'x');
      } catch (error) {
        caught = directories.explain(error);
      }
      expect(caught).toMatchObject({
        code: 'ENOENT',
        path: join(workspace, 'd', 'missing', 'f'),
        message: expect.stringContaining(join(workspace, 'd', 'missing', 'f')),
      });
    } finally {
      directories.close();
    }
  });

  it('a restore writes into the directory it checked, even if it became a link to elsewhere meanwhile', async () => {
    const { workspace, store } = await makeWorkspace({ 'd/keep.txt': 'k\n' });
    const outside = await makeTempDirectory();
    const content = await store.put(Buffer.from('restored\n'));
    const after = { name: 'f', type: 'file' as const, mode: 0o644, ...content };
    // Another process swaps d for a link to a directory outside while the content is fetched:
    // after the parent was checked, before the file is written.
    let isSwapped = false;
    const racing: ObjectStore = Object.create(store);
    racing.get = async (digest) => {
      if (!isSwapped) {
        isSwapped = true;
        await rename(join(workspace, 'd'), join(workspace, 'd.moved'));
        await symlink(outside, join(workspace, 'd'));
      }
      return store.get(digest);
    };
    await applyChanges(workspace, racing, [{ path: 'd/f', before: undefined, after }]);
    expect(isSwapped).toBe(true);
    expect(await readdir(outside)).toEqual([]);
    expect(await readFile(join(workspace, 'd.moved', 'f'), 'utf8')).toBe('restored\n');
  });

  it('a restore into a directory that is missing fails, even if a link to elsewhere appears there meanwhile', async () => {
    const { workspace, store } = await makeWorkspace({ 'keep.txt': 'k\n' });
    const outside = await makeTempDirectory();
    const content = await store.put(Buffer.from('restored\n'));
    const after = { name: 'f', type: 'file' as const, mode: 0o644, ...content };
    // d is not there when the restore looks; another process makes it a link to elsewhere
    // while the content is fetched, before the file is written.
    const racing: ObjectStore = Object.create(store);
    racing.get = async (digest) => {
      await symlink(outside, join(workspace, 'd'));
      return store.get(digest);
    };
    await expect(
      applyChanges(workspace, racing, [{ path: 'd/f', before: undefined, after }]),
    ).rejects.toMatchObject({ code: 'ENOENT', path: join(workspace, 'd') });
    expect(await readdir(outside)).toEqual([]);
  });

  it('a snapshot never stores a file from outside when a directory on its path becomes a link', async () => {
    const { workspace, store } = await makeWorkspace({ 'd/f': 'inside\n', 'd/big': 'inside\n' });
    const root = realpathSync(workspace);
    const outside = await makeTempDirectory();
    await writeFile(join(outside, 'f'), 'secret from outside\n');
    await writeFile(join(outside, 'big'), Buffer.alloc(2 * 1024 * 1024, 'S'));
    const entries = ['f', 'big'].map((name) =>
      fileToRead(
        name,
        `d/${name}`,
        join(root, 'd', name),
        lstatSync(join(root, 'd', name), { bigint: true }),
      ),
    );
    // Scanned inside; swapped for a link before the contents are read.
    await rename(join(root, 'd'), join(root, 'd.moved'));
    await symlink(outside, join(root, 'd'));
    const batch = store.batch();
    for (const entry of entries) {
      await expect(storeFile(entry, batch)).rejects.toMatchObject({
        code: 'PATH_UNREADABLE',
        message: expect.stringMatching(/a directory on its path was moved or replaced/),
      });
    }
    await batch.commit();
    expect(await store.has(digestBytes(Buffer.from('secret from outside\n')))).toBe(false);
  });

  it('a snapshot reads no file that became a named pipe, a link or a directory after it was listed, and never waits on a pipe', async () => {
    const { workspace, store } = await makeWorkspace({ pipe: 'a', link: 'b', dir: 'c' });
    const root = realpathSync(workspace);
    const entries = ['pipe', 'link', 'dir'].map((name) =>
      fileToRead(name, name, join(root, name), lstatSync(join(root, name), { bigint: true })),
    );
    await rm(join(root, 'pipe'));
    execFileSync('mkfifo', [join(root, 'pipe')]); // no writer: opening it to read would wait
    await rm(join(root, 'link'));
    await symlink('dir', join(root, 'link'));
    await rm(join(root, 'dir'));
    await mkdir(join(root, 'dir'));
    const batch = store.batch();
    for (const entry of entries) {
      await expect(storeFile(entry, batch)).rejects.toMatchObject({
        code: 'PATH_UNREADABLE',
        message: expect.stringMatching(/stopped being a regular file/),
      });
    }
    await batch.commit();
  });
});
