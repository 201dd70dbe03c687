import { isRewindError, RewindError } from '../../errors.js';
import {
  formatVerification,
  type VerificationResult,
  type VerifierConfig,
} from '../../verifier/index.js';
import { diffTrees, fileChangeKind } from '../../workspace/index.js';
import { type SessionContext, snapshotWorkspace } from '../context.js';
import { checkLabel } from '../history/checkpoints.js';
import { type RollbackScope, rollbackWithin } from '../history/rollback.js';
import type { CheckpointInfo } from '../journal/checkpoint-records.js';
import { type Journal, readJournal, withWorkspaceLock } from '../journal/journal.js';
import { runVerification } from '../verification.js';
import {
  type EscalationHandler,
  escalationFor,
  HaltError,
  type Resolution,
  stopEscalation,
} from './escalation.js';
import type { AutoRollbackReport, PolicyState } from './policy-state.js';

/** Options of `Session.autoRollback`. */
export interface AutoRollbackOptions {
  on?: readonly ('exception' | 'test-failure')[];
  to?: string;
  /** What to restore: both (default) the files and the conversation, or only one of them. */
  scope?: RollbackScope;
  verifier?: VerifierConfig;
  escalation?: EscalationHandler;
  /** Picks the escalation handler when none is given: see {@link escalationFor}. Default agent. */
  mode?: 'interactive' | 'agent';
}

/** Turns automatic rollback on. Throws `INVALID_ARGUMENT` for an unknown event or a bad label. */
export function setAutoRollback(policies: PolicyState, options: AutoRollbackOptions): void {
  const on = options.on ?? ['exception', 'test-failure'];
  for (const event of on) {
    if (event !== 'exception' && event !== 'test-failure') {
      throw new RewindError(
        'INVALID_ARGUMENT',
        `"${String(event)}" is not an event: use exception or test-failure.`,
        { data: { event } },
      );
    }
  }
  if (options.to !== undefined && options.to !== 'latest') checkLabel(options.to);
  const scope = options.scope ?? 'both';
  if (scope !== 'both' && scope !== 'files' && scope !== 'conversation') {
    throw new RewindError(
      'INVALID_ARGUMENT',
      `"${String(scope)}" is not a scope: use both, files or conversation.`,
      { data: { scope } },
    );
  }
  policies.rollback = {
    on: new Set(on),
    to: options.to ?? 'latest',
    scope,
    verifier: options.verifier,
    escalation: options.escalation ?? escalationFor(options.mode ?? 'agent'),
  };
}

/** The `[REWIND]` notice a model sees after an automatic rollback, with the verifier's words. */
export function rewindNotice(
  rolled: AutoRollbackReport | undefined,
  result: VerificationResult | undefined,
): string {
  if (!rolled || rolled.isSkipped) return '';
  const verdict =
    result && result.status !== 'pass' ? ` The verifier said: ${formatVerification(result)}` : '';
  // Only what moved: a checkpoint without a conversation (or a files-only policy) leaves it.
  const what =
    rolled.messages === undefined
      ? `The workspace's files were rolled back to checkpoint "${rolled.to}"; changes made to them after it were undone. The conversation was not rolled back.`
      : `The workspace and conversation were rolled back to checkpoint "${rolled.to}"; changes made after it were undone.`;
  return `\n[REWIND] ${what}${verdict}`;
}

/**
 * The checkpoint an automatic rollback goes to when its policy names none (`latest`): the newest
 * one that is not already broken. After a failed or undecided verdict, the newest checkpoint a
 * verifier passed, else the newest one no verifier failed (never one holding the very files that
 * just failed); after an exception, the newest one no verifier failed, which is the one taken
 * before the failing call began. With a `floor` (the checkpoint taken before the first call of
 * the model step running now), none later than it. Undefined when there is none.
 */
export function defaultRollbackTarget(
  journal: Journal,
  event: AutoRollbackReport['event'],
  floor?: string,
): CheckpointInfo | undefined {
  const all = journal.checkpoints();
  const floorIndex = floor === undefined ? -1 : all.findLastIndex((c) => c.label === floor);
  const checkpoints = floorIndex === -1 ? all : all.slice(0, floorIndex + 1);
  const passed =
    event === 'exception'
      ? undefined
      : checkpoints.findLast((checkpoint) => journal.verdictOn(checkpoint.tree) === 'pass');
  return (
    passed ?? checkpoints.findLast((checkpoint) => journal.verdictOn(checkpoint.tree) !== 'fail')
  );
}

/** The labels pruning must keep for the rollback policy: the checkpoint it would go back to. */
export function rollbackTargetsOf(policies: PolicyState, journal: Journal): string[] {
  const to = policies.rollback?.to;
  if (to === undefined) return [];
  if (to !== 'latest') return [to];
  const target = defaultRollbackTarget(journal, 'test-failure');
  return target ? [target.label] : [];
}

/**
 * Rolls back for a policy, unless that would change nothing (files and conversation already as
 * at the checkpoint) or there is no checkpoint: then the skip is journaled instead. Records
 * `lastAutoRollback` when it changed something. Undefined when the policy is off or there is
 * nothing to go back to.
 */
export async function autoRollbackTo(
  context: SessionContext,
  policies: PolicyState,
  event: AutoRollbackReport['event'],
  reason: string | undefined,
): Promise<AutoRollbackReport | undefined> {
  const policy = policies.rollback;
  if (!policy) return undefined;
  const to = policy.to;
  const report = await withWorkspaceLock(context, `rolling back to ${to}`, async (journal) => {
    let target: CheckpointInfo | undefined;
    try {
      target =
        to === 'latest'
          ? defaultRollbackTarget(journal, event, policies.stepFloor)
          : journal.findCheckpoint(to);
    } catch (error) {
      if (!isRewindError(error, 'CHECKPOINT_NOT_FOUND')) throw error;
    }
    if (!target) {
      // Nothing to go back to: the failure propagates as it is.
      await journal.append('rollback-skipped', {
        label: to,
        event,
        reason:
          journal.checkpoints().length === 0
            ? 'no checkpoint to roll back to'
            : 'every checkpoint holds files a verifier failed',
      });
      return undefined;
    }
    const { scope } = policy;
    const snapshot = await snapshotWorkspace(context);
    const changes = await diffTrees(context.store, snapshot.tree, target.tree);
    const current = journal.currentConversation();
    const targetConversation = journal.conversationAt(target);
    const isConversationUnchanged =
      scope === 'files' ||
      targetConversation === undefined ||
      current?.tree === targetConversation.tree ||
      (current !== undefined && current.tree === journal.lastRestoredFrom(target.label)?.tree);
    const areFilesUnchanged =
      scope === 'conversation' || changes.every((change) => !fileChangeKind(change));
    if (areFilesUnchanged && isConversationUnchanged) {
      await journal.append('rollback-skipped', {
        label: target.label,
        event,
        reason: 'nothing changed since that checkpoint',
      });
      return { event, to: target.label, isSkipped: true, messages: undefined };
    }
    const result = await rollbackWithin(context, journal, target, {
      scope,
      ...(reason !== undefined && { reason }),
    });
    return {
      event,
      to: result.label,
      isSkipped: false,
      messages: result.conversation?.messages,
    };
  });
  if (report && !report.isSkipped) {
    policies.lastAutoRollback = report;
    policies.autoRollbackCount += 1;
  }
  return report;
}

/**
 * Verifies with the policy's verifier (or the session's) and acts on the verdict; see
 * `Session.check`. Throws `VERIFICATION_FAILED`, `VERIFICATION_UNKNOWN`, {@link HaltError}.
 */
export async function checkVerdict(
  context: SessionContext,
  policies: PolicyState,
): Promise<VerificationResult & { id: number }> {
  const policy = policies.rollback;
  const result = await runVerification(context, policy?.verifier);
  if (result.status === 'pass') return result;
  const to = policy?.to ?? 'latest';
  if (result.status === 'fail') {
    const rolled = policy?.on.has('test-failure')
      ? await autoRollbackTo(context, policies, 'test-failure', formatVerification(result))
      : undefined;
    throw new RewindError(
      'VERIFICATION_FAILED',
      `Tests failed. ${formatVerification(result)}${rewindNotice(rolled, result)}`,
      {
        data: {
          verificationSeq: result.id,
          rolledBackTo: rolled && !rolled.isSkipped ? rolled.to : undefined,
        },
      },
    );
  }
  // Real labels, never `latest`: where a rollback would go, and the point a verifier passed.
  const journal = await readJournal(context);
  const target =
    to === 'latest' ? defaultRollbackTarget(journal, 'escalation', policies.stepFloor)?.label : to;
  const knownGood =
    to === 'latest'
      ? journal.checkpoints().findLast((c) => journal.verdictOn(c.tree) === 'pass')?.label
      : to;
  const handler = policy?.escalation ?? stopEscalation;
  let resolution: Resolution;
  let handlerError: string | undefined;
  try {
    resolution = await handler({ result, checkpoint: target ?? to });
    if (resolution !== 'continue' && resolution !== 'rollback' && resolution !== 'stop') {
      throw new Error(`it answered ${JSON.stringify(resolution)}`);
    }
  } catch (error) {
    // A handler that fails cannot say "go on": stop, and say why.
    resolution = 'stop';
    handlerError = error instanceof Error ? error.message : String(error);
  }
  await withWorkspaceLock(context, 'journaling an escalation', (journal) =>
    journal.append('escalation-resolved', {
      verificationSeq: result.id,
      resolution,
      checkpoint: target ?? to,
      ...(handlerError !== undefined && { error: handlerError }),
    }),
  );
  if (resolution === 'stop') throw new HaltError(knownGood, result);
  const rolled =
    resolution === 'rollback'
      ? await autoRollbackTo(context, policies, 'escalation', result.notes)
      : undefined;
  throw new RewindError(
    'VERIFICATION_UNKNOWN',
    `The verifier gave no verdict: ${formatVerification(result)}${rewindNotice(rolled, result)}`,
    { data: { verificationSeq: result.id, resolution } },
  );
}
