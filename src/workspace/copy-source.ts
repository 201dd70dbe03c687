// A first snapshot of a fresh copy of a workspace takes the contents of unchanged files from the
// snapshot of the workspace it was copied from, instead of reading and hashing every file again.
import type { BigIntStats } from 'node:fs';
import type { Digest } from '../lib/index.js';
import { forEachConcurrently } from '../lib/index.js';
import { type ObjectStore, readTree, type TreeEntry } from '../store/index.js';
import { CONCURRENCY, lstatEntry, type ScannedEntry } from './walk.js';

/** Where a workspace was copied from; see `SnapshotOptions.copyOf`. */
export interface CopySource {
  /** The workspace copied (`cp -a`: modes and modification times kept). */
  workspace: string;
  /** A snapshot of `workspace` begun at `sinceNs` or later. */
  tree: Digest;
  /** Wall-clock time (ns) before the copy began and before the snapshot `tree` began. */
  sinceNs: bigint;
}

/** The modification time of a scanned entry, from its fingerprint (`size:mtime:ctime:ino:mode`). */
function mtimeOf(entry: ScannedEntry): bigint {
  const start = entry.fingerprint.indexOf(':') + 1;
  return BigInt(entry.fingerprint.slice(start, entry.fingerprint.indexOf(':', start)));
}

/** True when the source file has not changed since `limitNs` and matches the copy's stat. */
function isUnchangedSource(
  stats: BigIntStats | undefined,
  entry: ScannedEntry,
  limitNs: bigint,
): boolean {
  return (
    stats?.isFile() === true &&
    stats.ctimeNs < limitNs &&
    stats.mtimeNs < limitNs &&
    stats.size === BigInt(entry.sizeBytes) &&
    stats.mtimeNs === mtimeOf(entry)
  );
}

/**
 * Gives each file of a scan of the copy that the stat cache did not know the digest its source
 * has in `source.tree`, when the source file has not changed since before the copy and the
 * snapshot began (its ctime and mtime older than `sinceNs` less `windowNs`, the filesystem's
 * timestamp granularity) and has the copy's size, modification time and mode. Both the copy and
 * the snapshot then saw the same content. Every other file is left to be read. Sound only for a
 * copy nothing else has written since it was made (an isolated session's view at its start):
 * the copy's own ctime says nothing, since copying set it.
 */
export async function takeFromCopySource(
  entries: readonly ScannedEntry[],
  source: CopySource,
  store: ObjectStore,
  windowNs: bigint,
): Promise<number> {
  const limitNs = source.sinceNs - windowNs;
  let taken = 0;
  const visit = async (
    scanned: readonly ScannedEntry[],
    tree: Digest,
    absolute: string,
  ): Promise<void> => {
    const needs = scanned.some(
      (entry) => entry.children || (entry.kind === 'file' && entry.payload === undefined),
    );
    if (!needs) return;
    const sourceEntries = new Map<string, TreeEntry>(
      (await readTree(store, tree)).entries.map((entry) => [entry.name, entry]),
    );
    const directories: [ScannedEntry, Digest][] = [];
    for (const entry of scanned) {
      const known = sourceEntries.get(entry.name);
      if (entry.children) {
        if (known?.type === 'directory') directories.push([entry, known.digest]);
        continue;
      }
      if (entry.kind !== 'file' || entry.payload !== undefined || known?.type !== 'file') continue;
      if (known.sizeBytes !== entry.sizeBytes || known.mode !== entry.mode) continue;
      let stats: BigIntStats | undefined;
      try {
        stats = lstatEntry(`${absolute}/${entry.name}`, entry.relative);
      } catch {
        continue; // Not readable there: the copy is read instead.
      }
      if (!isUnchangedSource(stats, entry, limitNs)) continue;
      entry.payload = known.digest;
      taken += 1;
    }
    await forEachConcurrently(directories, CONCURRENCY, ([entry, digest]) =>
      visit(entry.children ?? [], digest, `${absolute}/${entry.name}`),
    );
  };
  await visit(entries, source.tree, source.workspace);
  return taken;
}
