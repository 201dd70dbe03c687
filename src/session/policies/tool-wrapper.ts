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
import type { AutoRollbackReport, PolicyState } from './policy-state.js';

/** Options of `Session.tool`. */
export interface ToolOptions<A extends unknown[] = unknown[]> {
  name?: string;
  rollbackOnError?: boolean;
  /**
   * Names the model step a call belongs to (any object: the calls with the same one are siblings
   * the model asked for at once). Once a call of a step was rolled back, its later siblings are
   * refused (answered `ERROR:` without running), and a rollback to the policy's `latest` goes no
   * later than the checkpoint taken before the step's first call, so the files match the
   * conversation restored with them.
   */
  step?: (...args: A) => object | undefined;
  /**
   * Names the run a call belongs to (any object: the calls with the same one are those of one
   * agent run, over all its model steps). Once a call of a run was rolled back, every later call
   * of that run is refused (answered `ERROR:` without running): the run's own history, which the
   * framework goes on with, no longer matches the files.
   */
  run?: (...args: A) => object | undefined;
}

/** Why a call was refused: an earlier call of its step (or of its run) was rolled back. */
function refusal(rolled: AutoRollbackReport, of: 'step' | 'run'): string {
  const what =
    rolled.messages === undefined
      ? "the workspace's files were"
      : 'the workspace and conversation were';
  const call = of === 'step' ? 'another call made in the same step' : 'an earlier call of this run';
  return `ERROR: Rewind did not run this call: ${call} failed and ${what} rolled back to checkpoint "${rolled.to}". Decide again from there.`;
}

/**
 * Wraps a tool function: calls run one at a time, an automatic checkpoint comes first, and a
 * failure becomes an `ERROR:` string after an automatic rollback; see `Session.tool`.
 */
export function wrapTool<A extends unknown[], R>(
  context: SessionContext,
  policies: PolicyState,
  work: (...args: A) => Promise<R> | R,
  options: ToolOptions<A>,
): (...args: A) => Promise<R | string> {
  const name = options.name ?? (work.name || 'tool');
  return (...args: A) => {
    const call = policies.toolQueue.then(async () => {
      const step = stepOf(policies, options.step?.(...args));
      if (step?.halt) throw step.halt;
      if (step?.rolledBack !== undefined) return refusal(step.rolledBack, 'step');
      const run = options.run?.(...args);
      const runRolledBack = run === undefined ? undefined : policies.rolledBackRuns.get(run);
      if (runRolledBack !== undefined) return refusal(runRolledBack, 'run');
      const label = await checkpointBeforeTool(context, policies, name);
      if (step && step.floor === undefined) step.floor = label;
      const rollbacksBefore = policies.autoRollbackCount;
      policies.toolDepth += 1;
      policies.stepFloor = step?.floor;
      try {
        return await work(...args);
      } catch (error) {
        if (error instanceof HaltError) {
          // A halt stops the step: its later calls are refused with it.
          if (step) step.halt = error;
          throw error;
        }
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
        policies.stepFloor = undefined;
        const rolled = policies.lastAutoRollback;
        if (policies.autoRollbackCount !== rollbacksBefore && rolled !== undefined) {
          if (step) step.rolledBack = rolled;
          if (run !== undefined) policies.rolledBackRuns.set(run, rolled);
        }
      }
    });
    policies.toolQueue = call.catch(() => {});
    return call;
  };
}

/** The step a call belongs to, made on its first call. */
function stepOf(policies: PolicyState, key: object | undefined) {
  if (key === undefined) return undefined;
  let step = policies.steps.get(key);
  if (!step) {
    step = { floor: undefined, rolledBack: undefined, halt: undefined };
    policies.steps.set(key, step);
  }
  return step;
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
