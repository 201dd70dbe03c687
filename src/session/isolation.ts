import { readFile, rm } from 'node:fs/promises';
import { join } from 'node:path';
import { isRewindError, isSystemError, RewindError } from '../errors.js';
import { clearCurrentSession } from '../ledger/index.js';
import { type Digest, namedAndMore, writeFileAtomic } from '../lib/index.js';
import type { SandboxBackend } from '../sandbox/index.js';
import { findEntryAt, type TreeEntry } from '../store/index.js';
import {
  type ApplyProgress,
  type ApplyResult,
  diffTrees,
  fileChangeKind,
  isAtOrUnder,
  isSameEntry,
  type LeftOutListing,
  leftOutChanges,
  listLeftOut,
  renderDiff,
  type SnapshotResult,
  type TreeChange,
} from '../workspace/index.js';
import {
  outsideRulesOf,
  type SessionContext,
  sandboxFor,
  snapshotHost,
  snapshotWorkspace,
  stopWatching,
} from './context.js';
import { type PlannedChange, planChanges } from './history/rollback.js';
import { type PathChange, referencesOf } from './journal/action-records.js';
import { type Journal, withWorkspaceLock } from './journal/journal.js';
import { applyAnnounced, changesOf } from './journal/recovery.js';

/** A path where the host and an isolated session both changed things since the session began. */
export interface CommitConflict {
  path: string;
  /** What the session did there and what happened on the host. */
  session: string;
  host: string;
}

/** What `Session.commit` did, or would do with `dryRun`. */
export interface CommitResult {
  status: 'committed' | 'refused' | 'nothing-to-commit' | 'dry-run';
  /** The commit's action id, for `undo`. */
  id: number | undefined;
  /** The files the commit writes, creates and deletes on the host. */
  changes: PlannedChange[];
  conflicts: CommitConflict[];
  /**
   * Paths the ignore rules leave out (`.env`, `dist/`...) that changed in the view: a commit
   * never carries them (no snapshot holds them), and `destroy` refuses while they are there.
   */
  leftOut: string[];
  applied: ApplyResult | undefined;
  /**
   * With `dryRun` and `diff`: a unified diff, as `Session.diff` gives it, from what the host holds
   * now to what the commit would write, for exactly the paths of `changes` but the conflicting
   * ones (at or under a path of `conflicts`: those are listed, not diffed).
   */
  diff?: string;
}

/** How `Session.commit` is asked. */
export interface CommitOptions {
  /** Only say what the commit would do (`status: 'dry-run'`); write nothing. */
  dryRun?: boolean;
  /** With `dryRun`: also render the changes as a unified diff (`CommitResult.diff`). */
  diff?: boolean;
  onProgress?: (progress: ApplyProgress) => void;
}

/** What `Session.status` reports. */
export interface SessionStatus {
  id: string;
  isolation: 'shared' | 'isolated';
  /** Where the session works (the view, for an isolated session). */
  workspace: string;
  hostWorkspace: string;
  sandbox: SandboxBackend;
  network: boolean;
  /** For an isolated session: what a commit would write, create and delete now. */
  pendingChanges: PlannedChange[];
  /** For an isolated session: what would make a commit refuse now. */
  conflicts: CommitConflict[];
  /** For an isolated session: what changed in the view that a commit leaves out (see `CommitResult`). */
  leftOut: string[];
}

/** What `Session.end` does when an isolated session's work is over. */
export interface EndOptions {
  /** Commit to the host when the work ended cleanly (no `error`). Default false. */
  autoCommit?: boolean;
  /** Remove the view afterwards, unless that would drop uncommitted work. Default false. */
  destroyOnExit?: boolean;
  /**
   * `interactive` (default) or `agent`: in agent mode a failed run (any `error`) preserves the
   * session for a person to look at, whatever `destroyOnExit` says.
   */
  mode?: 'interactive' | 'agent';
  /** Why the work ended early, if it did: nothing is committed then. */
  error?: unknown;
}

/** What `Session.end` did. */
export interface EndResult {
  commit: CommitResult | undefined;
  /** The commit's error, when an auto-commit failed (the session is kept). */
  commitError: unknown;
  isDestroyed: boolean;
  /** True when the view is kept: resume it with `openSession({ workspace, session: id })`. */
  isPreserved: boolean;
}

/** Where an isolated session's view lives: under the store, so it is never snapshotted itself. */
export function viewDirectoryOf(storeDirectory: string, sessionId: string): string {
  return join(storeDirectory, 'views', sessionId, 'tree');
}

/** Where a view's listing of what its ignore rules left out when it was made is kept. */
function leftOutFileOf(context: SessionContext): string {
  return join(context.storeDirectory, 'views', context.id, 'left-out.json');
}

/** Lists what the ignore rules leave out of a new view, to tell later what changed there. */
export async function recordLeftOut(context: SessionContext): Promise<void> {
  const listing = listLeftOut(context.workspace, outsideRulesOf(context));
  await writeFileAtomic(leftOutFileOf(context), JSON.stringify([...listing]));
}

/**
 * The paths the ignore rules leave out that changed in the view and differ from the host: what a
 * commit cannot carry. A view made before this was recorded is compared with the host only.
 */
export async function leftOutChangesOf(context: SessionContext): Promise<string[]> {
  let before: LeftOutListing | undefined;
  try {
    before = new Map(
      JSON.parse(await readFile(leftOutFileOf(context), 'utf8')) as [string, string][],
    );
  } catch (error) {
    if (!isSystemError(error, 'ENOENT')) throw error;
  }
  return leftOutChanges(context.workspace, context.hostWorkspace, outsideRulesOf(context), before);
}

/**
 * Where an isolated session's change and the host's change since the session began collide:
 * the same path changed differently, a path under a directory one side removed, or a directory
 * the session removes that the host changed something in.
 */
function findCommitConflicts(
  sessionChanges: readonly TreeChange[],
  hostChanges: ReadonlyMap<string, TreeChange>,
): CommitConflict[] {
  const describe = (change: TreeChange): string => {
    const kind = fileChangeKind(change);
    if (kind) return kind;
    return change.after ? 'changed a directory' : 'removed a directory';
  };
  const conflicts: CommitConflict[] = [];
  const hostPaths = [...hostChanges.keys()];
  for (const change of sessionChanges) {
    const host = hostChanges.get(change.path);
    if (
      host &&
      !(host.after && change.after
        ? isSameEntry(host.after, change.after)
        : host.after === change.after)
    ) {
      conflicts.push({ path: change.path, session: describe(change), host: describe(host) });
      continue;
    }
    if (change.before?.type === 'directory' && change.after?.type !== 'directory') {
      const inside = hostPaths.find((path) => path.startsWith(`${change.path}/`));
      if (inside) {
        conflicts.push({ path: change.path, session: describe(change), host: `changed ${inside}` });
        continue;
      }
    }
    const parts = change.path.split('/');
    for (let index = 1; index < parts.length; index++) {
      const ancestor = hostChanges.get(parts.slice(0, index).join('/'));
      if (ancestor && ancestor.after?.type !== 'directory') {
        conflicts.push({
          path: change.path,
          session: describe(change),
          host: `${describe(ancestor)} ${ancestor.path}`,
        });
        break;
      }
    }
  }
  return conflicts;
}

/**
 * The tree the session's view started from, or was last committed at: what `commit` compares
 * the host and the view against. Throws `INVALID_ARGUMENT` for a session that is not isolated.
 */
function baseTree(context: SessionContext, journal: Journal): Digest {
  let base = journal.viewCreated?.body.baseTree as Digest | undefined;
  for (const action of journal.actions().values()) {
    if (action.kind === 'commit' && action.state === 'done') {
      base = action.started.body.sessionTree as Digest;
    }
  }
  if (base === undefined) {
    throw new RewindError(
      'INVALID_ARGUMENT',
      `Session ${context.id} is not isolated: it works on the workspace itself, so there is nothing to commit.`,
      { data: { session: context.id } },
    );
  }
  return base;
}

/**
 * The session's changes that touch a path one side could not read: what is there is unknown, so
 * committing could overwrite it (on the host) or would carry a change that was not made (a file of
 * the view that could not be read looks deleted).
 */
function unreadableConflicts(
  sessionChanges: readonly TreeChange[],
  view: SnapshotResult,
  host: SnapshotResult,
): CommitConflict[] {
  const conflicts: CommitConflict[] = [];
  for (const change of sessionChanges) {
    const touches = (unreadable: SnapshotResult['unreadable']) =>
      unreadable.find(
        ({ path }) => isAtOrUnder(change.path, [path]) || path.startsWith(`${change.path}/`),
      );
    const inView = touches(view.unreadable);
    const onHost = touches(host.unreadable);
    if (!inView && !onHost) continue;
    conflicts.push({
      path: change.path,
      session: inView ? `could not read ${inView.path} (${inView.reason})` : 'changed it',
      host: onHost ? `could not read ${onHost.path} (${onHost.reason})` : 'left it as it was',
    });
  }
  return conflicts;
}

/**
 * Applies an isolated session's net change to the host, three-way checked; see `Session.commit`.
 * Throws `INVALID_ARGUMENT` for `diff` without `dryRun`.
 */
export async function commitToHost(
  context: SessionContext,
  options: CommitOptions,
): Promise<CommitResult> {
  if (options.diff && !options.dryRun) {
    throw new RewindError(
      'INVALID_ARGUMENT',
      'A diff is shown with a dry run only: ask for the plan with dryRun and diff, then commit.',
      { data: { session: context.id } },
    );
  }
  return withWorkspaceLock(context, 'committing to the host', async (journal) => {
    const base = baseTree(context, journal);
    const current = await snapshotWorkspace(context);
    const host = await snapshotHost(context);
    const sessionChanges = await diffTrees(context.store, base, current.tree);
    // What the host could not read is unknown, not deleted: its own conflicts say so.
    const hostUnreadable = host.unreadable.map(({ path }) => path);
    const hostChanges = new Map(
      (await diffTrees(context.store, base, host.tree))
        .filter((change) => !isAtOrUnder(change.path, hostUnreadable))
        .map((change) => [change.path, change]),
    );
    const unreadable = unreadableConflicts(sessionChanges, current, host);
    const conflicts = [
      ...findCommitConflicts(
        sessionChanges.filter((change) => !unreadable.some(({ path }) => path === change.path)),
        hostChanges,
      ),
      ...unreadable,
    ];
    // What the commit changes on the host: from what the host holds now (a file the host
    // already holds as the session left it is no change), not from the session's base.
    const trees = new Map<Digest, Promise<readonly TreeEntry[]>>();
    const onHost: TreeChange[] = [];
    for (const change of sessionChanges) {
      const before = await findEntryAt(context.store, host.tree, change.path, trees);
      const isSame =
        before && change.after ? isSameEntry(before, change.after) : before === change.after;
      if (!isSame) onHost.push({ path: change.path, before, after: change.after });
    }
    const result: CommitResult = {
      status: 'dry-run',
      id: undefined,
      changes: await planChanges(context, onHost),
      conflicts,
      leftOut: await leftOutChangesOf(context),
      applied: undefined,
    };
    if (options.dryRun) {
      if (!options.diff) return result;
      // Conflicting paths are listed, not diffed: the commit would write none of them.
      const conflicted = conflicts.map(({ path }) => path);
      const diffed = onHost.filter(
        (change) => fileChangeKind(change) && !isAtOrUnder(change.path, conflicted),
      );
      return { ...result, diff: await renderDiff(context.store, diffed) };
    }
    if (conflicts.length > 0) {
      await journal.append('commit-refused', {
        conflicts: conflicts.slice(0, 50),
        conflictCount: conflicts.length,
        sessionTree: current.tree,
        hostTree: host.tree,
      });
      return { ...result, status: 'refused' };
    }
    // The topmost changed paths; a directory that only changed its mode is left as it is.
    const isModeOnly = (change: TreeChange): boolean =>
      change.before?.type === 'directory' && change.after?.type === 'directory';
    const tops = sessionChanges.filter(
      (change) =>
        !isModeOnly(change) &&
        !sessionChanges.some(
          (other) =>
            other !== change && change.path.startsWith(`${other.path}/`) && !isModeOnly(other),
        ),
    );
    if (tops.length === 0) return { ...result, status: 'nothing-to-commit' };
    const paths: PathChange[] = [];
    for (const change of tops) {
      paths.push({
        path: change.path,
        before: await findEntryAt(context.store, host.tree, change.path, trees),
        after: change.after,
      });
    }
    const started = await journal.append(
      'action-started',
      {
        action: 'commit',
        class: 'reversible',
        target: context.hostWorkspace,
        on: 'host',
        paths,
        sessionTree: current.tree,
        hostTree: host.tree,
      },
      [
        ...referencesOf(paths),
        { type: 'tree', digest: current.tree },
        { type: 'tree', digest: host.tree },
      ],
    );
    const changes = await changesOf(context, { type: 'paths', paths });
    const applied = await applyAnnounced(context, journal, started, changes, {
      isRecovery: false,
      leaveAlone: hostUnreadable,
      ...(options.onProgress && { onProgress: options.onProgress }),
    });
    return { ...result, status: 'committed', id: started.seq, applied };
  });
}

/**
 * What to say of paths the ignore rules leave out that changed in the view (`view`): a commit
 * cannot carry them, and destroying the view drops them for good (no snapshot holds them).
 */
export function leftOutAdvice(leftOut: readonly string[], view: string): string {
  return (
    `${leftOut.length} path${leftOut.length === 1 ? '' : 's'} the ignore rules leave out changed in the view (${namedAndMore(leftOut)}): ` +
    `a commit does not carry them, and destroying the view loses them (the store has no copy). Copy what you want to keep from ${view} into the workspace, then destroy with --force.`
  );
}

/**
 * Removes an isolated session's view and journals it; see `Session.destroy`. If it was the
 * current session, none is current after (it cannot be used): `wasCurrent` says so. Throws
 * `UNCOMMITTED_CHANGES` while the view holds uncommitted changes, or changes to paths the ignore
 * rules leave out (which no commit carries), unless `force`.
 */
export function destroyView(
  context: SessionContext,
  options: { force?: boolean },
): Promise<{ wasCurrent: boolean }> {
  return withWorkspaceLock(context, 'destroying the session', async (journal) => {
    const base = baseTree(context, journal);
    const current = await snapshotWorkspace(context);
    const pending = (await diffTrees(context.store, base, current.tree)).filter(
      (change) => fileChangeKind(change) !== undefined,
    );
    const leftOut = await leftOutChangesOf(context);
    if ((pending.length > 0 || leftOut.length > 0) && options.force !== true) {
      const view = context.workspace;
      throw new RewindError(
        'UNCOMMITTED_CHANGES',
        pending.length > 0
          ? `Session ${context.id} has ${pending.length} uncommitted change${pending.length === 1 ? '' : 's'} (${namedAndMore(pending.map((change) => change.path))}). ` +
              'Commit them with `rewind commit`, or destroy with --force to drop them (they stay in the store).' +
              (leftOut.length > 0 ? ` ${leftOutAdvice(leftOut, view)}` : '')
          : leftOutAdvice(leftOut, view),
        {
          data: {
            session: context.id,
            paths: pending.slice(0, 50).map((change) => change.path),
            leftOut: leftOut.slice(0, 50),
          },
        },
      );
    }
    await journal.append(
      'session-destroyed',
      {
        pendingCount: pending.length,
        ...(leftOut.length > 0 && { leftOutCount: leftOut.length }),
        viewTree: current.tree,
      },
      [{ type: 'tree', digest: current.tree }],
    );
    // The watcher of the view first: it would hear the removal and make its directory again.
    stopWatching(context);
    await rm(join(context.storeDirectory, 'views', context.id), { recursive: true, force: true });
    return {
      wasCurrent: await clearCurrentSession(context.storeDirectory, context.ledger.session),
    };
  });
}

/**
 * Ends an isolated session's work: commits only after a clean end with `autoCommit`; a refused
 * or failed commit never destroys anything; `destroyOnExit` removes the view only when nothing
 * uncommitted is left (and never after a failure in agent mode). The caller closes the session.
 */
export async function endSession(context: SessionContext, options: EndOptions): Promise<EndResult> {
  const result: EndResult = {
    commit: undefined,
    commitError: undefined,
    isDestroyed: false,
    isPreserved: true,
  };
  if (context.isolation !== 'isolated') return result;
  const failed = options.error !== undefined;
  if (!failed && options.autoCommit) {
    try {
      result.commit = await commitToHost(context, {});
    } catch (error) {
      result.commitError = error;
    }
  }
  const isSettled =
    result.commitError === undefined &&
    (result.commit === undefined ||
      result.commit.status === 'committed' ||
      result.commit.status === 'nothing-to-commit');
  const keepForInspection = failed && options.mode === 'agent';
  if (options.destroyOnExit && isSettled && !keepForInspection) {
    try {
      await destroyView(context, {});
      result.isDestroyed = true;
      result.isPreserved = false;
    } catch (error) {
      // Uncommitted work: kept, never dropped.
      if (!isRewindError(error, 'UNCOMMITTED_CHANGES')) throw error;
    }
  }
  return result;
}

/** Where the session's commands run, and what the caller should know about it. */
export function sandboxInfo(context: SessionContext): {
  backend: SandboxBackend;
  network: boolean;
  warnings: string[];
} {
  const sandbox = sandboxFor(context);
  return {
    backend: sandbox.backend,
    network: context.settings.network,
    warnings: sandbox.warnings,
  };
}

/** What the session is and, for an isolated one, what a commit would do now. */
export async function sessionStatus(context: SessionContext): Promise<SessionStatus> {
  const sandbox = sandboxInfo(context);
  const pending =
    context.isolation === 'isolated' ? await commitToHost(context, { dryRun: true }) : undefined;
  return {
    id: context.id,
    isolation: context.isolation,
    workspace: context.workspace,
    hostWorkspace: context.hostWorkspace,
    sandbox: sandbox.backend,
    network: sandbox.network,
    pendingChanges: pending?.changes ?? [],
    conflicts: pending?.conflicts ?? [],
    leftOut: pending?.leftOut ?? [],
  };
}
