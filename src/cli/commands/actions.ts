/** `exec`, `http`, `record`, `report`, and the line every action prints: its id and how to take it back. */
import { constants } from 'node:os';
import { Argument, type Command, Option } from 'commander';
import type { ActionResult, ExecResult, HttpResult } from '../../index.js';
import {
  execOperation,
  httpOperation,
  recordOperation,
  reportOperation,
  undoHintOf,
} from '../../operations/index.js';
import { type CliContext, type CliPresenter, EXIT_FAILED } from '../context.js';
import { commandFor, feed, headersOf, numberOf, repeatable } from '../options.js';

interface CompensationFlags {
  compensateCommand?: string;
  compensateRequest?: string;
}

interface ExecFlags {
  timeout?: string;
  draft?: boolean;
}

interface HttpFlags extends CompensationFlags {
  header?: string[];
  data?: string;
  timeout?: string;
  draft?: boolean;
}

interface RecordFlags extends CompensationFlags {
  class?: string;
  target?: string;
  detail?: string;
  draft?: boolean;
}

/** `action 12 (reversible): rewind undo 12`: the action's id, class, state, and how to take it back. */
export function renderActionLine(result: ActionResult): string {
  const hint = undoHintOf(result);
  const how =
    hint.way === 'approve-or-discard'
      ? `rewind approve ${hint.id} (or rewind discard ${hint.id})`
      : hint.way === 'undo'
        ? `rewind undo ${hint.id}`
        : hint.way === 'compensate'
          ? `rewind compensate ${hint.id}`
          : hint.reason === 'discarded'
            ? 'it will never run'
            : 'cannot be undone';
  const state = result.state === 'done' ? '' : `, ${result.state}`;
  return `action ${result.id} (${result.class}${state}): ${how}\n`;
}

/** How `timeout(1)` exits when it ends a command: scripts already know this code. */
export const EXIT_TIMED_OUT = 124;

/**
 * The exit code a shell would report for a command that ran: its own code; 128 plus the signal's
 * number when a signal ended it; {@link EXIT_TIMED_OUT} when its timeout did.
 */
export function commandExitCode(result: ExecResult): number {
  if (result.timedOut) return EXIT_TIMED_OUT;
  if (result.signal !== null) {
    return 128 + (constants.signals[result.signal as NodeJS.Signals] ?? 0);
  }
  return result.exitCode ?? EXIT_FAILED;
}

/**
 * How `rewind` exits after an action: with the command's own code when it ran one (`exec`, an
 * approved `exec` draft, a compensation command), else 1 when the action failed.
 */
export function actionExitCode(result: ActionResult): number | undefined {
  if ('exitCode' in result) return commandExitCode(result as ExecResult);
  return result.state === 'failed' ? EXIT_FAILED : undefined;
}

/** An action's presenter: `detail` (a command's output, a response), then its action line. */
export function actionPresenter<Result extends ActionResult>(
  detail: (result: Result) => string = () => '',
): CliPresenter<Result> {
  return {
    text: (result) => `${detail(result)}${renderActionLine(result)}`,
    exitCode: actionExitCode,
  };
}

/** The presenter of an action that prints nothing but its action line. */
export const ACTION_LINE = actionPresenter();

/** A command's output, then how it ended and what it changed in the workspace. */
export function renderExec(result: ExecResult): string {
  const lines: string[] = [];
  if (result.stdout !== '') lines.push(result.stdout.replace(/\n?$/, ''));
  if (result.stderr !== '') lines.push(result.stderr.replace(/\n?$/, ''));
  const ended = result.timedOut
    ? `timed out after ${Math.round(result.durationMs)} ms`
    : result.signal !== null
      ? `ended by ${result.signal}`
      : `exit ${result.exitCode}`;
  lines.push(
    `${ended}: ${result.created.length} created, ${result.modified.length} modified, ${result.deleted.length} deleted in the workspace`,
  );
  return `${lines.join('\n')}\n`;
}

/** A response's status and body (cut at 2,000 characters); nothing for a draft. */
export function renderHttp(result: HttpResult): string {
  if (!result.response) return '';
  const response = result.response;
  const body = response.body.length > 2000 ? `${response.body.slice(0, 2000)}\n...` : response.body;
  return `HTTP ${response.status}\n${body}${body.endsWith('\n') || body === '' ? '' : '\n'}`;
}

function feedCompensation(command: Command): void {
  feed(
    command,
    'compensateCommand',
    new Option('--compensate-command <command>', 'declare a command (run by sh) that offsets it'),
  );
  feed(
    command,
    'compensateRequest',
    new Option(
      '--compensate-request <request>',
      'declare an HTTP request that offsets it: "METHOD URL"',
    ),
  );
}

/** Registers `exec`, `http`, `record` and `report`. */
export function registerActionCommands(program: Command, cli: CliContext): void {
  const exec = commandFor(program, execOperation);
  feed(
    exec,
    'command',
    new Argument(
      '<command...>',
      'one word: a shell command, run by sh -c; several (after --): the program and its arguments',
    ),
  );
  feed(
    exec,
    'timeout',
    new Option(
      '--timeout <seconds>',
      'end the command and everything it started after this (default: 120)',
    ),
  );
  feed(
    exec,
    'draft',
    new Option('--draft', 'journal it without running it; `rewind approve ID` runs it'),
  );
  exec.addHelpText(
    'after',
    `
Examples:
  rewind exec "npm test && npm run lint"     one argument: a shell command, run by sh -c
  rewind exec -- touch "a b"                 after --: a program and its arguments, no shell

Exit status: the command's own exit code (\`rewind exec "exit 7"\` exits 7); 128 + N when signal
N ended it (130 for SIGINT, 143 for SIGTERM); ${EXIT_TIMED_OUT} when --timeout ended it, as timeout(1) does.
Before the command runs, 1 when Rewind refuses it and 2 for a usage error, as every command.
`,
  );
  exec.action((words: string[], flags: ExecFlags, command: Command) =>
    cli.perform(
      command,
      execOperation,
      {
        command: words.length === 1 ? words[0] : words,
        timeout: numberOf(flags.timeout),
        draft: flags.draft,
      },
      // A draft did not run: it has no output to show.
      actionPresenter((result) => ('exitCode' in result ? renderExec(result as ExecResult) : '')),
    ),
  );

  const http = commandFor(program, httpOperation);
  feed(http, 'method', new Argument('<method>', 'GET, POST, ...'));
  feed(http, 'url', new Argument('<url>', 'an absolute http:// or https:// URL'));
  feed(http, 'headers', repeatable(new Option('--header <k:v>', 'a request header (repeatable)')));
  feed(http, 'body', new Option('--data <data>', 'the request body'));
  feed(http, 'timeout', new Option('--timeout <seconds>', 'give up after this (default: 30)'));
  feedCompensation(http);
  feed(
    http,
    'draft',
    new Option('--draft', 'journal it without sending it; `rewind approve ID` sends it'),
  );
  http.action((method: string, url: string, flags: HttpFlags, command: Command) =>
    cli.perform(
      command,
      httpOperation,
      {
        method,
        url,
        headers: headersOf(flags.header ?? []),
        body: flags.data,
        timeout: numberOf(flags.timeout),
        compensateCommand: flags.compensateCommand,
        compensateRequest: flags.compensateRequest,
        draft: flags.draft,
      },
      actionPresenter(renderHttp),
    ),
  );

  const record = commandFor(program, recordOperation);
  feed(record, 'name', new Argument('<name>', 'what it is, such as deploy or send-email'));
  feed(
    record,
    'class',
    new Option(
      '--class <class>',
      'compensable or irreversible (default: compensable when a compensation is declared)',
    ),
  );
  feedCompensation(record);
  feed(record, 'target', new Option('--target <target>', 'what it acts on, for people'));
  feed(record, 'detail', new Option('--detail <text>', 'more about it'));
  feed(
    record,
    'draft',
    new Option('--draft', 'journal it for approval first (`rewind approve ID`)'),
  );
  record.action((name: string, flags: RecordFlags, command: Command) =>
    cli.perform(
      command,
      recordOperation,
      {
        name,
        class: flags.class,
        compensateCommand: flags.compensateCommand,
        compensateRequest: flags.compensateRequest,
        target: flags.target,
        detail: flags.detail,
        draft: flags.draft,
      },
      ACTION_LINE,
    ),
  );

  const report = commandFor(program, reportOperation);
  feed(report, 'id', new Argument('<id>', 'the action id that `rewind record` printed'));
  feed(report, 'ok', new Option('--failed', 'it failed (default: it succeeded)'));
  feed(report, 'detail', new Option('--detail <text>', 'what happened'));
  report.action((id: string, flags: { failed?: boolean; detail?: string }, command: Command) =>
    cli.perform(
      command,
      reportOperation,
      { id: numberOf(id), ok: flags.failed !== true, detail: flags.detail },
      ACTION_LINE,
    ),
  );
}
