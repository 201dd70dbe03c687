// What inotifywait watches, and what it should: it sets its watches up by a walk that does not see
// a directory made in one it has listed but not yet watched, which would stay unwatched for good.
import { type BigIntStats, lstatSync, readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { decodeName, diskPath, listNames } from '../lib/index.js';
import { findRecords } from './changes.js';
import { holdsIgnoreFile, type IgnoreRules, isAlwaysExcluded } from './ignore-rules.js';
import type { WatchedRules } from './watch-places.js';

/**
 * A directory's key as the kernel shows a watch (`sdev:ino`, hexadecimal): its device in the
 * kernel's encoding (major << 20 | minor), not the one `stat` gives.
 */
export function watchKey(stats: { dev: bigint; ino: bigint }): string {
  const { dev, ino } = stats;
  const major = ((dev >> 8n) & 0xfffn) | ((dev >> 32n) & ~0xfffn);
  const minor = (dev & 0xffn) | ((dev >> 12n) & ~0xffn);
  return `${((major << 20n) | minor).toString(16)}:${ino.toString(16)}`;
}

/** The keys of the inodes a process watches by inotify (its fdinfo); undefined if unreadable. */
export function watchedInodes(pid: number): Set<string> | undefined {
  try {
    for (const fd of readdirSync(`/proc/${pid}/fdinfo`)) {
      const text = readFileSync(`/proc/${pid}/fdinfo/${fd}`, 'latin1');
      if (!text.includes('inotify wd:')) continue;
      const keys = new Set<string>();
      for (const [, ino, sdev] of text.matchAll(
        /^inotify wd:[0-9a-f]+ ino:([0-9a-f]+) sdev:([0-9a-f]+)/gm,
      )) {
        keys.add(`${sdev}:${ino}`);
      }
      return keys;
    }
  } catch {}
  return undefined;
}

function lstatOf(path: string): BigIntStats | undefined {
  try {
    return lstatSync(diskPath(path), { bigint: true });
  } catch {
    return undefined;
  }
}

/** Whether `stats` is the directory still at `path`: one deleted since needs no watch. */
function isStillThere(path: string, key: string): boolean {
  const stats = lstatOf(path);
  if (!stats?.isDirectory()) return false;
  return watchKey(stats) === key;
}

/** Paths a watch walk leaves alone: as find prunes them, and the directories left out. */
function isSkipped(relative: string, name: string, excluded: ReadonlySet<string>): boolean {
  return isAlwaysExcluded(name) || excluded.has(relative);
}

/** What {@link walkMade} found under the directories made or moved in. */
export interface MadeWalk {
  /** The first directory without a watch, if any. */
  unwatched: string | undefined;
  /** The files with more than one link. */
  linked: string[];
  /** The directories the ignore rules leave out (not walked: they need no watch). */
  ignored: string[];
}

/**
 * Walks the directories at `relatives` (made or moved in since the last drain: their watches
 * were set up by a walk that may have missed some) and what is under them, for the first
 * directory that is not among `watched` and the files with more than one link, leaving out the
 * directories the ignore rules leave out (a tree moved in with its `node_modules`) and listing
 * them. Where the rules cannot be read, it walks on with none.
 */
export function walkMade(
  root: string,
  relatives: Iterable<string>,
  watched: ReadonlySet<string>,
  excluded: ReadonlySet<string>,
  watchedRules: WatchedRules,
): MadeWalk {
  const linked: string[] = [];
  const ignored: string[] = [];
  const pending: [string, IgnoreRules | undefined][] = [];
  for (const relative of relatives) {
    const above = watchedRules.above(relative);
    if (above !== 'left out') pending.push([relative, above]);
  }
  for (let next = pending.pop(); next !== undefined; next = pending.pop()) {
    const [relative, rules] = next;
    const absolute = relative === '' ? root : join(root, relative);
    const stats = lstatOf(absolute);
    if (stats === undefined) continue;
    if (!stats.isDirectory()) {
      if (stats.nlink > 1n) linked.push(relative);
      continue;
    }
    const name = relative.slice(relative.lastIndexOf('/') + 1);
    if (relative !== '' && rules?.isIgnored(relative, name, true)) {
      ignored.push(relative);
      continue;
    }
    if (!watched.has(watchKey(stats))) return { unwatched: relative, linked, ignored };
    let names: { name: string; isDirectory: boolean }[];
    try {
      names = listNames(diskPath(absolute));
    } catch {
      continue;
    }
    let inner = rules;
    try {
      if (holdsIgnoreFile(names.map((entry) => entry.name)))
        inner = rules?.enter(absolute, relative);
    } catch {
      inner = undefined;
    }
    for (const { name } of names) {
      const path = relative === '' ? name : `${relative}/${name}`;
      if (!isSkipped(path, name, excluded)) pending.push([path, inner]);
    }
  }
  return { unwatched: undefined, linked, ignored };
}

/** What a walk by find lists for a watch: every directory with its key, and files of several links. */
export interface WatchListing {
  directories: { path: string; key: string }[];
  linked: string[];
}

/** Escapes what `find -path` would take as a pattern. */
const literally = (path: string): string => path.replace(/[*?[\]\\]/g, '\\$&');

/**
 * Lists every directory under `root` that a watch of it should hold (not `.git`, `.rewind` or
 * the directories `excluded`, relative) and every file with more than one link. By GNU find,
 * twice if need be: find fails when a directory vanishes while it lists it (a build removing its
 * output). Then by a slower walk of its own, which skips what vanished; undefined when that
 * fails too (a directory it cannot read), since a listing that missed a subtree would leave a
 * directory without a watch unnoticed.
 */
export async function listForWatch(
  root: string,
  excluded: readonly string[],
): Promise<WatchListing | undefined> {
  return (
    (await findForWatch(root, excluded)) ??
    (await findForWatch(root, excluded)) ??
    walkForWatch(root, new Set(excluded))
  );
}

/** {@link listForWatch} by find; undefined when find is missing or fails. */
async function findForWatch(
  root: string,
  excluded: readonly string[],
): Promise<WatchListing | undefined> {
  // Directories only are matched against the paths left out (a test for each entry would cost).
  const paths = excluded.flatMap((path) => ['-o', '-path', literally(join(root, path))]).slice(1);
  const pruned = paths.length === 0 ? [] : ['-o', '-type', 'd', '(', ...paths, ')'];
  // biome-ignore format: the find expression reads best on one line
  const args = [root, '(', '-name', '.git', '-o', '-name', '.rewind', ...pruned, ')', '-prune', '-o', '-type', 'd', '-printf', 'd%D %i %P\\0', '-o', '-links', '+1', '-printf', 'l%P\\0'];
  const records = await findRecords(args);
  if (records === undefined) return undefined;
  const listing: WatchListing = { directories: [], linked: [] };
  for (const record of records) {
    if (record[0] === 0x6c) {
      listing.linked.push(decodeName(record.subarray(1)));
      continue;
    }
    const space = record.indexOf(0x20);
    const second = record.indexOf(0x20, space + 1);
    const dev = BigInt(record.subarray(1, space).toString('latin1'));
    const ino = BigInt(record.subarray(space + 1, second).toString('latin1'));
    const path = decodeName(record.subarray(second + 1));
    listing.directories.push({ path, key: watchKey({ dev, ino }) });
  }
  return listing;
}

/** Codes of a path that vanished while it was listed: it needs no watch. */
const VANISHED = new Set(['ENOENT', 'ENOTDIR']);

/** {@link listForWatch} by a walk of its own; undefined when a path cannot be listed. */
function walkForWatch(root: string, excluded: ReadonlySet<string>): WatchListing | undefined {
  const listing: WatchListing = { directories: [], linked: [] };
  const pending = [''];
  for (let relative = pending.pop(); relative !== undefined; relative = pending.pop()) {
    const absolute = diskPath(relative === '' ? root : join(root, relative));
    try {
      const stats = lstatSync(absolute, { bigint: true });
      if (!stats.isDirectory()) {
        if (stats.nlink > 1n) listing.linked.push(relative);
        continue;
      }
      listing.directories.push({ path: relative, key: watchKey(stats) });
      for (const { name } of listNames(absolute)) {
        const inner = relative === '' ? name : `${relative}/${name}`;
        if (!isSkipped(inner, name, excluded)) pending.push(inner);
      }
    } catch (error) {
      if (relative === '' || !VANISHED.has((error as NodeJS.ErrnoException).code ?? '')) {
        return undefined;
      }
    }
  }
  return listing;
}

/**
 * The first directory of `listing` that is not among `watched` and is still there (under
 * `root`); undefined when every one is watched.
 */
export function firstUnwatchedListed(
  root: string,
  listing: WatchListing,
  watched: ReadonlySet<string>,
): string | undefined {
  for (const { path, key } of listing.directories) {
    if (!watched.has(key) && isStillThere(path === '' ? root : join(root, path), key)) return path;
  }
  return undefined;
}
