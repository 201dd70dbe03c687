import { RewindError } from '../../errors.js';
import type { Command } from '../../sandbox/index.js';
import {
  commandFailureMessage,
  type ExecOptions,
  type ExecResult,
  execCommand,
  execSpecOf,
} from '../actions/exec.js';
import type { SessionContext } from '../context.js';
import { checkpointBeforeTool } from './auto-checkpoint.js';
import { autoRollbackTo, rewindNotice } from './auto-rollback.js';
import { HaltError } from './escalation.js';
import type { PolicyState } from './policy-state.js';

/** Options of `Session.tool`. */
export interface ToolOptions {
  name?: string;
  rollbackOnError?: boolean;
}

/**
 * Wraps a tool function: calls run one at a time, an automatic checkpoint comes first, and a
 * failure becomes an `ERROR:` string after an automatic rollback; see `Session.tool`.
 */
export function wrapTool<A extends unknown[], R>(
  context: SessionContext,
  policies: PolicyState,
  work: (...args: A) => Promise<R> | R,
  options: ToolOptions,
): (...args: A) => Promise<R | string> {
  const name = options.name ?? (work.name || 'tool');
  return (...args: A) => {
    const call = policies.toolQueue.then(async () => {
      await checkpointBeforeTool(context, policies, name);
      const rollbacksBefore = policies.autoRollbackCount;
      policies.toolDepth += 1;
      try {
        return await work(...args);
      } catch (error) {
        if (error instanceof HaltError) throw error;
        const message = error instanceof Error ? error.message : String(error);
        // A rollback inside the call (a failed check) already chose where to go, and its message
        // says so: rolling back again would only move away from that choice.
        const rolled =
          options.rollbackOnError !== false &&
          policies.rollback?.on.has('exception') &&
          policies.autoRollbackCount === rollbacksBefore
            ? await autoRollbackTo(context, policies, 'exception', message)
            : undefined;
        return `ERROR: ${message}${rewindNotice(rolled, undefined)}`;
      } finally {
        policies.toolDepth -= 1;
      }
    });
    policies.toolQueue = call.catch(() => {});
    return call;
  };
}

/**
 * Runs a command whose failure throws `COMMAND_FAILED`, after an automatic rollback under the
 * `exception` policy (inside a wrapped tool, the wrapper decides instead); see `Session.run`.
 */
export async function runCommand(
  context: SessionContext,
  policies: PolicyState,
  command: Command,
  options: Omit<ExecOptions, 'draft'>,
): Promise<ExecResult> {
  const result = await execCommand(context, execSpecOf(context, command, options));
  if (result.state !== 'failed') return result;
  const message = commandFailureMessage(result);
  const rolled =
    policies.toolDepth === 0 && policies.rollback?.on.has('exception')
      ? await autoRollbackTo(context, policies, 'exception', message)
      : undefined;
  throw new RewindError('COMMAND_FAILED', `${message}${rewindNotice(rolled, undefined)}`, {
    data: { id: result.id, exitCode: result.exitCode, timedOut: result.timedOut },
  });
}
