// The full walk of a snapshot: scanning every entry, storing changed files, building trees.
import { type BigIntStats, closeSync, constants, fstatSync, lstatSync, openSync } from 'node:fs';
import { isRewindError, isSystemError, RewindError } from '../errors.js';
import {
  type Digest,
  diskPath,
  forEachConcurrently,
  isOpenedAt,
  pathOfDescriptor,
  readAt,
  readLinkSync,
  readNamesSync,
} from '../lib/index.js';
import {
  encodeTree,
  type ObjectBatch,
  type ObjectStore,
  putTreeIn,
  type TreeEntry,
} from '../store/index.js';
import { holdsIgnoreFile, type IgnoreRules } from './ignore-rules.js';
import type { StatCache } from './stat-cache.js';

const SMALL_FILE_BYTES = 1024 * 1024;
const READ_ATTEMPTS = 4;
export const CONCURRENCY = 8;

type Kind = 'file' | 'directory' | 'symlink';

export interface ScannedEntry {
  name: string;
  relative: string;
  absolute: string;
  kind: Kind;
  mode: number;
  sizeBytes: number;
  fingerprint: string;
  changedAtNs: bigint;
  /** Content digest (file), target (symlink) or tree digest (directory), once known. */
  payload: string | undefined;
  /** True when nothing about this entry changed since the cached snapshot. */
  isUnchanged: boolean;
  /** True when its content could not be read: the snapshot leaves it out. */
  isUnreadable?: boolean;
  children: ScannedEntry[] | undefined;
}

/**
 * What a file's stat says of its content, its ctime left out: what a restore knew of a file it
 * wrote before renaming it into place (the rename changes the ctime). See `WorkspaceWatcher.wrote`.
 */
export function contentStatOf(stats: BigIntStats): string {
  return `${stats.size}:${stats.mtimeNs}:${stats.ino}:${stats.mode}`;
}

function fingerprintOf(stats: BigIntStats): string {
  return `${stats.size}:${stats.mtimeNs}:${stats.ctimeNs}:${stats.ino}:${stats.mode}`;
}

/** The later of mtime and ctime: when the file last changed, whichever way. */
function changedAtOf(stats: BigIntStats): bigint {
  if (stats.mtimeNs > stats.ctimeNs) return stats.mtimeNs;
  return stats.ctimeNs;
}

/** System errors that say the disk or the system failed, not the file: never a reason to skip it. */
const SYSTEM_FAILURES = new Set(['ENOSPC', 'EDQUOT', 'EROFS', 'EIO', 'ENOMEM', 'EMFILE', 'ENFILE']);

/**
 * The error for a path that cannot be snapshotted: `IO_FAILED` when the disk or the system
 * failed (full, read-only, an I/O error: nothing about the file, so leaving it out would hide the
 * real problem), else `PATH_UNREADABLE` (no permission, a name too long, a file that keeps
 * changing), which a snapshot that lists what it cannot read leaves out.
 */
export function unreadable(path: string, error: unknown): RewindError {
  const code = (error as { code?: unknown } | undefined)?.code;
  if (typeof code === 'string' && SYSTEM_FAILURES.has(code)) {
    return new RewindError(
      'IO_FAILED',
      `Snapshotting ${path} failed: ${code === 'ENOSPC' || code === 'EDQUOT' ? 'the disk is full' : String(error)}. ` +
        'That is the disk or the system, not the file: free space or fix it, then retry. Nothing was recorded.',
      { data: { path, code }, cause: error },
    );
  }
  const reason =
    isSystemError(error, 'EACCES') || isSystemError(error, 'EPERM')
      ? 'permission denied'
      : isSystemError(error, 'ENAMETOOLONG')
        ? 'its path is too long for the system'
        : error instanceof Error
          ? error.message
          : String(error);
  return new RewindError(
    'PATH_UNREADABLE',
    `Cannot read ${path} (${reason}). Make it readable; until then checkpoints leave it out, and no rollback or undo touches it.`,
    { data: { path, reason }, cause: error },
  );
}

/** True for what {@link unreadable} says of a path that a snapshot can leave out. */
function isUnreadablePath(error: unknown): error is RewindError {
  return isRewindError(error, 'PATH_UNREADABLE');
}

/**
 * What tells one directory from another that later stands at the same path: its inode and its
 * birth time (an inode number can be reused once a directory is gone; its birth time cannot).
 */
export function directoryIdentityOf(stats: BigIntStats): string {
  return `${stats.ino}:${stats.birthtimeNs}`;
}

/** What a scan collects besides the entries. */
export interface ScanContext {
  cache: StatCache;
  warnings: string[];
  /** Directories that hold an ignore file (`.gitignore`, `.rewindignore`). */
  ignoreDirectories: string[];
  /** When given, receives every path left out by the ignore rules. */
  ignored?: string[];
  /** When given, receives the identity of every directory scanned, by path. */
  directoryIdentities?: Map<string, string>;
  /** When given, receives the paths of what is not a file, directory or link (a FIFO, a socket). */
  special?: string[];
  /**
   * When given, a path that cannot be read (no permission, too long, changing all the time) is
   * left out and listed here, with why, instead of failing the scan.
   */
  unreadable?: { path: string; reason: string }[];
}

/** Runs `read` for `path`; an unreadable path is listed and skipped when the context allows. */
function readOrSkip<T>(context: ScanContext, read: () => T): T | undefined {
  try {
    return read();
  } catch (error) {
    if (!context.unreadable || !isUnreadablePath(error)) throw error;
    const { path, reason } = error.data as { path: string; reason: string };
    context.unreadable.push({ path, reason });
    return undefined;
  }
}

export function scanDirectory(
  absolute: string,
  relative: string,
  rules: IgnoreRules,
  context: ScanContext,
): ScannedEntry[] {
  const { cache, warnings, ignoreDirectories } = context;
  let names: string[];
  try {
    names = readNamesSync(absolute);
  } catch (error) {
    throw unreadable(relative === '' ? absolute : relative, error);
  }
  // Only directories that hold an ignore file add rules: no failed open in every directory.
  const hasRules = holdsIgnoreFile(names);
  if (hasRules) ignoreDirectories.push(relative);
  const inner = relative !== '' && hasRules ? rules.enter(absolute, relative) : rules;
  const entries: ScannedEntry[] = [];
  for (const name of names) {
    const childRelative = relative === '' ? name : `${relative}/${name}`;
    const childAbsolute = `${absolute}/${name}`;
    const stats = readOrSkip(context, () => lstatEntry(childAbsolute, childRelative));
    if (stats === undefined) continue;
    const kind: Kind | undefined = stats.isFile()
      ? 'file'
      : stats.isDirectory()
        ? 'directory'
        : stats.isSymbolicLink()
          ? 'symlink'
          : undefined;
    if (inner.isIgnored(childRelative, name, kind === 'directory')) {
      context.ignored?.push(childRelative);
      continue;
    }
    if (kind === undefined) {
      context.special?.push(childRelative);
      warnings.push(
        `${childRelative} is not a file, directory or symbolic link (a socket or device?); it was left out`,
      );
      continue;
    }
    const fingerprint = fingerprintOf(stats);
    const changedAtNs = changedAtOf(stats);
    const entry: ScannedEntry = {
      name,
      relative: childRelative,
      absolute: childAbsolute,
      kind,
      mode: Number(stats.mode) & 0o7777,
      sizeBytes: kind === 'file' ? Number(stats.size) : 0,
      fingerprint,
      changedAtNs,
      payload: undefined,
      isUnchanged: false,
      children: undefined,
    };
    if (kind === 'directory') {
      context.directoryIdentities?.set(childRelative, directoryIdentityOf(stats));
      const children = readOrSkip(context, () =>
        scanDirectory(childAbsolute, childRelative, inner, context),
      );
      if (children === undefined) continue;
      entry.children = children;
    } else {
      entry.payload = cache.lookup(childRelative, fingerprint, changedAtNs);
      entry.isUnchanged = entry.payload !== undefined;
      if (kind === 'symlink' && entry.payload === undefined) {
        const target = readOrSkip(context, () => {
          try {
            return readLinkSync(childAbsolute);
          } catch (error) {
            throw unreadable(childRelative, error);
          }
        });
        if (target === undefined) continue;
        entry.payload = target;
      }
    }
    entries.push(entry);
  }
  return entries;
}

/** The entry's lstat; undefined when it is gone (deleted while the directory was read). */
export function lstatEntry(absolute: string, relative: string): BigIntStats | undefined {
  try {
    return lstatSync(diskPath(absolute), { bigint: true });
  } catch (error) {
    // ENOTDIR: a folder above it is a file now, so it is absent.
    if (isSystemError(error, 'ENOENT') || isSystemError(error, 'ENOTDIR')) return undefined;
    throw unreadable(relative, error);
  }
}

/** A regular file about to be read and stored. */
export function fileToRead(
  name: string,
  relative: string,
  absolute: string,
  stats: BigIntStats,
): ScannedEntry {
  return {
    name,
    relative,
    absolute,
    kind: 'file',
    mode: Number(stats.mode) & 0o7777,
    sizeBytes: Number(stats.size),
    fingerprint: fingerprintOf(stats),
    changedAtNs: changedAtOf(stats),
    payload: undefined,
    isUnchanged: false,
    children: undefined,
  };
}

function sameStats(a: BigIntStats, b: BigIntStats): boolean {
  return a.size === b.size && a.mtimeNs === b.mtimeNs && a.ctimeNs === b.ctimeNs && a.ino === b.ino;
}

/**
 * Stores one file's content, making sure it did not change while it was read: the file's stat
 * before and after reading must match, and so must the number of bytes read (a truncate and a
 * rewrite within one tick of the filesystem clock leave the times as they were), else it is read
 * again. Never stores a torn file.
 */
export async function storeFile(entry: ScannedEntry, batch: ObjectBatch): Promise<void> {
  for (let attempt = 1; ; attempt++) {
    let before: BigIntStats;
    let after: BigIntStats;
    let content: Buffer | { file: string };
    let descriptor: number | undefined;
    try {
      // Opened here, so a file that cannot be read is told apart from a store that cannot write;
      // never through a link at its name, and without waiting should a named pipe be there now.
      try {
        descriptor = openSync(
          diskPath(entry.absolute),
          constants.O_RDONLY | constants.O_NOFOLLOW | constants.O_NONBLOCK,
        );
      } catch (error) {
        // A symbolic link (ELOOP) or a socket (ENXIO) there now.
        throw isSystemError(error, 'ELOOP') || isSystemError(error, 'ENXIO')
          ? typeChanged()
          : error;
      }
      before = fstatSync(descriptor, { bigint: true });
      if (!before.isFile()) throw typeChanged();
      // What was opened must be the file at its path: a directory on the path swapped for a link
      // to elsewhere would have a file outside the workspace stored (and later restored in it).
      if (!isOpenedAt(descriptor, entry.absolute)) {
        throw Object.assign(new Error('a directory on its path was moved or replaced'), {
          code: 'EMOVED',
        });
      }
      // Small files are read synchronously: a thread-pool round trip costs more than the read
      // (one read of the size fstat gave: readFileSync would stat again and read once more to find
      // the end; the stat after tells whether it changed). A large one is copied by the store
      // through the open descriptor, never by its path again.
      content =
        before.size <= SMALL_FILE_BYTES
          ? readAt(descriptor, Number(before.size), 0)
          : { file: pathOfDescriptor(descriptor, entry.absolute) };
      after = fstatSync(descriptor, { bigint: true });
    } catch (error) {
      if (descriptor !== undefined) closeSync(descriptor);
      const isGone = isSystemError(error, 'ENOENT') || isSystemError(error, 'EMOVED');
      if (isGone && attempt < READ_ATTEMPTS) continue;
      throw unreadable(entry.relative, error);
    }
    let digest: Digest;
    let readBytes: number;
    try {
      ({ digest, sizeBytes: readBytes } = await batch.put(content));
      if (!Buffer.isBuffer(content)) after = fstatSync(descriptor, { bigint: true });
    } catch (error) {
      if (isRewindError(error)) throw error;
      throw storeFailed(entry.relative, error);
    } finally {
      closeSync(descriptor);
    }
    if (sameStats(before, after) && BigInt(readBytes) === after.size) {
      entry.payload = digest;
      entry.fingerprint = fingerprintOf(after);
      entry.changedAtNs = changedAtOf(after);
      entry.sizeBytes = Number(after.size);
      entry.mode = Number(after.mode) & 0o7777;
      return;
    }
    if (attempt >= READ_ATTEMPTS) {
      throw unreadable(
        entry.relative,
        Object.assign(new Error(`it changed every time it was read (${READ_ATTEMPTS} times)`), {
          code: 'ECHANGED',
        }),
      );
    }
  }
}

/** Why a file that was listed is not read: something else is at its name now. */
function typeChanged(): Error {
  return Object.assign(new Error('it stopped being a regular file'), { code: 'ECHANGED' });
}

/** The error for a copy into the store that failed: the disk or the store, never the file. */
function storeFailed(path: string, error: unknown): RewindError {
  const code = (error as { code?: unknown } | undefined)?.code;
  return new RewindError(
    'IO_FAILED',
    `Storing a copy of ${path} in .rewind failed: ${code === 'ENOSPC' || code === 'EDQUOT' ? 'the disk is full' : String(error)}. ` +
      'Free space (or fix the store), then retry. Nothing was recorded.',
    { data: { path, code }, cause: error },
  );
}

function collectFilesToRead(entries: readonly ScannedEntry[], into: ScannedEntry[]): void {
  for (const entry of entries) {
    if (entry.children) collectFilesToRead(entry.children, into);
    else if (entry.kind === 'file' && entry.payload === undefined) into.push(entry);
  }
}

/** Builds the tree objects bottom-up, reusing a directory's cached tree when nothing in it changed. */
async function buildTree(
  relative: string,
  mode: number,
  entries: readonly ScannedEntry[],
  cache: StatCache,
  batch: ObjectBatch,
  store: ObjectStore | undefined,
): Promise<{ digest: Digest; isUnchanged: boolean }> {
  let isUnchanged = true;
  const kept = entries.filter((entry) => !entry.isUnreadable);
  if (kept.length !== entries.length) isUnchanged = false;
  for (const entry of kept) {
    if (entry.children) {
      const sub = await buildTree(entry.relative, entry.mode, entry.children, cache, batch, store);
      entry.payload = sub.digest;
      entry.isUnchanged = sub.isUnchanged;
    } else {
      cache.record(entry.relative, entry.fingerprint, entry.payload as string);
    }
    if (!entry.isUnchanged) isUnchanged = false;
  }
  // A directory's own mode is part of its parent's listing, so it is part of what must match.
  const key = `${relative}/`;
  const fingerprint = `${kept.length}:${mode}`;
  const cached = cache.lookup(key, fingerprint, 0n);
  if (isUnchanged && cached !== undefined) {
    cache.record(key, fingerprint, cached);
    return { digest: cached as Digest, isUnchanged: true };
  }
  const tree: TreeEntry[] = kept.map((entry) => {
    if (entry.kind === 'file') {
      return {
        name: entry.name,
        type: 'file',
        mode: entry.mode,
        sizeBytes: entry.sizeBytes,
        digest: entry.payload as Digest,
      };
    }
    if (entry.kind === 'directory') {
      return {
        name: entry.name,
        type: 'directory',
        mode: entry.mode,
        digest: entry.payload as Digest,
      };
    }
    return { name: entry.name, type: 'symlink', target: entry.payload as string };
  });
  // Kept decoded too, with the store: the next snapshots rebuild from these trees.
  const digest = store
    ? await putTreeIn(store, batch, tree)
    : (await batch.put(encodeTree(tree))).digest;
  cache.record(key, fingerprint, digest);
  return { digest, isUnchanged: cached === digest };
}

/** How a snapshot is going: files read and stored so far, of those it must read. */
export interface SnapshotProgress {
  filesRead: number;
  filesToRead: number;
  bytesRead: number;
  bytesToRead: number;
}

/**
 * Reads and stores the files of a scan that the stat cache could not vouch for, then builds the
 * tree objects (kept decoded as well when `store`, the batch's, is given: see `readTree`).
 * Returns the tree's digest and how many files were read.
 */
export async function storeScannedTree(
  relative: string,
  mode: number,
  entries: readonly ScannedEntry[],
  cache: StatCache,
  batch: ObjectBatch,
  {
    store,
    onProgress,
    unreadablePaths,
  }: {
    store?: ObjectStore;
    onProgress?: ((progress: SnapshotProgress) => void) | undefined;
    unreadablePaths?: { path: string; reason: string }[];
  } = {},
): Promise<{ digest: Digest; readCount: number }> {
  const toRead: ScannedEntry[] = [];
  collectFilesToRead(entries, toRead);
  const progress: SnapshotProgress = {
    filesRead: 0,
    filesToRead: toRead.length,
    bytesRead: 0,
    bytesToRead: toRead.reduce((sum, entry) => sum + entry.sizeBytes, 0),
  };
  await forEachConcurrently(toRead, CONCURRENCY, async (entry) => {
    try {
      await storeFile(entry, batch);
    } catch (error) {
      if (!unreadablePaths || !isUnreadablePath(error)) throw error;
      entry.isUnreadable = true;
      unreadablePaths.push(error.data as { path: string; reason: string });
    }
    if (!onProgress) return;
    progress.filesRead += 1;
    progress.bytesRead += entry.sizeBytes;
    onProgress({ ...progress });
  });
  const { digest } = await buildTree(relative, mode, entries, cache, batch, store);
  return { digest, readCount: toRead.length };
}

export function summarize(entries: readonly ScannedEntry[]): {
  fileCount: number;
  directoryCount: number;
  sizeBytes: number;
} {
  const totals = { fileCount: 0, directoryCount: 0, sizeBytes: 0 };
  for (const entry of entries) {
    if (entry.isUnreadable) continue;
    if (entry.children) {
      const inner = summarize(entry.children);
      totals.fileCount += inner.fileCount;
      totals.directoryCount += inner.directoryCount + 1;
      totals.sizeBytes += inner.sizeBytes;
    } else {
      totals.fileCount += 1;
      totals.sizeBytes += entry.sizeBytes;
    }
  }
  return totals;
}

/** A directory and what it holds. */
export interface DirectorySize {
  path: string;
  fileCount: number;
  sizeBytes: number;
}

/** The largest directories among `entries` (a scan's top level), largest first. */
export function largestDirectories(entries: readonly ScannedEntry[], count = 5): DirectorySize[] {
  return entries
    .filter((entry) => entry.children)
    .map((entry) => ({ path: entry.relative, ...summarize(entry.children ?? []) }))
    .sort((a, b) => b.sizeBytes - a.sizeBytes || b.fileCount - a.fileCount)
    .slice(0, count)
    .map(({ path, fileCount, sizeBytes }) => ({ path, fileCount, sizeBytes }));
}

export function budgetWarning(
  entries: readonly ScannedEntry[],
  totals: { fileCount: number; sizeBytes: number },
  budget: { maxBytes: number; maxFiles: number },
): string | undefined {
  if (totals.sizeBytes <= budget.maxBytes && totals.fileCount <= budget.maxFiles) return undefined;
  const largest = largestDirectories(entries).map(
    (entry) =>
      `${entry.path}/ (${(entry.sizeBytes / 1024 ** 2).toFixed(1)} MiB, ${entry.fileCount} files)`,
  );
  return (
    `This first snapshot stores ${(totals.sizeBytes / 1024 ** 3).toFixed(2)} GiB in ${totals.fileCount} files, over the budget ` +
    `of ${(budget.maxBytes / 1024 ** 3).toFixed(2)} GiB or ${budget.maxFiles} files. Largest directories: ${largest.join(', ') || '(none)'}. ` +
    'List what need not be kept (build output, dependencies) in .rewindignore.'
  );
}
