import { execFileSync } from 'node:child_process';
import {
  lstat,
  mkdir,
  open,
  readFile,
  readlink,
  rm,
  stat,
  symlink,
  writeFile,
} from 'node:fs/promises';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { applyChanges, diffTrees, renderDiff, snapshot } from '../../src/workspace/index.js';
import { makeTempDirectory } from '../helpers/temp.js';
import { lay, makeWorkspace } from '../helpers/workspace.js';

async function restoreTo(
  workspace: string,
  options: Parameters<typeof snapshot>[1],
  target: string,
) {
  const current = await snapshot(workspace, options);
  const changes = await diffTrees(options.store, current.tree, target as never);
  return applyChanges(workspace, options.store, changes);
}

describe('diffTrees and applyChanges', () => {
  it('restores files whose names are as long as a name may be (255 bytes), small and large', async () => {
    const long = `${'é'.repeat(127)}z`;
    const large = `${'b'.repeat(255)}`;
    const big = Buffer.alloc(1024 * 1024 + 10, 7);
    const { workspace, storeDirectory, store } = await makeWorkspace({ [long]: 'before' });
    await writeFile(join(workspace, large), big);
    const options = { store, storeDirectory };
    const target = (await snapshot(workspace, options)).tree;
    await writeFile(join(workspace, long), 'after');
    await writeFile(join(workspace, large), 'small now');
    await restoreTo(workspace, options, target);
    expect(await readFile(join(workspace, long), 'utf8')).toBe('before');
    expect((await readFile(join(workspace, large))).equals(big)).toBe(true);
    expect((await snapshot(workspace, options)).tree).toBe(target);
  });

  it('brings a workspace back to a tree exactly: contents, modes, links, and type changes', async () => {
    const { workspace, storeDirectory, store } = await makeWorkspace({
      'keep.txt': 'same',
      'edit.txt': 'before',
      'gone.txt': 'will be deleted',
      'bin/tool': { text: '#!/bin/sh\n', mode: 0o755 },
      'becomes-dir': 'a file first',
      'was-dir/inner/x.txt': 'x',
      link: { link: 'keep.txt' },
    });
    const options = { store, storeDirectory };
    const target = (await snapshot(workspace, options)).tree;

    await writeFile(join(workspace, 'edit.txt'), 'after');
    await rm(join(workspace, 'gone.txt'));
    await writeFile(join(workspace, 'new.txt'), 'new');
    await import('node:fs/promises').then(({ chmod }) => chmod(join(workspace, 'bin/tool'), 0o644));
    await rm(join(workspace, 'becomes-dir'));
    await lay(workspace, { 'becomes-dir/child.txt': 'child' });
    await rm(join(workspace, 'was-dir'), { recursive: true });
    await writeFile(join(workspace, 'was-dir'), 'now a file');
    await rm(join(workspace, 'link'));
    await symlink('edit.txt', join(workspace, 'link'));
    expect((await snapshot(workspace, options)).tree).not.toBe(target);

    const result = await restoreTo(workspace, options, target);
    expect((await snapshot(workspace, options)).tree).toBe(target);
    expect(await readFile(join(workspace, 'edit.txt'), 'utf8')).toBe('before');
    expect((await lstat(join(workspace, 'bin/tool'))).mode & 0o777).toBe(0o755);
    expect(await readlink(join(workspace, 'link'))).toBe('keep.txt');
    expect(result.skipped).toEqual([]);
  });

  it('puts back a link where a folder was, though the link loops or names a pipe: it is never followed', async () => {
    const { workspace, storeDirectory, store } = await makeWorkspace({
      'b/loop': { link: 'b/c d' }, // resolves to b/loop/c d: itself, for ever (ELOOP)
      'b/pipe': { link: '../fifo' }, // a named pipe: opening it would wait for a writer
    });
    execFileSync('mkfifo', [join(workspace, 'fifo')]);
    const options = { store, storeDirectory };
    const target = (await snapshot(workspace, options)).tree;
    for (const name of ['loop', 'pipe']) {
      await rm(join(workspace, 'b', name));
      await lay(workspace, { [`b/${name}/inner/x.txt`]: 'x' });
    }
    await restoreTo(workspace, options, target);
    expect(await readlink(join(workspace, 'b/loop'))).toBe('b/c d');
    expect(await readlink(join(workspace, 'b/pipe'))).toBe('../fifo');
    expect((await snapshot(workspace, options)).tree).toBe(target);
  });

  it('writes files side by side across more directories than it keeps open, each in its place with its mode', async () => {
    // More than the 128 directories WorkspaceDirectories keeps open, so they are closed and
    // opened again while writes are under way; modes the umask would cut, and set-id bits.
    const modes = [0o644, 0o600, 0o755, 0o666, 0o777, 0o4755, 0o2750, 0o400];
    const layout: Record<string, { text: string; mode: number }> = {};
    for (let index = 0; index < 600; index++) {
      const path = `d${index % 300}/s${index % 7}/f${index}.txt`;
      layout[path] = { text: `${path}\n`, mode: modes[index % modes.length] as number };
    }
    const { workspace, storeDirectory, store } = await makeWorkspace(layout);
    const options = { store, storeDirectory };
    const target = (await snapshot(workspace, options)).tree;
    for (const path of Object.keys(layout)) {
      await rm(join(workspace, path));
      await writeFile(join(workspace, path), 'edited');
    }
    const result = await restoreTo(workspace, options, target);
    expect(result.written).toBe(600);
    for (const [path, { text, mode }] of Object.entries(layout)) {
      expect(await readFile(join(workspace, path), 'utf8')).toBe(text);
      expect((await lstat(join(workspace, path))).mode & 0o7777).toBe(mode);
    }
    expect((await snapshot(workspace, options)).tree).toBe(target);
  });

  it('touches only what differs, and is idempotent', async () => {
    const { workspace, storeDirectory, store } = await makeWorkspace({
      'a.txt': 'a',
      'b.txt': 'b',
    });
    const options = { store, storeDirectory };
    const target = (await snapshot(workspace, options)).tree;
    const untouched = (await lstat(join(workspace, 'a.txt'))).ino;
    await writeFile(join(workspace, 'b.txt'), 'B');
    const changes = await diffTrees(store, (await snapshot(workspace, options)).tree, target);
    expect(changes.map((change) => change.path)).toEqual(['b.txt']);
    await applyChanges(workspace, store, changes);
    await applyChanges(workspace, store, changes);
    expect((await lstat(join(workspace, 'a.txt'))).ino).toBe(untouched);
    expect((await snapshot(workspace, options)).tree).toBe(target);
  });

  it('finishes, or puts back, from wherever it was cut short: type changes included (a directory that became a file)', async () => {
    const from = {
      'dir-to-file/inner/x.txt': 'x',
      'dir-to-file/y.txt': 'y',
      'file-to-dir': 'a file',
      'link-to-file': { link: 'keep.txt' },
      'keep.txt': 'same',
      'edit.txt': 'before',
      'deep/a/b/c.txt': 'c',
    } as const;
    const { workspace, storeDirectory, store } = await makeWorkspace(from);
    const options = { store, storeDirectory };
    const before = (await snapshot(workspace, options)).tree;
    await rm(join(workspace, 'dir-to-file'), { recursive: true });
    await writeFile(join(workspace, 'dir-to-file'), 'now a file');
    await rm(join(workspace, 'file-to-dir'));
    await lay(workspace, { 'file-to-dir/child/z.txt': 'z', 'edit.txt': 'after' });
    await rm(join(workspace, 'link-to-file'));
    await writeFile(join(workspace, 'link-to-file'), 'a file now');
    await rm(join(workspace, 'deep'), { recursive: true });
    await writeFile(join(workspace, 'deep'), 'flat');
    const after = (await snapshot(workspace, options)).tree;
    const forward = await diffTrees(store, before, after);
    const backward = forward.map((change) => ({
      ...change,
      before: change.after,
      after: change.before,
    }));
    for (let cut = 1; cut < forward.length; cut++) {
      for (const [finish, expected] of [
        [forward, after],
        [backward, before],
      ] as const) {
        await restoreTo(workspace, options, before);
        const stop = new Error('cut short');
        await expect(
          applyChanges(workspace, store, forward, {
            onProgress: ({ done }) => {
              if (done === cut) throw stop;
            },
          }),
        ).rejects.toBe(stop);
        await applyChanges(workspace, store, finish, { isRecovery: true });
        // Twice: running it again after it finished changes nothing.
        await applyChanges(workspace, store, finish, { isRecovery: true });
        expect((await snapshot(workspace, options)).tree, `cut after ${cut}`).toBe(expected);
      }
    }
  });

  it('brings a sparse file back sparse, byte for byte', async () => {
    const { workspace, storeDirectory, store } = await makeWorkspace({});
    const path = join(workspace, 'disk.img');
    const handle = await open(path, 'w');
    await handle.write('header', 0);
    await handle.write('middle', 20 * 1024 * 1024 + 5);
    await handle.truncate(48 * 1024 * 1024);
    await handle.close();
    const options = { store, storeDirectory };
    const target = (await snapshot(workspace, options)).tree;
    const original = await readFile(path);
    await rm(path);
    await restoreTo(workspace, options, target);
    const restored = await stat(path);
    expect(restored.size).toBe(48 * 1024 * 1024);
    expect((await readFile(path)).equals(original)).toBe(true);
    expect(restored.blocks * 512).toBeLessThan(1024 * 1024);
  });

  it('never touches ignored paths, even inside a directory it removes', async () => {
    const { workspace, storeDirectory, store } = await makeWorkspace({
      '.rewindignore': '*.log\n',
      'a.txt': 'a',
    });
    const options = { store, storeDirectory };
    const target = (await snapshot(workspace, options)).tree;
    await lay(workspace, {
      'build/out.js': 'out',
      'build/trace.log': 'ignored log',
      'a.log': 'ignored',
    });
    const result = await restoreTo(workspace, options, target);
    expect(await readFile(join(workspace, 'build/trace.log'), 'utf8')).toBe('ignored log');
    expect(await readFile(join(workspace, 'a.log'), 'utf8')).toBe('ignored');
    await expect(lstat(join(workspace, 'build/out.js'))).rejects.toMatchObject({ code: 'ENOENT' });
    expect(result.skipped).toEqual(['build']);
  });

  it('refuses to write through a directory that became a symbolic link', async () => {
    const { workspace, storeDirectory, store } = await makeWorkspace({ 'src/a.txt': 'a' });
    const options = { store, storeDirectory };
    const before = (await snapshot(workspace, options)).tree;
    await writeFile(join(workspace, 'src/a.txt'), 'changed');
    const after = (await snapshot(workspace, options)).tree;
    const outside = await makeTempDirectory();
    await rm(join(workspace, 'src'), { recursive: true });
    await symlink(outside, join(workspace, 'src'));
    const changes = await diffTrees(store, after, before);
    await expect(applyChanges(workspace, store, changes)).rejects.toMatchObject({
      code: 'SYMLINK_REFUSED',
    });
    await expect(lstat(join(outside, 'a.txt'))).rejects.toMatchObject({ code: 'ENOENT' });
  });

  it('never writes over a directory put where the changes start from a file: it fails, and recovery still looks', async () => {
    const { workspace, storeDirectory, store } = await makeWorkspace({
      'a.txt': 'a',
      'b.txt': 'b',
      'c.txt': 'c',
    });
    const options = { store, storeDirectory };
    const target = (await snapshot(workspace, options)).tree;
    await lay(workspace, { 'a.txt': 'A', 'b.txt': 'B', 'new.txt': 'new' });
    await rm(join(workspace, 'c.txt'));
    const changes = await diffTrees(store, (await snapshot(workspace, options)).tree, target);
    // Counted from the state the changes start from: two files written over, one created.
    const counted = await applyChanges(workspace, store, changes);
    expect(counted).toMatchObject({ written: 2, created: 1, deleted: 1 });
    expect((await snapshot(workspace, options)).tree).toBe(target);

    await lay(workspace, { 'a.txt': 'A', 'b.txt': 'B' });
    const raced = await diffTrees(store, (await snapshot(workspace, options)).tree, target);
    // A directory put at b.txt since that snapshot (a race with the person).
    await rm(join(workspace, 'b.txt'));
    await lay(workspace, { 'b.txt/inside.txt': 'kept' });
    await expect(applyChanges(workspace, store, raced)).rejects.toMatchObject({
      code: 'EISDIR',
    });
    expect(await readFile(join(workspace, 'b.txt/inside.txt'), 'utf8')).toBe('kept');
    // Recovery looks at what is there: an empty directory there gives way to the file.
    await rm(join(workspace, 'b.txt/inside.txt'));
    await applyChanges(workspace, store, raced, { isRecovery: true });
    expect((await snapshot(workspace, options)).tree).toBe(target);
  });
  it('reports progress after each path', async () => {
    const { workspace, storeDirectory, store } = await makeWorkspace({ 'a.txt': 'a' });
    const options = { store, storeDirectory };
    const target = (await snapshot(workspace, options)).tree;
    await lay(workspace, { 'b.txt': 'b', 'c/d.txt': 'd' });
    const changes = await diffTrees(store, (await snapshot(workspace, options)).tree, target);
    const seen: string[] = [];
    await applyChanges(workspace, store, changes, {
      onProgress: ({ done, total, path }) => seen.push(`${done}/${total} ${path}`),
    });
    expect(seen).toEqual(['1/3 c/d.txt', '2/3 b.txt', '3/3 c']);
  });

  it('renders a unified diff for text and summarizes binary files', async () => {
    const { workspace, storeDirectory, store } = await makeWorkspace({
      'a.txt': 'one\ntwo\nthree\n',
      'img.bin': 'x',
    });
    await writeFile(join(workspace, 'img.bin'), Buffer.from([0, 1, 2]));
    const options = { store, storeDirectory };
    const before = (await snapshot(workspace, options)).tree;
    await writeFile(join(workspace, 'a.txt'), 'one\nTWO\nthree\n');
    await writeFile(join(workspace, 'img.bin'), Buffer.from([0, 1, 2, 3]));
    await mkdir(join(workspace, 'd'));
    await writeFile(join(workspace, 'd/new.txt'), 'hello\n');
    const changes = await diffTrees(store, before, (await snapshot(workspace, options)).tree);
    expect(changes.map((change) => change.path)).toEqual(['a.txt', 'd', 'd/new.txt', 'img.bin']);
    const text = await renderDiff(store, changes);
    expect(text).toContain('--- a/a.txt\n+++ b/a.txt\n@@ -1,3 +1,3 @@\n one\n-two\n+TWO\n three\n');
    expect(text).toContain('--- /dev/null\n+++ b/d/new.txt\n@@ -0,0 +1,1 @@\n+hello\n');
    expect(text).toContain(
      'Binary files a/img.bin and b/img.bin differ (a file of 3 bytes (mode 644) -> a file of 4 bytes (mode 644))',
    );
  });

  it('restores files whose names take the whole 255 bytes a name may have', async () => {
    const longest = 'a'.repeat(255);
    const accented = `${'\u00e9'.repeat(127)}b`; // 254 bytes of é, and one more
    const { workspace, storeDirectory, store } = await makeWorkspace({
      [longest]: 'long\n',
      [`dir/${accented}`]: 'accented\n',
    });
    const options = { store, storeDirectory };
    const target = (await snapshot(workspace, options)).tree;
    await rm(join(workspace, longest));
    await writeFile(join(workspace, 'dir', accented), 'changed\n');
    await restoreTo(workspace, options, target);
    expect(await readFile(join(workspace, longest), 'utf8')).toBe('long\n');
    expect(await readFile(join(workspace, 'dir', accented), 'utf8')).toBe('accented\n');
    expect((await snapshot(workspace, options)).tree).toBe(target);
  });
});
