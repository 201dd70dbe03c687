// What the ignore rules leave out of a directory: never snapshotted, so an isolated session's
// commit cannot carry it; listed here so that what changed there is told, never dropped unseen.
import { type BigIntStats, closeSync, lstatSync, openSync, readSync } from 'node:fs';
import { isSystemError } from '../errors.js';
import { diskPath, listNames, readLinkSync } from '../lib/index.js';
import {
  IgnoreRules,
  isAlwaysExcluded,
  type OutsideRules,
  RESTORE_TEMPORARY,
} from './ignore-rules.js';

/**
 * What the ignore rules leave out of a directory tree: every path left out, and every path under
 * a directory left out, each with a signature of its stat (kind, mode, and for a file its size,
 * mtime, ctime and inode; for a link its target). `.rewind` and `.git` are not listed.
 */
export type LeftOutListing = ReadonlyMap<string, string>;

function signatureOf(absolute: string): string | undefined {
  let stats: BigIntStats;
  try {
    stats = lstatSync(diskPath(absolute), { bigint: true });
  } catch (error) {
    if (isSystemError(error, 'ENOENT') || isSystemError(error, 'ENOTDIR')) return undefined;
    // Behind a directory closed to this user: what is there is not known, so never alike.
    if (isSystemError(error, 'EACCES')) return 'unreadable';
    throw error;
  }
  const mode = Number(stats.mode & 0o7777n);
  if (stats.isFile()) {
    return `file:${mode}:${stats.size}:${stats.mtimeNs}:${stats.ctimeNs}:${stats.ino}`;
  }
  if (stats.isDirectory()) return `directory:${mode}`;
  if (stats.isSymbolicLink()) return `symlink:${readLinkSync(absolute)}`;
  return 'other';
}

/**
 * The names in a directory; none when it cannot be read: what was in it then looks gone, so a
 * directory closed since is told as changed (what it holds is not known; nothing is assumed).
 */
function namesIn(absolute: string): { name: string; isDirectory: boolean }[] {
  try {
    return listNames(diskPath(absolute));
  } catch (error) {
    if (
      isSystemError(error, 'EACCES') ||
      isSystemError(error, 'EPERM') ||
      isSystemError(error, 'ENOENT') ||
      isSystemError(error, 'ENOTDIR')
    ) {
      return [];
    }
    throw error;
  }
}

/** Lists, with their stat signatures, the paths of `root` its ignore rules leave out. */
export function listLeftOut(root: string, outside: OutsideRules): LeftOutListing {
  const listing = new Map<string, string>();
  const everything = (absolute: string, relative: string): void => {
    const signature = signatureOf(absolute);
    if (signature === undefined) return;
    listing.set(relative, signature);
    if (!signature.startsWith('directory:')) return;
    for (const { name } of namesIn(absolute)) {
      everything(`${absolute}/${name}`, `${relative}/${name}`);
    }
  };
  const walk = (absolute: string, relative: string, rules: IgnoreRules): void => {
    const inner = relative === '' ? rules : rules.enter(absolute, relative);
    for (const { name, isDirectory } of namesIn(absolute)) {
      if (isAlwaysExcluded(name) || RESTORE_TEMPORARY.test(name)) continue;
      const childRelative = relative === '' ? name : `${relative}/${name}`;
      const childAbsolute = `${absolute}/${name}`;
      if (inner.isIgnored(childRelative, name, isDirectory)) {
        everything(childAbsolute, childRelative);
      } else if (isDirectory) {
        walk(childAbsolute, childRelative, inner);
      }
    }
  };
  walk(root, '', IgnoreRules.root(root, outside));
  return listing;
}

/** True when two files hold the same bytes (read a chunk at a time). */
function isSameContent(a: string, b: string): boolean {
  const first = openSync(diskPath(a), 'r');
  try {
    const second = openSync(diskPath(b), 'r');
    try {
      const size = 1 << 20;
      const left = Buffer.alloc(size);
      const right = Buffer.alloc(size);
      for (;;) {
        const read = readSync(first, left, 0, size, null);
        const other = readSync(second, right, 0, size, null);
        if (read !== other || !left.subarray(0, read).equals(right.subarray(0, other)))
          return false;
        if (read === 0) return true;
      }
    } finally {
      closeSync(second);
    }
  } finally {
    closeSync(first);
  }
}

/** True when the entries at `view` and `host` are alike: same kind and mode, same bytes or target. */
function isSameAsHost(view: string, host: string, signature: string | undefined): boolean {
  const hostSignature = signatureOf(host);
  if (signature === undefined || hostSignature === undefined) return signature === hostSignature;
  if (!signature.startsWith('file:')) return signature === hostSignature;
  const [kind, mode, size] = signature.split(':');
  const [hostKind, hostMode, hostSize] = hostSignature.split(':');
  if (kind !== hostKind || mode !== hostMode || size !== hostSize) return false;
  try {
    return isSameContent(view, host);
  } catch (error) {
    if (isSystemError(error, 'EACCES') || isSystemError(error, 'EISDIR')) return false;
    throw error;
  }
}

/**
 * The paths the ignore rules leave out of `view` that changed there since `before` was listed
 * (created, changed, deleted), except those that now hold just what `host` holds at the same
 * path. Without `before` (a view listed never), every path that differs from `host` counts. Only
 * the topmost path of a created or deleted directory is given, sorted.
 */
export function leftOutChanges(
  view: string,
  host: string,
  outside: OutsideRules,
  before: LeftOutListing | undefined,
): string[] {
  const now = listLeftOut(view, outside);
  const candidates = new Set<string>();
  for (const [path, signature] of now) {
    if (before?.get(path) !== signature) candidates.add(path);
  }
  const previous = before ?? listLeftOut(host, outside);
  for (const path of previous.keys()) if (!now.has(path)) candidates.add(path);
  const changed = new Set(
    [...candidates].filter(
      (path) => !isSameAsHost(`${view}/${path}`, `${host}/${path}`, now.get(path)),
    ),
  );
  const hasChangedAncestor = (path: string): boolean => {
    for (let end = path.lastIndexOf('/'); end > 0; end = path.lastIndexOf('/', end - 1)) {
      if (changed.has(path.slice(0, end))) return true;
    }
    return false;
  };
  const tops = [...changed].filter((path) => !hasChangedAncestor(path)).sort();
  return tops;
}
