import {
  appendFile,
  chmod,
  mkdir,
  rename,
  rm,
  symlink,
  unlink,
  utimes,
  writeFile,
} from 'node:fs/promises';
import { join } from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { describe, expect, it } from 'vitest';
import {
  listChangedSince,
  loadChangeRecord,
  readSnapshotClock,
  type SnapshotClock,
} from '../../src/workspace/changes.js';
import { cachedReferences, snapshot } from '../../src/workspace/index.js';
import { makeTempDirectory } from '../helpers/temp.js';
import { listAll, random, randomEdit, referenceTree } from '../helpers/trees.js';
import { lay, makeWorkspace } from '../helpers/workspace.js';

describe('snapshot by changed paths', () => {
  it('looks only at what changed since the last snapshot, and gets the same tree as a full read', async () => {
    const layout = Object.fromEntries(
      Array.from({ length: 60 }, (_, index) => [`dir${index % 6}/sub/f${index}.txt`, `${index}`]),
    );
    const { workspace, storeDirectory, store } = await makeWorkspace(layout);
    const options = { store, storeDirectory };
    expect(await snapshot(workspace, options)).toMatchObject({ strategy: 'walk', readCount: 60 });
    // Files changed within two seconds before a snapshot are looked at again by the next one.
    await sleep(2100);
    await snapshot(workspace, options);
    const walked = loadChangeRecord(storeDirectory, workspace)?.directories;
    const quiet = await snapshot(workspace, options);
    expect(quiet).toMatchObject({ strategy: 'changed-since', readCount: 0 });
    // A snapshot that changed no directory records the same identities (their JSON is reused).
    expect(loadChangeRecord(storeDirectory, workspace)?.directories).toEqual(walked);
    expect(walked?.size).toBe(13);

    await appendFile(join(workspace, 'dir0/sub/f0.txt'), '!'); // modified
    await writeFile(join(workspace, 'dir1/new.txt'), 'new'); // created
    await unlink(join(workspace, 'dir2/sub/f2.txt')); // deleted
    await rm(join(workspace, 'dir3'), { recursive: true }); // tree deleted
    await rename(join(workspace, 'dir4/sub'), join(workspace, 'dir5/moved')); // tree moved
    await chmod(join(workspace, 'dir5/sub/f5.txt'), 0o755); // mode
    await unlink(join(workspace, 'dir1/sub/f1.txt'));
    await symlink('../f7.txt', join(workspace, 'dir1/sub/f1.txt')); // replaced by a link
    await mkdir(join(workspace, 'empty')); // empty directory
    const changed = await snapshot(workspace, options);
    expect(changed.strategy).toBe('changed-since');
    const identities = loadChangeRecord(storeDirectory, workspace)?.directories;
    expect([...(identities?.keys() ?? [])]).toEqual(
      expect.arrayContaining(['dir5/moved', 'empty']),
    );
    // The modified, created and mode-changed files, and the 10 files of the moved tree.
    expect(changed.readCount).toBe(13);
    expect(changed.tree).toBe(await referenceTree(workspace));
    const full = await snapshot(workspace, { ...options, now: () => new Date() });
    expect(changed).toMatchObject({
      fileCount: full.fileCount,
      directoryCount: full.directoryCount,
      sizeBytes: full.sizeBytes,
    });
  });

  it('agrees with a full read after every round of random edits', async () => {
    const next = random(20261129);
    const { workspace, storeDirectory, store } = await makeWorkspace(
      Object.fromEntries(
        Array.from({ length: 120 }, (_, index) => [
          `d${index % 4}/e${index % 3}/g${index % 5}/f${index}`,
          'f',
        ]),
      ),
    );
    // A short window, so each round looks only at its own edits, not at the earlier rounds'.
    const options = { store, storeDirectory, changeWindowMs: 30 };
    await snapshot(workspace, options);
    let reused = 0;
    for (let round = 0; round < 30; round++) {
      await sleep(40);
      for (let step = 0; step < 6; step++) await randomEdit(workspace, next, `${round}:${step}`);
      const result = await snapshot(workspace, options);
      expect(result.strategy).toBe('changed-since');
      expect(result.tree, `round ${round}`).toBe(await referenceTree(workspace));
      const full = await snapshot(workspace, { ...options, now: () => new Date() });
      if (result.readCount < full.fileCount) reused += 1;
      expect(result.fileCount).toBe(full.fileCount);
      expect(result.directoryCount).toBe(full.directoryCount);
      expect(result.sizeBytes).toBe(full.sizeBytes);
    }
    // Most rounds took most entries from the previous tree.
    expect(reused).toBeGreaterThan(20);
  });

  it('falls back to a full walk when a .rewindignore appears, changes or goes', async () => {
    const { workspace, storeDirectory, store } = await makeWorkspace({
      'keep.txt': 'k',
      'sub/build/out.bin': 'o',
      'sub/src.txt': 's',
    });
    const options = { store, storeDirectory };
    await snapshot(workspace, options);
    await writeFile(join(workspace, 'sub/.rewindignore'), 'build/\n');
    const added = await snapshot(workspace, options);
    expect(added.strategy).toBe('walk');
    expect(added.tree).toBe(await referenceTree(workspace));
    await writeFile(join(workspace, 'sub/.rewindignore'), 'src.txt\n');
    const edited = await snapshot(workspace, options);
    expect(edited.strategy).toBe('walk');
    expect(edited.tree).toBe(await referenceTree(workspace));
    await unlink(join(workspace, 'sub/.rewindignore'));
    const removed = await snapshot(workspace, options);
    expect(removed.strategy).toBe('walk');
    expect(removed.tree).toBe(await referenceTree(workspace));
    await mkdir(join(workspace, 'elsewhere'));
    await lay(join(workspace, 'elsewhere'), { 'tree/.rewindignore': '*.log\n', 'tree/x.log': 'x' });
    await rename(join(workspace, 'elsewhere/tree'), join(workspace, 'moved'));
    const moved = await snapshot(workspace, options);
    expect(moved.strategy).toBe('walk');
    expect(moved.tree).toBe(await referenceTree(workspace));
  });

  it('falls back to a full walk when a .gitignore appears or the repository info/exclude changes', async () => {
    const { workspace, storeDirectory, store } = await makeWorkspace({
      'keep.txt': 'k',
      'sub/out.log': 'o',
    });
    await mkdir(join(workspace, '.git/info'), { recursive: true });
    const options = { store, storeDirectory };
    await snapshot(workspace, options);
    await writeFile(join(workspace, 'sub/.gitignore'), '*.log\n');
    const added = await snapshot(workspace, options);
    expect(added.strategy).toBe('walk');
    expect(added.tree).toBe(await referenceTree(workspace));
    await writeFile(join(workspace, '.git/info/exclude'), 'keep.txt\n');
    const excluded = await snapshot(workspace, options);
    expect(excluded.strategy).toBe('walk');
    expect(excluded.fileCount).toBe(1);
    expect(excluded.tree).toBe(await referenceTree(workspace));
  });

  it('reads again a directory swapped with another, replaced, or moved in from outside with old timestamps', async () => {
    const { workspace, storeDirectory, store } = await makeWorkspace({
      'a/x.txt': 'a-x',
      'a/deep/y.txt': 'a-y',
      'b/x.txt': 'b-x',
      'b/deep/y.txt': 'b-y',
      'src/index.js': 'old',
      'src.new/index.js': 'new',
    });
    const options = { store, storeDirectory, changeWindowMs: 30 };
    await snapshot(workspace, options);
    await sleep(40);
    // mv a t; mv b a; mv t b: every child keeps its name, size and timestamps.
    await rename(join(workspace, 'a'), join(workspace, 't'));
    await rename(join(workspace, 'b'), join(workspace, 'a'));
    await rename(join(workspace, 't'), join(workspace, 'b'));
    const swapped = await snapshot(workspace, options);
    expect(swapped.strategy).toBe('changed-since');
    expect(swapped.tree).toBe(await referenceTree(workspace));
    await sleep(40);
    await rm(join(workspace, 'src'), { recursive: true });
    await rename(join(workspace, 'src.new'), join(workspace, 'src'));
    expect((await snapshot(workspace, options)).tree).toBe(await referenceTree(workspace));
    await sleep(40);
    const outside = await makeTempDirectory();
    await lay(outside, { 'a/x.txt': 'from outside', 'a/deep/y.txt': 'from outside too' });
    const past = new Date(Date.now() - 86_400_000);
    for (const path of ['a/x.txt', 'a/deep/y.txt', 'a/deep', 'a']) {
      await utimes(join(outside, path), past, past);
    }
    await rm(join(workspace, 'a'), { recursive: true });
    await rename(join(outside, 'a'), join(workspace, 'a'));
    const moved = await snapshot(workspace, options);
    expect(moved.tree).toBe(await referenceTree(workspace));
  });

  it('keeps the recorded tree through garbage collection', async () => {
    const { workspace, storeDirectory, store } = await makeWorkspace({ 'a.txt': 'a' });
    const { tree } = await snapshot(workspace, { store, storeDirectory });
    expect(loadChangeRecord(storeDirectory, workspace)?.tree).toBe(tree);
    expect(await cachedReferences(storeDirectory)).toContainEqual({ type: 'tree', digest: tree });
  });
});

describe('listChangedSince', () => {
  const clockAt = (clock: SnapshotClock, shiftNs: bigint): SnapshotClock => ({
    ...clock,
    wallNs: clock.wallNs + shiftNs,
  });

  const WINDOW = 2_000_000_000n;

  it('lists created, modified and renamed entries and the directories entries left', async () => {
    const workspace = await makeTempDirectory();
    await lay(workspace, { 'a/old.txt': 'o', 'a/keep.txt': 'k', 'b/x.txt': 'x', 'c/y.txt': 'y' });
    await sleep(2100);
    const since = readSnapshotClock() as SnapshotClock;
    await appendFile(join(workspace, 'a/keep.txt'), '!');
    await unlink(join(workspace, 'a/old.txt'));
    await rename(join(workspace, 'b/x.txt'), join(workspace, 'c/x.txt'));
    await mkdir(join(workspace, '.git/objects'), { recursive: true });
    const changed = await listChangedSince(
      workspace,
      since,
      readSnapshotClock() as SnapshotClock,
      WINDOW,
    );
    expect(changed?.sort()).toEqual(['', 'a', 'a/keep.txt', 'b', 'c', 'c/x.txt']);
  });

  it('lists the same paths with finds side by side over the top directories as with one find (randomized)', async () => {
    const seed = Number(process.env.REWIND_FIND_SEED ?? Date.now() % 1_000_000);
    const next = random(seed);
    const pick = <T>(items: readonly T[]): T => items[Math.floor(next() * items.length)] as T;
    for (let round = 0; round < 6; round++) {
      const workspace = await makeTempDirectory();
      const layout: Record<string, string> = { 'top.txt': 't', '.git/HEAD': 'ref', 'é/ü.txt': 'u' };
      for (let index = 0; index < 80; index++) {
        layout[`d${index % 7}/s${index % 3}/deep${index % 2}/f${index}.txt`] = `${index}`;
      }
      await lay(workspace, layout);
      await symlink('d0', join(workspace, 'link-to-d0'));
      await sleep(50);
      const since = readSnapshotClock() as SnapshotClock;
      for (let step = 0; step < 6; step++) {
        const { files, dirs } = await listAll(workspace);
        const kind = pick(['edit', 'create', 'delete', 'rename-dir', 'swap', 'move-in', 'chmod']);
        const file = pick(files.filter((path) => !path.startsWith('link-to-d0')));
        const dir = pick(dirs.filter((path) => !path.startsWith('.git')));
        if (kind === 'edit' && file) await appendFile(join(workspace, file), '!');
        if (kind === 'create') await lay(workspace, { [`${dir ?? 'new'}/n${step}.txt`]: 'n' });
        if (kind === 'delete' && file) await rm(join(workspace, file), { force: true });
        if (kind === 'chmod' && file) await chmod(join(workspace, file), 0o600).catch(() => {});
        if (kind === 'rename-dir' && dir) {
          await rename(join(workspace, dir), join(workspace, `${dir}-r${step}`)).catch(() => {});
        }
        if (kind === 'swap' && dir) {
          const other = pick(dirs.filter((path) => !path.startsWith('.git')));
          if (
            other &&
            other !== dir &&
            !other.startsWith(`${dir}/`) &&
            !dir.startsWith(`${other}/`)
          ) {
            await rename(join(workspace, dir), join(workspace, 'swap.tmp'));
            await rename(join(workspace, other), join(workspace, dir));
            await rename(join(workspace, 'swap.tmp'), join(workspace, other));
          }
        }
        if (kind === 'move-in') {
          const outside = await makeTempDirectory();
          await lay(outside, { 'x.txt': 'x', 'y/z.txt': 'z' });
          const old = new Date('2020-01-01T00:00:00Z');
          for (const path of ['x.txt', 'y/z.txt', 'y']) await utimes(join(outside, path), old, old);
          await rename(outside, join(workspace, `moved${step}`));
        }
      }
      const now = readSnapshotClock() as SnapshotClock;
      const one = await listChangedSince(workspace, since, now, 0n);
      const sideBySide = await listChangedSince(workspace, since, now, 0n, Number.MAX_SAFE_INTEGER);
      expect(sideBySide?.sort(), `seed ${seed}, round ${round}`).toEqual(one?.sort());
      // The root as written with a trailing slash: the same paths.
      const slashed = await listChangedSince(
        `${workspace}/`,
        since,
        now,
        0n,
        Number.MAX_SAFE_INTEGER,
      );
      expect(slashed?.sort(), `seed ${seed}, round ${round}`).toEqual(one?.sort());
      expect(one?.length, `seed ${seed}`).toBeGreaterThan(0);
    }
  });

  it('refuses to answer when the wall clock went back or the machine rebooted', async () => {
    const workspace = await makeTempDirectory();
    const now = readSnapshotClock() as SnapshotClock;
    const future = clockAt(now, 3_600_000_000_000n);
    expect(await listChangedSince(workspace, future, now, WINDOW)).toBeUndefined();
    const stepped = { ...now, offsetNs: now.offsetNs - 5_000_000_000n };
    expect(await listChangedSince(workspace, now, stepped, WINDOW)).toBeUndefined();
    expect(
      await listChangedSince(workspace, { ...now, bootId: 'another' }, now, WINDOW),
    ).toBeUndefined();
    // The workspace was just created: only its root changed.
    expect(await listChangedSince(workspace, now, now, WINDOW)).toEqual(['']);
  });
});
