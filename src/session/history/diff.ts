import { RewindError } from '../../errors.js';
import type { Digest } from '../../lib/index.js';
import { diffTrees, fileChangeKind, renderDiff, type TreeChange } from '../../workspace/index.js';
import { type SessionContext, snapshotWorkspace } from '../context.js';
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
}

const ACTION_ID = /^\d+$/;

/** A side of a comparison: the working tree, an action's after-state, or a checkpoint. */
async function resolveSide(
  context: SessionContext,
  journal: Journal,
  side: string | undefined,
): Promise<{ name: string; tree: Digest }> {
  if (side === undefined) {
    return { name: 'working tree', tree: (await snapshotWorkspace(context)).tree };
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
    return { name: `#${side}`, tree: action.effect.afterTree };
  }
  const checkpoint = journal.findCheckpoint(side);
  return { name: checkpoint.label, tree: checkpoint.tree };
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
        };
      }
      changes = await changesOf(context, action.effect);
      names = [`before #${from}`, `after #${from}`];
    } else {
      const fromSide = await resolveSide(context, journal, from);
      const toSide = await resolveSide(context, journal, to);
      changes = await diffTrees(context.store, fromSide.tree, toSide.tree);
      names = [fromSide.name, toSide.name];
    }
    return {
      from: names[0],
      to: names[1],
      changes: changes.flatMap((change) => {
        const kind = fileChangeKind(change);
        return kind ? [{ path: change.path, kind }] : [];
      }),
      text: (await renderDiff(context.store, changes)) + redactionNote(redacted),
      redacted,
    };
  };
  const isWorkingTree = to === undefined && !ACTION_ID.test(from);
  return isWorkingTree
    ? withWorkspaceLock(context, 'comparing states', compare)
    : readJournal(context).then(compare);
}
