import { execFileSync } from 'node:child_process';
import {
  chmodSync,
  closeSync,
  mkdirSync,
  openSync,
  readFileSync,
  realpathSync,
  renameSync,
  writeFileSync,
  writeSync,
} from 'node:fs';
import { appendFile, link, mkdir, rename, rm, symlink, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { afterEach, describe, expect, it } from 'vitest';
import type { Digest } from '../../src/lib/index.js';
import { loadChangeRecord } from '../../src/workspace/changes.js';
import {
  applyChanges,
  diffTrees,
  NO_OUTSIDE_RULES,
  snapshot,
  WorkspaceWatcher,
} from '../../src/workspace/index.js';
import { makeTempDirectory } from '../helpers/temp.js';
import { random, randomEdit, referenceTree } from '../helpers/trees.js';
import { untilLive } from '../helpers/watching.js';
import { makeWorkspace } from '../helpers/workspace.js';

const watchers: WorkspaceWatcher[] = [];
afterEach(() => {
  for (const watcher of watchers.splice(0)) watcher.close();
});

/** A workspace, its store and a watcher of it; snapshots taken with the watcher. */
async function watched(layout: Record<string, string>) {
  const made = await makeWorkspace(layout);
  const workspace = realpathSync(made.workspace);
  // Past the change window of the layout's files, so the first snapshots do not look at them again.
  await sleep(150);
  const watcher = new WorkspaceWatcher(workspace, made.storeDirectory, NO_OUTSIDE_RULES);
  watchers.push(watcher);
  const options = { store: made.store, storeDirectory: made.storeDirectory, watcher };
  const take = () => snapshot(workspace, options);
  return { ...made, workspace, watcher, take };
}

/**
 * Snapshots until one was taken with the watch live and did not walk (a walk may start the watch
 * again), then one more: after them, the next snapshot can take the watcher's word. Edits within
 * the change window before a snapshot are listed by find again, and an ignore file among them
 * makes it walk: each try waits past it.
 */
async function settle(
  take: () => Promise<{ strategy: string }>,
  watcher: WorkspaceWatcher,
): Promise<void> {
  for (let attempt = 0; attempt < 10; attempt++) {
    await sleep(150);
    await untilLive(watcher);
    if ((await take()).strategy !== 'walk') {
      await take();
      return;
    }
  }
  throw new Error('every snapshot walked');
}

const isAvailable = (() => {
  try {
    execFileSync('inotifywait', ['--help'], { stdio: 'ignore' });
    return true;
  } catch (error) {
    // It prints its help and exits 1 when it is there.
    return (error as { status?: number }).status === 1;
  }
})();

describe.runIf(process.platform === 'linux' && isAvailable)('snapshots with a watcher', () => {
  it('looks only at what the watcher saw change, and gets the same tree as a full read', async () => {
    const { workspace, storeDirectory, watcher, take } = await watched({
      'a/x.txt': 'x',
      'a/deep/y.txt': 'y',
      'b/z.txt': 'z',
    });
    await take();
    await settle(take, watcher);
    await appendFile(join(workspace, 'a/x.txt'), '!');
    await mkdir(join(workspace, 'c/new'), { recursive: true });
    await writeFile(join(workspace, 'c/new/file.txt'), 'made in a new directory');
    await symlink('a/x.txt', join(workspace, 'link'));
    const result = await take();
    expect(result.strategy).toBe('watched');
    // The appended file and the file of the new directory: nothing else was read.
    expect(result.readCount).toBe(2);
    expect(result.tree).toBe(await referenceTree(workspace));
    // Changes under .git and .rewind are none of the snapshot's.
    await mkdir(join(workspace, '.git'), { recursive: true });
    await writeFile(join(workspace, '.git/HEAD'), 'ref: refs/heads/main\n');
    const quiet = await take();
    expect(quiet).toMatchObject({ strategy: 'watched', readCount: 0, tree: result.tree });
    // What another process reads: the record the watched snapshots saved, new directories in it.
    const record = loadChangeRecord(storeDirectory, workspace);
    expect(record?.tree).toBe(result.tree);
    expect([...(record?.directories.keys() ?? [])].sort()).toEqual([
      '',
      'a',
      'a/deep',
      'b',
      'c',
      'c/new',
    ]);
  });

  it('can answer only after a snapshot taken while live, and not again until one is after events may have gone unseen', async () => {
    const { workspace, watcher, take } = await watched({ 'a/x.txt': 'x', 'b/y.txt': 'y' });
    expect(watcher.canAnswer).toBe(false);
    await untilLive(watcher);
    await take();
    expect(watcher.canAnswer).toBe(true);
    expect((await take()).strategy).toBe('watched');
    // A directory moved: the watch starts again, and keeps the record of the last snapshot, but
    // the next snapshot cannot take its word.
    await rename(join(workspace, 'a'), join(workspace, 'c'));
    for (let waited = 0; watcher.canAnswer && waited < 10_000; waited += 10) await sleep(10);
    expect(watcher.canAnswer).toBe(false);
    await untilLive(watcher);
    expect((await take()).strategy).not.toBe('watched');
    expect(watcher.canAnswer).toBe(true);
  });

  it('rebuilds the directories above changed files from their old trees, and looks again at one re-moded or replaced', async () => {
    const { workspace, watcher, take } = await watched({
      'a/b/c/f.txt': 'f',
      'a/b/g.txt': 'g',
      'p/q/r.txt': 'r',
    });
    await take();
    await settle(take, watcher);
    // A file changed deep down, and a directory above it given another mode.
    await appendFile(join(workspace, 'a/b/c/f.txt'), '!');
    chmodSync(join(workspace, 'a/b'), 0o700);
    let result = await take();
    expect(result.strategy).toBe('watched');
    expect(result.tree).toBe(await referenceTree(workspace));
    // A directory removed and made again at its path, a file written in it as it was.
    await rm(join(workspace, 'p/q'), { recursive: true });
    await mkdir(join(workspace, 'p/q'));
    chmodSync(join(workspace, 'p/q'), 0o750);
    await writeFile(join(workspace, 'p/q/r.txt'), 'r');
    result = await take();
    expect(result.strategy).toBe('watched');
    expect(result.tree).toBe(await referenceTree(workspace));
    // Only the file changed again: the directories above it keep their modes.
    await appendFile(join(workspace, 'a/b/c/f.txt'), '!');
    result = await take();
    expect(result).toMatchObject({ strategy: 'watched', readCount: 1 });
    expect(result.tree).toBe(await referenceTree(workspace));
  });

  it('agrees with a full read after every round of random edits', async () => {
    const next = random(20261202);
    const outside = await makeTempDirectory();
    const { workspace, watcher, take } = await watched(
      Object.fromEntries(
        Array.from({ length: 120 }, (_, index) => [
          `d${index % 4}/e${index % 3}/g${index % 5}/f${index}`,
          `f${index}`,
        ]),
      ),
    );
    // Files with a link outside the workspace, made before the watch starts: a write through
    // one reaches no watch of the workspace.
    const outsideLinks: string[] = [];
    for (const index of [0, 7, 42]) {
      const path = join(outside, `link${index}`);
      await link(join(workspace, `d${index % 4}/e${index % 3}/g${index % 5}/f${index}`), path);
      outsideLinks.push(path);
    }
    await take();
    await settle(take, watcher);
    const strategies: Record<string, number> = {};
    for (let round = 0; round < 60; round++) {
      for (let step = 0; step < 3; step++) {
        await randomEdit(workspace, next, `${round}:${step}`, outsideLinks);
      }
      const result = await take();
      strategies[result.strategy] = (strategies[result.strategy] ?? 0) + 1;
      expect(result.tree, `round ${round} (${result.strategy})`).toBe(
        await referenceTree(workspace),
      );
      // A pause, as between an agent's tool calls: a restarted watch becomes live.
      await untilLive(watcher);
    }
    // Most rounds took the watcher's word; the others (a directory moved out, a new hard link)
    // asked find.
    expect(strategies.watched ?? 0).toBeGreaterThan(15);
  });

  it('takes what a restore wrote from it, and reads again what was written to, replaced or re-moded right after', async () => {
    const next = random(20261203);
    const { workspace, store, watcher, take } = await watched(
      Object.fromEntries(
        Array.from({ length: 60 }, (_, index) => [
          `d${index % 3}/e${index % 4}/f${index}`,
          `f${index}`,
        ]),
      ),
    );
    await take();
    await settle(take, watcher);
    const trees: Digest[] = [];
    let restores = 0;
    let takenFromRestore = 0;
    for (let round = 0; round < 40; round++) {
      for (let step = 0; step < 2; step++) await randomEdit(workspace, next, `${round}:${step}`);
      const current = await take();
      expect(current.tree, `round ${round} before`).toBe(await referenceTree(workspace));
      trees.push(current.tree);
      if (trees.length < 2) continue;
      // A restore to an earlier snapshot, as a rollback or an undo makes one.
      const earlier = trees[Math.floor(next() * (trees.length - 1))] as Digest;
      const changes = await diffTrees(store, current.tree, earlier);
      await applyChanges(workspace, store, changes, { watcher });
      restores += 1;
      const written = changes
        .filter((change) => change.after?.type === 'file')
        .map((change) => change.path);
      // Right after it, before the next snapshot: one of the files it wrote written in place
      // with its size kept, replaced by another file, re-moded, or left as it is.
      const victim = written[Math.floor(next() * written.length)];
      const choice = next();
      if (victim !== undefined && choice < 0.6) {
        const path = join(workspace, victim);
        if (choice < 0.3) {
          const size = readFileSync(path).length;
          const descriptor = openSync(path, 'r+');
          writeSync(descriptor, Buffer.alloc(Math.max(size, 1), 'Z'), 0, Math.max(size, 1), 0);
          closeSync(descriptor);
        } else if (choice < 0.45) {
          writeFileSync(`${path}.new`, readFileSync(path).fill(0x59));
          renameSync(`${path}.new`, path);
        } else chmodSync(path, 0o700);
      }
      const after = await take();
      expect(after.tree, `round ${round} after a restore (${after.strategy})`).toBe(
        await referenceTree(workspace),
      );
      if (after.strategy === 'watched') takenFromRestore += written.length - after.readCount;
      trees.push(after.tree);
      await untilLive(watcher);
    }
    expect(restores).toBeGreaterThan(30);
    // Most files the restores wrote were not read again.
    expect(takenFromRestore).toBeGreaterThan(20);
  });

  it("hears nothing of a restore's own temporary files, only of the files moved into place, and still of another's", async () => {
    const files = Object.fromEntries(
      Array.from({ length: 20 }, (_, index) => [`d${index % 2}/f${index}.txt`, `f${index}`]),
    );
    const { workspace, store, watcher, take } = await watched(files);
    await settle(take, watcher);
    const before = await take();
    for (const path of Object.keys(files)) await appendFile(join(workspace, path), 'more');
    const after = await take();
    expect(after.strategy).toBe('watched');
    await applyChanges(workspace, store, await diffTrees(store, after.tree, before.tree), {
      watcher,
    });
    // Made as a restore in another process makes it: its events come as any others do.
    const foreign = 'd0/.f0.txt.rewind-0123456789ab.rewind-tmp';
    await writeFile(join(workspace, foreign), 'half');
    const { paths } = await watcher.drain();
    expect(paths?.filter((path) => path.includes('.rewind-tmp'))).toEqual([foreign]);
    // Files moved in alone leave their directory off (d1); a file made there lists it (d0).
    expect(paths).toEqual(expect.arrayContaining(['d0', ...Object.keys(files)]));
    expect(paths).not.toContain('d1');
  });

  it('asks find when events were lost (the queue overflowed), and takes the watcher again after', async () => {
    const { workspace, watcher, take } = await watched({ 'a.txt': 'a', 'burst/f': 'f' });
    await take();
    await settle(take, watcher);
    const pid = watcher.pid as number;
    process.kill(pid, 'SIGSTOP');
    try {
      // inotify queues 16,384 events by default: these make about 40,000 in a watched directory.
      for (let index = 0; index < 20_000; index++) {
        await writeFile(join(workspace, 'burst', `f${index}`), `${index}`);
      }
    } finally {
      process.kill(pid, 'SIGCONT');
    }
    await appendFile(join(workspace, 'a.txt'), ' changed');
    const after = await take();
    expect(after.strategy).not.toBe('watched');
    expect(after.tree).toBe(await referenceTree(workspace));
    await settle(take, watcher);
    await appendFile(join(workspace, 'burst/f7'), ' and again');
    const again = await take();
    expect(again.strategy).toBe('watched');
    expect(again.tree).toBe(await referenceTree(workspace));
  }, 60_000);

  it('asks find when a directory moved out and back, or the watcher was killed', async () => {
    const { workspace, watcher, take } = await watched({ 'd/x.txt': 'x', 'e/y.txt': 'y' });
    await take();
    await settle(take, watcher);
    const parked = join(await makeTempDirectory(), 'd');
    await rename(join(workspace, 'd'), parked);
    await writeFile(join(parked, 'x.txt'), 'X'); // same size
    await rename(parked, join(workspace, 'd'));
    const moved = await take();
    expect(moved.strategy).toBe('changed-since');
    expect(moved.tree).toBe(await referenceTree(workspace));
    await settle(take, watcher);
    process.kill(watcher.pid as number, 'SIGKILL');
    await writeFile(join(workspace, 'e/y.txt'), 'Y');
    const killed = await take();
    expect(killed.strategy).not.toBe('watched');
    expect(killed.tree).toBe(await referenceTree(workspace));
    await settle(take, watcher);
    await writeFile(join(workspace, 'e/y.txt'), 'y again');
    expect((await take()).strategy).toBe('watched');
  });

  it('finds the directories made while inotifywait set up the watches of a tree, which it leaves unwatched', async () => {
    const { workspace, watcher, take } = await watched({ 'a.txt': 'a' });
    await take();
    await settle(take, watcher);
    // A tree of 1,500 directories moved in: inotifywait walks it to watch it, each directory's
    // watch added after its children's. Directories made meanwhile (for 200 ms) in those it has
    // listed but not watched yet get none.
    const tree = join(await makeTempDirectory(), 'tree');
    for (let one = 0; one < 30; one++) {
      for (let two = 0; two < 50; two++)
        mkdirSync(join(tree, `d${one}`, `e${two}`), { recursive: true });
    }
    renameSync(tree, join(workspace, 'tree'));
    const made: string[] = [];
    for (const start = Date.now(); Date.now() - start < 200 && made.length < 3_000; ) {
      const directory = `tree/d${made.length % 30}/made${made.length}`;
      mkdirSync(join(workspace, directory));
      made.push(directory);
    }
    await take();
    await settle(take, watcher);
    for (const directory of made) writeFileSync(join(workspace, directory, 'f.txt'), directory);
    const result = await take();
    expect(result.tree).toBe(await referenceTree(workspace));
    expect(result.fileCount).toBe(1 + made.length);
  });

  it('finds the directories made while inotifywait set up its first watches, before it counts as live', async () => {
    const layout: Record<string, string> = {};
    for (let one = 0; one < 30; one++) {
      for (let two = 0; two < 50; two++) layout[`d${one}/e${two}/f`] = 'f';
    }
    const { workspace, watcher, take } = await watched(layout);
    // The first snapshot walks, which starts the watch again: directories are made meanwhile.
    await take();
    const made: string[] = [];
    for (const start = Date.now(); Date.now() - start < 300 && made.length < 3_000; ) {
      const directory = `d${made.length % 30}/made${made.length}`;
      mkdirSync(join(workspace, directory));
      made.push(directory);
    }
    await settle(take, watcher);
    for (const directory of made) writeFileSync(join(workspace, directory, 'f.txt'), directory);
    const result = await take();
    expect(result.tree).toBe(await referenceTree(workspace));
  });

  it('goes on watching after a walk that leaves the same top directories out: the next snapshot takes its word', async () => {
    const { workspace, watcher, take } = await watched({
      '.gitignore': 'node_modules/\n',
      'node_modules/pkg/index.js': 'module',
      'src/a.js': 'a',
    });
    await untilLive(watcher);
    const pid = watcher.pid;
    // The first snapshot walks (there is no record to start from), with the watch live.
    expect((await take()).strategy).toBe('walk');
    await appendFile(join(workspace, 'src/a.js'), '!');
    const next = await take();
    expect(next).toMatchObject({ strategy: 'watched', readCount: 1 });
    expect(next.tree).toBe(await referenceTree(workspace));
    expect(watcher.pid).toBe(pid);
  });

  it('leaves unwatched the top directories the ignore rules leave out, and watches again when they change', async () => {
    const { workspace, watcher, take } = await watched({
      '.gitignore': 'node_modules/\n',
      'node_modules/pkg/index.js': 'module',
      'src/a.js': 'a',
    });
    await take();
    await settle(take, watcher);
    await writeFile(join(workspace, 'node_modules/pkg/index.js'), 'changed, and ignored');
    expect(await take()).toMatchObject({ strategy: 'watched', readCount: 0 });
    await writeFile(join(workspace, '.gitignore'), '');
    const unignored = await take();
    expect(unignored.strategy).toBe('walk');
    expect(unignored.tree).toBe(await referenceTree(workspace));
    await settle(take, watcher);
    await writeFile(join(workspace, 'node_modules/pkg/index.js'), 'changed, and seen');
    const seen = await take();
    expect(seen.strategy).toBe('watched');
    expect(seen.tree).toBe(await referenceTree(workspace));
  });
});

describe('a watcher that cannot run', () => {
  it('answers nothing where inotifywait is missing, says why once, and snapshots stay right', async () => {
    const bin = await makeTempDirectory();
    await symlink('/bin/sh', join(bin, 'sh'));
    const path = process.env.PATH;
    process.env.PATH = bin;
    let watcher: WorkspaceWatcher;
    const made = await makeWorkspace({ 'a.txt': 'a' });
    const workspace = realpathSync(made.workspace);
    const told: string[] = [];
    try {
      watcher = new WorkspaceWatcher(workspace, made.storeDirectory, NO_OUTSIDE_RULES, (why) =>
        told.push(why),
      );
      watchers.push(watcher);
      for (let waited = 0; watcher.stoppedBecause === undefined && waited < 5_000; waited += 10) {
        await sleep(10);
      }
    } finally {
      process.env.PATH = path;
    }
    expect(watcher.stoppedBecause).toBe('inotifywait is not installed');
    watcher.close();
    expect(told).toEqual(['inotifywait is not installed']);
    const options = { store: made.store, storeDirectory: made.storeDirectory, watcher };
    await snapshot(workspace, options);
    await writeFile(join(workspace, 'a.txt'), 'changed');
    await sleep(150);
    const result = await snapshot(workspace, options);
    expect(result.strategy).toBe('changed-since');
    expect(result.tree).toBe(await referenceTree(workspace));
  });
});
