import { isRewindError, RewindError } from '../../errors.js';
import type { LedgerEntry } from '../../ledger/index.js';
import type { Digest } from '../../lib/index.js';
import {
  type ApplyProgress,
  type ApplyResult,
  applyChanges,
  decodeOutsideRules,
  diffEntries,
  diffTrees,
  type LeftOutCheck,
  type TreeChange,
  treeRules,
} from '../../workspace/index.js';
import {
  outsideRulesOf,
  type SessionContext,
  snapshotWorkspace,
  workspaceFor,
} from '../context.js';
import { type Effect, isRecorded } from './action-records.js';
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
  return treeRules(context.store, tree as Digest, outside);
}

/**
 * Applies an announced restore (the changes its `*-started` entry names) and journals how it
 * ended. If it fails (a missing object, a path that became a link), the paths it touched are put
 * back as they were, the failure is journaled (closing the intent, so it is not retried
 * forever), and the error is rethrown saying whether the workspace is back as it was.
 */
export async function applyAnnounced(
  context: SessionContext,
  journal: Journal,
  started: LedgerEntry,
  changes: readonly TreeChange[],
  options: { isRecovery: boolean; onProgress?: (progress: ApplyProgress) => void },
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
  };
  try {
    const applied = await applyChanges(target, context.store, changes, {
      isRecovery: options.isRecovery,
      ...rules,
      ...(options.onProgress && { onProgress: options.onProgress }),
    });
    await journal.append(`${kind}-completed`, { ...common, ...applied });
    return applied;
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
    await journal.append(`${kind}-failed`, { ...common, error: { code, message }, isReverted });
    throw new RewindError(
      code,
      `The ${kind === 'action' ? String(started.body.action) : kind} #${started.seq} failed: ${message} ` +
        (isReverted
          ? 'The workspace was put back as it was before; nothing was lost.'
          : 'Putting the workspace back failed too, so it is partly restored: `rewind diff` shows where it stands, and every state is still in the store.'),
      { data: { id: started.seq, isReverted }, cause: error },
    );
  }
}

/**
 * Finishes what a killed process left between intent and completion: a rollback, an undo or a
 * file action is applied again (all are idempotent) and journaled as completed; a command cannot
 * be finished, so the workspace it left is recorded and it is closed as interrupted (its file
 * effects can then still be undone). Runs under the workspace lock, before every operation.
 */
export async function recover(context: SessionContext, journal: Journal): Promise<void> {
  for (const action of journal.openActions()) {
    // Drafts wait for approval, recorded actions for their report: neither was interrupted.
    if (action.closed || action.state === 'draft' || action.state === 'discarded') continue;
    if (isRecorded(action)) continue;
    if (action.effect) {
      const changes = await changesOf(context, action.effect);
      await applyAnnounced(context, journal, action.started, changes, { isRecovery: true });
      continue;
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
  }
}
