import {
  type BigIntStats,
  closeSync,
  constants,
  fstatSync,
  lstatSync,
  openSync,
  readdirSync,
  readFileSync,
  readlinkSync,
  realpathSync,
  statSync,
} from 'node:fs';
import { homedir } from 'node:os';
import { dirname, sep } from 'node:path';
import { isRewindError, isSystemError, RewindError } from '../errors.js';
import { type Digest, forEachConcurrently } from '../lib/index.js';
import { encodeTree, type ObjectBatch, type ObjectStore, type TreeEntry } from '../store/index.js';
import { IGNORE_FILE, IgnoreRules } from './ignore-rules.js';
import { StatCache } from './stat-cache.js';

/** Options of {@link snapshot}. */
export interface SnapshotOptions {
  store: ObjectStore;
  /** The `.rewind/` directory, which holds the stat cache. */
  storeDirectory: string;
  /**
   * A first snapshot (nothing cached yet) larger than this adds a warning naming the largest
   * directories. Default: 2 GiB or 200,000 files.
   */
  budget?: { maxBytes?: number; maxFiles?: number };
  /**
   * The clock that dates the stat cache; injected in tests. A cached entry is trusted only for
   * files whose last change is more than two seconds older than the snapshot that cached it.
   */
  now?: () => Date;
}

/** What {@link snapshot} recorded. */
export interface SnapshotResult {
  /** The digest of the root tree: the whole state of the workspace. */
  tree: Digest;
  /** Files and symbolic links in the snapshot. */
  fileCount: number;
  directoryCount: number;
  /** Total size of the files. */
  sizeBytes: number;
  /** Files that were read and hashed (the rest were known from the stat cache). */
  readCount: number;
  /** Things the caller should show: an over-budget first snapshot, skipped special files. */
  warnings: string[];
}

const DEFAULT_MAX_BYTES = 2 * 1024 ** 3;
const DEFAULT_MAX_FILES = 200_000;
const SMALL_FILE_BYTES = 1024 * 1024;
const READ_ATTEMPTS = 4;
const CONCURRENCY = 8;

type Kind = 'file' | 'directory' | 'symlink';

interface ScannedEntry {
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
  children: ScannedEntry[] | undefined;
}

function fingerprintOf(stats: BigIntStats): string {
  return `${stats.size}:${stats.mtimeNs}:${stats.ctimeNs}:${stats.ino}:${stats.mode}`;
}

/** The later of mtime and ctime: when the file last changed, whichever way. */
function changedAtOf(stats: BigIntStats): bigint {
  if (stats.mtimeNs > stats.ctimeNs) return stats.mtimeNs;
  return stats.ctimeNs;
}

function unreadable(path: string, error: unknown): RewindError {
  const reason =
    isSystemError(error, 'EACCES') || isSystemError(error, 'EPERM')
      ? 'permission denied'
      : String(error);
  return new RewindError(
    'PATH_UNREADABLE',
    `Cannot read ${path} (${reason}), so the workspace cannot be snapshotted. ` +
      'Make it readable, or list it in .rewindignore to leave it out.',
    { data: { path }, cause: error },
  );
}

/**
 * Checks that `workspace` is a directory Rewind may snapshot and returns its real path. Refuses
 * the filesystem root, a home directory and any directory above one: snapshotting those would
 * copy a whole machine.
 *
 * Throws `WORKSPACE_INVALID` (missing, not a directory) or `WORKSPACE_REFUSED`.
 */
export function checkWorkspace(workspace: string): string {
  let real: string;
  try {
    real = realpathSync(workspace);
    if (!statSync(real).isDirectory()) throw new Error('not a directory');
  } catch (error) {
    throw new RewindError(
      'WORKSPACE_INVALID',
      `The workspace ${workspace} is not a directory. Give the directory of the project to work in.`,
      { data: { path: workspace }, cause: error },
    );
  }
  const homes = [homedir(), process.env.HOME].filter((home): home is string => Boolean(home));
  for (const home of homes) {
    let realHome = home;
    try {
      realHome = realpathSync(home);
    } catch {}
    if (real === realHome || realHome.startsWith(real === sep ? sep : `${real}${sep}`)) {
      throw new RewindError(
        'WORKSPACE_REFUSED',
        `Refusing to snapshot ${real}: it ${real === realHome ? 'is' : 'contains'} the home directory ${realHome}. ` +
          'Run Rewind in a project directory instead.',
        { data: { path: real } },
      );
    }
  }
  if (real === dirname(real)) {
    throw new RewindError(
      'WORKSPACE_REFUSED',
      `Refusing to snapshot the filesystem root ${real}. Run Rewind in a project directory instead.`,
      { data: { path: real } },
    );
  }
  return real;
}

function scanDirectory(
  absolute: string,
  relative: string,
  rules: IgnoreRules,
  cache: StatCache,
  warnings: string[],
): ScannedEntry[] {
  let names: string[];
  try {
    names = readdirSync(absolute);
  } catch (error) {
    throw unreadable(relative === '' ? absolute : relative, error);
  }
  // Only directories that hold a .rewindignore add rules: no failed open in every directory.
  const inner =
    relative !== '' && names.includes(IGNORE_FILE) ? rules.enter(absolute, relative) : rules;
  const entries: ScannedEntry[] = [];
  for (const name of names) {
    const childRelative = relative === '' ? name : `${relative}/${name}`;
    const childAbsolute = `${absolute}/${name}`;
    let stats: BigIntStats;
    try {
      stats = lstatSync(childAbsolute, { bigint: true });
    } catch (error) {
      if (isSystemError(error, 'ENOENT')) continue;
      throw unreadable(childRelative, error);
    }
    const kind: Kind | undefined = stats.isFile()
      ? 'file'
      : stats.isDirectory()
        ? 'directory'
        : stats.isSymbolicLink()
          ? 'symlink'
          : undefined;
    if (inner.isIgnored(childRelative, name, kind === 'directory')) continue;
    if (kind === undefined) {
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
      entry.children = scanDirectory(childAbsolute, childRelative, inner, cache, warnings);
    } else {
      entry.payload = cache.lookup(childRelative, fingerprint, changedAtNs);
      entry.isUnchanged = entry.payload !== undefined;
      if (kind === 'symlink' && entry.payload === undefined) {
        try {
          entry.payload = readlinkSync(childAbsolute);
        } catch (error) {
          throw unreadable(childRelative, error);
        }
      }
    }
    entries.push(entry);
  }
  return entries;
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
async function storeFile(entry: ScannedEntry, batch: ObjectBatch): Promise<void> {
  for (let attempt = 1; ; attempt++) {
    let before: BigIntStats;
    let after: BigIntStats;
    let digest: Digest;
    let readBytes: number;
    try {
      before = lstatSync(entry.absolute, { bigint: true });
      if (!before.isFile())
        throw Object.assign(new Error('it stopped being a regular file'), { code: 'ECHANGED' });
      if (before.size <= SMALL_FILE_BYTES) {
        // Small files are read synchronously: a thread-pool round trip costs more than the read.
        const descriptor = openSync(entry.absolute, constants.O_RDONLY | constants.O_NOFOLLOW);
        let bytes: Buffer;
        try {
          bytes = readFileSync(descriptor);
          after = fstatSync(descriptor, { bigint: true });
        } finally {
          closeSync(descriptor);
        }
        ({ digest, sizeBytes: readBytes } = await batch.put(bytes));
      } else {
        ({ digest, sizeBytes: readBytes } = await batch.put({ file: entry.absolute }));
        after = lstatSync(entry.absolute, { bigint: true });
      }
    } catch (error) {
      if (isRewindError(error)) throw error;
      if (isSystemError(error, 'ENOENT') && attempt < READ_ATTEMPTS) continue;
      throw unreadable(entry.relative, error);
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
      throw new RewindError(
        'PATH_UNREADABLE',
        `${entry.relative} changed every time it was read (${READ_ATTEMPTS} times), so no consistent copy could be taken. ` +
          'Stop whatever is writing it, or list it in .rewindignore, then retry.',
        { data: { path: entry.relative } },
      );
    }
  }
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
): Promise<{ digest: Digest; isUnchanged: boolean }> {
  let isUnchanged = true;
  for (const entry of entries) {
    if (entry.children) {
      const sub = await buildTree(entry.relative, entry.mode, entry.children, cache, batch);
      entry.payload = sub.digest;
      entry.isUnchanged = sub.isUnchanged;
    } else {
      cache.record(entry.relative, entry.fingerprint, entry.payload as string);
    }
    if (!entry.isUnchanged) isUnchanged = false;
  }
  // A directory's own mode is part of its parent's listing, so it is part of what must match.
  const key = `${relative}/`;
  const fingerprint = `${entries.length}:${mode}`;
  const cached = cache.lookup(key, fingerprint, 0n);
  if (isUnchanged && cached !== undefined) {
    cache.record(key, fingerprint, cached);
    return { digest: cached as Digest, isUnchanged: true };
  }
  const tree: TreeEntry[] = entries.map((entry) => {
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
  const { digest } = await batch.put(encodeTree(tree));
  cache.record(key, fingerprint, digest);
  return { digest, isUnchanged: cached === digest };
}

function summarize(entries: readonly ScannedEntry[]): {
  fileCount: number;
  directoryCount: number;
  sizeBytes: number;
} {
  const totals = { fileCount: 0, directoryCount: 0, sizeBytes: 0 };
  for (const entry of entries) {
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

function budgetWarning(
  entries: readonly ScannedEntry[],
  totals: { fileCount: number; sizeBytes: number },
  budget: { maxBytes: number; maxFiles: number },
): string | undefined {
  if (totals.sizeBytes <= budget.maxBytes && totals.fileCount <= budget.maxFiles) return undefined;
  const largest = entries
    .filter((entry) => entry.children)
    .map((entry) => ({ name: entry.relative, ...summarize(entry.children ?? []) }))
    .sort((a, b) => b.sizeBytes - a.sizeBytes || b.fileCount - a.fileCount)
    .slice(0, 5)
    .map(
      (entry) =>
        `${entry.name}/ (${(entry.sizeBytes / 1024 ** 2).toFixed(1)} MiB, ${entry.fileCount} files)`,
    );
  return (
    `This first snapshot stores ${(totals.sizeBytes / 1024 ** 3).toFixed(2)} GiB in ${totals.fileCount} files, over the budget ` +
    `of ${(budget.maxBytes / 1024 ** 3).toFixed(2)} GiB or ${budget.maxFiles} files. Largest directories: ${largest.join(', ') || '(none)'}. ` +
    'List what need not be kept (build output, dependencies) in .rewindignore.'
  );
}

/**
 * Records the state of a workspace as a Merkle tree in the store and returns its digest. Only
 * files whose stat changed since the last snapshot are read (the stat cache under `.rewind/`),
 * and directories in which nothing changed reuse their tree object. Left out: `.rewind/`, `.git/`
 * and what `.rewindignore` files list. Symbolic links are recorded as links, never followed.
 *
 * Throws `WORKSPACE_INVALID`, `WORKSPACE_REFUSED` (see {@link checkWorkspace}) and
 * `PATH_UNREADABLE` naming the first file or directory that cannot be read; the store then holds
 * only objects nothing refers to yet, which `rewind gc` reclaims.
 */
export async function snapshot(
  workspace: string,
  options: SnapshotOptions,
): Promise<SnapshotResult> {
  const root = checkWorkspace(workspace);
  const startedAtNs = BigInt((options.now ?? (() => new Date()))().getTime()) * 1_000_000n;
  const cache = await StatCache.load(options.storeDirectory);
  const warnings: string[] = [];
  const entries = scanDirectory(root, '', IgnoreRules.root(root), cache, warnings);
  const totals = summarize(entries);
  if (cache.isEmpty) {
    const warning = budgetWarning(entries, totals, {
      maxBytes: options.budget?.maxBytes ?? DEFAULT_MAX_BYTES,
      maxFiles: options.budget?.maxFiles ?? DEFAULT_MAX_FILES,
    });
    if (warning) warnings.push(warning);
  }
  const toRead: ScannedEntry[] = [];
  collectFilesToRead(entries, toRead);
  const batch = options.store.batch();
  await forEachConcurrently(toRead, CONCURRENCY, (entry) => storeFile(entry, batch));
  const { digest } = await buildTree('', 0, entries, cache, batch);
  await batch.commit();
  await cache.save(options.storeDirectory, startedAtNs);
  return { tree: digest, ...totals, readCount: toRead.length, warnings };
}
