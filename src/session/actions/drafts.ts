import { RewindError } from '../../errors.js';
import type { SnapshotResult } from '../../workspace/index.js';
import { type SessionContext, snapshotWorkspace } from '../context.js';
import type { ActionClass, ActionRecord } from '../journal/action-records.js';
import { readJournal, withWorkspaceLock } from '../journal/journal.js';
import { runCommandAction } from './exec.js';
import { checkRequestTarget, runRequestAction } from './http.js';
import {
  type ActionResult,
  type ActionSpec,
  actionResult,
  journaledSpec,
  targetOf,
} from './journaled-spec.js';
import { forgetVerbatim, keepCompensation, keepVerbatim, readVerbatim } from './verbatim.js';

/** A draft as it will run, and the digest that binds its approval. */
export interface DraftInfo {
  id: number;
  kind: string;
  class: ActionClass;
  digest: string;
  spec: ActionSpec;
}

/** Journals a draft: its exact content is kept until it runs or is discarded. */
export function draftAction(
  context: SessionContext,
  spec: ActionSpec,
  actionClass: ActionClass,
): Promise<ActionResult> {
  return withWorkspaceLock(
    context,
    `drafting ${targetOf(context.redactor, spec)}`,
    async (journal) => {
      const digest = await keepVerbatim(context, spec);
      const started = await journal.append('action-started', {
        ...journaledSpec(context.redactor, spec),
        ...(await keepCompensation(context, spec)),
        class: actionClass,
        draft: true,
        draftDigest: digest,
      });
      return actionResult({
        id: started.seq,
        kind: spec.action,
        class: actionClass,
        state: 'draft',
        target: targetOf(context.redactor, spec),
      });
    },
  );
}

/**
 * A draft exactly as it will run. Throws `ACTION_NOT_ALLOWED` when the action is no draft
 * waiting for approval, or its content is gone or no longer matches its digest.
 */
async function readDraftOf(context: SessionContext, action: ActionRecord): Promise<DraftInfo> {
  if (action.state !== 'draft') {
    throw new RewindError(
      'ACTION_NOT_ALLOWED',
      `Action #${action.id} (${action.kind}) is ${action.state}, not a draft waiting for approval.`,
      { data: { id: action.id, state: action.state } },
    );
  }
  const digest = String(action.started.body.draftDigest);
  const kept = await readVerbatim(context, digest);
  if (kept.status === 'missing') {
    throw new RewindError(
      'ACTION_NOT_ALLOWED',
      `The content of draft #${action.id} is missing from .rewind/drafts, so there is nothing to approve. Discard it and draft it again.`,
      { data: { id: action.id }, cause: kept.error },
    );
  }
  if (kept.status === 'changed') {
    throw new RewindError(
      'ACTION_NOT_ALLOWED',
      `The content of draft #${action.id} changed since it was journaled (its digest is no longer ${digest}), so nothing runs. Discard it and draft it again.`,
      { data: { id: action.id, digest } },
    );
  }
  return {
    id: action.id,
    kind: action.kind,
    class: action.class,
    digest,
    spec: kept.value as ActionSpec,
  };
}

/** The draft `id` as it will run; see `Session.draft`. */
export async function readDraft(context: SessionContext, id: number): Promise<DraftInfo> {
  return readDraftOf(context, (await readJournal(context)).findAction(id));
}

/** Runs a draft, bound to `digest` when given; see `Session.approve`. */
export function approveDraft(
  context: SessionContext,
  id: number,
  approvedDigest: string | undefined,
): Promise<ActionResult> {
  return withWorkspaceLock(context, `approving #${id}`, async (journal) => {
    const action = journal.findAction(id);
    const draft = await readDraftOf(context, action);
    if (approvedDigest !== undefined && approvedDigest !== draft.digest) {
      throw new RewindError(
        'ACTION_NOT_ALLOWED',
        `Draft #${id} is not the content that was approved (approved ${approvedDigest}, the draft is ${draft.digest}), so nothing runs.`,
        { data: { id, digest: draft.digest, approved: approvedDigest } },
      );
    }
    const spec = draft.spec;
    if (spec.action === 'http') await checkRequestTarget(context, spec);
    const before = spec.action === 'exec' ? await snapshotWorkspace(context) : undefined;
    await journal.append(
      'action-approved',
      { startedSeq: id, digest: draft.digest, ...(before && { beforeTree: before.tree }) },
      before ? [{ type: 'tree', digest: before.tree }] : [],
    );
    try {
      if (spec.action === 'exec') {
        return await runCommandAction(context, journal, id, spec, before as SnapshotResult);
      }
      if (spec.action === 'http') {
        return await runRequestAction(context, journal, id, spec, action.class);
      }
      return actionResult({
        id,
        kind: action.kind,
        class: action.class,
        state: 'approved',
        target: action.target,
      });
    } finally {
      await forgetVerbatim(context, draft.digest);
    }
  });
}

/** Discards a draft for good; see `Session.discard`. */
export function discardDraft(context: SessionContext, id: number): Promise<ActionResult> {
  return withWorkspaceLock(context, `discarding #${id}`, async (journal) => {
    const action = journal.findAction(id);
    if (action.state !== 'draft') {
      throw new RewindError(
        'ACTION_NOT_ALLOWED',
        `Action #${id} (${action.kind}) is ${action.state}, not a draft, so it cannot be discarded.`,
        { data: { id, state: action.state } },
      );
    }
    await journal.append('action-discarded', { startedSeq: id });
    await forgetVerbatim(context, String(action.started.body.draftDigest));
    return actionResult({
      id,
      kind: action.kind,
      class: action.class,
      state: 'discarded',
      target: action.target,
    });
  });
}
