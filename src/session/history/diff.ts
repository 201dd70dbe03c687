import { RewindError } from '../../errors.js';
import type { Digest } from '../../lib/index.js';
import {
  diffTrees,
  fileChangeKind,
  isAtOrUnder,
  renderDiff,
  type TreeChange,
} from '../../workspace/index.js';
import { type SessionContext, snapshotWorkspace } from '../context.js';
import type { Effect } from '../journal/action-records.js';
import { type Journal, readJournal, withWorkspaceLock } from '../journal/journal.js';
import { changesOf } from '../journal/recovery.js';

/** What `Session.diff` found. */
export interface DiffResult {
  from: string;
  to: string;
  changes: { path: string; kind: 'added' | 'deleted' | 'modified' }[];
  /** A unified diff: text files line by line, binary files summarized. */
  text: string;
  /** For one action: where its record was redacted before storing (`request.headers.authorization`). */
  redacted: string[];
  /**
   * Paths a side could not read (no permission, ...): what they hold there is unknown, so they
   * are not compared (not shown as deleted or added).
   */
  unreadable: string[];
}

/** A path a side of a comparison could not read, and why when known. */
interface Unread {
  path: string;
  side: string;
  reason?: string;
}

/** A state to compare: its tree, and what it could not read (left out of the tree). */
interface Side {
  name: string;
  tree: Digest;
  unreadable: Unread[];
}

const ACTION_ID = /^\d+$/;

/** A side of a comparison: the working tree, an action's after-state, or a checkpoint. */
async function resolveSide(
  context: SessionContext,
  journal: Journal,
  side: string | undefined,
): Promise<Side> {
  if (side === undefined) {
    const snapshot = await snapshotWorkspace(context);
    return {
      name: 'working tree',
      tree: snapshot.tree,
      unreadable: snapshot.unreadable.map(({ path, reason }) => ({
        path,
        side: 'the working tree',
        reason,
      })),
    };
  }
  if (ACTION_ID.test(side)) {
    const action = journal.findAction(Number(side));
    if (action.effect?.type !== 'trees') {
      throw new RewindError(
        'INVALID_ARGUMENT',
        `Action #${side} changed only some paths, so it names no whole state to compare with. Run \`rewind diff ${side}\` alone to see what it changed.`,
        { data: { id: Number(side) } },
      );
    }
    const name = `#${side}`;
    return {
      name,
      tree: action.effect.afterTree,
      unreadable: unreadOf(action.effect, `the state after ${name}`),
    };
  }
  const checkpoint = journal.findCheckpoint(side);
  return {
    name: checkpoint.label,
    tree: checkpoint.tree,
    unreadable: (checkpoint.unreadable ?? []).map((path) => ({
      path,
      side: `checkpoint ${checkpoint.label}`,
    })),
  };
}

/**
 * Throws `CHECKPOINT_NOT_FOUND` for an isolated session without a checkpoint, saying what shows
 * the changes of its view instead: a person asks for `rewind diff` alone to see them.
 */
function checkHasCheckpoint(context: SessionContext, journal: Journal): void {
  if (journal.checkpoints().length > 0) return;
  throw new RewindError(
    'CHECKPOINT_NOT_FOUND',
    `Session ${context.id} has no checkpoint yet, so there is no latest one to compare with. What it changed in its view (what a commit would write) is what \`rewind commit --dry-run --diff\` shows; \`rewind checkpoint\` makes a checkpoint to compare with later.`,
    { data: { label: 'latest', known: [] } },
  );
}

/** The paths an action's after-state could not read. */
function unreadOf(effect: Effect, side: string): Unread[] {
  return effect.type === 'trees' ? (effect.unreadable ?? []).map((path) => ({ path, side })) : [];
}

/** The note that ends a comparison's text for the paths it could not compare. */
function unreadNote(unread: readonly Unread[]): string {
  return unread
    .map(
      ({ path, side, reason }) =>
        `Not compared: ${path}, unreadable in ${side}${reason ? ` (${reason})` : ''}\n`,
    )
    .join('');
}

function redactionNote(redacted: readonly string[]): string {
  return redacted.length > 0 ? `Redacted before storing: ${redacted.join(', ')}\n` : '';
}

/**
 * The differences between two states: each side a checkpoint label (or `latest`), an action id,
 * or the working tree when omitted; an action id alone gives what that action did. Throws
 * `CHECKPOINT_NOT_FOUND`, `ACTION_NOT_FOUND`, `INVALID_ARGUMENT`.
 */
export function diffStates(
  context: SessionContext,
  from: string,
  to: string | undefined,
): Promise<DiffResult> {
  // Only the working tree needs a snapshot, and so the lock: checkpoints and actions are recorded.
  const compare = async (journal: Journal): Promise<DiffResult> => {
    let changes: TreeChange[];
    let names: [string, string];
    let redacted: string[] = [];
    let unread: Unread[] = [];
    if (ACTION_ID.test(from) && to === undefined) {
      const action = journal.findAction(Number(from));
      redacted = [
        ...((action.started.body.redacted as string[] | undefined) ?? []),
        ...((action.closed?.body.redacted as string[] | undefined) ?? []),
      ];
      if (!action.effect) {
        // Not a file action: what it did, as journaled.
        const record = {
          action: action.kind,
          class: action.class,
          state: action.state,
          ...Object.fromEntries(
            Object.entries(action.started.body).filter(([key]) =>
              ['target', 'request', 'detail', 'compensation', 'command'].includes(key),
            ),
          ),
          ...(action.closed && {
            outcome: action.closed.body.evidence ?? action.closed.body.detail ?? null,
          }),
        };
        return {
          from: `before #${from}`,
          to: `after #${from}`,
          changes: [],
          text: `${JSON.stringify(record, null, 2)}\n${redactionNote(redacted)}`,
          redacted,
          unreadable: [],
        };
      }
      changes = await changesOf(context, action.effect);
      unread = unreadOf(action.effect, `the state after #${from}`);
      names = [`before #${from}`, `after #${from}`];
    } else {
      if (from === 'latest' && context.isolation === 'isolated')
        checkHasCheckpoint(context, journal);
      const fromSide = await resolveSide(context, journal, from);
      const toSide = await resolveSide(context, journal, to);
      changes = await diffTrees(context.store, fromSide.tree, toSide.tree);
      names = [fromSide.name, toSide.name];
      unread = [...fromSide.unreadable, ...toSide.unreadable];
    }
    const unreadPaths = [...new Set(unread.map(({ path }) => path))].sort();
    changes = changes.filter((change) => !isAtOrUnder(change.path, unreadPaths));
    return {
      from: names[0],
      to: names[1],
      changes: changes.flatMap((change) => {
        const kind = fileChangeKind(change);
        return kind ? [{ path: change.path, kind }] : [];
      }),
      text:
        (await renderDiff(context.store, changes)) + unreadNote(unread) + redactionNote(redacted),
      redacted,
      unreadable: unreadPaths,
    };
  };
  const isWorkingTree = to === undefined && !ACTION_ID.test(from);
  return isWorkingTree
    ? withWorkspaceLock(context, 'comparing states', compare)
    : readJournal(context).then(compare);
}
