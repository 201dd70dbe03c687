import { lchown, mkdir, rmdir, symlink, unlink } from 'node:fs/promises';
import { posix } from 'node:path';
import { isRewindError, isSystemError, RewindError } from '../errors.js';
import {
  createOrderedWindow,
  diskPath,
  isAbsentSync,
  readNamesSync,
  syncPaths,
  WorkspaceDirectories,
} from '../lib/index.js';
import type { ObjectStore, TreeEntry } from '../store/index.js';
import { explainDenied, type RestoreStep } from './denied.js';
import { IgnoreRules, type OutsideRules, readOutsideRules } from './ignore-rules.js';
import { type Current, currentType, isSpecialSync, modeOf } from './on-disk.js';
import {
  currentUmask,
  holdsFile,
  holdsLink,
  isEditedSince,
  ownerOf,
  readAhead,
  removeLeftovers,
  writeFromStore,
} from './restore-file.js';
import { checkWorkspace } from './snapshot.js';
import type { TreeChange } from './tree-diff.js';
import type { LeftOutCheck } from './tree-rules.js';
import { relock, unlockParents } from './unlock.js';
import { contentStatOf } from './walk.js';
import type { WorkspaceWatcher } from './watcher.js';

/** Progress of {@link applyChanges}, reported after each path. */
export interface ApplyProgress {
  done: number;
  total: number;
  path: string;
}

/**
 * What {@link applyChanges} did. `written`, `created` and `deleted` count files and symbolic links,
 * as a plan lists them (`fileChangeKind`); the directories made and removed are counted apart.
 */
export interface ApplyResult {
  written: number;
  created: number;
  deleted: number;
  directoriesCreated: number;
  directoriesDeleted: number;
  /**
   * Paths left alone because the rules of either side leave them out (or directories that still
   * hold such paths), or because a socket, a FIFO or a device is there (left out of snapshots):
   * the first {@link MAX_LISTED_SKIPPED}; `skippedCount` counts them all.
   */
  skipped: string[];
  skippedCount: number;
  /**
   * Paths created though the workspace's rules leave them out (nothing was there: see
   * {@link applyChanges}), the first {@link MAX_LISTED_SKIPPED}; absent when there are none. An
   * undo may remove them again, though the state it goes back to leaves them out.
   */
  createdLeftOut?: string[];
  /**
   * Paths left as they are because they were edited after the state the changes start from was
   * taken (see {@link ApplyOptions.keepEditedSinceNs}); absent when there are none.
   */
  keptEdited?: string[];
}

/** How many skipped paths an {@link ApplyResult} lists (it counts them all). */
export const MAX_LISTED_SKIPPED = 100;

/** True when `path` is one of `roots` or under one of them. */
export function isAtOrUnder(path: string, roots: readonly string[]): boolean {
  return roots.some((root) => path === root || path.startsWith(`${root}/`));
}

function depth(path: string): number {
  let count = 0;
  for (let at = path.indexOf('/'); at !== -1; at = path.indexOf('/', at + 1)) count += 1;
  return count;
}

/**
 * Memoized ignore rules per directory, read from the ignore files on disk: each directory's are
 * read before any path in it is touched, so they are the rules the workspace had.
 */
function createIgnoreCheck(
  root: string,
  outside: OutsideRules,
): (path: string, isDirectory: boolean) => boolean {
  const rulesByDirectory = new Map<string, IgnoreRules>([['', IgnoreRules.root(root, outside)]]);
  const rulesFor = (directory: string): IgnoreRules => {
    const known = rulesByDirectory.get(directory);
    if (known) return known;
    const parent = posix.dirname(directory);
    const rules = rulesFor(parent === '.' ? '' : parent).enter(`${root}/${directory}`, directory);
    rulesByDirectory.set(directory, rules);
    return rules;
  };
  // Whether a directory is left out, itself or by one above it: known once asked.
  const leftOutDirectories = new Map<string, boolean>([['', false]]);
  const isLeftOut = (path: string, isDirectory: boolean): boolean => {
    const known = isDirectory ? leftOutDirectories.get(path) : undefined;
    if (known !== undefined) return known;
    const slash = path.lastIndexOf('/');
    const parent = slash === -1 ? '' : path.slice(0, slash);
    const isIgnored =
      isLeftOut(parent, true) ||
      rulesFor(parent).isIgnored(path, path.slice(slash + 1), isDirectory);
    if (isDirectory) leftOutDirectories.set(path, isIgnored);
    return isIgnored;
  };
  return isLeftOut;
}

/**
 * What a restore with these options leaves alone: `isIgnored`, a path that the workspace's rules
 * (as on disk before anything moves), the target's rules or `leaveAlone` leave out; `isKept`, one
 * that the target's rules or `leaveAlone` leave out, never put back even where nothing is.
 */
function createLeftOutChecks(
  root: string,
  options: Pick<ApplyOptions, 'outside' | 'target' | 'leaveAlone'>,
): {
  isIgnored: (path: string, isDirectory: boolean) => Promise<boolean>;
  isKept: (path: string, isDirectory: boolean) => Promise<boolean>;
} {
  const isIgnoredNow = createIgnoreCheck(root, options.outside ?? readOutsideRules(root));
  const leaveAlone = options.leaveAlone ?? [];
  const isTargetIgnored = async (path: string, isDirectory: boolean): Promise<boolean> =>
    (await options.target?.(path, isDirectory)) ?? false;
  return {
    // What could not be read first: its ignore files are never read.
    isIgnored: async (path, isDirectory) =>
      isAtOrUnder(path, leaveAlone) ||
      isIgnoredNow(path, isDirectory) ||
      (await isTargetIgnored(path, isDirectory)),
    isKept: async (path, isDirectory) =>
      isAtOrUnder(path, leaveAlone) || (await isTargetIgnored(path, isDirectory)),
  };
}

/**
 * The paths among `changes` that {@link applyChanges} with these options would leave alone, as
 * the workspace is now (for a dry run): what either side's rules or `leaveAlone` leave out,
 * except a path only the workspace's rules leave out where nothing is (it is put back), and a
 * directory to remove that would not be empty (it holds what is left alone, or what no change
 * names: files the rules leave out).
 */
export async function leftAloneOf(
  workspace: string,
  changes: readonly TreeChange[],
  options: Pick<ApplyOptions, 'outside' | 'target' | 'leaveAlone'> = {},
): Promise<string[]> {
  const root = checkWorkspace(workspace);
  const { isIgnored, isKept } = createLeftOutChecks(root, options);
  const { removals, placements } = applicationOrder(changes);
  const removed = new Set(removals.map((change) => change.path));
  const leftAlone = new Set<string>();
  const special: string[] = [];
  const remainsIn = (directory: string): boolean => {
    let names: string[];
    try {
      names = readNamesSync(`${root}/${directory}`);
    } catch {
      return false;
    }
    return names.some((name) => {
      const child = `${directory}/${name}`;
      return !removed.has(child) || leftAlone.has(child);
    });
  };
  // Deepest first, as they are removed.
  for (const change of removals) {
    const isDirectory = change.before?.type === 'directory';
    if (
      (await isIgnored(change.path, isDirectory)) ||
      (isDirectory && remainsIn(change.path)) ||
      isSpecialSync(`${root}/${change.path}`)
    ) {
      leftAlone.add(change.path);
    }
  }
  for (const change of placements) {
    const isDirectory = change.after?.type === 'directory';
    if (!(await isIgnored(change.path, isDirectory))) {
      // A socket, a FIFO or a device, left out of snapshots, is never replaced.
      if (change.before === undefined && isSpecialSync(`${root}/${change.path}`)) {
        leftAlone.add(change.path);
        special.push(change.path);
      } else if (isAtOrUnder(change.path, special)) leftAlone.add(change.path);
      continue;
    }
    if (
      (await isKept(change.path, isDirectory)) ||
      !isAbsentSync(diskPath(`${root}/${change.path}`))
    ) {
      leftAlone.add(change.path);
    }
  }
  return [...leftAlone];
}

/**
 * Whether a restore removes what is at a path, of `type` (`other`: a FIFO, a socket), before it
 * puts `after` there: one type for another, but a file, which is renamed over anything but a
 * directory. (A link given another target is removed and made again too.)
 */
export function isRemovedBeforePlacing(type: NonNullable<Current>, after: TreeEntry): boolean {
  return type !== after.type && (type === 'directory' || after.type !== 'file');
}

/**
 * What a workspace's own rules leave out, as on disk now (each directory's rules read once, on
 * first use): the current side of a rollback, an undo or a commit.
 */
export function workspaceRules(workspace: string, outside?: OutsideRules): LeftOutCheck {
  const root = checkWorkspace(workspace);
  const isIgnored = createIgnoreCheck(root, outside ?? readOutsideRules(root));
  return async (path, isDirectory) => isIgnored(path, isDirectory);
}

/** Where a path to remove is, or undefined when a symbolic link above it keeps it out. */
function locateExisting(directories: WorkspaceDirectories, path: string): string | undefined {
  try {
    return directories.locate(path);
  } catch (error) {
    if (isRewindError(error, 'SYMLINK_REFUSED')) return undefined;
    throw error;
  }
}

async function removeEntry(
  absolute: string,
  type: Current,
): Promise<'removed' | 'not-empty' | 'absent'> {
  try {
    if (type === 'directory') await rmdir(diskPath(absolute));
    else await unlink(diskPath(absolute));
    return 'removed';
  } catch (error) {
    if (isSystemError(error, 'ENOENT') || isSystemError(error, 'ENOTDIR')) return 'absent';
    if (isSystemError(error, 'ENOTEMPTY') || isSystemError(error, 'EEXIST')) return 'not-empty';
    throw error;
  }
}

/**
 * Removes the temporary files a killed restore of these paths may have left beside them (a kill
 * between writing a file's copy and renaming it into place). Recovery runs it before anything
 * else, so that neither what it saves first, nor the next snapshot, nor a workspace whose restore
 * is closed as not performed keeps them.
 */
export async function removeRestoreLeftovers(
  workspace: string,
  paths: readonly string[],
): Promise<void> {
  const root = checkWorkspace(workspace);
  await removeLeftovers(new Set(paths.map((path) => posix.dirname(`${root}/${path}`))));
}

/**
 * Makes each changed path of a workspace hold its `after` state (or nothing), whatever it holds
 * now: files are written to a temporary file beside them and renamed into place (never torn);
 * directories are created or removed; modes fixed; symbolic links recreated, never followed;
 * everything written is fsynced before it returns; run as root, what it creates belongs to the
 * workspace's owner. It is idempotent, so running it again after a crash finishes the job. A
 * path that the workspace's rules leave out (git's rules and `.rewindignore`, as on disk before
 * anything moves), or that `target`'s rules leave out (those of the state the changes lead to),
 * is never touched, nor is anything under it: a rule that changes between the two states never
 * deletes or overwrites what either side leaves out. Nor are the paths of `leaveAlone` (what
 * could not be read).
 *
 * Throws `SYMLINK_REFUSED` when a parent of a changed path has become a symbolic link,
 * `OBJECT_NOT_FOUND` / `OBJECT_CORRUPT` when a file's content is missing from the store (nothing
 * torn is written: a file is replaced only by a complete, verified copy).
 */
export async function applyChanges(
  workspace: string,
  store: ObjectStore,
  changes: readonly TreeChange[],
  options: ApplyOptions = {},
): Promise<ApplyResult> {
  const root = checkWorkspace(workspace);
  // A folder the person made read-only (or a checkpoint held as such) must not block putting
  // paths back in it: it is opened for writing for the time of the restore, then closed again.
  const unlocked = unlockParents(root, changes);
  try {
    return await applyWithin(root, store, changes, options);
  } finally {
    relock(root, unlocked, changes);
  }
}

/** The options of {@link applyChanges}. */
export interface ApplyOptions {
  onProgress?: (progress: ApplyProgress) => void;
  /** After a crash: also remove temporary files an interrupted run left beside its paths. */
  isRecovery?: boolean;
  /** The rules from outside the workspace (default: read from around it). */
  outside?: OutsideRules;
  /** What the rules of the state the changes lead to leave out (see `treeRules`). */
  target?: LeftOutCheck;
  /**
   * Paths never touched, nor anything under them: those the snapshot of the workspace could
   * not read (see `SnapshotResult.unreadable`), whose content nothing holds.
   */
  leaveAlone?: readonly string[];
  /**
   * The watcher of the workspace kept by this process: told of each file written (see
   * {@link WorkspaceWatcher.wrote}), so that the next snapshot need not read it again.
   */
  watcher?: WorkspaceWatcher;
  /**
   * When the state `changes` start from was taken (a snapshot's start less the change window, in
   * nanoseconds since the epoch, as ctimes count): a path changed since then that no longer holds
   * its change's `before` was edited while the restore was prepared, and is left as it is, with
   * nothing put under it (listed in `keptEdited`). Without it (recovery), every path is set.
   */
  keepEditedSinceNs?: bigint;
}

/**
 * How many files a restore writes at once (a large file's writes and rename wait on the disk; a
 * small one is written with synchronous calls, one at a time). A file at place `i` of the
 * placements is written only once every one at `i - WRITES_AT_ONCE` or before has been; recovery
 * relies on it.
 */
export const WRITES_AT_ONCE = 8;

/**
 * The order a restore applies `changes` in: removals first, deepest first, then placements,
 * shallowest first (each stable in path order), files up to WRITES_AT_ONCE at a time. Recovery
 * reads it to tell how far a killed restore had come.
 */
export function applicationOrder(changes: readonly TreeChange[]): {
  removals: TreeChange[];
  placements: TreeChange[];
} {
  const depths = new Map(changes.map((change) => [change, depth(change.path)]));
  const deeper = (a: TreeChange, b: TreeChange): number =>
    (depths.get(a) as number) - (depths.get(b) as number);
  return {
    removals: changes.filter((change) => !change.after).sort((a, b) => deeper(b, a)),
    placements: changes.filter((change) => change.after).sort(deeper),
  };
}

async function applyWithin(
  root: string,
  store: ObjectStore,
  changes: readonly TreeChange[],
  options: ApplyOptions,
): Promise<ApplyResult> {
  const { isIgnored, isKept } = createLeftOutChecks(root, options);
  const owner = ownerOf(root);
  const umask = currentUmask();
  const watcher = options.watcher?.root === root ? options.watcher : undefined;
  const none = { written: 0, created: 0, deleted: 0, directoriesCreated: 0, directoriesDeleted: 0 };
  const result: ApplyResult = { ...none, skipped: [], skippedCount: 0 };
  const skip = (path: string): void => {
    result.skippedCount += 1;
    if (result.skipped.length < MAX_LISTED_SKIPPED) result.skipped.push(path);
  };
  const { removals, placements } = applicationOrder(changes);
  // Where a socket, a FIFO or a device is (`special`), or what was edited since the changes were
  // listed (`kept`): left alone, and nothing put under it.
  const special: string[] = [];
  const kept: string[] = [];
  const since = options.keepEditedSinceNs;
  const isEdited = (at: string, change: TreeChange): Promise<boolean> =>
    since === undefined ? Promise.resolve(false) : isEditedSince(at, change.before, since);
  const keep = (path: string): void => {
    result.keptEdited ??= [];
    result.keptEdited.push(path);
    kept.push(path);
  };
  const directoriesToSync = new Set<string>();
  // Everything written is made durable together at the end: see syncPaths.
  const written: string[] = [];

  const modes: { path: string; mode: number; depth: number }[] = [];
  const total = changes.length;
  let done = 0;
  const report = (path: string): void => {
    done += 1;
    options.onProgress?.({ done, total, path });
  };

  // Every path is reached through its opened parent: see WorkspaceDirectories.
  const directories = new WorkspaceDirectories(root);
  // A refused permission is said of the path, not of the temporary file beside it.
  const denying = <T>(path: string, step: RestoreStep, act: () => Promise<T>): Promise<T> =>
    act().catch((error: unknown) => {
      throw explainDenied(root, path, step, error);
    });
  // Files are written WRITES_AT_ONCE at a time, in order (see createOrderedWindow).
  const writes = createOrderedWindow(WRITES_AT_ONCE);
  try {
    for (const change of removals) {
      if (await isIgnored(change.path, change.before?.type === 'directory')) {
        skip(change.path);
      } else {
        // Under a symbolic link (put there since the changes were listed), the path is not in
        // the workspace: already gone, and the link is never followed to remove anything.
        const at = locateExisting(directories, change.path);
        const type = at === undefined ? undefined : currentType(at);
        // A socket, a FIFO or a device (left out of snapshots) is not what the change removes.
        const outcome =
          at === undefined
            ? 'absent'
            : type === 'other'
              ? 'special'
              : (await isEdited(at, change))
                ? 'edited'
                : await denying(change.path, 'remove', () => removeEntry(at, type));
        if (type === 'directory') directories.forget(change.path);
        if (outcome === 'removed') {
          result[type === 'directory' ? 'directoriesDeleted' : 'deleted'] += 1;
          directoriesToSync.add(posix.dirname(`${root}/${change.path}`));
        }
        if (outcome === 'not-empty' || outcome === 'special') skip(change.path);
        if (outcome === 'edited') keep(change.path);
      }
      report(change.path);
    }

    const ahead = readAhead(store, placements);
    for (const [index, change] of placements.entries()) {
      await writes.before(index);
      // A path located while the directories were all open may name another one once they have
      // been closed: the writes that use such paths end first.
      if (directories.isFull()) await writes.finish();
      const content = ahead.take(index);
      ahead.startAfter(index);
      const after = change.after as TreeEntry;
      const isDirectory = after.type === 'directory';
      let at: string | undefined;
      // Under what was kept: said of the kept path alone.
      if (isAtOrUnder(change.path, kept)) {
        report(change.path);
        continue;
      }
      // Nothing is put under a socket, a FIFO or a device left alone (see below).
      if (isAtOrUnder(change.path, special) || (await isIgnored(change.path, isDirectory))) {
        // What the workspace leaves out now is never overwritten; but where nothing is, putting
        // the path back tramples nothing (a rule written just before deleting it must not keep
        // it from coming back).
        if (!isAtOrUnder(change.path, special) && !(await isKept(change.path, isDirectory))) {
          try {
            at = directories.locateToCreate(change.path);
          } catch (error) {
            if (!isRewindError(error, 'SYMLINK_REFUSED')) throw error;
          }
          if (at !== undefined && currentType(at) !== undefined) at = undefined;
        }
        if (at === undefined) {
          skip(change.path);
          report(change.path);
          continue;
        }
        result.createdLeftOut ??= [];
        if (result.createdLeftOut.length < MAX_LISTED_SKIPPED) {
          result.createdLeftOut.push(change.path);
        }
      }
      at ??= directories.locateToCreate(change.path);
      const real = `${root}/${change.path}`;
      // A file is renamed over what is there unless that is a directory: where the state the
      // changes start from (a snapshot taken under the lock just before) held a file, the lstat
      // is spared (~17 µs a file while a restore writes). A directory put there since makes the
      // rename fail, and the restore is put back. Where it held nothing, a socket or a FIFO the
      // snapshot left out may be there. Recovery, which starts from wherever a crash left the
      // paths, always looks.
      let type =
        after.type === 'file' && !options.isRecovery && change.before?.type === after.type
          ? change.before.type
          : currentType(at);
      // A socket, a FIFO or a device is left out of snapshots (nothing holds it): never replaced,
      // nor is anything put under it.
      if (type === 'other') {
        special.push(change.path);
        skip(change.path);
        report(change.path);
        continue;
      }
      if (await isEdited(at, change)) {
        keep(change.path);
        report(change.path);
        continue;
      }
      const wasFileOrLink = type === 'file' || type === 'symlink';
      // A file is renamed over whatever non-directory is there; anything else must go first.
      if (type !== undefined && isRemovedBeforePlacing(type, after)) {
        const location = at;
        const removed = await denying(change.path, 'remove', () => removeEntry(location, type));
        if (removed === 'not-empty') {
          throw new RewindError(
            'PATH_UNREADABLE',
            `Cannot put a ${after.type} at ${change.path}: a directory is there that still holds files Rewind does not track ` +
              '(ignored by .gitignore or .rewindignore). Move them away, then retry.',
            { data: { path: change.path } },
          );
        }
        if (type === 'directory') directories.forget(change.path);
        if (type === 'directory') result.directoriesDeleted += 1;
        type = undefined;
      }
      if (after.type === 'directory') {
        if (type !== 'directory') {
          const location = at;
          await denying(change.path, 'create', () => mkdir(diskPath(location), { mode: 0o700 }));
          if (owner) await lchown(diskPath(at), owner.uid, owner.gid);
          result.directoriesCreated += 1;
          if (wasFileOrLink) result.deleted += 1;
        }
        modes.push({ path: change.path, mode: after.mode, depth: depth(change.path) });
      } else if (after.type === 'file') {
        // Putting things back after a failure (or a crash) leaves alone what already is right:
        // it may be exactly the file that could not be replaced.
        if (options.isRecovery && type === 'file' && (await holdsFile(at, after))) {
          directoriesToSync.add(posix.dirname(real));
          report(change.path);
          continue;
        }
        const location = at;
        await writes.start(index, async () => {
          const stats = await denying(change.path, type === undefined ? 'create' : 'write', () =>
            writeFromStore(store, location, after, { owner, umask }, content),
          );
          watcher?.wrote(change.path, contentStatOf(stats), after);
          written.push(real);
          if (type === undefined) result.created += 1;
          else result.written += 1;
          directoriesToSync.add(posix.dirname(real));
          report(change.path);
        });
        continue;
      } else {
        const target = diskPath(after.target);
        const location = diskPath(at);
        if (type === 'symlink') {
          if (!holdsLink(at, after)) {
            await denying(change.path, 'write', async () => {
              await unlink(location);
              await symlink(target, location);
            });
            if (owner) await lchown(location, owner.uid, owner.gid);
            result.written += 1;
          }
        } else {
          await denying(change.path, 'create', () => symlink(target, location));
          if (owner) await lchown(location, owner.uid, owner.gid);
          result[wasFileOrLink ? 'written' : 'created'] += 1;
        }
      }
      directoriesToSync.add(posix.dirname(real));
      report(change.path);
    }

    await writes.finish();
    for (const { path, mode } of modes.sort((a, b) => b.depth - a.depth)) {
      // One that has it already is left as it is: it may be a folder only its owner may change
      // (putting things back after a failure must not fail on a folder nothing changed).
      if (modeOf(directories, path) === mode) continue;
      await denying(path, 'set the mode of', async () => directories.chmodDirectory(path, mode));
    }
  } catch (error) {
    // Nothing goes on writing once this has failed.
    await writes.finish().catch(() => {});
    throw directories.explain(error);
  } finally {
    directories.close();
  }
  if (options.isRecovery) {
    await removeLeftovers(
      new Set(changes.map((change) => posix.dirname(`${root}/${change.path}`))),
    );
  }
  // A directory emptied and then removed by this same call has nothing left to sync: skipped.
  await syncPaths([...written, ...directoriesToSync], root);
  return result;
}
