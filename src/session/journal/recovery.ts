import { isRewindError, RewindError } from '../../errors.js';
import type { LedgerEntry } from '../../ledger/index.js';
import { type Digest, namedAndMore } from '../../lib/index.js';
import { findEntryAt, putTree, type TreeEntry } from '../../store/index.js';
import {
  type ApplyProgress,
  type ApplyResult,
  applicationOrder,
  applyChanges,
  decodeOutsideRules,
  diffEntries,
  diffTrees,
  exceptFor,
  isAtOrUnder,
  isRemovedBeforePlacing,
  isSameEntry,
  type LeftOutCheck,
  leftAloneOf,
  removeRestoreLeftovers,
  type SnapshotResult,
  type TreeChange,
  treeRules,
  WRITES_AT_ONCE,
  workspaceRules,
} from '../../workspace/index.js';
import {
  outsideRulesOf,
  type SessionContext,
  snapshotHost,
  snapshotWorkspace,
  watcherOf,
  workspaceFor,
} from '../context.js';
import { type Effect, isRecorded } from './action-records.js';
import { appendCheckpoint } from './checkpoint-records.js';
import type { Journal } from './journal.js';

/** Every path an effect changes, with its state before and after. */
export async function changesOf(context: SessionContext, effect: Effect): Promise<TreeChange[]> {
  if (effect.type === 'trees') return diffTrees(context.store, effect.beforeTree, effect.afterTree);
  const changes: TreeChange[] = [];
  for (const change of effect.paths) {
    changes.push(...(await diffEntries(context.store, change.path, change.before, change.after)));
  }
  return changes;
}

/** The same changes, backwards: what puts their paths back. */
export function reverseChanges(changes: readonly TreeChange[]): TreeChange[] {
  return changes.map((change) => ({
    path: change.path,
    before: change.after,
    after: change.before,
  }));
}

/**
 * What the rules of the state an announced restore leads to leave out: the ignore files of its
 * tree (a rollback's checkpoint, an undo's earlier state, a commit's view) with the outside rules
 * recorded for it, else today's. Undefined for a restore of some paths only.
 */
async function targetRulesOf(
  context: SessionContext,
  body: Record<string, unknown>,
): Promise<LeftOutCheck | undefined> {
  const tree = body.afterTree ?? body.sessionTree;
  if (typeof tree !== 'string') return undefined;
  const outside =
    typeof body.afterRules === 'string'
      ? decodeOutsideRules(await context.store.get(body.afterRules as Digest))
      : outsideRulesOf(context);
  const mayRemove = Array.isArray(body.mayRemove) ? body.mayRemove.map(String) : undefined;
  return exceptFor(treeRules(context.store, tree as Digest, outside), mayRemove);
}

/**
 * The paths among `changes` that a restore announced with `body` would leave alone, as the
 * workspace is now: what {@link applyAnnounced} would skip, for a dry run to tell.
 */
export async function leftAloneBy(
  context: SessionContext,
  body: Record<string, unknown>,
  changes: readonly TreeChange[],
  leaveAlone: readonly string[],
): Promise<string[]> {
  const target = await targetRulesOf(context, body);
  return leftAloneOf(workspaceFor(context, body), changes, {
    outside: outsideRulesOf(context),
    ...(target && { target }),
    leaveAlone,
  });
}

/**
 * Applies an announced restore (the changes its `*-started` entry names) and journals how it
 * ended. If it fails (a missing object, a path that became a link), the paths it touched are put
 * back as they were, the failure is journaled (closing the intent, so it is not retried
 * forever), and the error is rethrown saying whether the workspace is back as it was. If only
 * journaling its end fails, the workspace stays as the restore left it: the entry may be in the
 * ledger though the call failed (written, then not synced), and if it is not, the next command
 * finds the intent open and the workspace at its end, and closes it.
 */
export async function applyAnnounced(
  context: SessionContext,
  journal: Journal,
  started: LedgerEntry,
  changes: readonly TreeChange[],
  options: {
    isRecovery: boolean;
    onProgress?: (progress: ApplyProgress) => void;
    /** More fields for the completion entry (what recovery saved first). */
    completion?: Record<string, unknown>;
    /** Paths the workspace's snapshot could not read: never touched (see `applyChanges`). */
    leaveAlone?: readonly string[];
    /** What was edited since then is left as it is (see `ApplyOptions.keepEditedSinceNs`). */
    keepEditedSinceNs?: bigint;
  },
): Promise<ApplyResult> {
  const kind = started.kind.replace(/-started$/, '') as 'rollback' | 'undo' | 'action';
  const common = {
    startedSeq: started.seq,
    ...(kind === 'undo' && { undoes: started.body.undoes }),
    isRecovery: options.isRecovery,
  };
  const target = workspaceFor(context, started.body);
  // Neither side's rules may be trampled: what the workspace or the target leaves out stays.
  const rules = {
    outside: outsideRulesOf(context),
    target: await targetRulesOf(context, started.body),
    ...(options.leaveAlone && { leaveAlone: options.leaveAlone }),
  };
  const name = kind === 'action' ? String(started.body.action) : kind;
  let applied: ApplyResult;
  try {
    const watcher = watcherOf(context);
    applied = await applyChanges(target, context.store, changes, {
      isRecovery: options.isRecovery,
      ...rules,
      // Putting back after a failure keeps nothing this way: a path the failure left midway
      // holds neither side (see ApplyOptions.keepEditedSinceNs).
      ...(options.keepEditedSinceNs !== undefined && {
        keepEditedSinceNs: options.keepEditedSinceNs,
      }),
      ...(options.onProgress && { onProgress: options.onProgress }),
      ...(watcher && { watcher }),
    });
  } catch (error) {
    let isReverted = false;
    try {
      await applyChanges(target, context.store, reverseChanges(changes), {
        isRecovery: true,
        ...rules,
      });
      isReverted = true;
    } catch {}
    const code = isRewindError(error) ? error.code : 'IO_FAILED';
    const message = error instanceof Error ? error.message : String(error);
    // On a full or failing disk the failure may not be journaled either: the intent then stays
    // open, and the next command closes it (nothing changed) or finishes it.
    const isJournaled = await journal
      .append(`${kind}-failed`, { ...common, error: { code, message }, isReverted })
      .then(
        () => true,
        () => false,
      );
    throw new RewindError(
      code,
      `The ${name} #${started.seq} failed: ${message} ` +
        (isReverted
          ? 'The workspace was put back as it was before; nothing was lost.'
          : isJournaled
            ? 'Putting the workspace back failed too, so it is partly restored: `rewind diff` shows where it stands, and every state is still in the store.'
            : 'Putting the workspace back failed too, so it is partly restored, and this could not be journaled: once the cause is dealt with, the next command finishes it (every state is still in the store).'),
      { data: { id: started.seq, isReverted, isJournaled }, cause: error },
    );
  }
  try {
    await journal.append(`${kind}-completed`, { ...common, ...applied, ...options.completion });
  } catch (error) {
    throw new RewindError(
      isRewindError(error) ? error.code : 'IO_FAILED',
      `The ${name} #${started.seq} was applied, but its end could not be journaled: ${error instanceof Error ? error.message : String(error)} ` +
        `The workspace is as the ${name} leaves it; the next command records its end, and nothing was lost.`,
      { data: { id: started.seq, isApplied: true }, cause: error },
    );
  }
  return applied;
}

/**
 * The warning naming the paths a restore left as they were because they were edited while it was
 * prepared (`ApplyResult.keptEdited`), with `remedy` after it; none when there are none.
 */
export function keptEditedWarnings(applied: ApplyResult, name: string, remedy: string): string[] {
  const kept = applied.keptEdited ?? [];
  if (kept.length === 0) return [];
  const one = kept.length === 1;
  return [
    `${namedAndMore(kept)} changed while the ${name} was under way, so ${one ? 'it was' : 'they were'} left as ${one ? 'it is' : 'they are'}, not overwritten. ${remedy}`,
  ];
}

/** The digest of the empty tree. */
const emptyTree = (context: SessionContext): Promise<Digest> => putTree(context.store, []);

const sameState = (a: TreeEntry | undefined, b: TreeEntry | undefined): boolean =>
  a === undefined || b === undefined ? a === b : isSameEntry(a, b);

/** Whether a restore removes `before` first to put `after` there (see `isRemovedBeforePlacing`). */
function isRemovedFirst(before: TreeEntry | undefined, after: TreeEntry | undefined): boolean {
  if (before === undefined || after === undefined) return false;
  // A link given another target is removed and made again.
  if (before.type === 'symlink' && after.type === 'symlink') return !isSameEntry(before, after);
  return isRemovedBeforePlacing(before.type, after);
}

/**
 * The paths an interrupted restore would set that hold neither the state it started from nor the
 * one it leads to: edited since the crash. Paths either side's rules leave out are never touched,
 * so they are not counted; a directory is judged by what is in it. A path back in the state the
 * restore started from looks as if the restore had not reached it yet; but the restore goes in a
 * fixed order (see applicationOrder), so one that comes before a path it did set was set too
 * (one place before, or WRITES_AT_ONCE places for a file written over what is there, as files are
 * written that many at a time), and was put back since the crash: edited as well. So is a path
 * found absent where the restore removes what is there first (the restore midway) when the
 * restore had gone past it.
 */
async function findDrift(
  context: SessionContext,
  started: LedgerEntry,
  changes: readonly TreeChange[],
): Promise<{
  snapshot: SnapshotResult;
  paths: string[];
  applied: number;
  /** The restore's changes, with the folders that must become folders again first. */
  changes: TreeChange[];
}> {
  const isOnHost = started.body.on === 'host';
  const snapshot = isOnHost ? await snapshotHost(context) : await snapshotWorkspace(context);
  const now = workspaceRules(workspaceFor(context, started.body), outsideRulesOf(context));
  const then = await targetRulesOf(context, started.body);
  const trees = new Map<Digest, Promise<readonly TreeEntry[]>>();
  const { removals, placements } = applicationOrder(changes);
  /** What cannot be read now is left as it is by the restore: neither drifted nor saved. */
  const unreadable = snapshot.unreadable.map(({ path }) => path);
  /** Whether either side's rules leave a path out: then it is never touched, nor counted. */
  const isLeftOut = async (path: string, entries: (TreeEntry | undefined)[]) => {
    if (isAtOrUnder(path, unreadable)) return true;
    const isDirectory = entries.some((entry) => entry?.type === 'directory');
    return (await now(path, isDirectory)) || ((await then?.(path, isDirectory)) ?? false);
  };
  const drifted = new Set<string>();
  /**
   * Paths not (or not wholly) set, in the order the restore applies them, each with how many
   * places on a path set later proves it was set too.
   */
  let notReached: {
    path: string;
    place: number;
    window: number;
    entries: (TreeEntry | undefined)[];
  }[] = [];
  /** The path at `place` was set: those it must come after were set too (see above). */
  const reached = async (place: number) => {
    const kept: typeof notReached = [];
    for (const path of notReached) {
      if (place - path.place < path.window) kept.push(path);
      else if (!(await isLeftOut(path.path, path.entries))) drifted.add(path.path);
    }
    notReached = kept;
  };
  let applied = 0;
  for (const [place, { path, before, after }] of [...removals, ...placements].entries()) {
    if (isAtOrUnder(path, unreadable)) continue;
    const current = await findEntryAt(context.store, snapshot.tree, path, trees);
    if (current?.type === 'directory' && after?.type === 'directory') {
      if (before?.type !== 'directory') {
        applied += 1;
        await reached(place);
      }
      continue;
    }
    if (current?.type === 'directory' && before?.type === 'directory') continue;
    const entries = [current, before, after];
    // Only a file's writing waits: removals, folders, links and what goes before placing
    // another type are done one after the other (see applyChanges).
    const isWritten = after?.type === 'file';
    if (sameState(current, before)) {
      const window = isWritten && !isRemovedFirst(before, after) ? WRITES_AT_ONCE : 1;
      notReached.push({ path, place, window, entries });
      continue;
    }
    if (sameState(current, after)) {
      applied += 1;
      await reached(place);
      continue;
    }
    // Absent where the restore removes what is there before putting its path in place (one
    // type for another, a link retargeted): killed in between, the restore was at this path;
    // unless it had gone past it.
    if (current === undefined && isRemovedFirst(before, after)) {
      applied += 1;
      await reached(place);
      notReached.push({ path, place, window: isWritten ? WRITES_AT_ONCE : 1, entries });
      continue;
    }
    if (!(await isLeftOut(path, entries))) drifted.add(path);
  }
  // A directory the restore replaces or removes must be empty by then: what is in it now that
  // the restore does not remove was put there since the crash (a directory moved there, say).
  // It drifted, and goes too (saved first, with everything else that drifted).
  const removed = new Set(removals.map(({ path }) => path));
  const emptied: TreeChange[] = [];
  for (const { path, after } of changes) {
    if (after?.type === 'directory') continue;
    const current = await findEntryAt(context.store, snapshot.tree, path, trees);
    if (current?.type !== 'directory') continue;
    for (const inner of await diffTrees(context.store, current.digest, await emptyTree(context))) {
      const innerPath = `${path}/${inner.path}`;
      if (removed.has(innerPath) || (await isLeftOut(innerPath, [inner.before]))) continue;
      drifted.add(innerPath);
      emptied.push({ path: innerPath, before: inner.before, after: undefined });
    }
  }
  const parents = await replacedParents(context, started, changes, snapshot.tree, trees, isLeftOut);
  for (const { path } of parents) drifted.add(path);
  const all = [...parents, ...changes, ...emptied];
  // In path order, as the changes are listed.
  const paths = all.map(({ path }) => path).filter((path) => drifted.has(path));
  return { snapshot, paths, applied, changes: all };
}

/**
 * The folders above the paths a restore puts back that are no longer folders (removed, or
 * replaced by a file or a symbolic link since the crash): edits, to be saved, and made folders
 * again first so that the restore can finish (with the mode the restore's own tree gives them,
 * else 755). A restore never does that to a parent itself unless the parent is one of its paths.
 */
async function replacedParents(
  context: SessionContext,
  started: LedgerEntry,
  changes: readonly TreeChange[],
  current: Digest,
  trees: Map<Digest, Promise<readonly TreeEntry[]>>,
  isLeftOut: (path: string, entries: (TreeEntry | undefined)[]) => Promise<boolean>,
): Promise<TreeChange[]> {
  const listed = new Set(changes.map(({ path }) => path));
  const found = new Map<string, TreeChange>();
  const targetTree = started.body.afterTree ?? started.body.sessionTree;
  for (const { path, after } of changes) {
    if (!after || (await isLeftOut(path, [after]))) continue;
    const parts = path.split('/');
    for (let index = 1; index < parts.length; index++) {
      const parent = parts.slice(0, index).join('/');
      if (listed.has(parent) || found.has(parent)) continue;
      // Under a parent that is no longer a folder, nothing is found: folders to make too.
      const entry = await findEntryAt(context.store, current, parent, trees);
      if (entry?.type === 'directory') continue;
      const then =
        typeof targetTree === 'string'
          ? await findEntryAt(context.store, targetTree as Digest, parent, trees)
          : undefined;
      const folder: TreeEntry =
        then?.type === 'directory'
          ? then
          : {
              name: parts[index - 1] as string,
              type: 'directory',
              mode: 0o755,
              digest: await emptyTree(context),
            };
      found.set(parent, { path: parent, before: entry, after: folder });
    }
  }
  return [...found.values()];
}

/**
 * Puts back what an interrupted commit had written on the host, leaving `leaveAlone` (the paths
 * edited since, and those that cannot be read) as they are. Whether it was all put back.
 */
async function putBackCommit(
  context: SessionContext,
  started: LedgerEntry,
  changes: readonly TreeChange[],
  leaveAlone: readonly string[],
): Promise<boolean> {
  try {
    await applyChanges(
      workspaceFor(context, started.body),
      context.store,
      reverseChanges(changes),
      {
        isRecovery: true,
        outside: outsideRulesOf(context),
        target: await targetRulesOf(context, started.body),
        leaveAlone,
      },
    );
    return true;
  } catch {
    return false;
  }
}

/**
 * The checkpoint an earlier recovery of action `id` saved what had drifted in, before it was
 * itself cut short (the newest, if it was cut short more than once), with the paths it holds
 * that were neither the action's source nor its target.
 */
async function earlierSave(
  context: SessionContext,
  journal: Journal,
  id: number,
  changes: readonly TreeChange[],
): Promise<
  | { completion: { savedAs: string; drifted: string[]; driftedCount: number }; shown: string }
  | undefined
> {
  const base = savedLabelOf(id);
  const saved = journal
    .checkpoints()
    .filter(
      (checkpoint) =>
        checkpoint.seq > id &&
        (checkpoint.label === base || checkpoint.label.startsWith(`${base}-`)),
    )
    .at(-1);
  if (!saved) return undefined;
  const trees = new Map<Digest, Promise<readonly TreeEntry[]>>();
  const drifted: string[] = [];
  for (const { path, before, after } of changes) {
    // What it could not read is not in it: not saved there.
    if (isAtOrUnder(path, saved.unreadable ?? [])) continue;
    const there = await findEntryAt(context.store, saved.tree, path, trees);
    if (!sameState(there, before) && !sameState(there, after)) drifted.push(path);
  }
  const shown = namedAndMore(drifted);
  return {
    completion: {
      savedAs: saved.label,
      drifted: drifted.slice(0, 50),
      driftedCount: drifted.length,
    },
    shown,
  };
}

/** The label of the checkpoint recovery saves edits in before finishing action `id`. */
const savedLabelOf = (id: number): string => `saved-before-recovery-${id}`;

/** A free label for the checkpoint that keeps what recovery would otherwise overwrite. */
function savedLabelFor(journal: Journal, id: number): string {
  const base = savedLabelOf(id);
  for (let index = 1; ; index++) {
    const label = index === 1 ? base : `${base}-${index}`;
    if (!journal.checkpoints().some((checkpoint) => checkpoint.label === label)) return label;
  }
}

/**
 * Finishes what a killed process left between intent and completion. Operations run one at a
 * time under the workspace lock, and this runs before each, so only the newest action can have
 * been interrupted: an older one that looks open lost its closing entry (a damaged line) and is
 * never replayed. A rollback, an undo, a commit or a file action that had changed no path yet is
 * closed as failed (`NOT_APPLIED`), not performed: it was never reported done. One that had is
 * applied again (all are idempotent) and journaled as completed; but first, any path edited
 * since the crash (see findDrift) is saved in a checkpoint
 * (`saved-before-recovery-<id>`, named in the completion), or, for a commit to the host, the
 * commit is closed as failed and nothing is overwritten. A command cannot be finished: the
 * workspace it left is recorded and it is closed as interrupted (its file effects can then still
 * be undone). Runs under the workspace lock, before every operation. Returns what it did, in a
 * sentence for people (what was saved first, what to run next), or undefined when nothing was
 * pending.
 */
export async function recover(
  context: SessionContext,
  journal: Journal,
): Promise<string | undefined> {
  const action = journal.newestAction();
  // Drafts wait for approval, recorded actions for their report: neither was interrupted.
  if (!action || action.closed || action.state === 'draft' || action.state === 'discarded') {
    return undefined;
  }
  if (isRecorded(action)) return undefined;
  const what = `${action.kind} #${action.id} (${action.target})`;
  context.settings.onRecoveryStart?.(
    `A killed process left the ${what} unfinished: finishing or closing it before anything else...`,
  );
  if (action.effect) {
    const changes = await changesOf(context, action.effect);
    // Rewind's own half-written copies go first: they are neither side's, nor anyone's edit.
    await removeRestoreLeftovers(
      workspaceFor(context, action.started.body),
      changes.map((change) => change.path),
    );
    const drift = await findDrift(context, action.started, changes);
    // Not one path was changed: it failed and was put back (its closing entry could not be
    // written: a full disk), or it was cut short before it began. It is closed, not performed: it
    // was never reported done, and edits made since must not be overwritten by it.
    if (drift.applied === 0 && changes.length > 0) {
      const kind = action.started.kind.replace(/-started$/, '') as 'rollback' | 'undo' | 'action';
      await journal.append(`${kind}-failed`, {
        startedSeq: action.id,
        ...(kind === 'undo' && { undoes: action.started.body.undoes }),
        error: {
          code: 'NOT_APPLIED',
          message:
            'It was cut short before it changed any path (or failed and was put back), so it was not performed. Run it again if it is still wanted.',
        },
        isReverted: true,
        isRecovery: true,
      });
      return `The ${what} a killed process had cut short before it changed anything was closed, not performed: run it again if it is still wanted.`;
    }
    const leaveAlone = drift.snapshot.unreadable.map(({ path }) => path);
    // A recovery killed after saving what drifted left its checkpoint: it is still the one to name.
    const earlier = await earlierSave(context, journal, action.id, changes);
    if (drift.paths.length === 0) {
      await applyAnnounced(context, journal, action.started, drift.changes, {
        isRecovery: true,
        ...(earlier && { completion: earlier.completion }),
        leaveAlone,
      });
      return earlier
        ? `The ${what} a killed process had left half-done was finished first; what was edited since ` +
            `(${earlier.shown}) was saved, by a recovery cut short before, in checkpoint ${earlier.completion.savedAs}: ` +
            `\`rewind rollback ${earlier.completion.savedAs} -- PATH\` brings a path back.`
        : `The ${what} a killed process had left half-done was finished first.`;
    }
    const listed = { drifted: drift.paths.slice(0, 50), driftedCount: drift.paths.length };
    const shown = namedAndMore(drift.paths);
    if (action.started.body.on === 'host') {
      // Not finished over edits: what it had written is put back, as a commit that fails midway
      // puts back what it touched, and the paths edited since are left as they are.
      const isReverted = await putBackCommit(context, action.started, drift.changes, [
        ...leaveAlone,
        ...drift.paths,
      ]);
      const outcome = isReverted
        ? 'it was not finished, and what it had written was put back; nothing edited since was overwritten. Look at the workspace, then commit again.'
        : `it was not finished, and putting back what it had written failed, so the workspace holds some of it (\`rewind diff\` shows where it stands; every state is in the store); nothing edited since was overwritten.`;
      await journal.append('action-failed', {
        startedSeq: action.id,
        error: {
          code: 'DRIFTED',
          message: `The commit was interrupted, and ${drift.paths.length} of its paths changed in the workspace since (${shown}): ${outcome}`,
        },
        ...listed,
        isReverted,
        isRecovery: true,
      });
      return `The ${what} a killed process had left half-done: ${drift.paths.length} of its paths changed in the workspace since (${shown}), so ${outcome}`;
    }
    const savedAs = savedLabelFor(journal, action.id);
    await appendCheckpoint(context, journal, savedAs, drift.snapshot, {
      isAutomatic: false,
      conversation: journal.currentConversation(),
    });
    await applyAnnounced(context, journal, action.started, drift.changes, {
      isRecovery: true,
      completion: { savedAs, ...listed },
      leaveAlone,
    });
    return (
      `The ${what} a killed process had left half-done was finished first; what was edited since ` +
      `(${shown}) is saved in checkpoint ${savedAs}` +
      (earlier
        ? ` (and what was edited before an earlier recovery was cut short, in ${earlier.completion.savedAs})`
        : '') +
      `: \`rewind rollback ${savedAs} -- PATH\` brings a path back.`
    );
  }
  const snapshot = action.kind === 'exec' ? await snapshotWorkspace(context) : undefined;
  await journal.append(
    'action-failed',
    {
      startedSeq: action.id,
      ...(snapshot && { afterTree: snapshot.tree }),
      error: {
        code: 'INTERRUPTED',
        message:
          'The process running it ended before it finished; the workspace as it was then is recorded.',
      },
      isRecovery: true,
    },
    snapshot ? [{ type: 'tree', digest: snapshot.tree }] : [],
  );
  return snapshot
    ? `The ${what} a killed process had left running was closed as interrupted; what it changed in the workspace is recorded: \`rewind undo ${action.id}\` reverts it.`
    : `The ${what} a killed process had left unfinished was closed as interrupted.`;
}
