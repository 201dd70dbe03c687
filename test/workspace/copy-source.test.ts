import { execFileSync } from 'node:child_process';
import {
  chmod,
  mkdir,
  readdir,
  rename,
  rm,
  stat,
  symlink,
  utimes,
  writeFile,
} from 'node:fs/promises';
import { join } from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { describe, expect, it } from 'vitest';
import type { ObjectStore } from '../../src/store/index.js';
import { snapshot } from '../../src/workspace/index.js';
import { makeTempDirectory } from '../helpers/temp.js';
import { listAll, random, referenceTree } from '../helpers/trees.js';
import { makeWorkspace } from '../helpers/workspace.js';

const WINDOW_MS = 30;
/** Every file gets this modification time, so swapped files look alike but for their ctime. */
const OLD_TIME = new Date('2020-01-02T03:04:05Z');

/** Files of one size, all with the same old modification time. */
async function makeHost(fileCount: number): Promise<{
  workspace: string;
  storeDirectory: string;
  store: ObjectStore;
}> {
  const layout = Object.fromEntries(
    Array.from({ length: fileCount }, (_, index) => [
      `d${index % 4}/e${index % 3}/f${index % 5}-${index}`,
      `content ${String(index).padStart(4, '0')}`,
    ]),
  );
  const host = await makeWorkspace(layout);
  const { files } = await listAll(host.workspace);
  for (const file of files) await utimes(join(host.workspace, file), OLD_TIME, OLD_TIME);
  return host;
}

/** `cp -a` of everything but `.rewind`, as an isolated session's view is made. */
async function copyOf(host: string): Promise<{ copy: string; storeDirectory: string }> {
  const copy = await makeTempDirectory();
  const storeDirectory = await makeTempDirectory();
  for (const name of await readdir(host)) {
    if (name !== '.rewind') execFileSync('cp', ['-a', join(host, name), copy]);
  }
  return { copy, storeDirectory };
}

/** The source's snapshot, then the copy's first one, seeded from it. */
async function snapshotBoth(
  host: Awaited<ReturnType<typeof makeHost>>,
  copy: string,
  storeDirectory: string,
  sinceNs: bigint,
) {
  const source = await snapshot(host.workspace, {
    store: host.store,
    storeDirectory: host.storeDirectory,
  });
  const seeded = await snapshot(copy, {
    store: host.store,
    storeDirectory,
    changeWindowMs: WINDOW_MS,
    copyOf: { workspace: host.workspace, tree: source.tree, sinceNs },
  });
  return { source, seeded };
}

/** Rewrites a file with other bytes of the same size and puts its old times back. */
async function rewriteAlike(path: string, text: string): Promise<void> {
  const { size } = await stat(path);
  await writeFile(path, text.padEnd(size, '#').slice(0, size));
  await utimes(path, OLD_TIME, OLD_TIME);
}

describe('a first snapshot of a copy', () => {
  it('takes the digests of files unchanged at the source from its snapshot, reading none', async () => {
    const host = await makeHost(40);
    await sleep(WINDOW_MS + 20);
    const sinceNs = BigInt(Date.now()) * 1_000_000n;
    const { copy, storeDirectory } = await copyOf(host.workspace);
    const { source, seeded } = await snapshotBoth(host, copy, storeDirectory, sinceNs);
    expect(seeded).toMatchObject({ tree: source.tree, fileCount: 40, readCount: 0 });
    expect(seeded.tree).toBe(await referenceTree(copy));
  });

  it('reads a file the source changed after the copy began, even with its size and times kept', async () => {
    const host = await makeHost(12);
    await sleep(WINDOW_MS + 20);
    const sinceNs = BigInt(Date.now()) * 1_000_000n;
    const { copy, storeDirectory } = await copyOf(host.workspace);
    // Changed at the source after it was copied, before the source's snapshot: the snapshot
    // holds what the copy does not.
    await rewriteAlike(join(host.workspace, 'd0/e0/f0-0'), 'other bytes');
    const { source, seeded } = await snapshotBoth(host, copy, storeDirectory, sinceNs);
    expect(seeded.readCount).toBe(1);
    expect(seeded.tree).not.toBe(source.tree);
    expect(seeded.tree).toBe(await referenceTree(copy));
  });

  it('agrees with a full read of the copy whatever the source does during the copy', async () => {
    const next = random(20261201);
    let taken = 0;
    for (let round = 0; round < 12; round++) {
      const host = await makeHost(30);
      await sleep(WINDOW_MS + 20);
      const sinceNs = BigInt(Date.now()) * 1_000_000n;
      const { copy, storeDirectory } = await copyOf(host.workspace);
      const editCount = Math.floor(next() * 6);
      for (let step = 0; step < editCount; step++) {
        const { files, dirs } = await listAll(host.workspace);
        const pick = <T>(list: T[]): T | undefined => list[Math.floor(next() * list.length)];
        const choice = next();
        const file = pick(files);
        const at = (path: string) => join(host.workspace, path);
        // An edit that makes no sense here (a name taken by a directory) just fails.
        await (async () => {
          if (choice < 0.3 && file) await rewriteAlike(at(file), `round ${round} step ${step}`);
          else if (choice < 0.45 && dirs.length > 1) {
            // Swap two sibling-free directories: their files look alike (size and times).
            const one = pick(dirs) as string;
            const other = pick(dirs) as string;
            if (`${one}/`.startsWith(`${other}/`) || `${other}/`.startsWith(`${one}/`)) return;
            await rename(at(one), at('swap'));
            await rename(at(other), at(one));
            await rename(at('swap'), at(other));
          } else if (choice < 0.6 && files.length > 1) {
            // A file moved over another: same size, same times, other content.
            const other = pick(files) as string;
            if (other !== file) await rename(at(file as string), at(other));
          } else if (choice < 0.7 && file) await chmod(at(file), 0o755);
          else if (choice < 0.8 && file) await rm(at(file));
          else if (choice < 0.9 && file) {
            await rm(at(file));
            await symlink('elsewhere', at(file));
          } else {
            await mkdir(at(`new${step}`), { recursive: true });
            await writeFile(at(`new${step}/x`), 'new');
          }
        })().catch(() => {});
      }
      const { seeded } = await snapshotBoth(host, copy, storeDirectory, sinceNs);
      expect(seeded.tree, `round ${round}`).toBe(await referenceTree(copy));
      taken += seeded.fileCount - seeded.readCount;
    }
    // Most files were taken from the source's snapshot, not read.
    expect(taken).toBeGreaterThan(12 * 20);
  });
});
