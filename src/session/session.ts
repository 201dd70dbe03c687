import { join } from 'node:path';
import { isRewindError, RewindError } from '../errors.js';
import { Ledger, type LedgerEntry, type SessionFile } from '../ledger/index.js';
import { acquireLock, type Digest } from '../lib/index.js';
import {
  createObjectStore,
  type ObjectStore,
  openStore,
  readTree,
  type StoreLocation,
  type TreeEntry,
} from '../store/index.js';
import {
  type ApplyProgress,
  type ApplyResult,
  applyChanges,
  diffTrees,
  fileChangeKind,
  renderDiff,
  type SnapshotResult,
  snapshot,
  type TreeChange,
} from '../workspace/index.js';
import { pickSession } from './repository.js';

/** Options of {@link openSession}. */
export interface OpenSessionOptions {
  /** The workspace root: the directory that holds `.rewind/`. */
  workspace: string;
  /** The session to open (id, unique prefix, or file name). Default: the current session. */
  session?: string;
  /** The clock for ledger entries; injected in tests. */
  now?: () => Date;
  /** How long to wait for another process's operation on the same workspace. Default 60 000 ms. */
  lockTimeoutMs?: number;
  /** First-snapshot budget; see {@link SnapshotOptions}. */
  budget?: { maxBytes?: number; maxFiles?: number };
}

/** A checkpoint as the ledger records it. */
export interface CheckpointInfo {
  label: string;
  /** The seq of its `checkpoint-created` entry. */
  seq: number;
  at: string;
  tree: Digest;
  fileCount: number;
  sizeBytes: number;
  /** Files changed since the previous checkpoint of the session. */
  added: number;
  modified: number;
  deleted: number;
  isAutomatic: boolean;
}

/** What {@link Session.checkpoint} recorded. */
export interface CheckpointResult extends CheckpointInfo {
  /** Files that had to be read (the rest were unchanged since the last snapshot). */
  readCount: number;
  warnings: string[];
}

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
  applied: ApplyResult | undefined;
  warnings: string[];
}

/** The outcome of an undo: done, or refused because later edits would be trampled. */
export type UndoResult =
  | { status: 'undone'; id: number; undoes: number; applied: ApplyResult }
  | { status: 'refused'; undoes: number; conflicts: string[] };

/** What {@link Session.diff} found. */
export interface DiffResult {
  from: string;
  to: string;
  changes: { path: string; kind: 'added' | 'deleted' | 'modified' }[];
  /** A unified diff: text files line by line, binary files summarized. */
  text: string;
}

/** A restore-like action in the ledger: its effect is to set every path that differs between
 * `beforeTree` and `afterTree` to its `afterTree` state. */
interface RestoreAction {
  /** Its `rollback-started` or `undo-started` entry; its seq is the action's id. */
  started: LedgerEntry;
  kind: 'rollback' | 'undo';
  beforeTree: Digest;
  afterTree: Digest;
  /** `open` until a completion or failure entry names it. */
  outcome: 'open' | 'completed' | 'failed';
}

const LABEL_PATTERN = /^[A-Za-z0-9][A-Za-z0-9._-]{0,127}$/;

/** Checks a checkpoint label: letters, digits, `.`, `_`, `-`; not only digits; not `latest`. */
export function checkLabel(label: string): string {
  if (
    !LABEL_PATTERN.test(label) ||
    /^\d+$/.test(label) ||
    label === 'latest' ||
    label.includes('..')
  ) {
    throw new RewindError(
      'INVALID_ARGUMENT',
      `"${label}" is not a valid checkpoint label. Use letters, digits, ".", "_" and "-" (up to 128, starting with a letter or digit, ` +
        'not only digits, not "latest"), such as "before-refactor".',
      { data: { label } },
    );
  }
  return label;
}

function checkpointOf(entry: LedgerEntry): CheckpointInfo {
  const body = entry.body;
  return {
    label: String(body.label),
    seq: entry.seq,
    at: entry.at,
    tree: body.tree as Digest,
    fileCount: Number(body.fileCount),
    sizeBytes: Number(body.sizeBytes),
    added: Number(body.added),
    modified: Number(body.modified),
    deleted: Number(body.deleted),
    isAutomatic: body.isAutomatic === true,
  };
}

const CLOSING_KINDS: Record<string, 'completed' | 'failed' | undefined> = {
  'rollback-completed': 'completed',
  'undo-completed': 'completed',
  'rollback-failed': 'failed',
  'undo-failed': 'failed',
};

function restoreActions(entries: readonly LedgerEntry[]): Map<number, RestoreAction> {
  const actions = new Map<number, RestoreAction>();
  for (const entry of entries) {
    if (entry.kind === 'rollback-started' || entry.kind === 'undo-started') {
      actions.set(entry.seq, {
        started: entry,
        kind: entry.kind === 'rollback-started' ? 'rollback' : 'undo',
        beforeTree: entry.body.beforeTree as Digest,
        afterTree: entry.body.afterTree as Digest,
        outcome: 'open',
      });
    }
    const closed = CLOSING_KINDS[entry.kind];
    if (closed) {
      const action = actions.get(Number(entry.body.startedSeq));
      if (action) action.outcome = closed;
    }
  }
  return actions;
}

function countFiles(changes: readonly TreeChange[]): {
  added: number;
  modified: number;
  deleted: number;
} {
  const counts = { added: 0, modified: 0, deleted: 0 };
  for (const change of changes) {
    const kind = fileChangeKind(change);
    if (kind) counts[kind] += 1;
  }
  return counts;
}

async function entryAt(
  store: ObjectStore,
  tree: Digest,
  path: string,
  trees: Map<Digest, Promise<TreeEntry[]>>,
): Promise<TreeEntry | undefined> {
  let current: Digest = tree;
  const parts = path.split('/');
  for (let index = 0; index < parts.length; index++) {
    let entries = trees.get(current);
    if (!entries) {
      entries = readTree(store, current).then((decoded) => decoded.entries);
      trees.set(current, entries);
    }
    const entry = (await entries).find((candidate) => candidate.name === parts[index]);
    if (!entry || index === parts.length - 1) return entry;
    if (entry.type !== 'directory') return undefined;
    current = entry.digest;
  }
  return undefined;
}

/**
 * A session on a workspace: checkpoints, rollback and undo, journaled in its ledger. Open one
 * with {@link openSession}; close it when done (or use `await using`).
 */
export class Session {
  readonly id: string;
  readonly workspace: string;
  readonly #location: StoreLocation;
  readonly #store: ObjectStore;
  readonly #ledger: Ledger;
  readonly #options: OpenSessionOptions;

  private constructor(location: StoreLocation, ledger: Ledger, options: OpenSessionOptions) {
    this.id = ledger.session.id;
    this.workspace = location.workspace;
    this.#location = location;
    this.#store = createObjectStore(location.directory);
    this.#ledger = ledger;
    this.#options = options;
  }

  /** See {@link openSession}. */
  static async open(options: OpenSessionOptions): Promise<Session> {
    const location = await openStore(options.workspace);
    const file: SessionFile = await pickSession(location, options.session);
    const ledger = await Ledger.open(file, { ...(options.now && { now: options.now }) });
    const session = new Session(location, ledger, options);
    try {
      // Taking the lock finishes any interrupted operation first.
      await session.#withOperationLock('opening the session', async () => {});
    } catch (error) {
      await ledger.close();
      throw error;
    }
    return session;
  }

  async #withOperationLock<T>(purpose: string, fn: () => Promise<T>): Promise<T> {
    const lock = await acquireLock(join(this.#location.directory, 'workspace.lock'), {
      timeoutMs: this.#options.lockTimeoutMs ?? 60_000,
      purpose: `${purpose} (session ${this.id})`,
    });
    try {
      await this.#recover();
      return await fn();
    } finally {
      await lock.release();
    }
  }

  async #entries(): Promise<LedgerEntry[]> {
    return (await this.#ledger.read()).entries;
  }

  /** Finishes a rollback or undo that a killed process left between its intent and completion. */
  async #recover(): Promise<void> {
    const entries = await this.#entries();
    for (const action of restoreActions(entries).values()) {
      if (action.outcome !== 'open') continue;
      const changes = await diffTrees(this.#store, action.beforeTree, action.afterTree);
      await this.#finish(action.kind, action.started, changes, { isRecovery: true });
    }
  }

  /**
   * Applies an announced restore and journals how it ended. If it fails (a missing object, a
   * path that became a link), the paths it touched are put back as they were, the failure is
   * journaled (closing the intent, so it is not retried forever), and the error is rethrown
   * saying whether the workspace is back as it was.
   */
  async #finish(
    kind: 'rollback' | 'undo',
    started: LedgerEntry,
    changes: readonly TreeChange[],
    options: { isRecovery: boolean; onProgress?: (progress: ApplyProgress) => void },
  ): Promise<ApplyResult> {
    const common = {
      startedSeq: started.seq,
      ...(kind === 'undo' && { undoes: started.body.undoes }),
      isRecovery: options.isRecovery,
    };
    try {
      const applied = await applyChanges(this.workspace, this.#store, changes, {
        isRecovery: options.isRecovery,
        ...(options.onProgress && { onProgress: options.onProgress }),
      });
      await this.#ledger.append(kind === 'rollback' ? 'rollback-completed' : 'undo-completed', {
        ...common,
        ...applied,
      });
      return applied;
    } catch (error) {
      let isReverted = false;
      try {
        const back = changes.map((change) => ({
          path: change.path,
          before: change.after,
          after: change.before,
        }));
        await applyChanges(this.workspace, this.#store, back, { isRecovery: true });
        isReverted = true;
      } catch {}
      const code = isRewindError(error) ? error.code : 'IO_FAILED';
      const message = error instanceof Error ? error.message : String(error);
      await this.#ledger.append(kind === 'rollback' ? 'rollback-failed' : 'undo-failed', {
        ...common,
        error: { code, message },
        isReverted,
      });
      throw new RewindError(
        code,
        `The ${kind} #${started.seq} failed: ${message} ` +
          (isReverted
            ? 'The workspace was put back as it was before; nothing was lost.'
            : 'Putting the workspace back failed too, so it is partly restored: `rewind diff` shows where it stands, and every state is still in the store.'),
        { data: { id: started.seq, isReverted }, cause: error },
      );
    }
  }

  async #snapshot(): Promise<SnapshotResult> {
    return snapshot(this.workspace, {
      store: this.#store,
      storeDirectory: this.#location.directory,
      ...(this.#options.budget && { budget: this.#options.budget }),
    });
  }

  /** Every checkpoint of the session, oldest first. */
  async checkpoints(): Promise<CheckpointInfo[]> {
    return (await this.#entries())
      .filter((entry) => entry.kind === 'checkpoint-created')
      .map(checkpointOf);
  }

  async #findCheckpoint(label: string): Promise<CheckpointInfo> {
    const checkpoints = await this.checkpoints();
    const found =
      label === 'latest'
        ? checkpoints.at(-1)
        : checkpoints.find((checkpoint) => checkpoint.label === label);
    if (found) return found;
    const known = checkpoints.map((checkpoint) => checkpoint.label);
    throw new RewindError(
      'CHECKPOINT_NOT_FOUND',
      label === 'latest'
        ? `Session ${this.id} has no checkpoint yet. Create one with \`rewind checkpoint LABEL\`.`
        : `Session ${this.id} has no checkpoint "${label}". ` +
            (known.length > 0
              ? `Its checkpoints: ${known.join(', ')}.`
              : 'It has no checkpoint yet.'),
      { data: { label, known } },
    );
  }

  /**
   * Records the workspace under `label` (unique in the session) with a `checkpoint-created` entry.
   * Costs what changed since the last snapshot. Throws `INVALID_ARGUMENT` for a malformed label,
   * `CHECKPOINT_EXISTS`, and the errors of {@link snapshot}.
   */
  async checkpoint(
    label: string,
    options: { isAutomatic?: boolean } = {},
  ): Promise<CheckpointResult> {
    checkLabel(label);
    return this.#withOperationLock(`creating checkpoint ${label}`, async () => {
      const checkpoints = await this.checkpoints();
      const existing = checkpoints.find((checkpoint) => checkpoint.label === label);
      if (existing) {
        throw new RewindError(
          'CHECKPOINT_EXISTS',
          `Session ${this.id} already has a checkpoint "${label}" (#${existing.seq}). Choose another label.`,
          { data: { label, seq: existing.seq } },
        );
      }
      const snap = await this.#snapshot();
      const counts = countFiles(await diffTrees(this.#store, checkpoints.at(-1)?.tree, snap.tree));
      const entry = await this.#ledger.append(
        'checkpoint-created',
        {
          label,
          tree: snap.tree,
          fileCount: snap.fileCount,
          sizeBytes: snap.sizeBytes,
          ...counts,
          isAutomatic: options.isAutomatic === true,
        },
        [{ type: 'tree', digest: snap.tree }],
      );
      return { ...checkpointOf(entry), readCount: snap.readCount, warnings: snap.warnings };
    });
  }

  /**
   * Restores the workspace to a checkpoint (`latest` is the newest). The current state is saved
   * first, so nothing is lost and the rollback can be undone (`undo(result.id)`). An intent entry
   * names both states before anything moves, so a process killed midway is finished by the next
   * {@link openSession}. With `dryRun`, only lists what would change, marking what this session
   * never recorded.
   *
   * Throws `CHECKPOINT_NOT_FOUND`, and the errors of {@link snapshot} and {@link applyChanges}.
   */
  async rollback(
    label: string,
    options: { dryRun?: boolean; onProgress?: (progress: ApplyProgress) => void } = {},
  ): Promise<RollbackResult> {
    const target = await this.#findCheckpoint(label);
    return this.#withOperationLock(`rolling back to ${target.label}`, async () => {
      const snap = await this.#snapshot();
      const changes = await diffTrees(this.#store, snap.tree, target.tree);
      const planned = await this.#plan(changes, options.dryRun === true);
      const result: RollbackResult = {
        isDryRun: options.dryRun === true,
        label: target.label,
        id: undefined,
        beforeTree: snap.tree,
        afterTree: target.tree,
        changes: planned,
        applied: undefined,
        warnings: snap.warnings,
      };
      if (result.isDryRun) return result;
      const started = await this.#ledger.append(
        'rollback-started',
        {
          label: target.label,
          checkpointSeq: target.seq,
          beforeTree: snap.tree,
          afterTree: target.tree,
          changeCount: changes.length,
        },
        [
          { type: 'tree', digest: snap.tree },
          { type: 'tree', digest: target.tree },
        ],
      );
      const applied = await this.#finish('rollback', started, changes, {
        isRecovery: false,
        ...(options.onProgress && { onProgress: options.onProgress }),
      });
      return { ...result, id: started.seq, applied };
    });
  }

  async #plan(changes: readonly TreeChange[], isDryRun: boolean): Promise<PlannedChange[]> {
    const recordedTrees = isDryRun
      ? new Set(
          (await this.#entries()).flatMap((entry) =>
            (entry.refs ?? []).filter((ref) => ref.type === 'tree').map((ref) => ref.digest),
          ),
        )
      : new Set<Digest>();
    const planned: PlannedChange[] = [];
    const trees = new Map<Digest, Promise<TreeEntry[]>>();
    const actions = { added: 'created', deleted: 'deleted', modified: 'written' } as const;
    for (const change of changes) {
      const kind = fileChangeKind(change);
      if (!kind) continue;
      const action = actions[kind];
      let isUnrecorded = false;
      if (isDryRun && kind !== 'added' && change.before) {
        isUnrecorded = true;
        for (const tree of recordedTrees) {
          const seen = await entryAt(this.#store, tree, change.path, trees);
          if (seen && JSON.stringify(seen) === JSON.stringify(change.before)) {
            isUnrecorded = false;
            break;
          }
        }
      }
      planned.push({ path: change.path, action, isUnrecorded });
    }
    return planned;
  }

  /**
   * Undoes a rollback or an undo (`id` is the seq of its `rollback-started` or `undo-started`
   * entry): every path it changed goes back to what it was, and nothing else is touched. Refused,
   * and the refusal journaled, when any of those paths changed since: undo never tramples later
   * edits. An undo is itself an action, so it can be undone too (redo).
   *
   * Throws `ACTION_NOT_FOUND` when `id` names no undoable action.
   */
  async undo(id: number): Promise<UndoResult> {
    return this.#withOperationLock(`undoing #${id}`, async () => {
      const action = await this.#findAction(id);
      if (action.outcome === 'failed') {
        throw new RewindError(
          'ACTION_NOT_FOUND',
          `Action #${id} of session ${this.id} failed and was put back, so there is nothing to undo. Run \`rewind log\` for what happened.`,
          { data: { id } },
        );
      }
      const touched = await diffTrees(this.#store, action.beforeTree, action.afterTree);
      const snap = await this.#snapshot();
      const drifted = new Set(
        (await diffTrees(this.#store, snap.tree, action.afterTree)).map((change) => change.path),
      );
      const conflicts = touched.map((change) => change.path).filter((path) => drifted.has(path));
      if (conflicts.length > 0) {
        await this.#ledger.append('undo-refused', {
          undoes: id,
          paths: conflicts.slice(0, 50),
          pathCount: conflicts.length,
        });
        return { status: 'refused', undoes: id, conflicts };
      }
      const started = await this.#ledger.append(
        'undo-started',
        { undoes: id, beforeTree: action.afterTree, afterTree: action.beforeTree },
        [
          { type: 'tree', digest: action.afterTree },
          { type: 'tree', digest: action.beforeTree },
        ],
      );
      const reverse = touched.map((change) => ({
        path: change.path,
        before: change.after,
        after: change.before,
      }));
      const applied = await this.#finish('undo', started, reverse, { isRecovery: false });
      return { status: 'undone', id: started.seq, undoes: id, applied };
    });
  }

  async #findAction(id: number): Promise<RestoreAction> {
    const action = restoreActions(await this.#entries()).get(id);
    if (action) return action;
    throw new RewindError(
      'ACTION_NOT_FOUND',
      `Entry #${id} of session ${this.id} is not an action (a rollback or an undo). Run \`rewind log\` to see the action ids.`,
      { data: { id } },
    );
  }

  async #resolveSide(side: string | undefined): Promise<{ name: string; tree: Digest }> {
    if (side === undefined) return { name: 'working tree', tree: (await this.#snapshot()).tree };
    if (/^\d+$/.test(side)) {
      return { name: `#${side}`, tree: (await this.#findAction(Number(side))).afterTree };
    }
    const checkpoint = await this.#findCheckpoint(side);
    return { name: checkpoint.label, tree: checkpoint.tree };
  }

  /**
   * The differences between two states: each side is a checkpoint label (or `latest`), an action
   * id, or the working tree when omitted. `diff(id)` alone, for an action, shows the changes that
   * action made.
   */
  async diff(from: string, to?: string): Promise<DiffResult> {
    return this.#withOperationLock('comparing states', async () => {
      let fromTree: Digest;
      let toTree: Digest;
      let names: [string, string];
      if (/^\d+$/.test(from) && to === undefined) {
        const action = await this.#findAction(Number(from));
        fromTree = action.beforeTree;
        toTree = action.afterTree;
        names = [`before #${from}`, `after #${from}`];
      } else {
        const a = await this.#resolveSide(from);
        const b = await this.#resolveSide(to);
        fromTree = a.tree;
        toTree = b.tree;
        names = [a.name, b.name];
      }
      const changes = await diffTrees(this.#store, fromTree, toTree);
      return {
        from: names[0],
        to: names[1],
        changes: changes.flatMap((change) => {
          const kind = fileChangeKind(change);
          return kind ? [{ path: change.path, kind }] : [];
        }),
        text: await renderDiff(this.#store, changes),
      };
    });
  }

  /** Closes the session's ledger. */
  async close(): Promise<void> {
    await this.#ledger.close();
  }

  async [Symbol.asyncDispose](): Promise<void> {
    await this.close();
  }
}

/**
 * Opens a session of a workspace that has a store (`init` makes one): the current session unless
 * `session` names another. Before returning, finishes any rollback or undo that a killed process
 * left half-done, so the workspace is in a state the ledger names.
 *
 * Throws `STORE_NOT_FOUND`, `SESSION_NOT_FOUND`, `LOCK_HELD`, and `ENTRY_KIND_UNKNOWN` /
 * `LEDGER_VERSION_UNSUPPORTED` for a session a newer Rewind wrote to.
 */
export function openSession(options: OpenSessionOptions): Promise<Session> {
  return Session.open(options);
}
