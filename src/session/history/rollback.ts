import { RewindError } from '../../errors.js';
import { type Digest, normalizeWorkspacePath } from '../../lib/index.js';
import { encodeTree, findEntryAt, type TreeEntry } from '../../store/index.js';
import {
  type ApplyProgress,
  type ApplyResult,
  diffTrees,
  editsFrom,
  fileChangeKind,
  isAtOrUnder,
  isIgnoredPath,
  isRealDirectory,
  isSameEntry,
  type SnapshotResult,
  type TreeChange,
} from '../../workspace/index.js';
import { outsideRulesOf, type SessionContext, snapshotWorkspace } from '../context.js';
import { type PathChange, referencesOf } from '../journal/action-records.js';
import type { CheckpointInfo } from '../journal/checkpoint-records.js';
import {
  checkConversationUnmoved,
  type Journal,
  planningAgain,
  withWorkspaceLock,
} from '../journal/journal.js';
import { applyAnnounced, changesOf, keptEditedWarnings, leftAloneBy } from '../journal/recovery.js';
import {
  type RestoredConversation,
  type RestoreOptions,
  restoreConversation,
} from './conversation.js';
import { keepUnread, pathChangesKeepingUnread } from './unread.js';

/** Options of `Session.rollback`. */
export interface RollbackOptions extends Omit<RestoreOptions, 'dryRun'> {
  dryRun?: boolean;
  onProgress?: (progress: ApplyProgress) => void;
  /**
   * Restore only these paths (files, or directories with everything under them), relative to the
   * workspace root; the rest of the workspace and the conversation stay as they are.
   */
  paths?: readonly string[];
  /**
   * What to restore: `both` (the default) the files and the conversation, `files` only the
   * files (the conversation stays as it is), `conversation` only the conversation (no file moves).
   */
  scope?: RollbackScope;
}

/** What a rollback restores: see {@link RollbackOptions.scope}. */
export type RollbackScope = 'both' | 'files' | 'conversation';

/** One path a rollback would change, as a dry run lists it. */
export interface PlannedChange {
  path: string;
  /** `written` (replaced), `created`, or `deleted`. */
  action: 'written' | 'created' | 'deleted';
  /**
   * True when what is there now was never recorded by this session (no checkpoint, rollback or
   * undo saw it): the rollback saves it first, but this is what a user would see disappear.
   */
  isUnrecorded: boolean;
}

/** What a rollback did, or would do with `dryRun`. */
export interface RollbackResult {
  isDryRun: boolean;
  label: string;
  /** The action id (the seq of `rollback-started`), for `undo`; undefined in a dry run. */
  id: number | undefined;
  /** The state the workspace was in: saved before anything moved. */
  beforeTree: Digest;
  afterTree: Digest;
  changes: PlannedChange[];
  /**
   * In a dry run, the paths the rollback would leave alone rather than change (what the rules of
   * the workspace or of the checkpoint leave out: see `applied.skipped` after a real one).
   */
  leftAlone?: string[];
  applied: ApplyResult | undefined;
  warnings: string[];
  /** The checkpoint's conversation, repaired and with the resume note, when it has one. */
  conversation?: RestoredConversation;
}

/**
 * What applying `changes` would write, create and delete, file by file; with `journal` (a dry
 * run), paths whose current state no entry of the session ever recorded are marked.
 */
export async function planChanges(
  context: SessionContext,
  changes: readonly TreeChange[],
  journal?: Journal,
): Promise<PlannedChange[]> {
  const planned: PlannedChange[] = [];
  const trees = new Map<Digest, Promise<readonly TreeEntry[]>>();
  const actions = { added: 'created', deleted: 'deleted', modified: 'written' } as const;
  for (const change of changes) {
    const kind = fileChangeKind(change);
    if (!kind) continue;
    let isUnrecorded = false;
    if (journal && kind !== 'added' && change.before) {
      isUnrecorded = true;
      for (const tree of journal.recordedTrees()) {
        const seen = await findEntryAt(context.store, tree, change.path, trees);
        if (seen && JSON.stringify(seen) === JSON.stringify(change.before)) {
          isUnrecorded = false;
          break;
        }
      }
    }
    planned.push({ path: change.path, action: actions[kind], isUnrecorded });
  }
  return planned;
}

/** How many of `changes` a plan lists: files and symbolic links, not directories. */
const countFiles = (changes: readonly TreeChange[]): number =>
  changes.filter((change) => fileChangeKind(change) !== undefined).length;

/**
 * A dry run's result: the changes the rollback would make, each marked when what is there now
 * was never recorded, and apart from them what the rules of either side would leave alone.
 */
async function planned(
  context: SessionContext,
  journal: Journal,
  result: RollbackResult,
  body: Record<string, unknown>,
  changes: readonly TreeChange[],
  leaveAlone: readonly string[],
): Promise<RollbackResult> {
  const leftAlone = await leftAloneBy(context, body, changes, leaveAlone);
  const skipped = new Set(leftAlone);
  const made = changes.filter((change) => !skipped.has(change.path));
  return { ...result, changes: await planChanges(context, made, journal), leftAlone };
}

/**
 * Restores the workspace, and the conversation when the checkpoint has one, to a checkpoint:
 * the current state is saved and an intent entry names both states before anything moves.
 * Throws `CHECKPOINT_NOT_FOUND`.
 */
export function rollbackTo(
  context: SessionContext,
  label: string,
  options: RollbackOptions,
): Promise<RollbackResult> {
  return withWorkspaceLock(context, `rolling back to ${label}`, (journal) =>
    rollbackWithin(context, journal, journal.findCheckpoint(label), options),
  );
}

/**
 * Throws `CHECKPOINT_NOT_FOUND` when `target` is no longer a checkpoint of the session: another
 * copy of the workspace on a shared ledger pruned it while the rollback was prepared.
 */
function checkStillThere(context: SessionContext, journal: Journal, target: CheckpointInfo): void {
  if (journal.checkpoints().some((checkpoint) => checkpoint.seq === target.seq)) return;
  throw new RewindError(
    'CHECKPOINT_NOT_FOUND',
    `Checkpoint ${target.label} (#${target.seq}) of session ${context.id} was pruned while the rollback was prepared. Nothing was changed.`,
    { data: { label: target.label, seq: target.seq } },
  );
}

/**
 * Inside the workspace lock: rolls back to `target`; see {@link rollbackTo}. Its intent is
 * appended only if, at that moment, the checkpoint is still there and the conversation it records
 * as replaced is still the current one (on a shared ledger another copy of the workspace appends
 * under its own lock); when the conversation moved, the rollback is planned again.
 */
export function rollbackWithin(
  context: SessionContext,
  journal: Journal,
  target: CheckpointInfo,
  options: RollbackOptions,
): Promise<RollbackResult> {
  return planningAgain(context, journal, () => rollbackOnce(context, journal, target, options));
}

async function rollbackOnce(
  context: SessionContext,
  journal: Journal,
  target: CheckpointInfo,
  options: RollbackOptions,
): Promise<RollbackResult> {
  const movedAt = journal.conversationMovedAt();
  const scope = options.scope ?? 'both';
  if (scope === 'conversation' && options.paths !== undefined) {
    throw new RewindError(
      'INVALID_ARGUMENT',
      'Paths restore files: leave them out to restore only the conversation, or restore files.',
      { data: { scope } },
    );
  }
  if (scope === 'conversation' && !journal.conversationAt(target)) {
    throw new RewindError(
      'CONVERSATION_NOT_FOUND',
      `Checkpoint ${target.label} has no conversation to restore. Roll back its files instead.`,
      { data: { label: target.label } },
    );
  }
  // What changes from now on, while the rollback is prepared, is kept: the snapshot may miss it.
  const since = editsFrom(context.workspace);
  const snapshot = await snapshotWorkspace(context);
  if (options.paths !== undefined) {
    return restorePaths(context, journal, target, { snapshot, since }, options.paths, options);
  }
  const leaveAlone = snapshot.unreadable.map(({ path }) => path);
  // The files after the rollback: the checkpoint's (what it could not read left as it is now),
  // or (conversation only) those there now.
  const afterTree =
    scope === 'conversation'
      ? snapshot.tree
      : await keepUnread(context.store, target.tree, snapshot.tree, target.unreadable ?? []);
  // What could not be read is left as it is (the snapshot's warnings say so).
  const changes = (await diffTrees(context.store, snapshot.tree, afterTree)).filter(
    (change) => !isAtOrUnder(change.path, leaveAlone),
  );
  const isDryRun = options.dryRun === true;
  const restored =
    scope === 'files' ? undefined : await restoreConversation(context, journal, target, options);
  const before = journal.currentConversation();
  const rules = journal.rulesAt(target);
  const body = {
    label: target.label,
    checkpointSeq: target.seq,
    beforeTree: snapshot.tree,
    afterTree,
    changeCount: countFiles(changes),
    ...(scope !== 'both' && { scope }),
    // What the checkpoint left out is left alone, even if the rules changed since.
    ...(rules && scope !== 'conversation' && { afterRules: rules }),
    ...(restored && {
      ...(before && { conversationBefore: before }),
      conversationAfter: restored.ref,
    }),
  };
  const result: RollbackResult = {
    isDryRun,
    label: target.label,
    id: undefined,
    beforeTree: snapshot.tree,
    afterTree,
    changes: [],
    applied: undefined,
    warnings: snapshot.warnings,
    ...(restored && { conversation: restored.result }),
  };
  if (isDryRun) return planned(context, journal, result, body, changes, leaveAlone);
  result.changes = await planChanges(context, changes);
  const started = await journal.append(
    'rollback-started',
    body,
    [
      { type: 'tree', digest: snapshot.tree },
      { type: 'tree', digest: afterTree },
      ...(restored ? [{ type: 'tree' as const, digest: restored.ref.tree }] : []),
      ...(restored && before ? [{ type: 'tree' as const, digest: before.tree }] : []),
    ],
    (current) => {
      checkStillThere(context, current, target);
      if (restored) checkConversationUnmoved(current, context.id, movedAt);
    },
  );
  const applied = await applyAnnounced(context, journal, started, changes, {
    isRecovery: false,
    leaveAlone,
    keepEditedSinceNs: since,
    ...(options.onProgress && { onProgress: options.onProgress }),
  });
  return withKept(result, started.seq, applied);
}

/**
 * The changes that give `paths` (and what is under them) their state in `target`, nothing else:
 * a path whose parent directories the workspace lacks is created with them, holding only what was
 * asked for. Throws `PATH_NOT_FOUND` for a path that neither side has (`PATH_IGNORED` when the
 * rules leave it out), `PATH_CONFLICT` for one below a file of the workspace.
 */
async function pathChangesTo(
  context: SessionContext,
  current: Digest,
  target: CheckpointInfo,
  paths: readonly string[],
): Promise<PathChange[]> {
  const trees = new Map<Digest, Promise<readonly TreeEntry[]>>();
  const entryIn = (tree: Digest, path: string) => findEntryAt(context.store, tree, path, trees);
  const asked = [...new Set(paths.map((path) => normalizeWorkspacePath(path)))].sort();
  const tops = asked.filter((path) => !asked.some((other) => path.startsWith(`${other}/`)));
  const changes: PathChange[] = [];
  /** Paths to create under a directory the workspace lacks, by its topmost missing ancestor. */
  const missing = new Map<string, Map<string, TreeEntry>>();
  for (const path of tops) {
    const before = await entryIn(current, path);
    const after = await entryIn(target.tree, path);
    if (before === undefined && after === undefined) {
      if (
        isIgnoredPath(
          context.workspace,
          path,
          isRealDirectory(`${context.workspace}/${path}`),
          outsideRulesOf(context),
        )
      ) {
        throw new RewindError(
          'PATH_IGNORED',
          `${path} is left out of snapshots (by .gitignore or .rewindignore, or it is in .git or .rewind): ` +
            `no checkpoint holds it, so a rollback cannot restore it. Restore it without Rewind, or re-include it with a "!" line in .rewindignore for the checkpoints to come.`,
          { data: { path, label: target.label } },
        );
      }
      throw new RewindError(
        'PATH_NOT_FOUND',
        `Nothing is at ${path}, neither in the workspace nor in checkpoint ${target.label}.`,
        { data: { path, label: target.label } },
      );
    }
    if (before !== undefined && after !== undefined && isSameEntry(before, after)) continue;
    const parts = path.split('/');
    let top: string | undefined;
    for (let index = 1; index < parts.length; index++) {
      const ancestor = parts.slice(0, index).join('/');
      const entry = await entryIn(current, ancestor);
      if (entry === undefined) {
        top = ancestor;
        break;
      }
      if (entry.type !== 'directory') {
        throw new RewindError(
          'PATH_CONFLICT',
          `Cannot restore ${path} alone: ${ancestor} is a ${entry.type} in the workspace. Restore ${ancestor} instead.`,
          { data: { path, conflict: ancestor } },
        );
      }
    }
    if (top === undefined || after === undefined) {
      changes.push({ path, before, after });
      continue;
    }
    const group = missing.get(top) ?? new Map<string, TreeEntry>();
    group.set(path, after);
    missing.set(top, group);
  }
  const batch = context.store.batch();
  try {
    for (const [top, group] of missing) {
      // A directory holding only the asked-for paths, with the mode the checkpoint gives it.
      const build = async (directory: string): Promise<TreeEntry> => {
        const children = new Map<string, TreeEntry>();
        for (const [path, entry] of group) {
          if (!path.startsWith(`${directory}/`)) continue;
          const name = path.slice(directory.length + 1).split('/')[0] as string;
          if (children.has(name)) continue;
          const child = `${directory}/${name}`;
          children.set(name, group.has(child) ? entry : await build(child));
        }
        const { digest } = await batch.put(encodeTree([...children.values()]));
        const existing = await entryIn(target.tree, directory);
        const mode = existing?.type === 'directory' ? existing.mode : 0o755;
        return { name: directory.split('/').at(-1) as string, type: 'directory', mode, digest };
      };
      changes.push({ path: top, before: undefined, after: await build(top) });
    }
  } finally {
    await batch.commit();
  }
  return changes;
}

/** A rollback's result once applied, warning of the paths edited meanwhile that it left alone. */
function withKept(result: RollbackResult, id: number, applied: ApplyResult): RollbackResult {
  const { label } = result;
  const remedy = `\`rewind diff ${label}\` shows what differs from checkpoint ${label}; \`rewind rollback ${label} -- PATH\` restores a path.`;
  const kept = keptEditedWarnings(applied, 'rollback', remedy);
  return { ...result, id, applied, warnings: [...result.warnings, ...kept] };
}

/** A rollback of some paths only: an action on those paths, undone like a file action. */
async function restorePaths(
  context: SessionContext,
  journal: Journal,
  target: CheckpointInfo,
  { snapshot, since }: { snapshot: SnapshotResult; since: bigint },
  paths: readonly string[],
  options: RollbackOptions,
): Promise<RollbackResult> {
  const leaveAlone = snapshot.unreadable.map(({ path }) => path);
  const pathChanges = await pathChangesKeepingUnread(
    context.store,
    await pathChangesTo(context, snapshot.tree, target, paths),
    snapshot.tree,
    target.unreadable ?? [],
  );
  const changes = (await changesOf(context, { type: 'paths', paths: pathChanges })).filter(
    (change) => !isAtOrUnder(change.path, leaveAlone),
  );
  const rules = journal.rulesAt(target);
  const body = {
    label: target.label,
    checkpointSeq: target.seq,
    beforeTree: snapshot.tree,
    afterTree: target.tree,
    paths: pathChanges,
    changeCount: countFiles(changes),
    ...(rules && { afterRules: rules }),
  };
  const result: RollbackResult = {
    isDryRun: options.dryRun === true,
    label: target.label,
    id: undefined,
    beforeTree: snapshot.tree,
    afterTree: target.tree,
    changes: [],
    applied: undefined,
    warnings: snapshot.warnings,
  };
  if (result.isDryRun) return planned(context, journal, result, body, changes, leaveAlone);
  result.changes = await planChanges(context, changes);
  const started = await journal.append(
    'rollback-started',
    body,
    [
      ...referencesOf(pathChanges),
      { type: 'tree', digest: snapshot.tree },
      { type: 'tree', digest: target.tree },
    ],
    (current) => checkStillThere(context, current, target),
  );
  const applied = await applyAnnounced(context, journal, started, changes, {
    isRecovery: false,
    leaveAlone,
    keepEditedSinceNs: since,
    ...(options.onProgress && { onProgress: options.onProgress }),
  });
  return withKept(result, started.seq, applied);
}
