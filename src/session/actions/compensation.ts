import { RewindError } from '../../errors.js';
import type { SessionContext } from '../context.js';
import type { ActionRecord } from '../journal/action-records.js';
import { readJournal, withWorkspaceLock } from '../journal/journal.js';
import { startCommandAction } from './exec.js';
import { checkRequestTarget, runRequestAction } from './http.js';
import {
  type ActionResult,
  type Compensation,
  type ExecSpec,
  type HttpSpec,
  journaledSpec,
} from './journaled-spec.js';
import { forgetVerbatim, readVerbatim } from './verbatim.js';

/**
 * The compensation an action declared, verbatim as it will run. Throws `ACTION_NOT_ALLOWED` for
 * an action with none to run (not compensable, compensated already, never run) or whose kept
 * copy is gone or changed.
 */
async function compensationOf(
  context: SessionContext,
  action: ActionRecord,
): Promise<Compensation> {
  const declared = action.started.body.compensation as Compensation | undefined;
  const kept = action.started.body.compensationDigest;
  if (
    action.class !== 'compensable' ||
    !declared ||
    action.state === 'compensated' ||
    action.state === 'draft' ||
    action.state === 'discarded'
  ) {
    throw new RewindError(
      'ACTION_NOT_ALLOWED',
      `Action #${action.id} (${action.kind}, ${action.class}, ${action.state}) has no compensation to run` +
        (action.state === 'compensated' ? ': it is compensated already.' : '.'),
      { data: { id: action.id, state: action.state, class: action.class } },
    );
  }
  if (typeof kept !== 'string') return declared;
  const verbatim = await readVerbatim(context, kept);
  if (verbatim.status === 'missing') {
    throw new RewindError(
      'ACTION_NOT_ALLOWED',
      `The compensation of #${action.id} is missing from .rewind/drafts, so it cannot run as declared. Its journaled form: ${JSON.stringify(declared)}.`,
      { data: { id: action.id }, cause: verbatim.error },
    );
  }
  if (verbatim.status === 'changed') {
    throw new RewindError(
      'ACTION_NOT_ALLOWED',
      `The compensation of #${action.id} changed since it was declared, so it does not run.`,
      { data: { id: action.id } },
    );
  }
  return verbatim.value as Compensation;
}

/** The compensation of the action `id`; see `Session.compensation`. */
export async function readCompensation(context: SessionContext, id: number): Promise<Compensation> {
  return compensationOf(context, (await readJournal(context)).findAction(id));
}

/** Runs the compensation of the action `id` as an action of its own; see `Session.compensate`. */
export function compensateAction(context: SessionContext, id: number): Promise<ActionResult> {
  return withWorkspaceLock(context, `compensating #${id}`, async (journal) => {
    // Checked under the lock: two processes cannot both run the same compensation.
    const action = journal.findAction(id);
    const compensation = await compensationOf(context, action);
    let result: ActionResult;
    if ('command' in compensation) {
      const spec: ExecSpec = {
        action: 'exec',
        command: compensation.command,
        timeoutMs: context.settings.execTimeoutMs,
      };
      result = await startCommandAction(context, journal, spec, id);
    } else {
      const spec: HttpSpec = {
        action: 'http',
        request: {
          method: compensation.http.method,
          url: compensation.http.url,
          ...(compensation.http.headers && { headers: compensation.http.headers }),
        },
        timeoutMs: context.settings.httpTimeoutMs,
      };
      await checkRequestTarget(context, spec);
      const started = await journal.append('action-started', {
        ...journaledSpec(context.redactor, spec),
        class: 'irreversible',
        compensates: id,
      });
      result = await runRequestAction(context, journal, started.seq, spec, 'irreversible');
    }
    // Once a compensation ran, its verbatim copy (which may hold secrets) is no longer kept.
    const kept = action.started.body.compensationDigest;
    if (result.state === 'done' && typeof kept === 'string') await forgetVerbatim(context, kept);
    return result;
  });
}
