// The snapshot entry point: its options and result, the workspace check, the choice of strategy.
import { realpathSync, statSync } from 'node:fs';
import { homedir } from 'node:os';
import { dirname, sep } from 'node:path';
import { isRewindError, RewindError } from '../errors.js';
import { type Digest, namedAndMore } from '../lib/index.js';
import type { ObjectBatch, ObjectStore } from '../store/index.js';
import { changeWindowOf, findChanges, snapshotChanges } from './changed-since.js';
import {
  type ChangeRecord,
  clearChangeRecord,
  isStillSaved,
  loadChangeRecord,
  markSaved,
  readSnapshotClock,
  saveChangeRecord,
} from './changes.js';
import { type CopySource, takeFromCopySource } from './copy-source.js';
import {
  digestOutsideRules,
  encodeOutsideRules,
  IgnoreRules,
  type OutsideRules,
  readOutsideRules,
} from './ignore-rules.js';
import { StatCache } from './stat-cache.js';
import {
  budgetWarning,
  directoryIdentityOf,
  type SnapshotProgress,
  scanDirectory,
  storeScannedTree,
  summarize,
} from './walk.js';
import type { WorkspaceWatcher } from './watcher.js';

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
  /**
   * The rules that apply from outside the workspace (its git repository's `info/exclude` and the
   * `.gitignore` files above it). Default: read from around the workspace; an isolated session's
   * view passes its host's.
   */
  outside?: OutsideRules;
  /**
   * Called as files are read and stored, when the snapshot must read some (a first snapshot
   * reads every file): for a progress line.
   */
  onProgress?: (progress: SnapshotProgress) => void;
  /**
   * The workspace is a copy of another (`cp -a`) that nothing has written since: its files that
   * did not change at the source since before the copy take their digests from the source's
   * snapshot instead of being read (see {@link takeFromCopySource}). Used by the first snapshot
   * of an isolated session's view.
   */
  copyOf?: CopySource;
  /**
   * A watcher of this workspace kept by the calling process: when it knows what changed since
   * the previous snapshot it was given to, only that is looked at, without a find over every
   * entry (see {@link WorkspaceWatcher}).
   */
  watcher?: WorkspaceWatcher;
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
   * How the snapshot found what changed: `watched` took it from a watcher of the workspace and
   * looked at nothing else; `changed-since` asked the filesystem for what changed since the last
   * snapshot (find by ctime) and looked at nothing else; `walk` looked at every entry (first
   * snapshot, ignore rules changed, platform or filesystem without the shortcut).
   */
  strategy: 'watched' | 'changed-since' | 'walk';
  /**
   * The rules from outside the workspace the snapshot applied, stored as a blob (see
   * `encodeOutsideRules`); undefined when there were none.
   */
  rules: Digest | undefined;
  /**
   * Paths that could not be read (no permission, a path too long, a file that kept changing):
   * left out of the snapshot, each with why. A rollback or an undo must leave them alone.
   */
  unreadable: { path: string; reason: string }[];
}

/** The warnings that say which paths a snapshot could not read (the first few, and a count). */
function unreadableWarnings(unreadable: readonly { path: string; reason: string }[]): string[] {
  if (unreadable.length === 0) return [];
  const named = namedAndMore(unreadable.map(({ path, reason }) => `${path} (${reason})`));
  return [
    `Could not read ${named}: left out of this snapshot, and no rollback or undo will touch them. Make them readable to keep them.`,
  ];
}

const DEFAULT_MAX_BYTES = 2 * 1024 ** 3;
const DEFAULT_MAX_FILES = 200_000;

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

/**
 * Records the state of a workspace as a Merkle tree in the store and returns its digest. Only
 * files whose stat changed since the last snapshot are read (the stat cache under `.rewind/`),
 * and directories in which nothing changed reuse their tree object. On Linux filesystems that
 * keep ctime faithfully (ext4, xfs, btrfs, tmpfs), GNU find lists what changed since the last
 * snapshot and only that is looked at (see {@link listChangedSince}); elsewhere every entry is.
 * Left out: `.rewind/`, `.git/`, and what git ignores (`.gitignore` files at every level, above
 * the workspace too, and the repository's `info/exclude`) unless a `.rewindignore` re-includes it
 * (`!.env`), and what `.rewindignore` files list. Symbolic links are recorded as links, never
 * followed.
 *
 * A path that cannot be read (no permission, a path longer than the system allows, a file that
 * changes every time it is read) is left out, listed in `unreadable` and warned about: one such
 * path never stops a checkpoint, a rollback or an undo, and none of them touches it.
 *
 * Throws `WORKSPACE_INVALID`, `WORKSPACE_REFUSED` (see {@link checkWorkspace}),
 * `PATH_UNREADABLE` when the workspace itself cannot be listed, and `IO_FAILED` when the disk or
 * the store fails (full, read-only, an I/O error); the store then holds only objects nothing
 * refers to yet, which `rewind gc` reclaims.
 */
export async function snapshot(
  workspace: string,
  options: SnapshotOptions,
): Promise<SnapshotResult> {
  const root = checkWorkspace(workspace);
  const outside = options.outside ?? readOutsideRules(root);
  const outsideRules = digestOutsideRules(outside);
  // The rules are kept with the tree, so what the snapshot left out can be told later.
  const storeRules = async (batch: ObjectBatch): Promise<void> => {
    if (outsideRules !== undefined) await batch.put(Buffer.from(encodeOutsideRules(outside)));
  };
  const clock = options.now ? undefined : readSnapshotClock();
  const watcher = clock && options.watcher?.root === root ? options.watcher : undefined;
  // A watcher's answer updates the snapshot taken at its previous drain, kept in memory while
  // the record on disk is still the one saved with it (see isStillSaved); without one, the
  // record of the last snapshot on disk is updated with what find lists.
  const drained = watcher && (await watcher.drain());
  const base =
    drained?.paths && drained.base && isStillSaved(options.storeDirectory, drained.base)
      ? drained.base
      : undefined;
  const record = base ?? (clock && loadChangeRecord(options.storeDirectory, root));
  /**
   * Saves this snapshot's record; a watcher that drained for it keeps it as its next base, marked
   * with what the file is as saved (one stat, taken only then: see isStillSaved).
   */
  const saveRecord = async (next: ChangeRecord): Promise<void> => {
    await saveChangeRecord(options.storeDirectory, next);
    if (!drained) return;
    markSaved(options.storeDirectory, next);
    watcher?.setBase(next, drained.token);
  };
  // Rules from outside that changed change what is left out anywhere: the shortcut cannot tell.
  if (clock && record && record.outsideRules === outsideRules) {
    const batch = options.store.batch();
    let result: Awaited<ReturnType<typeof snapshotChanges>>;
    try {
      await storeRules(batch);
      const windowNs =
        options.changeWindowMs === undefined
          ? changeWindowOf(root)
          : BigInt(options.changeWindowMs) * 1_000_000n;
      const changes = base ? drained?.paths : await findChanges(root, record, clock, windowNs);
      const known = base ? drained : undefined;
      result =
        changes &&
        (await snapshotChanges(root, outside, record, changes, options.store, batch, known));
    } catch (error) {
      // A path the shortcut cannot read: the full walk below lists it with the others.
      if (!isRewindError(error, 'PATH_UNREADABLE')) throw error;
      result = undefined;
    } finally {
      await batch.commit();
    }
    if (result !== undefined) {
      const { tree, totals, readCount, warnings, directories } = result;
      const next: ChangeRecord = {
        root,
        clock,
        tree,
        totals,
        ignoreDirectories: record.ignoreDirectories,
        outsideRules,
        directories,
      };
      await saveRecord(next);
      return {
        tree,
        ...totals,
        readCount,
        warnings,
        strategy: base ? 'watched' : 'changed-since',
        rules: outsideRules,
        unreadable: [],
      };
    }
  }
  const startedAtNs = BigInt((options.now ?? (() => new Date()))().getTime()) * 1_000_000n;
  const cache = await StatCache.load(options.storeDirectory);
  const warnings: string[] = [];
  const ignoreDirectories: string[] = [];
  const rules = IgnoreRules.root(root, outside);
  const directoryIdentities = new Map([
    ['', directoryIdentityOf(statSync(root, { bigint: true }))],
  ]);
  const unreadable: { path: string; reason: string }[] = [];
  const entries = scanDirectory(root, '', rules, {
    cache,
    warnings,
    ignoreDirectories,
    directoryIdentities,
    unreadable,
  });
  const scanned = summarize(entries);
  if (cache.isEmpty) {
    const warning = budgetWarning(entries, scanned, {
      maxBytes: options.budget?.maxBytes ?? DEFAULT_MAX_BYTES,
      maxFiles: options.budget?.maxFiles ?? DEFAULT_MAX_FILES,
    });
    if (warning) warnings.push(warning);
  }
  if (options.copyOf) {
    const windowNs =
      options.changeWindowMs === undefined
        ? changeWindowOf(options.copyOf.workspace)
        : BigInt(options.changeWindowMs) * 1_000_000n;
    await takeFromCopySource(entries, options.copyOf, options.store, windowNs);
  }
  const batch = options.store.batch();
  let digest: Digest;
  let readCount: number;
  try {
    await storeRules(batch);
    ({ digest, readCount } = await storeScannedTree('', 0, entries, cache, batch, {
      store: options.store,
      onProgress: options.onProgress,
      unreadablePaths: unreadable,
    }));
  } finally {
    await batch.commit();
  }
  const totals = summarize(entries);
  warnings.push(...unreadableWarnings(unreadable));
  await cache.save(options.storeDirectory, startedAtNs);
  // With paths left out unread the next snapshot walks everything again, to list them again.
  if (unreadable.length > 0) await clearChangeRecord(options.storeDirectory);
  else if (clock) {
    const next: ChangeRecord = {
      root,
      clock,
      tree: digest,
      totals,
      ignoreDirectories,
      outsideRules,
      directories: directoryIdentities,
    };
    await saveRecord(next);
  }
  // A walk follows rules that changed (or none kept): the watch starts again if what it leaves
  // unwatched (ignored, or that it cannot enter) may have changed.
  watcher?.startAgain(outside);
  return {
    tree: digest,
    ...totals,
    readCount,
    warnings,
    strategy: 'walk',
    rules: outsideRules,
    unreadable,
  };
}
