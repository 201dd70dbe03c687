import type { LedgerEntry } from '../../ledger/index.js';
import type { Digest } from '../../lib/index.js';
import type { ObjectReference, TreeEntry } from '../../store/index.js';

/**
 * What undoing an action takes: `reversible` (Rewind holds its pre-image and can put it back),
 * `compensable` (it cannot be undone, but a declared compensation can offset it), `irreversible`.
 */
export type ActionClass = 'reversible' | 'compensable' | 'irreversible';

/** Where an action stands, computed from the ledger alone. */
export type ActionState =
  | 'done'
  | 'failed'
  /** Started and never closed: the process running it ended first. */
  | 'interrupted'
  | 'undone'
  /** The last attempt to undo it was refused (later edits) and it was not undone since. */
  | 'undo-refused'
  | 'draft'
  | 'approved'
  | 'discarded'
  | 'compensated';

/** One path an action changes: its state before and after (undefined where absent). */
export interface PathChange {
  path: string;
  before: TreeEntry | undefined;
  after: TreeEntry | undefined;
}

/**
 * An action's effect on the workspace: the states of the paths it touched (file actions, known
 * before it runs), or two whole trees (exec, rollback; every path differing between them).
 */
export type Effect =
  | { type: 'paths'; paths: PathChange[] }
  | {
      type: 'trees';
      beforeTree: Digest;
      afterTree: Digest;
      /** Paths a rollback or undo created though the workspace's rules left them out. */
      createdLeftOut?: string[];
      /**
       * Paths the after-state could not read (a command made them unreadable): what they hold is
       * unknown, so they count as untouched, and an undo leaves them as they are.
       */
      unreadable?: string[];
    };

/** An action as the ledger tells it. */
export interface ActionRecord {
  /** The seq of the entry that started it. */
  id: number;
  /** `write`, `delete`, `move`, `mkdir`, `exec`, `rollback`, `undo`, ... */
  kind: string;
  class: ActionClass;
  /** What it acts on, for people: a path, a command, a checkpoint label. */
  target: string;
  at: string;
  state: ActionState;
  started: LedgerEntry;
  /** The entry that closed it, if any. */
  closed: LedgerEntry | undefined;
  /** Undefined while the effect is not known (interrupted before the after-state was taken). */
  effect: Effect | undefined;
  /** For an undo: the action it undid. */
  undoes: number | undefined;
  /** For a draft: the entry that approved it, once approved. */
  approved: LedgerEntry | undefined;
  /** For a compensation: the action it compensates. */
  compensates: number | undefined;
}

export const STARTING_KINDS: ReadonlySet<string> = new Set([
  'action-started',
  'rollback-started',
  'undo-started',
]);
const COMPLETING_KINDS = new Set(['action-completed', 'rollback-completed', 'undo-completed']);
const FAILING_KINDS = new Set(['action-failed', 'rollback-failed', 'undo-failed']);

function pathChangesOf(value: unknown): PathChange[] {
  if (!Array.isArray(value)) return [];
  return value.map((item) => {
    const change = item as Record<string, unknown>;
    return {
      path: String(change.path),
      before: (change.before ?? undefined) as TreeEntry | undefined,
      after: (change.after ?? undefined) as TreeEntry | undefined,
    };
  });
}

function effectOf(action: ActionRecord): Effect | undefined {
  const body = action.started.body;
  if (Array.isArray(body.paths)) return { type: 'paths', paths: pathChangesOf(body.paths) };
  const beforeTree = body.beforeTree ?? action.approved?.body.beforeTree;
  const afterTree = body.afterTree ?? action.closed?.body.afterTree;
  if (typeof beforeTree === 'string' && typeof afterTree === 'string') {
    const created = action.closed?.body.createdLeftOut;
    const unreadable = body.unreadable ?? action.closed?.body.unreadable;
    return {
      type: 'trees',
      beforeTree: beforeTree as Digest,
      afterTree: afterTree as Digest,
      ...(Array.isArray(created) && { createdLeftOut: created.map(String) }),
      ...(Array.isArray(unreadable) && { unreadable: unreadable.map(String) }),
    };
  }
  return undefined;
}

function targetOf(entry: LedgerEntry): string {
  const body = entry.body;
  if (entry.kind === 'rollback-started') return String(body.label);
  if (entry.kind === 'undo-started') return `#${String(body.undoes)}`;
  return String(body.target ?? '');
}

/** Every action of a session, by id, kept current entry by entry. */
export interface ActionIndex {
  readonly byId: Map<number, ActionRecord>;
  /** Actions started and not yet closed (drafts and recorded actions included), by id. */
  readonly open: Set<number>;
  /**
   * The newest action started, by the workspace copy that started it (`workspaceId` in its
   * intent; '' for none): on a shared ledger, each copy finishes only its own.
   */
  readonly newest: Map<string, ActionRecord>;
}

/**
 * The newest action a copy of the workspace started, closed or not: the newest of those whose
 * intent names its `workspaceId` or names none (a local ledger's, or a shared one's written
 * before copies were named). Another copy's actions are that copy's to finish.
 */
export function newestActionOf(
  index: ActionIndex,
  workspaceId: string | undefined,
): ActionRecord | undefined {
  const unnamed = index.newest.get('');
  const own = workspaceId === undefined ? undefined : index.newest.get(workspaceId);
  if (!own) return unnamed;
  return !unnamed || own.id > unnamed.id ? own : unnamed;
}

/** An empty {@link ActionIndex}; feed it with {@link addToActionIndex}. */
export function createActionIndex(): ActionIndex {
  return { byId: new Map(), open: new Set(), newest: new Map() };
}

/**
 * Folds one ledger entry into the index: file actions, commands, rollbacks and undos (an undo is
 * an action too, so undoing it is redo) with their derived state. Entries must come in order.
 */
export function addToActionIndex(index: ActionIndex, entry: LedgerEntry): void {
  const body = entry.body;
  if (STARTING_KINDS.has(entry.kind)) {
    const kind =
      entry.kind === 'action-started'
        ? String(body.action)
        : entry.kind === 'rollback-started'
          ? 'rollback'
          : 'undo';
    const action: ActionRecord = {
      id: entry.seq,
      kind,
      class: entry.kind === 'action-started' ? (body.class as ActionClass) : 'reversible',
      target: targetOf(entry),
      at: entry.at,
      state: body.draft === true ? 'draft' : 'interrupted',
      started: entry,
      closed: undefined,
      effect: undefined,
      undoes: entry.kind === 'undo-started' ? Number(body.undoes) : undefined,
      approved: undefined,
      compensates: typeof body.compensates === 'number' ? body.compensates : undefined,
    };
    action.effect = effectOf(action);
    index.byId.set(entry.seq, action);
    index.open.add(entry.seq);
    index.newest.set(typeof body.workspaceId === 'string' ? body.workspaceId : '', action);
    return;
  }
  const action = index.byId.get(Number(body.startedSeq ?? body.undoes));
  if (!action) return;
  if (entry.kind === 'action-approved' && action.state === 'draft') {
    action.approved = entry;
    action.state = 'approved';
    action.effect = effectOf(action);
  } else if (entry.kind === 'action-discarded' && action.state === 'draft') {
    action.state = 'discarded';
    index.open.delete(action.id);
  } else if (COMPLETING_KINDS.has(entry.kind) || FAILING_KINDS.has(entry.kind)) {
    if (action.closed) return;
    action.closed = entry;
    index.open.delete(action.id);
    const isInterrupted = (body.error as { code?: string } | undefined)?.code === 'INTERRUPTED';
    action.state = COMPLETING_KINDS.has(entry.kind)
      ? 'done'
      : isInterrupted
        ? 'interrupted'
        : 'failed';
    action.effect = effectOf(action);
    const compensated = index.byId.get(action.compensates ?? 0);
    if (compensated && COMPLETING_KINDS.has(entry.kind)) compensated.state = 'compensated';
    if (entry.kind === 'undo-completed') {
      const undone = index.byId.get(Number(body.undoes));
      if (undone) undone.state = 'undone';
      // Undoing an undo (redo) leaves the action that undo had undone done again.
      const redone = undone?.kind === 'undo' ? index.byId.get(undone.undoes ?? 0) : undefined;
      if (redone) redone.state = 'done';
    }
  } else if (entry.kind === 'undo-refused') {
    if (action.state !== 'undone') action.state = 'undo-refused';
  }
}

/** Every action of a session, by id, with its derived state, from its entries. */
export function deriveActions(entries: readonly LedgerEntry[]): Map<number, ActionRecord> {
  const index = createActionIndex();
  for (const entry of entries) addToActionIndex(index, entry);
  return index.byId;
}

/** The objects a list of path changes refers to, for the `refs` of its entry. */
export function referencesOf(paths: readonly PathChange[]): ObjectReference[] {
  const references: ObjectReference[] = [];
  for (const change of paths) {
    for (const entry of [change.before, change.after]) {
      if (entry?.type === 'file') references.push({ type: 'blob', digest: entry.digest });
      if (entry?.type === 'directory') references.push({ type: 'tree', digest: entry.digest });
    }
  }
  return references;
}

/** True for an external action journaled by `record` (kind `x.<name>`): closed by `report`. */
export function isRecorded(action: ActionRecord): boolean {
  return action.kind.startsWith('x.');
}

/** A short description of a path's state, for refusals: what was expected and what is there. */
export function describeState(entry: TreeEntry | undefined): string {
  if (entry === undefined) return 'absent';
  if (entry.type === 'symlink') return `symbolic link to ${entry.target}`;
  if (entry.type === 'directory') return `directory ${entry.digest.slice(7, 19)}`;
  return `file ${entry.digest.slice(7, 19)} (${entry.sizeBytes} bytes, mode ${entry.mode.toString(8)})`;
}
