// The "changed since" shortcut: the previous snapshot's tree updated with only what changed.
import { type BigIntStats, statSync } from 'node:fs';
import {
  createLimiter,
  type Digest,
  forEachConcurrently,
  type Limiter,
  readLinkSync,
  readNamesSync,
} from '../lib/index.js';
import {
  type ObjectBatch,
  type ObjectStore,
  putTreeIn,
  readTree,
  type TreeEntry,
} from '../store/index.js';
import {
  type ChangeRecord,
  listChangedSince,
  type SnapshotClock,
  type TreeTotals,
} from './changes.js';
import { holdsIgnoreFile, IGNORE_FILES, IgnoreRules, type OutsideRules } from './ignore-rules.js';
import { StatCache } from './stat-cache.js';
import {
  CONCURRENCY,
  contentStatOf,
  directoryIdentityOf,
  fileToRead,
  lstatEntry,
  type ScanContext,
  type ScannedEntry,
  scanDirectory,
  storeFile,
  storeScannedTree,
  summarize,
  unreadable,
} from './walk.js';
import type { DrainResult, WrittenFile } from './watch-drain.js';

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
  const context: ScanContext = {
    cache,
    warnings: state.warnings,
    ignoreDirectories: [],
    directoryIdentities: changeableDirectories(state),
  };
  const entries = scanDirectory(absolute, relative, rules, context);
  if (context.ignoreDirectories.length > 0) state.ignoreRulesChanged = true;
  const { digest, readCount } = await storeScannedTree(relative, mode, entries, cache, batch, {
    store: state.store,
  });
  state.readCount += readCount;
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
  /** Set when an ignore file appeared, went or changed: the rules differ, so the shortcut is off. */
  ignoreRulesChanged: boolean;
  /**
   * The identity of every directory, by path: the record's, updated as directories are read;
   * the record's own map until one changes (see {@link changeableDirectories}).
   */
  directories: ReadonlyMap<string, string>;
  /** The record's map, never changed. */
  recordDirectories: ReadonlyMap<string, string>;
  /** Previous trees being read ahead, by digest: see {@link previousEntries}. */
  treeReads: Map<Digest, Promise<readonly TreeEntry[]>>;
  /** The gate that bounds those reads. */
  gate: Limiter;
  /** Files a restore of this process wrote, as it wrote them: see `WorkspaceWatcher.wrote`. */
  written: ReadonlyMap<string, WrittenFile>;
  /** The lstat of changed paths the watcher took (null: gone): see `DrainResult.stats`. */
  stats: ReadonlyMap<string, BigIntStats | null>;
  /** The changes come from a watcher's whole drain, not from find. */
  isWatched: boolean;
}

/**
 * The directory identities, copied from the record's before the first change: most snapshots
 * change none, and hand the record's own map on (saving the record then reuses its JSON).
 */
function changeableDirectories(state: IncrementalState): Map<string, string> {
  if (state.directories === state.recordDirectories) state.directories = new Map(state.directories);
  return state.directories as Map<string, string>;
}

/** Previous trees read at once: the directories are rebuilt one by one, their trees read ahead. */
const TREE_READS_AHEAD = 16;

/**
 * The entries of a directory's previous tree. Called ahead of time for the changed directories
 * under the one being rebuilt, so that their reads wait on the disk side by side rather than one
 * after another; a read ahead that fails fails again where its directory is rebuilt.
 */
function previousEntries(state: IncrementalState, digest: Digest): Promise<readonly TreeEntry[]> {
  let read = state.treeReads.get(digest);
  if (read === undefined) {
    read = state.gate(async () => (await readTree(state.store, digest)).entries);
    read.catch(() => {}); // rejected where it is used; never an unhandled rejection here
    state.treeReads.set(digest, read);
  }
  return read;
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
 * at (a changed name the previous tree lacks too: it is there when it can be looked at), and only
 * directories that lost or may have lost names are read. Returns the new digest and how the
 * totals moved.
 */
async function rebuildDirectory(
  absolute: string,
  relative: string,
  previous: Digest,
  rules: IgnoreRules,
  state: IncrementalState,
): Promise<{ digest: Digest; delta: TreeTotals }> {
  const oldEntries = await previousEntries(state, previous);
  state.treeReads.delete(previous);
  const oldByName = new Map(oldEntries.map((entry) => [entry.name, entry]));
  const changed = state.changedNames.get(relative) ?? new Set<string>();
  for (const name of changed) {
    const oldEntry = oldByName.get(name);
    if (oldEntry?.type === 'directory') void previousEntries(state, oldEntry.digest);
  }
  let names: string[];
  if (state.changedPaths.has(relative)) {
    try {
      names = readNamesSync(absolute);
    } catch (error) {
      throw unreadable(relative === '' ? absolute : relative, error);
    }
    if (holdsIgnoreFile(names) !== state.ignoreDirectories.has(relative)) {
      state.ignoreRulesChanged = true;
    }
  } else {
    // Its list of names as it was, and the changed names it did not hold: a name moved in alone
    // leaves its directory off the changed paths (see the watcher's #onRecord).
    names = oldEntries.map((entry) => entry.name);
    for (const name of changed) if (!oldByName.has(name)) names.push(name);
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
    /** The digest of this directory, the same one as before, rebuilt from its previous tree. */
    const rebuilt = async (previous: Digest): Promise<Digest> => {
      const sub = await rebuildDirectory(childAbsolute, childRelative, previous, inner, state);
      addTotals(delta, sub.delta, 1);
      return sub.digest;
    };
    // A directory of the previous tree that only holds changed paths, when a watcher saw every
    // change: had it been made, removed, moved, replaced or its mode changed, the watcher would
    // name it among the changed paths. It is the same directory, rebuilt without an lstat (at L,
    // a checkpoint of 1,000 files passes through some 2,500 of them).
    if (
      state.isWatched &&
      oldEntry?.type === 'directory' &&
      !state.changedPaths.has(childRelative) &&
      state.directories.has(childRelative)
    ) {
      seen.add(name);
      const digest = await rebuilt(oldEntry.digest);
      entries.push({ name, type: 'directory', mode: oldEntry.mode, digest });
      continue;
    }
    const known = state.stats.get(childRelative);
    const stats =
      known === undefined ? lstatEntry(childAbsolute, childRelative) : (known ?? undefined);
    if (stats === undefined) continue;
    // An ignore file that changed changes what is left out: the shortcut cannot tell.
    if ((IGNORE_FILES as readonly string[]).includes(name)) state.ignoreRulesChanged = true;
    const isDirectory = stats.isDirectory();
    if (inner.isIgnored(childRelative, name, isDirectory)) continue;
    seen.add(name);
    const mode = Number(stats.mode) & 0o7777;
    if (isDirectory) {
      let digest: Digest;
      const identity = directoryIdentityOf(stats);
      // Another directory at the same path (moved in, swapped) carries children whose timestamps
      // say nothing changed: only one known to be the same directory is rebuilt from its old tree.
      const isSameDirectory = state.directories.get(childRelative) === identity;
      if (!isSameDirectory) changeableDirectories(state).set(childRelative, identity);
      if (oldEntry?.type === 'directory' && isSameDirectory) {
        digest = await rebuilt(oldEntry.digest);
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
        target = readLinkSync(childAbsolute);
      } catch (error) {
        throw unreadable(childRelative, error);
      }
      entries.push({ name, type: 'symlink', target });
      delta.fileCount += 1;
    } else if (stats.isFile()) {
      const written = state.written.get(childRelative);
      if (written !== undefined && written.contentStat === contentStatOf(stats)) {
        const { digest, sizeBytes } = written.entry;
        entries.push({ name, type: 'file', mode, sizeBytes, digest });
        delta.fileCount += 1;
        delta.sizeBytes += sizeBytes;
      } else toRead.push(fileToRead(name, childRelative, childAbsolute, stats));
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
  const digest = await putTreeIn(state.store, state.batch, entries);
  return { digest, delta };
}

/**
 * How long before a snapshot a change must be to be sure the snapshot saw it: 100 ms where the
 * filesystem keeps nanoseconds (the kernel's coarse clock ticks every few milliseconds), 2 s
 * where it keeps whole seconds (a timestamp without nanoseconds tells).
 */
export function changeWindowOf(root: string): bigint {
  return statSync(root, { bigint: true }).ctimeNs % 1_000_000_000n === 0n
    ? 2_000_000_000n
    : 100_000_000n;
}

/**
 * The time (nanoseconds since the epoch, as ctimes count) from which a change of the workspace at
 * `root` may be missed by a snapshot or a check that starts now: now, less the change window. A
 * restore planned from that snapshot keeps what changed since (`ApplyOptions.keepEditedSinceNs`).
 */
export function editsFrom(root: string): bigint {
  return BigInt(Date.now()) * 1_000_000n - changeWindowOf(root);
}

/** What the shortcut recorded; the entry point turns it into a snapshot's result. */
export interface ChangedSinceResult {
  tree: Digest;
  totals: TreeTotals;
  readCount: number;
  warnings: string[];
  directories: ReadonlyMap<string, string>;
}

/**
 * What changed since the snapshot of `record` started, by find (see {@link listChangedSince});
 * undefined when that cannot be trusted this time.
 */
export function findChanges(
  root: string,
  record: ChangeRecord,
  clock: SnapshotClock,
  windowNs: bigint,
): Promise<string[] | undefined> {
  const entryCount = record.totals.fileCount + record.totals.directoryCount;
  return listChangedSince(root, record.clock, clock, windowNs, entryCount);
}

/**
 * The shortcut: the previous snapshot's tree (`record`) updated with only the paths `changes`
 * lists (relative, '' for the root; with, for an entry created, removed or renamed, its
 * directory, but for a file moved in alone), as find or a watcher reports them; from a watcher's
 * drain (`known`), the files among them a restore of this process wrote are taken as written
 * rather than read, and the lstat it took of each path is used rather than taken again.
 * Undefined when the record's tree is gone from the store or the ignore rules changed; the caller
 * then looks at every file.
 */
export async function snapshotChanges(
  root: string,
  outside: OutsideRules,
  record: ChangeRecord,
  changes: readonly string[],
  store: ObjectStore,
  batch: ObjectBatch,
  known?: Pick<DrainResult, 'written' | 'stats'>,
): Promise<ChangedSinceResult | undefined> {
  if (!(await store.has(record.tree))) return undefined;
  const state: IncrementalState = {
    store,
    batch,
    changedNames: new Map(),
    changedPaths: new Set(changes),
    ignoreDirectories: new Set(record.ignoreDirectories),
    warnings: [],
    readCount: 0,
    ignoreRulesChanged: false,
    directories: record.directories,
    recordDirectories: record.directories,
    treeReads: new Map(),
    gate: createLimiter(TREE_READS_AHEAD),
    written: known?.written ?? new Map(),
    stats: known?.stats ?? new Map(),
    isWatched: known !== undefined,
  };
  // The workspace directory itself replaced: nothing of the old tree can be trusted.
  if (state.directories.get('') !== directoryIdentityOf(statSync(root, { bigint: true }))) {
    return undefined;
  }
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
    IgnoreRules.root(root, outside),
    state,
  );
  if (state.ignoreRulesChanged) return undefined;
  const totals = { ...record.totals };
  addTotals(totals, delta, 1);
  return {
    tree: digest,
    totals,
    readCount: state.readCount,
    warnings: state.warnings,
    directories: state.directories,
  };
}
