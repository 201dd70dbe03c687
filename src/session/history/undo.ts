import { lstatSync } from 'node:fs';
import { join } from 'node:path';
import { isRewindError, isSystemError, RewindError } from '../../errors.js';
import type { LedgerEntry } from '../../ledger/index.js';
import type { Digest } from '../../lib/index.js';
import { diskPath, namedAndMore } from '../../lib/index.js';
import { putTree, readTree, type TreeEntry } from '../../store/index.js';
import {
  type ApplyProgress,
  type ApplyResult,
  diffTrees,
  editsFrom,
  exceptFor,
  isAtOrUnder,
  isAtSpecialSync,
  isSameEntry,
  type LeftOutCheck,
  snapshotPath,
  type TreeChange,
  treeRules,
  workspaceRules,
} from '../../workspace/index.js';
import {
  outsideRulesOf,
  type SessionContext,
  snapshotWorkspace,
  workspaceFor,
} from '../context.js';
import {
  type ActionRecord,
  describeState,
  type Effect,
  referencesOf,
} from '../journal/action-records.js';
import { conversationIn } from '../journal/conversation-refs.js';
import {
  ChangedMeanwhile,
  checkConversationUnmoved,
  type Journal,
  planningAgain,
  withWorkspaceLock,
} from '../journal/journal.js';
import {
  applyAnnounced,
  changesOf,
  keptEditedWarnings,
  reverseChanges,
} from '../journal/recovery.js';

/** A path an undo would trample: what the action left there, and what is there now. */
export interface UndoConflict {
  path: string;
  expected: string;
  found: string;
}

/** Options of `Session.undo`. */
export interface UndoOptions {
  /** Told of each path the undo has put back, once it has checked it tramples nothing. */
  onProgress?: (progress: ApplyProgress) => void;
}

/** The outcome of an undo: done, or refused because later edits would be trampled. */
export type UndoResult =
  | {
      status: 'undone';
      id: number;
      undoes: number;
      applied: ApplyResult;
      /** What the undo left as it is, and why (a path the action left unreadable). */
      warnings: string[];
    }
  | { status: 'refused'; undoes: number; conflicts: UndoConflict[] };

/** The effect of an action that can be undone. Throws `ACTION_NOT_ALLOWED` for one that cannot. */
function checkUndoable(action: ActionRecord): Effect {
  const refuse = (why: string, next: string): never => {
    throw new RewindError(
      'ACTION_NOT_ALLOWED',
      `Action #${action.id} (${action.kind} ${action.target}) ${why}. ${next}`,
      { data: { id: action.id, state: action.state, class: action.class } },
    );
  };
  if (action.class !== 'reversible') {
    refuse(
      `is ${action.class}: Rewind holds no state to put back`,
      action.class === 'compensable'
        ? `Run its declared compensation with \`rewind compensate ${action.id}\`.`
        : 'Nothing can undo it; record what you do about it with `rewind note`.',
    );
  }
  if (action.state === 'undone') {
    refuse('is undone already', 'Run `rewind log` to find the undo, and undo that to redo it.');
  }
  if (action.state === 'draft' || action.state === 'discarded') {
    refuse(`never ran (it is ${action.state})`, 'There is nothing to undo.');
  }
  if (action.effect === undefined || (action.state === 'failed' && action.kind !== 'exec')) {
    refuse(
      'failed and was put back as it was',
      'There is nothing to undo; `rewind log` shows what happened.',
    );
  }
  return action.effect as Effect;
}

/** The most recent action that can still be undone. Throws `ACTION_NOT_FOUND` when none is left. */
function lastUndoable(context: SessionContext, journal: Journal): ActionRecord {
  const actions = [...journal.actions().values()];
  for (let index = actions.length - 1; index >= 0; index--) {
    const action = actions[index] as ActionRecord;
    if (
      action.kind !== 'undo' &&
      action.class === 'reversible' &&
      action.effect !== undefined &&
      (action.state === 'done' ||
        action.state === 'undo-refused' ||
        action.state === 'interrupted' ||
        (action.state === 'failed' && action.kind === 'exec'))
    ) {
      return action;
    }
  }
  throw new RewindError(
    'ACTION_NOT_FOUND',
    `Session ${context.id} has no action left to undo. Run \`rewind log\` to see its actions.`,
    { data: { id: 'last' } },
  );
}

function isSameState(a: TreeEntry | undefined, b: TreeEntry | undefined): boolean {
  if (a === undefined || b === undefined) return a === b;
  return isSameEntry(a, b);
}

/**
 * What an undo leaves alone, as the restore will: paths that the workspace's rules leave out, or
 * the rules of the state it goes back to (for a whole-tree effect).
 */
function leftOutByUndo(context: SessionContext, effect: Effect, target: string): LeftOutCheck {
  const outside = outsideRulesOf(context);
  const now = workspaceRules(target, outside);
  const then =
    effect.type === 'trees'
      ? exceptFor(treeRules(context.store, effect.beforeTree, outside), effect.createdLeftOut)
      : undefined;
  // A socket, a FIFO or a device is left out of snapshots: a restore leaves it alone.
  return async (path, isDirectory) =>
    (await now(path, isDirectory)) ||
    ((await then?.(path, isDirectory)) ?? false) ||
    isAtSpecialSync(target, path);
}

const isDirectoryChange = (change: TreeChange): boolean =>
  change.before?.type === 'directory' || change.after?.type === 'directory';

/**
 * A directory the action was to remove that is there, holding only paths the action did not
 * touch: the action left it because of them (a restore never removes a directory that still
 * holds something it does not set), or it was made again since, with the same mode, around
 * other things. Either way the undo only puts the action's own paths back inside it, each checked
 * on its own: nothing to trample.
 */
function isKeptDirectory(
  change: TreeChange,
  drifted: TreeChange,
  drift: ReadonlyMap<string, TreeChange>,
  touchedPaths: ReadonlySet<string>,
): boolean {
  if (change.after !== undefined || change.before?.type !== 'directory') return false;
  if (drifted.before?.type !== 'directory' || drifted.before.mode !== change.before.mode)
    return false;
  for (const [path, inside] of drift) {
    if (path.startsWith(`${change.path}/`) && inside.before && touchedPaths.has(path)) return false;
  }
  return true;
}

/** A directory the action removed that is there again (see {@link isKeptDirectory}). */
interface KeptDirectory {
  path: string;
  mode: number;
}

/**
 * `tree` with an empty directory at each kept path: the state an undo replaces, as far as the
 * action's paths go. Recorded as the undo's `beforeTree`, so undoing the undo leaves those
 * directories where they were (without it, they would go with what the undo put in them).
 */
async function withKeptDirectories(
  context: SessionContext,
  tree: Digest,
  kept: readonly KeptDirectory[],
): Promise<Digest> {
  if (kept.length === 0) return tree;
  const empty = await putTree(context.store, []);
  const place = async (root: Digest, parts: readonly string[], mode: number): Promise<Digest> => {
    const entries = [...(await readTree(context.store, root)).entries];
    const [name, ...rest] = parts as [string, ...string[]];
    const index = entries.findIndex((entry) => entry.name === name);
    const existing = entries[index];
    if (existing && (rest.length === 0 || existing.type !== 'directory')) return root;
    const inner = existing?.type === 'directory' ? existing.digest : empty;
    const entry: TreeEntry = {
      name,
      type: 'directory',
      mode: existing?.type === 'directory' ? existing.mode : mode,
      digest: rest.length === 0 ? empty : await place(inner, rest, mode),
    };
    if (index >= 0) entries[index] = entry;
    else entries.push(entry);
    return putTree(context.store, entries);
  };
  let root = tree;
  const byDepth = [...kept].sort((a, b) => a.path.split('/').length - b.path.split('/').length);
  for (const { path, mode } of byDepth) root = await place(root, path.split('/'), mode);
  return root;
}

/**
 * The touched paths that no longer hold what the action left there, leaving out those the undo
 * leaves alone anyway (which the action may have left alone too: a rollback skips what either
 * side's rules leave out). Collects in `unreadable` the paths the workspace's snapshot could not
 * read, which the undo must leave alone.
 */
async function findUndoConflicts(
  context: SessionContext,
  effect: Effect,
  touched: readonly TreeChange[],
  target: string,
  unreadable: string[],
  kept: KeptDirectory[],
  stays: KeptDirectory[],
): Promise<UndoConflict[]> {
  const conflicts: UndoConflict[] = [];
  const isLeftOut = leftOutByUndo(context, effect, target);
  if (effect.type === 'trees') {
    const snapshot = await snapshotWorkspace(context);
    // What cannot be read is unknown: undoing could overwrite it. (A directory above it that the
    // undo would remove is left in place, still holding it, as a rollback does.)
    for (const { path, reason } of snapshot.unreadable) {
      const change = touched.find((change) => isAtOrUnder(change.path, [path]));
      if (change) {
        conflicts.push({
          path: change.path,
          expected: describeState(change.after),
          found: `unreadable (${reason})`,
        });
      }
    }
    unreadable.push(...snapshot.unreadable.map(({ path }) => path));
    const drift = new Map(
      (await diffTrees(context.store, snapshot.tree, effect.afterTree)).map((change) => [
        change.path,
        change,
      ]),
    );
    const touchedPaths = new Set(touched.map((change) => change.path));
    for (const change of touched) {
      const drifted = drift.get(change.path);
      if (isAtOrUnder(change.path, unreadable)) continue;
      if (drifted && isKeptDirectory(change, drifted, drift, touchedPaths)) {
        kept.push({ path: change.path, mode: (drifted.before as { mode: number }).mode });
        continue;
      }
      if (drifted && !(await isLeftOut(change.path, isDirectoryChange(drifted)))) {
        conflicts.push({
          path: change.path,
          expected: describeState(drifted.after),
          found: describeState(drifted.before),
        });
      }
    }
    // A directory the action made that still holds what the undo does not touch stays (a restore
    // never removes a directory that holds something): recorded as staying, so that undoing the
    // undo knows it was there.
    for (const change of touched) {
      if (change.before !== undefined || change.after?.type !== 'directory') continue;
      const own = drift.get(change.path)?.before ?? change.after;
      if (own.type !== 'directory') continue;
      const holdsMore = [...drift].some(
        ([path, inner]) =>
          path.startsWith(`${change.path}/`) && inner.before && !touchedPaths.has(path),
      );
      if (holdsMore) stays.push({ path: change.path, mode: own.mode });
    }
    // A directory the action left that the undo turns back into a file or a link goes whole:
    // what was put in it since would go with it.
    for (const change of touched) {
      if (change.after?.type !== 'directory') continue;
      if (change.before?.type !== 'file' && change.before?.type !== 'symlink') continue;
      for (const [path, drifted] of drift) {
        if (!path.startsWith(`${change.path}/`) || touchedPaths.has(path)) continue;
        if (drifted.before === undefined || drifted.after !== undefined) continue;
        if (await isLeftOut(path, drifted.before.type === 'directory')) continue;
        conflicts.push({ path, expected: 'absent', found: describeState(drifted.before) });
      }
    }
    return conflicts;
  }
  const batch = context.store.batch();
  const outside = outsideRulesOf(context);
  const own = new Set(touched.map((change) => change.path));
  try {
    for (const change of effect.paths) {
      if (await isLeftOut(change.path, isDirectoryChange(change))) continue;
      let current: TreeEntry | undefined;
      try {
        ({ entry: current } = await snapshotPath(target, change.path, batch, outside));
      } catch (error) {
        if (!isRewindError(error, 'PATH_UNREADABLE')) throw error;
        const { path, reason } = error.data as { path: string; reason: string };
        conflicts.push({
          path,
          expected: describeState(change.after),
          found: `unreadable (${reason})`,
        });
        continue;
      }
      if (isSameState(current, change.after)) continue;
      // A directory the action removed that is there (it held what the action did not touch, or
      // was made again): the undo puts the action's own paths back in it, each checked on its own.
      if (
        current?.type === 'directory' &&
        change.after === undefined &&
        change.before?.type === 'directory' &&
        current.mode === change.before.mode
      ) {
        // What it holds where the undo puts something else back was put there since.
        for (const inner of await diffTrees(context.store, current.digest, change.before.digest)) {
          if (!inner.before || !inner.after) continue;
          const path = `${change.path}/${inner.path}`;
          conflicts.push({ path, expected: 'absent', found: describeState(inner.before) });
        }
        continue;
      }
      if (current?.type === 'directory' && change.after?.type === 'directory') {
        let holdsMore = false;
        for (const inner of await diffTrees(context.store, current.digest, change.after.digest)) {
          // Put in a directory the action made, and none of its business: it stays, and so
          // does the directory.
          const innerPath = `${change.path}/${inner.path}`;
          if (change.before === undefined && inner.after === undefined && !own.has(innerPath)) {
            holdsMore = true;
            continue;
          }
          conflicts.push({
            path: `${change.path}/${inner.path}`,
            expected: describeState(inner.after),
            found: describeState(inner.before),
          });
        }
        if (current.mode !== change.after.mode) {
          conflicts.push({
            path: change.path,
            expected: `mode ${change.after.mode.toString(8)}`,
            found: `mode ${current.mode.toString(8)}`,
          });
        }
        if (holdsMore) stays.push({ path: change.path, mode: current.mode });
      } else {
        conflicts.push({
          path: change.path,
          expected: describeState(change.after),
          found: describeState(current),
        });
      }
    }
  } finally {
    await batch.commit();
  }
  return conflicts;
}

/** What is at a path of the workspace now, for {@link brokenParents}: `directory`, or what else. */
function kindAt(absolute: string): string {
  try {
    const stats = lstatSync(diskPath(absolute));
    if (stats.isDirectory()) return 'directory';
    return stats.isSymbolicLink() ? 'a symbolic link' : 'a file';
  } catch (error) {
    if (isSystemError(error, 'ENOENT') || isSystemError(error, 'ENOTDIR')) return 'absent';
    throw error;
  }
}

/**
 * The folders above the paths an undo puts back that are no folder now (removed since the
 * action, or replaced by a file or a link) and that the undo does not put back itself: nothing can
 * be restored into them, so the undo refuses and names them.
 */
async function brokenParents(
  touched: readonly TreeChange[],
  target: string,
  isLeftOut: LeftOutCheck,
): Promise<UndoConflict[]> {
  const restoredDirectories = new Set(
    touched.filter((change) => change.before?.type === 'directory').map((change) => change.path),
  );
  const conflicts = new Map<string, UndoConflict>();
  for (const change of touched) {
    if (change.before === undefined) continue;
    if (await isLeftOut(change.path, change.before.type === 'directory')) continue;
    const names = change.path.split('/');
    // Under a folder the undo puts back in place of what is there now (a link, a file), only what
    // it puts back is there after it; nothing is looked at through what is there now.
    let isReplaced = false;
    for (let index = 1; index < names.length; index++) {
      const parent = names.slice(0, index).join('/');
      // No folder now, named already: what is under it is not looked at through it.
      if (conflicts.has(parent)) break;
      if (restoredDirectories.has(parent)) {
        isReplaced ||= kindAt(join(target, parent)) !== 'directory';
        continue;
      }
      const found = isReplaced ? 'absent' : kindAt(join(target, parent));
      if (found !== 'directory') {
        conflicts.set(parent, { path: parent, expected: 'a directory', found });
        break;
      }
    }
  }
  return [...conflicts.values()];
}

/**
 * Undoes a reversible action (`last`: the most recent one that can still be undone), unless a
 * path it changed no longer holds what it left: then the refusal is journaled and returned.
 * Throws `ACTION_NOT_FOUND` and `ACTION_NOT_ALLOWED`.
 */
export function undoAction(
  context: SessionContext,
  id: number | 'last',
  options: UndoOptions = {},
): Promise<UndoResult> {
  const purpose = `undoing ${id === 'last' ? 'the last action' : `#${id}`}`;
  return withWorkspaceLock(context, purpose, (journal) =>
    planningAgain(context, journal, () => undoOnce(context, journal, id, options)),
  );
}

/**
 * Inside the workspace lock: {@link undoAction}. Its intent is appended only if, at that moment,
 * the action can still be undone and (when the undo moves the conversation) the conversation is
 * the one it planned with: on a shared ledger another copy of the workspace may have undone it,
 * or moved the conversation, under its own lock meanwhile.
 */
async function undoOnce(
  context: SessionContext,
  journal: Journal,
  id: number | 'last',
  options: UndoOptions,
): Promise<UndoResult> {
  const movedAt = journal.conversationMovedAt();
  const action = id === 'last' ? lastUndoable(context, journal) : journal.findAction(id);
  const effect = checkUndoable(action);
  // What the action left unreadable is unknown: the undo leaves it as it is, and says so.
  const leftUnread = effect.type === 'trees' ? (effect.unreadable ?? []) : [];
  const touched = (await changesOf(context, effect)).filter(
    (change) => !isAtOrUnder(change.path, leftUnread),
  );
  const unreadable: string[] = [...leftUnread];
  const kept: KeptDirectory[] = [];
  const stays: KeptDirectory[] = [];
  const target = workspaceFor(context, action.started.body);
  // What changes from now on, while the undo is checked and prepared, is kept.
  const since = editsFrom(target);
  const conflicts = [
    ...(await findUndoConflicts(context, effect, touched, target, unreadable, kept, stays)),
    ...(await brokenParents(touched, target, leftOutByUndo(context, effect, target))),
  ];
  if (conflicts.length > 0) {
    await journal.append('undo-refused', {
      undoes: action.id,
      paths: conflicts.slice(0, 50).map((conflict) => conflict.path),
      conflicts: conflicts.slice(0, 50),
      pathCount: conflicts.length,
    });
    return { status: 'refused', undoes: action.id, conflicts };
  }
  // Undoing what moved the conversation moves it back (to none, if there was none).
  const movedTo = conversationIn(action.started.body, 'conversationAfter');
  const movedFrom = conversationIn(action.started.body, 'conversationBefore');
  const current = journal.currentConversation();
  const moved = {
    ...(movedTo && {
      ...(movedFrom && { conversationAfter: movedFrom }),
      ...(current && { conversationBefore: current }),
    }),
    // An undo acts where the action did: the host, for a commit.
    ...(action.started.body.on === 'host' && { on: 'host' }),
  };
  const conversationRefs = [movedFrom, current].flatMap((ref) =>
    movedTo && ref ? [{ type: 'tree' as const, digest: ref.tree }] : [],
  );
  // Another copy of the workspace may have undone it meanwhile, or moved the conversation.
  const stillUndoable = (latest: Journal) => {
    const undoing = latest
      .underWayElsewhere()
      .find((other) => other.kind === 'undo' && other.undoes === action.id);
    if (undoing) {
      throw new ChangedMeanwhile(
        `Action #${action.id} is being undone by another copy of the workspace (#${undoing.id}), which has not finished.`,
        context.id,
        undoing.id,
      );
    }
    checkUndoable(latest.findAction(action.id));
    if (movedTo) checkConversationUnmoved(latest, context.id, movedAt);
  };
  const staying = new Set(stays.map(({ path }) => path));
  const changes = reverseChanges(touched).filter(({ path }) => !staying.has(path));
  let started: LedgerEntry;
  if (effect.type === 'trees') {
    const beforeTree = await withKeptDirectories(context, effect.afterTree, kept);
    const afterTree = await withKeptDirectories(context, effect.beforeTree, stays);
    started = await journal.append(
      'undo-started',
      {
        undoes: action.id,
        beforeTree,
        afterTree,
        ...(effect.createdLeftOut && { mayRemove: effect.createdLeftOut }),
        ...(leftUnread.length > 0 && { unreadable: leftUnread }),
        ...moved,
      },
      [
        { type: 'tree', digest: beforeTree },
        { type: 'tree', digest: afterTree },
        ...conversationRefs,
      ],
      stillUndoable,
    );
  } else {
    // A directory that stays is left out of what the undo records it changed.
    const paths = stays.length > 0 ? changes : reverseChanges(effect.paths);
    started = await journal.append(
      'undo-started',
      { undoes: action.id, paths, ...moved },
      [...referencesOf(paths), ...conversationRefs],
      stillUndoable,
    );
  }
  const applied = await applyAnnounced(context, journal, started, changes, {
    isRecovery: false,
    leaveAlone: unreadable,
    keepEditedSinceNs: since,
    ...(options.onProgress && { onProgress: options.onProgress }),
  });
  const one = leftUnread.length === 1;
  const keptEdited = keptEditedWarnings(
    applied,
    'undo',
    `\`rewind undo ${started.seq}\` puts back what the undo did change.`,
  );
  const warnings =
    leftUnread.length === 0
      ? keptEdited
      : [
          ...keptEdited,
          `${namedAndMore(leftUnread)} could not be read after #${action.id}, so Rewind does not know what ${one ? 'it holds' : 'they hold'}: ` +
            `this undo leaves ${one ? 'it' : 'them'} as ${one ? 'it is' : 'they are'}. To put back an earlier version, make ${one ? 'it' : 'them'} readable (chmod u+r) and roll back to a checkpoint.`,
        ];
  return { status: 'undone', id: started.seq, undoes: action.id, applied, warnings };
}
