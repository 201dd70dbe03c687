/** `approve`, `discard`, `compensate`: what a person decides about an agent's actions. */
import { Argument, type Command, Option } from 'commander';
import type { ActionResult, Compensation, DraftInfo } from '../../index.js';
import { approveOperation, compensateOperation, discardOperation } from '../../operations/index.js';
import { type CliContext, type CliPresenter, EXIT_FAILED } from '../context.js';
import { addCliOnly, commandFor, feed, numberOf } from '../options.js';
import {
  ACTION_PRESENTER,
  actionExitCode,
  commandOutput,
  renderActionLine,
  renderOutcome,
  sayingFailedAction,
} from './actions.js';

interface ApproveFlags {
  digest?: string;
  dryRun?: boolean;
  yes?: boolean;
}

interface CompensateFlags {
  dryRun?: boolean;
  yes?: boolean;
}

const YES_REASON =
  'it answers the confirmation prompt: how a person approves on the command line, not an input';

function renderDraft(draft: DraftInfo): string {
  return (
    `Draft #${draft.id} (${draft.kind}, ${draft.class}) will run exactly this:\n` +
    `${JSON.stringify(draft.spec, null, 2)}\n` +
    `content digest ${draft.digest}\n`
  );
}

function renderCompensation(id: number, compensation: Compensation): string {
  return `Compensation of #${id}:\n  ${JSON.stringify(compensation)}\n`;
}

/**
 * What running a compensation came to: done, or, when it did not succeed, that the action is not
 * compensated and what to do (the compensation itself is an action of its own, kept in the log).
 */
function renderCompensated(id: number, result: ActionResult): string {
  if (result.state === 'done') return `Compensated #${id} with ${renderActionLine(result)}`;
  const ended = result.state === 'failed' ? 'failed' : `did not finish (${result.state})`;
  return (
    `The compensation of #${id} ${ended}; #${id} is not compensated. It ran as ${renderActionLine(result)}` +
    `See its output with \`rewind show ${result.id}\`, deal with the cause, then run \`rewind compensate ${id}\` again.\n`
  );
}

const APPROVAL: CliPresenter<DraftInfo | ActionResult> = {
  passthrough: (output, globals) =>
    'digest' in output ? { stdout: '', stderr: '' } : commandOutput(output, globals),
  text: (output, globals) =>
    'digest' in output ? renderDraft(output) : ACTION_PRESENTER.text(output, globals),
  exitCode: (output) => ('digest' in output ? undefined : actionExitCode(output)),
};

/** Registers `approve`, `discard` and `compensate`. */
export function registerApprovalCommands(program: Command, cli: CliContext): void {
  const approve = commandFor(program, approveOperation);
  feed(approve, 'id', new Argument('<id>', 'the draft id'));
  feed(
    approve,
    'digest',
    new Option('--digest <digest>', 'run it only if its content still has this digest'),
  );
  feed(
    approve,
    'dryRun',
    new Option('--dry-run', 'show exactly what it will run, and run nothing'),
  );
  addCliOnly(approve, new Option('-y, --yes', 'run it without asking (for scripts)'), YES_REASON);
  approve.action((id: string, flags: ApproveFlags, command: Command) =>
    cli.withTarget(command, async (target) => {
      const draft = await cli.run(command, target, approveOperation, {
        id: numberOf(id),
        dryRun: true,
      });
      if (flags.dryRun === true || !('digest' in draft)) {
        cli.emit(command, draft, APPROVAL);
        return;
      }
      const globals = cli.globalsOf(command);
      // What a person is asked to approve is shown, --quiet or not; --yes asks nobody.
      if (!globals.json && (!globals.quiet || flags.yes !== true))
        cli.io.stdout(renderDraft(draft));
      if (!(await cli.confirm(command, flags.yes === true, `Run draft #${draft.id}?`))) {
        cli.io.stdout('Not approved; nothing ran.\n');
        cli.setExitCode(EXIT_FAILED);
        return;
      }
      // A request that fails is journaled as failed all the same: its line is said, as by `http`.
      const result = await sayingFailedAction(cli, command, () =>
        cli.run(command, target, approveOperation, {
          id: draft.id,
          digest: flags.digest ?? draft.digest,
        }),
      );
      cli.emit(command, result, APPROVAL);
    }),
  );

  const discard = commandFor(program, discardOperation);
  feed(discard, 'id', new Argument('<id>', 'the draft id'));
  discard.action((id: string, _flags: object, command: Command) =>
    cli.perform(command, discardOperation, { id: numberOf(id) }, ACTION_PRESENTER),
  );

  const compensate = commandFor(program, compensateOperation);
  feed(compensate, 'id', new Argument('<id>', 'the action id'));
  feed(compensate, 'dryRun', new Option('--dry-run', 'show the compensation, and run nothing'));
  addCliOnly(
    compensate,
    new Option('-y, --yes', 'run it without asking (for scripts)'),
    YES_REASON,
  );
  compensate.action((id: string, flags: CompensateFlags, command: Command) =>
    cli.withTarget(command, async (target) => {
      const declared = await cli.run(command, target, compensateOperation, {
        id: numberOf(id),
        dryRun: true,
      });
      const number = Number(id);
      const presenter: CliPresenter<Compensation | ActionResult> = {
        passthrough: (output, globals) =>
          'id' in output ? commandOutput(output, globals) : { stdout: '', stderr: '' },
        text: (output, globals) =>
          !('id' in output)
            ? renderCompensation(number, output)
            : globals.quiet
              ? renderOutcome(output, globals)
              : `${renderOutcome(output, globals)}${renderCompensated(number, output)}`,
        // The action it names is `id` when showing; once run, `id` is the new action.
        json: (output) =>
          'id' in output
            ? { ...output, compensates: number }
            : { id: number, compensation: output },
        exitCode: (output) => ('id' in output ? actionExitCode(output) : undefined),
      };
      if (flags.dryRun === true || 'id' in declared) {
        cli.emit(command, declared, presenter);
        return;
      }
      const globals = cli.globalsOf(command);
      if (!globals.json && (!globals.quiet || flags.yes !== true)) {
        cli.io.stdout(renderCompensation(number, declared));
      }
      if (!(await cli.confirm(command, flags.yes === true, 'Run it?'))) {
        cli.io.stdout('Not confirmed; nothing ran.\n');
        cli.setExitCode(EXIT_FAILED);
        return;
      }
      // A compensating request whose exchange fails is an action too: said, then the error.
      const result = await sayingFailedAction(
        cli,
        command,
        () => cli.run(command, target, compensateOperation, { id: number }),
        (failed) => renderCompensated(number, failed),
      );
      cli.emit(command, result, presenter);
    }),
  );
}
