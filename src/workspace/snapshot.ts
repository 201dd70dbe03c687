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
import {
  encodeTree,
  type ObjectBatch,
  type ObjectStore,
  readTree,
  type TreeEntry,
} from '../store/index.js';
import {
  type ChangeRecord,
  listChangedSince,
  loadChangeRecord,
  readSnapshotClock,
  type SnapshotClock,
  saveChangeRecord,
  type TreeTotals,
} from './changes.js';
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
   * files whose last change is more than two seconds older than the snapshot that cached it. An
   * injected clock turns off the listing of changes by ctime, which must use the kernel's clock.
   */
  now?: () => Date;
  /**
   * A change made this close before the last snapshot started may have been missed by it, so the
   * next one looks at it again. Default: 100 ms on filesystems with nanosecond timestamps, 2,000
   * ms on those with whole seconds.
   */
  changeWindowMs?: number;
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
  /**
   * How the snapshot found what changed: `changed-since` asked the filesystem for what changed
   * since the last snapshot (find by ctime) and looked at nothing else; `walk` looked at every
   * entry (first snapshot, ignore rules changed, platform or filesystem without the shortcut).
   */
  strategy: 'changed-since' | 'walk';
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

/** What a scan collects besides the entries. */
interface ScanContext {
  cache: StatCache;
  warnings: string[];
  /** Directories that hold a `.rewindignore`. */
  ignoreDirectories: string[];
  /** When given, receives every path left out by the ignore rules. */
  ignored?: string[];
}

function scanDirectory(
  absolute: string,
  relative: string,
  rules: IgnoreRules,
  context: ScanContext,
): ScannedEntry[] {
  const { cache, warnings, ignoreDirectories } = context;
  let names: string[];
  try {
    names = readdirSync(absolute);
  } catch (error) {
    throw unreadable(relative === '' ? absolute : relative, error);
  }
  // Only directories that hold a .rewindignore add rules: no failed open in every directory.
  const hasRules = names.includes(IGNORE_FILE);
  if (hasRules) ignoreDirectories.push(relative);
  const inner = relative !== '' && hasRules ? rules.enter(absolute, relative) : rules;
  const entries: ScannedEntry[] = [];
  for (const name of names) {
    const childRelative = relative === '' ? name : `${relative}/${name}`;
    const childAbsolute = `${absolute}/${name}`;
    const stats = lstatEntry(childAbsolute, childRelative);
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
      entry.children = scanDirectory(childAbsolute, childRelative, inner, context);
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

/** The entry's lstat; undefined when it is gone (deleted while the directory was read). */
function lstatEntry(absolute: string, relative: string): BigIntStats | undefined {
  try {
    return lstatSync(absolute, { bigint: true });
  } catch (error) {
    if (isSystemError(error, 'ENOENT')) return undefined;
    throw unreadable(relative, error);
  }
}

/** A regular file about to be read and stored. */
function fileToRead(
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

/** Reads, stores and lists one directory and everything under it, as a first snapshot does. */
async function snapshotSubtree(
  absolute: string,
  relative: string,
  mode: number,
  rules: IgnoreRules,
  batch: ObjectBatch,
  state: IncrementalState,
): Promise<{ digest: Digest; totals: TreeTotals }> {
  const cache = StatCache.empty();
  const context: ScanContext = { cache, warnings: state.warnings, ignoreDirectories: [] };
  const entries = scanDirectory(absolute, relative, rules, context);
  if (context.ignoreDirectories.length > 0) state.ignoreRulesChanged = true;
  const toRead: ScannedEntry[] = [];
  collectFilesToRead(entries, toRead);
  await forEachConcurrently(toRead, CONCURRENCY, (entry) => storeFile(entry, batch));
  state.readCount += toRead.length;
  const { digest } = await buildTree(relative, mode, entries, cache, batch);
  const totals = summarize(entries);
  return { digest, totals: { ...totals, directoryCount: totals.directoryCount + 1 } };
}

interface IncrementalState {
  store: ObjectStore;
  batch: ObjectBatch;
  /** For each directory, the names in it that changed (from the changed paths). */
  changedNames: Map<string, Set<string>>;
  /** Paths that changed themselves: for a directory, its list of names may differ. */
  changedPaths: Set<string>;
  ignoreDirectories: Set<string>;
  warnings: string[];
  readCount: number;
  /** Set when a `.rewindignore` appeared or went: the rules differ, so the shortcut is off. */
  ignoreRulesChanged: boolean;
}

/** The files, directories and bytes under a stored entry (a directory counting itself). */
async function totalsOf(store: ObjectStore, entry: TreeEntry): Promise<TreeTotals> {
  if (entry.type === 'file') return { fileCount: 1, directoryCount: 0, sizeBytes: entry.sizeBytes };
  if (entry.type === 'symlink') return { fileCount: 1, directoryCount: 0, sizeBytes: 0 };
  const totals = { fileCount: 0, directoryCount: 1, sizeBytes: 0 };
  for (const child of (await readTree(store, entry.digest)).entries) {
    const inner = await totalsOf(store, child);
    totals.fileCount += inner.fileCount;
    totals.directoryCount += inner.directoryCount;
    totals.sizeBytes += inner.sizeBytes;
  }
  return totals;
}

function addTotals(into: TreeTotals, totals: TreeTotals, sign: 1 | -1): void {
  into.fileCount += sign * totals.fileCount;
  into.directoryCount += sign * totals.directoryCount;
  into.sizeBytes += sign * totals.sizeBytes;
}

/**
 * Rebuilds the tree of one directory from its previous tree and the changed paths: entries that
 * did not change are taken from the previous tree as they are; only changed entries are looked
 * at, and only directories whose list of names changed are read. Returns the new digest and how
 * the totals moved.
 */
async function rebuildDirectory(
  absolute: string,
  relative: string,
  previous: Digest,
  rules: IgnoreRules,
  state: IncrementalState,
): Promise<{ digest: Digest; delta: TreeTotals }> {
  const oldEntries = (await readTree(state.store, previous)).entries;
  const oldByName = new Map(oldEntries.map((entry) => [entry.name, entry]));
  const changed = state.changedNames.get(relative) ?? new Set<string>();
  let names: string[];
  if (state.changedPaths.has(relative)) {
    try {
      names = readdirSync(absolute);
    } catch (error) {
      throw unreadable(relative === '' ? absolute : relative, error);
    }
    if (names.includes(IGNORE_FILE) !== state.ignoreDirectories.has(relative)) {
      state.ignoreRulesChanged = true;
    }
  } else {
    names = oldEntries.map((entry) => entry.name);
  }
  const inner =
    relative !== '' && state.ignoreDirectories.has(relative)
      ? rules.enter(absolute, relative)
      : rules;
  const delta: TreeTotals = { fileCount: 0, directoryCount: 0, sizeBytes: 0 };
  const entries: TreeEntry[] = [];
  const toRead: ScannedEntry[] = [];
  const seen = new Set<string>();
  for (const name of names) {
    const oldEntry = oldByName.get(name);
    if (oldEntry !== undefined && !changed.has(name)) {
      entries.push(oldEntry);
      seen.add(name);
      continue;
    }
    const childRelative = relative === '' ? name : `${relative}/${name}`;
    const childAbsolute = `${absolute}/${name}`;
    const stats = lstatEntry(childAbsolute, childRelative);
    if (stats === undefined) continue;
    // A .rewindignore that changed changes what is left out: the shortcut cannot tell.
    if (name === IGNORE_FILE) state.ignoreRulesChanged = true;
    const isDirectory = stats.isDirectory();
    if (inner.isIgnored(childRelative, name, isDirectory)) continue;
    seen.add(name);
    const mode = Number(stats.mode) & 0o7777;
    if (isDirectory) {
      let digest: Digest;
      if (oldEntry?.type === 'directory') {
        const sub = await rebuildDirectory(
          childAbsolute,
          childRelative,
          oldEntry.digest,
          inner,
          state,
        );
        digest = sub.digest;
        addTotals(delta, sub.delta, 1);
      } else {
        if (oldEntry !== undefined) addTotals(delta, await totalsOf(state.store, oldEntry), -1);
        const sub = await snapshotSubtree(
          childAbsolute,
          childRelative,
          mode,
          inner,
          state.batch,
          state,
        );
        digest = sub.digest;
        addTotals(delta, sub.totals, 1);
      }
      entries.push({ name, type: 'directory', mode, digest });
      continue;
    }
    if (oldEntry !== undefined) addTotals(delta, await totalsOf(state.store, oldEntry), -1);
    if (stats.isSymbolicLink()) {
      let target: string;
      try {
        target = readlinkSync(childAbsolute);
      } catch (error) {
        throw unreadable(childRelative, error);
      }
      entries.push({ name, type: 'symlink', target });
      delta.fileCount += 1;
    } else if (stats.isFile()) {
      toRead.push(fileToRead(name, childRelative, childAbsolute, stats));
    } else {
      state.warnings.push(
        `${childRelative} is not a file, directory or symbolic link (a socket or device?); it was left out`,
      );
    }
  }
  for (const oldEntry of oldEntries) {
    if (!seen.has(oldEntry.name)) addTotals(delta, await totalsOf(state.store, oldEntry), -1);
  }
  await forEachConcurrently(toRead, CONCURRENCY, (entry) => storeFile(entry, state.batch));
  state.readCount += toRead.length;
  for (const entry of toRead) {
    entries.push({
      name: entry.name,
      type: 'file',
      mode: entry.mode,
      sizeBytes: entry.sizeBytes,
      digest: entry.payload as Digest,
    });
    delta.fileCount += 1;
    delta.sizeBytes += entry.sizeBytes;
  }
  const { digest } = await state.batch.put(encodeTree(entries));
  return { digest, delta };
}

/**
 * How long before a snapshot a change must be to be sure the snapshot saw it: 100 ms where the
 * filesystem keeps nanoseconds (the kernel's coarse clock ticks every few milliseconds), 2 s
 * where it keeps whole seconds (a timestamp without nanoseconds tells).
 */
function changeWindowOf(root: string): bigint {
  return statSync(root, { bigint: true }).ctimeNs % 1_000_000_000n === 0n
    ? 2_000_000_000n
    : 100_000_000n;
}

/**
 * The shortcut: the previous snapshot's tree updated with only what changed since it started,
 * as {@link listChangedSince} reports. Undefined when that cannot be trusted this time (see
 * there) or the ignore rules changed; the caller then looks at every file.
 */
async function snapshotChanges(
  root: string,
  record: ChangeRecord,
  clock: SnapshotClock,
  store: ObjectStore,
  batch: ObjectBatch,
  windowNs: bigint,
): Promise<(SnapshotResult & { ignoreDirectories: string[] }) | undefined> {
  if (!(await store.has(record.tree))) return undefined;
  const changes = await listChangedSince(root, record.clock, clock, windowNs);
  if (changes === undefined) return undefined;
  const state: IncrementalState = {
    store,
    batch,
    changedNames: new Map(),
    changedPaths: new Set(changes),
    ignoreDirectories: new Set(record.ignoreDirectories),
    warnings: [],
    readCount: 0,
    ignoreRulesChanged: false,
  };
  for (const path of changes) {
    if (path === '') continue;
    const parts = path.split('/');
    let directory = '';
    for (const part of parts) {
      let names = state.changedNames.get(directory);
      if (names === undefined) {
        names = new Set();
        state.changedNames.set(directory, names);
      }
      names.add(part);
      directory = directory === '' ? part : `${directory}/${part}`;
    }
  }
  const { digest, delta } = await rebuildDirectory(
    root,
    '',
    record.tree,
    IgnoreRules.root(root),
    state,
  );
  if (state.ignoreRulesChanged) return undefined;
  const totals = { ...record.totals };
  addTotals(totals, delta, 1);
  return {
    tree: digest,
    ...totals,
    readCount: state.readCount,
    warnings: state.warnings,
    strategy: 'changed-since',
    ignoreDirectories: record.ignoreDirectories,
  };
}

/**
 * Records the state of a workspace as a Merkle tree in the store and returns its digest. Only
 * files whose stat changed since the last snapshot are read (the stat cache under `.rewind/`),
 * and directories in which nothing changed reuse their tree object. On Linux filesystems that
 * keep ctime faithfully (ext4, xfs, btrfs, tmpfs), GNU find lists what changed since the last
 * snapshot and only that is looked at (see {@link listChangedSince}); elsewhere every entry is.
 * Left out: `.rewind/`, `.git/` and what `.rewindignore` files list. Symbolic links are recorded
 * as links, never followed.
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
  const clock = options.now ? undefined : readSnapshotClock();
  const record = clock && loadChangeRecord(options.storeDirectory, root);
  if (clock && record) {
    const batch = options.store.batch();
    let result: Awaited<ReturnType<typeof snapshotChanges>>;
    try {
      const windowNs =
        options.changeWindowMs === undefined
          ? changeWindowOf(root)
          : BigInt(options.changeWindowMs) * 1_000_000n;
      result = await snapshotChanges(root, record, clock, options.store, batch, windowNs);
    } finally {
      await batch.commit();
    }
    if (result !== undefined) {
      const { ignoreDirectories, ...snap } = result;
      const totals = {
        fileCount: snap.fileCount,
        directoryCount: snap.directoryCount,
        sizeBytes: snap.sizeBytes,
      };
      await saveChangeRecord(options.storeDirectory, {
        root,
        clock,
        tree: snap.tree,
        totals,
        ignoreDirectories,
      });
      return snap;
    }
  }
  const startedAtNs = BigInt((options.now ?? (() => new Date()))().getTime()) * 1_000_000n;
  const cache = await StatCache.load(options.storeDirectory);
  const warnings: string[] = [];
  const ignoreDirectories: string[] = [];
  const rules = IgnoreRules.root(root);
  const entries = scanDirectory(root, '', rules, { cache, warnings, ignoreDirectories });
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
  let digest: Digest;
  try {
    await forEachConcurrently(toRead, CONCURRENCY, (entry) => storeFile(entry, batch));
    ({ digest } = await buildTree('', 0, entries, cache, batch));
  } finally {
    await batch.commit();
  }
  await cache.save(options.storeDirectory, startedAtNs);
  if (clock) {
    await saveChangeRecord(options.storeDirectory, {
      root,
      clock,
      tree: digest,
      totals,
      ignoreDirectories,
    });
  }
  return { tree: digest, ...totals, readCount: toRead.length, warnings, strategy: 'walk' };
}

/** The rules in force in the directory of `relative`; undefined when a directory above is left out. */
function rulesAbove(root: string, relative: string): IgnoreRules | undefined {
  let rules = IgnoreRules.root(root);
  let directory = '';
  for (const part of relative.split('/').slice(0, -1)) {
    const next = directory === '' ? part : `${directory}/${part}`;
    if (rules.isIgnored(next, part, true)) return undefined;
    directory = next;
    rules = rules.enter(`${root}/${directory}`, directory);
  }
  return rules;
}

/**
 * True when snapshots leave `relative` out (`.rewindignore`, `.git`, `.rewind`), whether or not
 * it exists: an action there could not be undone.
 */
export function isIgnoredPath(workspace: string, relative: string, isDirectory: boolean): boolean {
  const rules = rulesAbove(workspace, relative);
  return (
    rules === undefined ||
    rules.isIgnored(relative, relative.split('/').at(-1) as string, isDirectory)
  );
}

/** What {@link snapshotPath} found at one path. */
export interface PathSnapshot {
  /** The path's entry (a file's content, a directory's tree, a link's target); undefined if absent. */
  entry: TreeEntry | undefined;
  /**
   * Paths at or under it that the ignore rules leave out (and `.git`, `.rewind`): a snapshot of
   * the path does not hold them, so an action that removes them could not bring them back.
   */
  ignored: string[];
  warnings: string[];
}

/**
 * Records one path of a workspace (a file, a symbolic link, or a directory and everything under
 * it) in the store, as a full snapshot would, and returns its tree entry. Every file is read
 * (no stat cache): this is for the few paths an action touches. The caller commits `batch`.
 *
 * Throws `PATH_UNREADABLE` for what cannot be read; `relative` must already be resolved safely.
 */
export async function snapshotPath(
  workspace: string,
  relative: string,
  batch: ObjectBatch,
): Promise<PathSnapshot> {
  const root = checkWorkspace(workspace);
  const name = relative.split('/').at(-1) as string;
  const rules = rulesAbove(root, relative);
  if (rules === undefined) return { entry: undefined, ignored: [relative], warnings: [] };
  const absolute = `${root}/${relative}`;
  const stats = lstatEntry(absolute, relative);
  if (stats === undefined) return { entry: undefined, ignored: [], warnings: [] };
  if (rules.isIgnored(relative, name, stats.isDirectory())) {
    return { entry: undefined, ignored: [relative], warnings: [] };
  }
  const mode = Number(stats.mode) & 0o7777;
  if (stats.isSymbolicLink()) {
    try {
      return {
        entry: { name, type: 'symlink', target: readlinkSync(absolute) },
        ignored: [],
        warnings: [],
      };
    } catch (error) {
      throw unreadable(relative, error);
    }
  }
  const context: ScanContext = {
    cache: StatCache.empty(),
    warnings: [],
    ignoreDirectories: [],
    ignored: [],
  };
  if (stats.isDirectory()) {
    const entries = scanDirectory(absolute, relative, rules, context);
    const toRead: ScannedEntry[] = [];
    collectFilesToRead(entries, toRead);
    await forEachConcurrently(toRead, CONCURRENCY, (entry) => storeFile(entry, batch));
    const { digest } = await buildTree(relative, mode, entries, context.cache, batch);
    return {
      entry: { name, type: 'directory', mode, digest },
      ignored: context.ignored ?? [],
      warnings: context.warnings,
    };
  }
  if (!stats.isFile()) {
    throw new RewindError(
      'PATH_CONFLICT',
      `${relative} is not a file, directory or symbolic link (a socket or device?): Rewind cannot keep a copy of it.`,
      { data: { path: relative } },
    );
  }
  const entry = fileToRead(name, relative, absolute, stats);
  await storeFile(entry, batch);
  return {
    entry: {
      name,
      type: 'file',
      mode: entry.mode,
      sizeBytes: entry.sizeBytes,
      digest: entry.payload as Digest,
    },
    ignored: [],
    warnings: [],
  };
}
