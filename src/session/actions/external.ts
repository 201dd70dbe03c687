import { RewindError } from '../../errors.js';
import type { SessionContext } from '../context.js';
import { type ActionClass, isRecorded } from '../journal/action-records.js';
import { withWorkspaceLock } from '../journal/journal.js';
import {
  type ActionResult,
  actionResult,
  type Compensation,
  checkCompensation,
  journaledSpec,
  type RecordSpec,
  targetOf,
} from './journaled-spec.js';
import { keepCompensation } from './verbatim.js';

/** Options of `Session.record`. */
export interface RecordOptions {
  /** `irreversible` (default without a compensation) or `compensable` (default with one). */
  class?: 'compensable' | 'irreversible';
  compensation?: Compensation;
  /** What it acts on, for people (default: the name). */
  target?: string;
  detail?: string;
  draft?: boolean;
}

/**
 * The external action as it will be journaled, and its class. Throws `INVALID_ARGUMENT` for a
 * bad name, a `reversible` class, or a class that does not fit the compensation.
 */
export function recordSpecOf(
  name: string,
  options: RecordOptions,
): { spec: RecordSpec; actionClass: ActionClass } {
  if (!/^[a-z0-9][a-z0-9._-]{0,63}$/i.test(name)) {
    throw new RewindError(
      'INVALID_ARGUMENT',
      `"${name}" is not an action name: use letters, digits, ".", "_" and "-", such as "deploy" (it is journaled as x.${name}).`,
      { data: { name } },
    );
  }
  const actionClass = options.class ?? (options.compensation ? 'compensable' : 'irreversible');
  if (
    (actionClass as string) === 'reversible' ||
    (actionClass === 'compensable') !== (options.compensation !== undefined)
  ) {
    throw new RewindError(
      'INVALID_ARGUMENT',
      (actionClass as string) === 'reversible'
        ? 'An external action cannot be reversible: Rewind holds nothing to put back. Record it as compensable (with its compensation) or irreversible.'
        : actionClass === 'compensable'
          ? 'A compensable action needs its compensation declared up front: a command or an HTTP request.'
          : 'An irreversible action has no compensation; record it as compensable to declare one.',
      { data: { class: actionClass } },
    );
  }
  if (options.compensation) checkCompensation(options.compensation);
  return {
    spec: {
      action: `x.${name}`,
      target: options.target ?? name,
      ...(options.detail !== undefined && { detail: options.detail }),
      ...(options.compensation && { compensation: options.compensation }),
    },
    actionClass,
  };
}

/** Journals an external action before it happens, open until reported; see `Session.record`. */
export function recordExternal(
  context: SessionContext,
  spec: RecordSpec,
  actionClass: ActionClass,
): Promise<ActionResult> {
  return withWorkspaceLock(context, `recording ${spec.action}`, async (journal) => {
    const started = await journal.append('action-started', {
      ...journaledSpec(context.redactor, spec),
      ...(await keepCompensation(context, spec)),
      class: actionClass,
    });
    return actionResult({
      id: started.seq,
      kind: spec.action,
      class: actionClass,
      state: 'interrupted',
      target: targetOf(context.redactor, spec),
    });
  });
}

/** Closes a recorded external action with its outcome; see `Session.report`. */
export function reportOutcome(
  context: SessionContext,
  id: number,
  outcome: { ok: boolean; detail?: string },
): Promise<ActionResult> {
  return withWorkspaceLock(context, `reporting #${id}`, async (journal) => {
    const action = journal.findAction(id);
    if (
      !isRecorded(action) ||
      action.closed ||
      action.state === 'draft' ||
      action.state === 'discarded'
    ) {
      throw new RewindError(
        'ACTION_NOT_ALLOWED',
        `Action #${id} (${action.kind}, ${action.state}) is not a recorded action waiting for its outcome.` +
          (action.state === 'draft' ? ` Approve it first: \`rewind approve ${id}\`.` : ''),
        { data: { id, state: action.state } },
      );
    }
    const redactor = context.redactor;
    await journal.append(outcome.ok ? 'action-completed' : 'action-failed', {
      startedSeq: id,
      reported: true,
      ...(outcome.detail !== undefined && { detail: redactor.text(outcome.detail).text }),
      ...(!outcome.ok && {
        error: {
          code: 'REPORTED_FAILED',
          message: redactor.text(outcome.detail ?? 'reported as failed').text,
        },
      }),
    });
    return actionResult({
      id,
      kind: action.kind,
      class: action.class,
      state: outcome.ok ? 'done' : 'failed',
      target: action.target,
    });
  });
}
