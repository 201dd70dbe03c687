import { RewindError } from '../../errors.js';
import type { SessionContext } from '../context.js';
import { createCheckpoint, listCheckpoints, pruneCheckpoint } from '../history/checkpoints.js';
import { readJournal } from '../journal/journal.js';
import { rollbackTargetsOf } from './auto-rollback.js';
import type { PolicyState } from './policy-state.js';

/** Options of `Session.autoCheckpoint`. */
export interface AutoCheckpointOptions {
  trigger?: 'before-tool-call';
  keepLast?: number;
}

/** Turns automatic checkpoints on. Throws `INVALID_ARGUMENT` for a `keepLast` below 1. */
export function setAutoCheckpoint(policies: PolicyState, options: AutoCheckpointOptions): void {
  if (
    options.keepLast !== undefined &&
    (!Number.isInteger(options.keepLast) || options.keepLast < 1)
  ) {
    throw new RewindError(
      'INVALID_ARGUMENT',
      `keepLast must be a whole number of 1 or more, not ${options.keepLast}.`,
      { data: { keepLast: options.keepLast } },
    );
  }
  policies.checkpoint = {
    trigger: options.trigger ?? 'before-tool-call',
    keepLast: options.keepLast,
  };
}

/**
 * The automatic checkpoint before a tool call (labelled `auto-NNNN-<tool>-<ms since epoch>` by
 * the session's clock), and the pruning of those beyond `keepLast`. Returns its label, or
 * undefined when the policy is off.
 */
export async function checkpointBeforeTool(
  context: SessionContext,
  policies: PolicyState,
  name: string,
): Promise<string | undefined> {
  const policy = policies.checkpoint;
  if (!policy) return undefined;
  policies.autoCheckpointCount += 1;
  const tool = name.replace(/[^A-Za-z0-9_-]/g, '_').slice(0, 40) || 'tool';
  const label = `auto-${String(policies.autoCheckpointCount).padStart(4, '0')}-${tool}-${context.settings.now().getTime()}`;
  await createCheckpoint(context, label, { isAutomatic: true, messages: undefined });
  if (policy.keepLast !== undefined) {
    // The checkpoint an automatic rollback would go back to stays, whatever its age.
    const kept = new Set(rollbackTargetsOf(policies, await readJournal(context)));
    const automatic = (await listCheckpoints(context)).filter(
      (checkpoint) => checkpoint.isAutomatic,
    );
    for (const old of automatic.slice(0, Math.max(0, automatic.length - policy.keepLast))) {
      if (!kept.has(old.label)) await pruneCheckpoint(context, old);
    }
  }
  return label;
}
