/**
 * `exec`, `http`, `show`, `record`, `report`, and the line every action prints: its id and how to
 * take it back.
 */
import { constants } from 'node:os';
import { Argument, type Command, Option } from 'commander';
import type {
  ActionDetail,
  ActionResult,
  ExecResult,
  HttpResult,
  StoredText,
} from '../../index.js';
import { isRewindError } from '../../index.js';
import {
  execOperation,
  httpOperation,
  recordOperation,
  reportOperation,
  showOperation,
  undoHintOf,
} from '../../operations/index.js';
import {
  type CliContext,
  type CliPresenter,
  EXIT_FAILED,
  type GlobalFlags,
  type Passthrough,
} from '../context.js';
import { formatLocalTime, listLines, plural } from '../format.js';
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

/** The action a failed request was journaled as, from the error's data, if it was. */
function failedActionOf(error: unknown): ActionResult | undefined {
  if (!isRewindError(error)) return undefined;
  const { actionId, actionClass } = error.data;
  if (typeof actionId !== 'number' || typeof actionClass !== 'string') return undefined;
  return { id: actionId, class: actionClass, state: 'failed' } as ActionResult;
}

/**
 * Runs `work`, which may fail after it journaled an action (a request whose exchange failed, sent
 * by `http`, `approve` or `compensate`): that action is said first (`say`, the action line by
 * default), as every action command says its action, then the error goes on to be reported.
 */
export async function sayingFailedAction<T>(
  cli: CliContext,
  command: Command,
  work: () => Promise<T>,
  say: (failed: ActionResult) => string = renderActionLine,
): Promise<T> {
  try {
    return await work();
  } catch (error) {
    const globals = cli.globalsOf(command);
    const failed = failedActionOf(error);
    if (failed && !globals.json && !globals.quiet) cli.io.stdout(say(failed));
    throw error;
  }
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

/** How an action ended, for people: a command's summary, a response; nothing for a draft or a record. */
export function renderOutcome(result: ActionResult, globals: GlobalFlags): string {
  if ('exitCode' in result) return renderExec(result as ExecResult, globals);
  if ('response' in result) return renderHttp(result as HttpResult, globals);
  return '';
}

/**
 * What a command printed, passed through as it printed it: its stdout on stdout, its stderr on
 * stderr. Without `--quiet` each ends with a newline, so the summary after it starts a line.
 * With `--quiet`, a response's body, whole, byte for byte.
 */
export function commandOutput(result: ActionResult, globals: GlobalFlags): Passthrough {
  // With --quiet, a response's body, whole and byte for byte (an image stays an image).
  const response = (result as HttpResult).response;
  if (response && globals.quiet) {
    const { body, bodyBase64 } = response;
    return {
      stdout: bodyBase64 === undefined ? body : Buffer.from(bodyBase64, 'base64'),
      stderr: '',
    };
  }
  if (!('exitCode' in result)) return { stdout: '', stderr: '' };
  const ran = result as ExecResult;
  return {
    stdout: endedLine(ran.stdout, ran.stdoutBase64, globals),
    stderr: endedLine(ran.stderr, ran.stderrBase64, globals),
  };
}

/**
 * The presenter of every action: what a command printed, then how it ended and the action line,
 * which `--quiet` leaves out (a response body stays: it is the output asked for).
 */
export const ACTION_PRESENTER: CliPresenter<ActionResult> = {
  passthrough: commandOutput,
  text: (result, globals) =>
    `${renderOutcome(result, globals)}${globals.quiet ? '' : renderActionLine(result)}`,
  // What did not go as asked, on stderr: a command run without the sandbox the session asked
  // for (and why), what a snapshot left out.
  warnings: (result) => result.warnings,
  exitCode: actionExitCode,
};

/**
 * How a command ended, what it changed in the workspace, and the paths (the first few, unless
 * `--verbose`); nothing with `--quiet`.
 */
function renderExec(result: ExecResult, globals: GlobalFlags): string {
  if (globals.quiet) return '';
  const ended = result.timedOut
    ? `timed out after ${Math.round(result.durationMs)} ms`
    : result.signal !== null
      ? `ended by ${result.signal}`
      : `exit ${result.exitCode}`;
  const changes = [
    ...result.created.map((path) => ({ path, action: 'created' })),
    ...result.modified.map((path) => ({ path, action: 'modified' })),
    ...result.deleted.map((path) => ({ path, action: 'deleted' })),
  ];
  return [
    `${ended}: ${result.created.length} created, ${result.modified.length} modified, ${result.deleted.length} deleted in the workspace`,
    ...listLines(
      changes,
      globals.verbose,
      (change) => `  ${change.action.padEnd(8)} ${change.path}`,
    ),
    '',
  ].join('\n');
}

/** How much of a response body people see, unless `--verbose`. */
const BODY_SHOWN_CHARACTERS = 2000;

/**
 * A body for people: the first 2,000 characters unless `--verbose`, ending with a newline. Bytes
 * that are not UTF-8 (an image, a gzip body) are summarized, as `rewind diff` summarizes a binary
 * file: printed as text they garble the terminal. `whole` says how to get them.
 */
function renderBody(
  body: { text: string; base64?: string | undefined },
  globals: GlobalFlags,
  whole: string,
): string {
  if (body.base64 !== undefined) {
    const size = plural(Buffer.byteLength(body.base64, 'base64'), 'byte');
    return `Binary body of ${size}, not shown: ${whole}.\n`;
  }
  const cut = body.text.length - BODY_SHOWN_CHARACTERS;
  const shown =
    cut > 0 && !globals.verbose
      ? `${body.text.slice(0, BODY_SHOWN_CHARACTERS)}\n... and ${cut} more characters (--verbose shows them)`
      : body.text;
  return `${shown}${shown.endsWith('\n') || shown === '' ? '' : '\n'}`;
}

/** How to get a response's body as it came. */
const wholeBody = (id: number) => `\`rewind show ${id} -q > FILE\` writes it byte for byte`;

/**
 * A response's status and body (the first 2,000 characters, unless `--verbose`); nothing with
 * `--quiet` (the body alone, whole, is passed through by {@link commandOutput}) or for a draft.
 */
function renderHttp(result: HttpResult, globals: GlobalFlags): string {
  if (!result.response) return '';
  const response = result.response;
  if (globals.quiet) return ''; // the body is passed through ({@link commandOutput})
  const body = { text: response.body, base64: response.bodyBase64 };
  return `HTTP ${response.status}\n${renderBody(body, globals, wholeBody(result.id))}`;
}

/** `action 7: exec npm test (reversible, done) at 2026-11-29 10:41:02.123`. */
function renderDetailHeader(detail: ActionDetail): string {
  return `action ${detail.id}: ${detail.kind} ${detail.target} (${detail.class}, ${detail.state}) at ${formatLocalTime(detail.at)}\n`;
}

/** Headers one per line, `name: value`. */
function renderHeaders(headers: Record<string, string>): string {
  return Object.entries(headers)
    .map(([name, value]) => `${name}: ${value}\n`)
    .join('');
}

/** Said of a stored output that was cut when it was stored. */
function cutWhenStored(name: string, stored: StoredText): string {
  return stored.truncated ? `${name} was cut when it was stored; this is all Rewind has.\n` : '';
}

/**
 * What a command printed, as stored, passed through as `exec` passes it (stdout on stdout, stderr
 * on stderr) and, but with `--quiet`, after the action's header line; with `--quiet`, a
 * response's body. Both byte for byte: output that is not UTF-8 is not turned into U+FFFD.
 */
function shownOutput(detail: ActionDetail, globals: GlobalFlags): Passthrough {
  // With --quiet, a response's body, whole and byte for byte (an image stays an image).
  if (detail.response && globals.quiet)
    return { stdout: bytesOf(detail.response.body), stderr: '' };
  if (!detail.command) return { stdout: '', stderr: '' };
  const { stdout, stderr } = detail.command;
  const ended = (stored: StoredText) => endedLine(stored.text, stored.base64, globals);
  const header = globals.quiet ? '' : renderDetailHeader(detail);
  const out = ended(stdout);
  return {
    stdout: typeof out === 'string' ? `${header}${out}` : Buffer.concat([Buffer.from(header), out]),
    stderr: ended(stderr),
  };
}

/**
 * Output as it was printed: its text, or its bytes (`base64`) when they are not UTF-8; without
 * `--quiet`, ending with a newline, so what follows starts a line.
 */
function endedLine(
  text: string,
  base64: string | undefined,
  globals: GlobalFlags,
): string | Uint8Array {
  const isEnded = globals.quiet || text === '' || text.endsWith('\n');
  if (base64 === undefined) return isEnded ? text : `${text}\n`;
  const bytes = Buffer.from(base64, 'base64');
  return isEnded ? bytes : Buffer.concat([bytes, Buffer.from('\n')]);
}

/** A stored output as it was: its text, or its bytes where they are not UTF-8. */
function bytesOf(stored: StoredText): string | Buffer {
  return stored.base64 === undefined ? stored.text : Buffer.from(stored.base64, 'base64');
}

/**
 * What an action stored, for people (a command's output comes first, through
 * {@link shownOutput}): how a command ended; a request (`METHOD URL`, headers, body) and its
 * response (`HTTP status`, headers, body), bodies cut as `http` cuts them; else its ledger
 * entries. With `--quiet`: the entries; nothing else (a response's body, whole, and a command's
 * output are passed through).
 */
function renderDetail(detail: ActionDetail, globals: GlobalFlags): string {
  const redacted =
    detail.redacted.length > 0 ? `Redacted before storing: ${detail.redacted.join(', ')}.\n` : '';
  if (detail.command) {
    if (globals.quiet) return '';
    const ran = detail.command;
    const ended = ran.timedOut
      ? 'timed out'
      : ran.signal !== null
        ? `ended by ${ran.signal}`
        : `exit ${ran.exitCode}`;
    return (
      `${ended} after ${Math.round(ran.durationMs)} ms${ran.sandbox === 'none' ? '' : ` (sandbox ${ran.sandbox})`}\n` +
      `${cutWhenStored('Its stdout', ran.stdout)}${cutWhenStored('Its stderr', ran.stderr)}${redacted}`
    );
  }
  if (detail.request) {
    const response = detail.response;
    if (globals.quiet) return ''; // the body is passed through ({@link shownOutput})
    const request = detail.request;
    const sent = `\`rewind show ${detail.id} --json\` holds it in base64`;
    const requestBody = request.body ? `\n${renderBody(request.body, globals, sent)}` : '';
    const answer = response
      ? `\nHTTP ${response.status}\n${renderHeaders(response.headers)}\n${renderBody(response.body, globals, wholeBody(detail.id))}${cutWhenStored('The response body', response.body)}`
      : '\nNo response was stored (the request was not sent, or did not complete).\n';
    return (
      `${renderDetailHeader(detail)}${request.method} ${request.url}\n${renderHeaders(request.headers)}` +
      `${requestBody}${answer}${redacted}`
    );
  }
  const entries = `started: ${JSON.stringify(detail.started, null, 2)}\nclosed: ${JSON.stringify(detail.closed ?? null, null, 2)}\n`;
  return globals.quiet ? entries : `${renderDetailHeader(detail)}${entries}${redacted}`;
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

/** Registers `exec`, `http`, `show`, `record` and `report`. */
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
      ACTION_PRESENTER,
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
    sayingFailedAction(cli, command, () =>
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
        ACTION_PRESENTER,
      ),
    ),
  );

  const show = commandFor(program, showOperation);
  feed(
    show,
    'id',
    new Argument('<id>', 'the action id, as `rewind log` and every action command show it'),
  );
  show.action((id: string, _flags: object, command: Command) =>
    cli.perform(
      command,
      showOperation,
      { id: numberOf(id) },
      {
        passthrough: shownOutput,
        text: renderDetail,
        // An action still open has no closing entry: `closed` is null rather than missing.
        json: (detail) => ({ ...detail, closed: detail.closed ?? null }),
      },
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
      ACTION_PRESENTER,
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
      ACTION_PRESENTER,
    ),
  );
}
