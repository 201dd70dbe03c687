import { join } from 'node:path';
import { isRewindError, type RewindError } from '../errors.js';
import { type Digest, isDigest, readPlainFile, writeFileAtomic } from '../lib/index.js';
import type { ObjectStore } from '../store/index.js';
import { makeCacheDirectory } from './changes.js';
import { countLineChanges, type LineCounts } from './render-diff.js';
import { diffTrees } from './tree-diff.js';

/**
 * The cache of lines added and removed between two trees (`.rewind/cache/line-counts-v1.json`).
 * Trees are content-addressed, so a count never goes stale: a pruned checkpoint only makes the
 * listing ask for another pair. It is a cache: deleted or damaged, the counts are made again.
 */
const CACHE_FILE = join('cache', 'line-counts-v1.json');
const FORMAT = 'rewind-line-counts';
const VERSION = 1;

/** Counts by `FROM TO`: `[linesAdded, linesRemoved]`. */
type Counts = Map<string, readonly [number, number]>;

const keyOf = (from: Digest, to: Digest) => `${from} ${to}`;
const isCount = (value: unknown): value is number =>
  Number.isSafeInteger(value) && Number(value) >= 0;

/** The counts a cache file holds; none when it is missing, damaged or of another version. */
async function loadCounts(storeDirectory: string): Promise<Counts> {
  const counts: Counts = new Map();
  let document: unknown;
  try {
    const opened = await readPlainFile(join(storeDirectory, CACHE_FILE));
    if (!opened.isFile) return counts;
    document = JSON.parse(opened.value.toString('utf8'));
  } catch {
    // Missing, unreadable or not JSON (a crash may leave a torn cache): start again.
    return counts;
  }
  const { format, version, pairs } = (document ?? {}) as Record<string, unknown>;
  if (format !== FORMAT || version !== VERSION || typeof pairs !== 'object' || pairs === null) {
    return counts;
  }
  for (const [key, value] of Object.entries(pairs)) {
    const [from, to, extra] = key.split(' ');
    if (!isDigest(from) || !isDigest(to) || extra !== undefined) continue;
    if (Array.isArray(value) && value.length === 2 && isCount(value[0]) && isCount(value[1])) {
      counts.set(key, [value[0], value[1]]);
    }
  }
  return counts;
}

/** Writes the counts; a store that cannot take it (read-only, full) lists them anyway. */
async function saveCounts(storeDirectory: string, counts: Counts): Promise<void> {
  const document = { format: FORMAT, version: VERSION, pairs: Object.fromEntries(counts) };
  try {
    await makeCacheDirectory(storeDirectory);
    await writeFileAtomic(join(storeDirectory, CACHE_FILE), JSON.stringify(document), {
      isDurable: false,
    });
  } catch {
    // Only a cache: the next listing counts these again.
  }
}

/** True for the errors of an object missing or damaged, which leave only that pair uncounted. */
const isDamage = (error: unknown): error is RewindError =>
  isRewindError(error, 'OBJECT_NOT_FOUND') ||
  isRewindError(error, 'OBJECT_CORRUPT') ||
  isRewindError(error, 'TREE_INVALID');

/**
 * The lines added and removed from each pair's first tree to its second, as `countLineChanges`
 * counts them: from the store's cache, the pairs it lacks counted (reading the files that changed
 * between them) and added to it. A pair that needs an object missing or damaged in the store
 * (`OBJECT_NOT_FOUND`, `OBJECT_CORRUPT`, `TREE_INVALID`) is that error, and the others are still
 * counted; any other error is thrown.
 */
export async function lineCountsBetween(
  store: ObjectStore,
  storeDirectory: string,
  pairs: readonly { from: Digest; to: Digest }[],
): Promise<(LineCounts | { error: RewindError })[]> {
  if (pairs.length === 0) return [];
  const counts = await loadCounts(storeDirectory);
  const sizeBefore = counts.size;
  const listed: (LineCounts | { error: RewindError })[] = [];
  for (const { from, to } of pairs) {
    const key = keyOf(from, to);
    let cached = counts.get(key);
    if (cached === undefined) {
      try {
        const { linesAdded, linesRemoved } = await countLineChanges(
          store,
          await diffTrees(store, from, to),
        );
        cached = [linesAdded, linesRemoved];
      } catch (error) {
        if (!isDamage(error)) throw error;
        listed.push({ error });
        continue;
      }
      counts.set(key, cached);
    }
    listed.push({ linesAdded: cached[0], linesRemoved: cached[1] });
  }
  if (counts.size !== sizeBefore) await saveCounts(storeDirectory, counts);
  return listed;
}

/**
 * Drops the cached counts of pairs with a tree `isKept` refuses (gc removes it), so the cache
 * stays as large as what the store keeps. Returns how many were dropped.
 */
export async function forgetUnkeptLineCounts(
  storeDirectory: string,
  isKept: (digest: Digest) => boolean,
): Promise<number> {
  const counts = await loadCounts(storeDirectory);
  let forgotten = 0;
  for (const key of counts.keys()) {
    const [from, to] = key.split(' ') as [Digest, Digest];
    if (!isKept(from) || !isKept(to)) {
      counts.delete(key);
      forgotten += 1;
    }
  }
  if (forgotten > 0) await saveCounts(storeDirectory, counts);
  return forgotten;
}
