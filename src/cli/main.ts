import { readFile } from 'node:fs/promises';
import { resolve } from 'node:path';
import { Command, CommanderError, InvalidArgumentError, Option } from 'commander';
import {
  type ActionResult,
  type CheckpointInfo,
  type CheckpointResult,
  type CommitResult,
  type Compensation,
  createSandbox,
  type DraftInfo,
  type ExecResult,
  FORMATS,
  type Format,
  formatVerification,
  type GcReport,
  gc,
  type HttpResult,
  type InitResult,
  init,
  isRewindError,
  type LogReport,
  locateWorkspace,
  log,
  note,
  openSession,
  REWIND_VERSION,
  RewindError,
  type RollbackResult,
  type Session,
  type StatusReport,
  startIsolatedSession,
  status,
  type UndoResult,
  type VerifyReport,
  verify,
  writeFileAtomic,
} from '../index.js';
import { formatBytes, formatLocalTime, plural } from './format.js';

/** Where the CLI reads and writes; the real process by default, buffers in tests. */
export interface CliIo {
  stdout: (text: string) => void;
  stderr: (text: string) => void;
  cwd: string;
  /** What `rewind write PATH -` reads; the process's standard input by default. */
  stdin?: AsyncIterable<Uint8Array>;
  /** Asks a person a question and resolves with the answer; absent when nobody can answer. */
  prompt?: (question: string) => Promise<string>;
}

/** A JSON message list from a file, or from `stdin` when `file` is undefined. */
async function readMessages(
  file: string | undefined,
  stdin: AsyncIterable<Uint8Array> | undefined,
): Promise<unknown[]> {
  let text: string;
  try {
    text =
      file === undefined ? (await readAll(stdin)).toString('utf8') : await readFile(file, 'utf8');
  } catch (error) {
    throw new RewindError('INVALID_ARGUMENT', `Cannot read ${file}: ${(error as Error).message}.`, {
      data: { file },
      cause: error,
    });
  }
  let value: unknown;
  try {
    value = JSON.parse(text);
  } catch (error) {
    throw new RewindError(
      'INVALID_ARGUMENT',
      `${file ?? 'Standard input'} is not JSON (${(error as Error).message}). Give a JSON array of messages.`,
      { data: { file }, cause: error },
    );
  }
  if (!Array.isArray(value)) {
    throw new RewindError(
      'CONVERSATION_FORMAT_UNKNOWN',
      `${file ?? 'Standard input'} holds JSON but not an array: a conversation is an array of messages.`,
      { data: { file } },
    );
  }
  return value;
}

async function readAll(input: AsyncIterable<Uint8Array> | undefined): Promise<Buffer> {
  const chunks: Uint8Array[] = [];
  for await (const chunk of input ?? []) chunks.push(chunk);
  return Buffer.concat(chunks);
}

interface GlobalOptions {
  dir?: string;
  json?: boolean;
  quiet?: boolean;
  debug?: boolean;
  redact?: boolean;
  redactPattern?: string[];
  blockPrivate?: boolean;
}

/** A mistake in how a command was called, found in its action (Commander reports its own). */
class UsageError extends Error {}

const EXIT_OK = 0;
const EXIT_FAILED = 1;
const EXIT_USAGE = 2;
/** `rewind test`: the verifier gave no verdict. */
const EXIT_UNKNOWN = 3;

function describeError(error: unknown, isDebug: boolean): string {
  const lines: string[] = [];
  if (isRewindError(error)) {
    lines.push(`rewind: ${error.message} [${error.code}]`);
  } else if (error instanceof Error && typeof (error as NodeJS.ErrnoException).code === 'string') {
    const system = error as NodeJS.ErrnoException;
    lines.push(
      `rewind: the system refused an operation: ${system.message}. Check the path and its permissions, then retry.`,
    );
  } else {
    lines.push(
      `rewind: unexpected error: ${error instanceof Error ? error.message : String(error)}. ` +
        'Run again with --debug for the details, and please report it.',
    );
  }
  if (isDebug) {
    for (let current: unknown = error; current !== undefined; ) {
      lines.push(current instanceof Error ? (current.stack ?? String(current)) : String(current));
      current = current instanceof Error ? current.cause : undefined;
      if (current !== undefined) lines.push('caused by:');
    }
  }
  return `${lines.join('\n')}\n`;
}

function errorDocument(error: unknown): Record<string, unknown> {
  if (isRewindError(error))
    return { error: { code: error.code, message: error.message, data: error.data } };
  return {
    error: { code: 'UNEXPECTED', message: error instanceof Error ? error.message : String(error) },
  };
}

function renderInit(result: InitResult): string {
  const session = result.session;
  if (!result.isNewStore && !result.isNewSession) {
    return `Rewind store already in ${result.storeDirectory}; nothing changed. Current session: ${session.id} (${plural(session.entryCount, 'entry', 'entries')}).\n`;
  }
  const store = result.isNewStore ? `Initialized a Rewind store in ${result.storeDirectory}\n` : '';
  return `${store}Started session ${session.id}${session.isHashChained ? ' (hash-chained)' : ''}.\n`;
}

function renderCheckpoint(result: CheckpointResult): string {
  return (
    `Checkpoint ${result.label} (#${result.seq}): ${plural(result.fileCount, 'file')}, ${formatBytes(result.sizeBytes)}` +
    (result.conversation
      ? ` and ${plural(result.conversation.messageCount, 'message')} (${result.conversation.format}); `
      : '; ') +
    `${result.added} added, ${result.modified} modified, ${result.deleted} deleted since the previous checkpoint ` +
    `(${plural(result.readCount, 'file')} read).\n`
  );
}

function renderCheckpoints(checkpoints: CheckpointInfo[]): string {
  if (checkpoints.length === 0)
    return 'No checkpoints yet. Create one with `rewind checkpoint LABEL`.\n';
  const width = Math.max(5, ...checkpoints.map((checkpoint) => checkpoint.label.length));
  const lines = [
    `${'LABEL'.padEnd(width)}  ${'SEQ'.padStart(5)}  ${'TIME'.padEnd(23)}  CHANGED SINCE PREVIOUS`,
  ];
  for (const checkpoint of checkpoints) {
    lines.push(
      `${checkpoint.label.padEnd(width)}  ${String(checkpoint.seq).padStart(5)}  ${formatLocalTime(checkpoint.at)}  ` +
        `+${checkpoint.added} ~${checkpoint.modified} -${checkpoint.deleted}${checkpoint.isAutomatic ? '  (automatic)' : ''}`,
    );
  }
  return `${lines.join('\n')}\n`;
}

function renderRollback(result: RollbackResult): string {
  if (!result.isDryRun) {
    const applied = result.applied;
    const skipped =
      applied && applied.skipped.length > 0
        ? `; left alone (ignored): ${applied.skipped.join(', ')}`
        : '';
    return (
      `Rolled back to ${result.label}: ${applied?.written ?? 0} written, ${applied?.created ?? 0} created, ` +
      `${applied?.deleted ?? 0} deleted${skipped}. The previous state is saved: \`rewind undo ${result.id}\` brings it back.\n`
    );
  }
  if (result.changes.length === 0) return `Rolling back to ${result.label} would change nothing.\n`;
  const lines = [
    `Rolling back to ${result.label} would change ${plural(result.changes.length, 'path')}:`,
  ];
  for (const change of result.changes) {
    const note = change.isUnrecorded
      ? '   (never recorded by this session: saved before the rollback)'
      : '';
    lines.push(`  ${change.action.padEnd(7)}  ${change.path}${note}`);
  }
  return `${lines.join('\n')}\n`;
}

function renderActionLine(result: ActionResult): string {
  const how =
    result.state === 'draft'
      ? `rewind approve ${result.id} (or rewind discard ${result.id})`
      : result.state === 'discarded'
        ? 'it will never run'
        : result.class === 'reversible'
          ? `rewind undo ${result.id}`
          : result.class === 'compensable'
            ? `rewind compensate ${result.id}`
            : 'cannot be undone';
  const state = result.state === 'done' ? '' : `, ${result.state}`;
  return `action ${result.id} (${result.class}${state}): ${how}\n`;
}

function renderExec(result: ExecResult): string {
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

function renderHttp(result: HttpResult): string {
  if (!result.response) return '';
  const response = result.response;
  const body = response.body.length > 2000 ? `${response.body.slice(0, 2000)}\n...` : response.body;
  return `HTTP ${response.status}\n${body}${body.endsWith('\n') || body === '' ? '' : '\n'}`;
}

function renderDraft(draft: DraftInfo): string {
  return (
    `Draft #${draft.id} (${draft.kind}, ${draft.class}) will run exactly this:\n` +
    `${JSON.stringify(draft.spec, null, 2)}\n` +
    `content digest ${draft.digest}\n`
  );
}

/** The compensation declared by --compensate-command or --compensate-request, if any. */
function compensationOption(own: Record<string, unknown>): { compensation?: Compensation } {
  if (own.compensateCommand !== undefined && own.compensateRequest !== undefined) {
    throw new UsageError('Declare one compensation: --compensate-command or --compensate-request.');
  }
  if (own.compensateCommand !== undefined) {
    return { compensation: { command: String(own.compensateCommand) } };
  }
  if (own.compensateRequest === undefined) return {};
  const [method, url, ...rest] = String(own.compensateRequest).trim().split(/\s+/);
  if (method === undefined || url === undefined || rest.length > 0) {
    throw new UsageError(
      `--compensate-request takes "METHOD URL", such as "DELETE https://api.example.com/deploys/42", not "${String(own.compensateRequest)}".`,
    );
  }
  return { compensation: { http: { method, url } } };
}

/** Whether a sandbox backend can start here: throws SANDBOX_UNAVAILABLE for bwrap if not. */
function probeSandbox(backend: 'bwrap' | 'auto'): { warnings: string[] } {
  return { warnings: createSandbox({ backend, workspace: '/' }).warnings };
}

function actionId(id: string): number {
  if (!/^\d+$/.test(id)) {
    throw new UsageError(`"${id}" is not an action id: give the number that \`rewind log\` shows.`);
  }
  return Number(id);
}

function secondsOption(value: unknown, flag: string): number {
  const seconds = Number(value);
  if (!Number.isFinite(seconds) || seconds <= 0) {
    throw new UsageError(`${flag} must be a positive number of seconds, not "${String(value)}".`);
  }
  return Math.round(seconds * 1000);
}

function renderCommit(result: CommitResult): string {
  const lines: string[] = [];
  const counts = { written: 0, created: 0, deleted: 0 };
  for (const change of result.changes) counts[change.action] += 1;
  const summary = `${counts.written} written, ${counts.created} created, ${counts.deleted} deleted`;
  if (result.status === 'nothing-to-commit')
    return 'Nothing to commit: the session changed nothing since it began or was last committed.\n';
  if (result.status === 'dry-run') {
    lines.push(`Committing would change the workspace: ${summary}.`);
    for (const change of result.changes) lines.push(`  ${change.action.padEnd(8)} ${change.path}`);
  } else if (result.status === 'committed') {
    lines.push(
      `Committed to the workspace: ${summary}. The previous state is saved: \`rewind undo ${result.id}\` puts it back.`,
    );
  } else {
    lines.push(
      `Refused to commit: ${plural(result.conflicts.length, 'path')} changed in the workspace too since the session began; nothing was written.`,
    );
  }
  if (result.conflicts.length > 0) {
    if (result.status === 'dry-run') lines.push(`Conflicts (the commit would be refused):`);
    for (const conflict of result.conflicts) {
      lines.push(
        `  ${conflict.path}: the session ${conflict.session}, the workspace ${conflict.host}`,
      );
    }
  }
  return `${lines.join('\n')}\n`;
}

function renderUndo(result: UndoResult): string {
  if (result.status === 'undone') {
    return (
      `Undid #${result.undoes}: ${result.applied.written} written, ${result.applied.created} created, ` +
      `${result.applied.deleted} deleted. Redo with \`rewind undo ${result.id}\`.\n`
    );
  }
  const shown = result.conflicts
    .slice(0, 20)
    .map(
      (conflict) => `  ${conflict.path}: expected ${conflict.expected}, found ${conflict.found}`,
    );
  const more =
    result.conflicts.length > 20 ? [`  ... and ${result.conflicts.length - 20} more`] : [];
  return [
    `Refused to undo #${result.undoes}: ${plural(result.conflicts.length, 'path')} it changed ${result.conflicts.length === 1 ? 'has' : 'have'} been edited since, and undoing would overwrite those edits:`,
    ...shown,
    ...more,
    'Nothing was changed. Save or revert those edits first, or roll back to a checkpoint instead.',
    '',
  ].join('\n');
}

function renderStatus(report: StatusReport): string {
  const lines = [
    `Workspace  ${report.workspace}`,
    `Store      ${report.storeDirectory}: ${plural(report.objects.count, 'object')}, ${formatBytes(report.objects.sizeBytes)}`,
    `Current    ${report.currentSession ?? '(none: run `rewind init`)'}`,
    `Sessions   ${report.sessions.length}`,
  ];
  for (const session of report.sessions) {
    const flags = [
      session.isHashChained ? 'hash-chained' : '',
      session.tornLine ? 'torn last line ignored' : '',
      session.isolation === 'isolated' ? 'isolated' : '',
      session.sandbox !== 'none'
        ? `sandbox ${session.sandbox}${session.network ? ' with network' : ', no network'}`
        : '',
    ]
      .filter(Boolean)
      .join(', ');
    const note = session.unsupported
      ? `  (written by a newer Rewind: ${session.unsupported.code})`
      : '';
    lines.push(
      `  ${session.isCurrent ? '*' : ' '} ${session.id}  ${formatLocalTime(session.startedAt)}  ` +
        `${plural(session.entryCount, 'entry', 'entries').padEnd(12)}${flags}${note}`.trimEnd(),
    );
  }
  return `${lines.join('\n')}\n`;
}

function renderLog(report: LogReport): string {
  const width = String(report.entries.at(-1)?.seq ?? 1).length;
  const kindWidth = Math.max(0, ...report.entries.map((line) => line.kind.length));
  const lines = [
    `Session ${report.session.id}: ${plural(report.session.entryCount, 'entry', 'entries')}`,
  ];
  for (const line of report.entries) {
    lines.push(
      `${String(line.seq).padStart(width)}  ${formatLocalTime(line.at)}  ${line.kind.padEnd(kindWidth)}  ${line.summary}` +
        (line.action ? ` [${line.action.state}]` : ''),
    );
  }
  return `${lines.join('\n')}\n`;
}

function logWarnings(report: LogReport): string[] {
  const warnings: string[] = [];
  for (const line of report.unreadable) {
    warnings.push(
      line.isTorn
        ? `line ${line.line} is a torn write left by a crash; it was ignored`
        : `line ${line.line} is not a ledger entry (${line.reason}); run \`rewind verify\``,
    );
  }
  if (report.session.unsupported) warnings.push(report.session.unsupported.message);
  return warnings;
}

function renderVerify(report: VerifyReport): string {
  const entryCount = report.sessions.reduce((sum, session) => sum + session.entryCount, 0);
  const checked =
    `${plural(report.sessions.length, 'session')} (${plural(entryCount, 'entry', 'entries')}) ` +
    `and ${plural(report.objectsChecked, 'object')}`;
  if (report.isOk) return `Verified ${checked}: no problems.\n`;
  const lines = [`Checked ${checked}: ${plural(report.problems.length, 'problem')}.`];
  for (const problem of report.problems) {
    const where = [
      problem.session && `session ${problem.session}`,
      problem.seq !== undefined && `#${problem.seq}`,
    ]
      .filter(Boolean)
      .join(' ');
    lines.push(`  ${problem.type}${where ? ` (${where})` : ''}: ${problem.message}`);
  }
  const firstBreak = report.problems.find((problem) => problem.type === 'chain-broken');
  if (firstBreak)
    lines.push(
      `The hash chain first breaks at entry #${firstBreak.seq} of session ${firstBreak.session}.`,
    );
  return `${lines.join('\n')}\n`;
}

function renderGc(report: GcReport): string {
  const verb = report.isDryRun ? 'Would remove' : 'Removed';
  const lines = report.isDryRun
    ? report.removed.map((object) => `  ${object.digest}  ${formatBytes(object.sizeBytes)}`)
    : [];
  const abandoned =
    report.abandonedFiles.length > 0
      ? ` and ${plural(report.abandonedFiles.length, 'abandoned temporary file')}`
      : '';
  lines.push(
    `${verb} ${plural(report.removed.length, 'unreferenced object')}${abandoned}, ` +
      `${report.isDryRun ? 'freeing' : 'freed'} ${formatBytes(report.freedBytes)}; ` +
      `kept ${plural(report.keptCount, 'referenced object')}` +
      (report.recentCount > 0 ? `, spared ${report.recentCount} written in the last hour` : '') +
      '.',
  );
  return `${lines.join('\n')}\n`;
}

/** Builds the `rewind` command tree. Actions report through `io`, and set `state.exitCode`. */
function createProgram(io: CliIo, state: { exitCode: number }): Command {
  const program = new Command('rewind')
    .description('Checkpoints, an action ledger and undo for AI agents.')
    .version(REWIND_VERSION, '-V, --version')
    .option(
      '--dir <dir>',
      'workspace directory (default: nearest ancestor holding .rewind/, else the current directory)',
    )
    .option('--json', 'print one JSON document on stdout, nothing else')
    .option('-q, --quiet', 'print only errors and the output asked for')
    .option('--debug', 'add stack traces and cause chains to errors')
    .option(
      '--redact',
      'strip credential headers (Authorization, Cookie, X-Api-Key...) before anything is stored',
    )
    .option(
      '--redact-pattern <re>',
      'strip every match of this regular expression from what is stored (repeatable)',
      (value: string, previous: string[] = []) => [...previous, value],
    )
    .option('--block-private', 'refuse HTTP requests to loopback and private addresses too')
    .showHelpAfterError('(run `rewind --help` for usage)')
    .exitOverride()
    .configureOutput({ writeOut: io.stdout, writeErr: io.stderr });

  const globals = (command: Command): GlobalOptions => command.optsWithGlobals<GlobalOptions>();
  const workspaceOf = async (options: GlobalOptions): Promise<string> =>
    options.dir !== undefined ? resolve(io.cwd, options.dir) : locateWorkspace(io.cwd);
  const emit = <T>(
    options: GlobalOptions,
    value: T,
    render: (value: T) => string,
    warnings: string[] = [],
  ): void => {
    if (options.json) {
      io.stdout(`${JSON.stringify(value, jsonReplacer, 2)}\n`);
    } else {
      const text = render(value);
      if (text) io.stdout(text);
    }
    if (!options.quiet) for (const warning of warnings) io.stderr(`rewind: warning: ${warning}\n`);
  };

  program
    .command('init')
    .description('create .rewind/ in a directory and start a session')
    .argument('[dir]', 'the workspace directory (default: --dir, else the current directory)')
    .option('--hash-chain', 'make every ledger entry of the new session commit to the previous one')
    .addOption(
      new Option(
        '--sandbox <backend>',
        'where `rewind exec` runs commands (default: none)',
      ).choices(['bwrap', 'none', 'auto']),
    )
    .option('--network', 'let sandboxed commands use the network')
    .option(
      '--isolated',
      'start an isolated session: it works on a private view, and the workspace changes only with `rewind commit`',
    )
    .action(async (dir: string | undefined, _options, command: Command) => {
      const options = globals(command);
      const own = command.opts<{
        hashChain?: boolean;
        sandbox?: 'bwrap' | 'none' | 'auto';
        network?: boolean;
        isolated?: boolean;
      }>();
      const workspace = resolve(io.cwd, dir ?? options.dir ?? '.');
      let warnings: string[] = [];
      if (own.sandbox !== undefined && own.sandbox !== 'none') {
        // Checked now, so a sandbox that cannot start is said at once, not at the first exec.
        const probe = probeSandbox(own.sandbox);
        warnings = probe.warnings;
      }
      const sandboxing = {
        ...(own.sandbox !== undefined && { sandbox: own.sandbox }),
        ...(own.network === true && { network: true }),
      };
      const result = await init({
        workspace,
        hashChain: own.hashChain === true,
        ...(own.isolated !== true && sandboxing),
      });
      if (own.isolated === true) {
        const isolated = await startIsolatedSession({ workspace, ...sandboxing });
        const id = isolated.id;
        await isolated.close();
        emit(
          options,
          { ...result, isolatedSession: id },
          (value) =>
            options.quiet
              ? ''
              : `${renderInit(value)}Started isolated session ${id}: it works on a private view of the workspace, which changes only with \`rewind commit\`.\n`,
          warnings,
        );
        return;
      }
      emit(options, result, (value) => (options.quiet ? '' : renderInit(value)), warnings);
    });

  program
    .command('status')
    .description('show sessions, the current session, and the size of the store')
    .action(async (_options, command: Command) => {
      const options = globals(command);
      const report = await status({ workspace: await workspaceOf(options) });
      const current = report.sessions.find((session) => session.isCurrent);
      // For an isolated current session: what a commit would do now.
      const pending =
        current?.isolation === 'isolated' && !current.unsupported
          ? await withSession(options, current.id, (session) => session.status()).catch(
              () => undefined,
            )
          : undefined;
      emit(options, { ...report, ...(pending && { pending }) }, (value) => {
        const extra = pending
          ? `Pending    ${plural(pending.pendingChanges.length, 'change')} to commit from the isolated view` +
            (pending.conflicts.length > 0
              ? ` (${plural(pending.conflicts.length, 'conflict')}: \`rewind commit --dry-run\`)`
              : '') +
            '\n'
          : '';
        return `${renderStatus(value)}${extra}`;
      });
    });

  program
    .command('log')
    .description('show the timeline of a session, one line per ledger entry')
    .option('--session <id>', 'the session to show (default: the current one)')
    .option(
      '--kind <kind>',
      'only entries of this kind or family (verification, action, rollback...)',
    )
    .option('--checkpoint <label>', 'only entries about this checkpoint')
    .action(async (_options, command: Command) => {
      const options = globals(command);
      const own = command.opts<{ session?: string; kind?: string; checkpoint?: string }>();
      const report = await log({
        workspace: await workspaceOf(options),
        ...(own.session !== undefined && { session: own.session }),
        ...(own.kind !== undefined && { kind: own.kind }),
        ...(own.checkpoint !== undefined && { checkpoint: own.checkpoint }),
      });
      emit(options, report, renderLog, logWarnings(report));
    });

  const withSession = async <T>(
    options: GlobalOptions,
    session: string | undefined,
    fn: (opened: Session) => Promise<T>,
  ): Promise<T> => {
    const patterns = options.redactPattern ?? [];
    const opened = await openSession({
      workspace: await workspaceOf(options),
      ...(session !== undefined && { session }),
      ...((options.redact || patterns.length > 0) && {
        redact: { headers: options.redact === true, patterns },
      }),
      ...(options.blockPrivate && { blockPrivate: true }),
    });
    try {
      return await fn(opened);
    } finally {
      await opened.close();
    }
  };

  program
    .command('checkpoint')
    .description('record the workspace under a label')
    .argument('<label>', 'letters, digits, ".", "_" and "-", unique in the session')
    .option(
      '--messages <file>',
      'the conversation to record with the files (a JSON array of messages; - reads stdin)',
    )
    .addOption(
      new Option('--format <format>', 'its message format (default: detected)').choices([
        ...FORMATS,
      ]),
    )
    .option('--session <id>', 'the session (default: the current one)')
    .action(async (label: string, _options, command: Command) => {
      const options = globals(command);
      const own = command.opts<{ messages?: string; format?: Format; session?: string }>();
      const messages =
        own.messages === undefined
          ? undefined
          : await readMessages(
              own.messages === '-' ? undefined : resolve(io.cwd, own.messages),
              io.stdin,
            );
      const result = await withSession(options, own.session, (session) =>
        session.checkpoint(label, {
          ...(messages && { messages }),
          ...(own.format && { format: own.format }),
        }),
      );
      emit(
        options,
        result,
        (value) => (options.quiet ? '' : renderCheckpoint(value)),
        result.warnings,
      );
    });

  program
    .command('checkpoints')
    .description('list the checkpoints of a session')
    .option('--session <id>', 'the session (default: the current one)')
    .action(async (_options, command: Command) => {
      const options = globals(command);
      const checkpoints = await withSession(options, command.opts().session, (session) =>
        session.checkpoints(),
      );
      emit(options, checkpoints, renderCheckpoints);
    });

  program
    .command('rollback')
    .description(
      'restore the workspace (and the conversation, if the checkpoint has one) to a checkpoint; the current state is saved first',
    )
    .argument('<label>', 'the checkpoint, or "latest"')
    .option('--dry-run', 'list what would be written, created and deleted, and change nothing')
    .option('--patch-note <text>', 'tell the model what changed since the checkpoint')
    .option(
      '--messages-out <file>',
      'write the restored conversation (repaired, with the resume note) to this JSON file',
    )
    .option('--session <id>', 'the session (default: the current one)')
    .action(async (label: string, _options, command: Command) => {
      const options = globals(command);
      const own = command.opts<{
        dryRun?: boolean;
        session?: string;
        patchNote?: string;
        messagesOut?: string;
      }>();
      const result = await withSession(options, own.session, (session) =>
        session.rollback(label, {
          dryRun: own.dryRun === true,
          ...(own.patchNote !== undefined && { patchNote: own.patchNote }),
        }),
      );
      let where = '';
      if (result.conversation) {
        const count = plural(result.conversation.messages.length, 'message');
        if (own.messagesOut !== undefined && !result.isDryRun) {
          const file = resolve(io.cwd, own.messagesOut);
          await writeFileAtomic(file, `${JSON.stringify(result.conversation.messages, null, 2)}\n`);
          where = `The restored conversation (${count}, ${result.conversation.format}) is in ${file}.\n`;
        } else {
          where = `The ${result.isDryRun ? 'conversation would be restored to' : 'restored conversation has'} ${count} (${result.conversation.format}): \`rewind conversation show\` prints it${result.isDryRun ? '' : ', or pass --messages-out FILE'}.\n`;
        }
      }
      emit(
        options,
        result,
        (value) => (options.quiet && !value.isDryRun ? '' : `${renderRollback(value)}${where}`),
        result.warnings,
      );
    });

  const conversation = program
    .command('conversation')
    .description("record and show the agent's conversation, paired with checkpoints");

  conversation
    .command('sync')
    .description('record the current conversation (a JSON array of messages; - reads stdin)')
    .argument('<file>', 'a JSON file, or - for standard input')
    .addOption(
      new Option('--format <format>', 'the message format (default: detected)').choices([
        ...FORMATS,
      ]),
    )
    .option('--session <id>', 'the session (default: the current one)')
    .action(async (file: string, _options, command: Command) => {
      const options = globals(command);
      const own = command.opts<{ format?: Format; session?: string }>();
      const messages = await readMessages(
        file === '-' ? undefined : resolve(io.cwd, file),
        io.stdin,
      );
      const result = await withSession(options, own.session, (session) =>
        session.syncConversation(messages, { ...(own.format && { format: own.format }) }),
      );
      emit(options, result, (value) =>
        options.quiet
          ? ''
          : value.isChanged
            ? `Recorded the conversation: ${plural(value.messageCount, 'message')} (${value.format}).\n`
            : `The conversation is unchanged (${plural(value.messageCount, 'message')}); nothing recorded.\n`,
      );
    });

  conversation
    .command('show')
    .description(
      'print the conversation at a checkpoint, repaired as a rollback would restore it (default: the current one)',
    )
    .argument('[label]', 'a checkpoint label, or "latest"')
    .option('--patch-note <text>', 'the patch note a rollback would pass')
    .option('--session <id>', 'the session (default: the current one)')
    .action(async (label: string | undefined, _options, command: Command) => {
      const options = globals(command);
      const own = command.opts<{ session?: string; patchNote?: string }>();
      const shown = await withSession(options, own.session, async (session) =>
        label === undefined
          ? await session.conversation()
          : await session.conversationAt(label, {
              ...(own.patchNote !== undefined && { patchNote: own.patchNote }),
            }),
      );
      if (!shown) {
        throw new RewindError(
          'CONVERSATION_NOT_FOUND',
          label === undefined
            ? 'This session has no conversation yet. Record one with `rewind conversation sync FILE`.'
            : `Checkpoint ${label} has no conversation. Pass --messages to \`rewind checkpoint\`, or sync one before checkpointing.`,
          { data: { label } },
        );
      }
      if (options.json) {
        io.stdout(
          `${JSON.stringify({ format: shown.format, messages: shown.messages }, null, 2)}\n`,
        );
      } else {
        io.stdout(`${JSON.stringify(shown.messages, null, 2)}\n`);
      }
    });

  program
    .command('undo')
    .description(
      'undo an action (file action, command, rollback, undo) unless later edits would be trampled',
    )
    .argument('[id]', 'the action id, as `rewind log` and every action command show it')
    .option('--last', 'the most recent action that can still be undone')
    .option('--session <id>', 'the session (default: the current one)')
    .action(async (id: string | undefined, _options, command: Command) => {
      const options = globals(command);
      const isLast = command.opts().last === true;
      if ((id === undefined) === !isLast) {
        throw new UsageError('Give either an action id or --last.');
      }
      if (id !== undefined && !/^\d+$/.test(id))
        throw new UsageError(
          `"${id}" is not an action id: give the number that \`rewind log\` shows.`,
        );
      const result = await withSession(options, command.opts().session, (session) =>
        session.undo(id === undefined ? 'last' : Number(id)),
      );
      emit(options, result, (value) =>
        options.quiet && value.status === 'undone' ? '' : renderUndo(value),
      );
      if (result.status === 'refused') state.exitCode = EXIT_FAILED;
    });

  const act = async (
    command: Command,
    fn: (session: Session) => Promise<ActionResult>,
    render: (result: ActionResult) => string = () => '',
  ): Promise<void> => {
    const options = globals(command);
    const result = await withSession(options, command.opts().session, fn);
    emit(options, result, (value) => `${render(value)}${renderActionLine(value)}`);
    if (result.state === 'failed') state.exitCode = EXIT_FAILED;
  };

  program
    .command('write')
    .description('write a file (journaled; the previous content is kept for undo)')
    .argument('<path>', 'the file, relative to the workspace root')
    .argument('[content]', 'the text to write, or - to read standard input (the default)')
    .option('--session <id>', 'the session (default: the current one)')
    .action(async (path: string, content: string | undefined, _options, command: Command) => {
      const bytes =
        content === undefined || content === '-' ? await readAll(io.stdin) : Buffer.from(content);
      await act(command, (session) => session.write(path, bytes));
    });

  program
    .command('delete')
    .alias('rm')
    .description('delete a file or a directory tree (journaled; everything is kept for undo)')
    .argument('<path>', 'relative to the workspace root')
    .option('--session <id>', 'the session (default: the current one)')
    .action(async (path: string, _options, command: Command) => {
      await act(command, (session) => session.delete(path));
    });

  program
    .command('move')
    .alias('mv')
    .description('move or rename a file or directory (journaled)')
    .argument('<from>', 'relative to the workspace root')
    .argument(
      '<to>',
      'relative to the workspace root; must be free (or a file, when moving a file)',
    )
    .option('--session <id>', 'the session (default: the current one)')
    .action(async (from: string, to: string, _options, command: Command) => {
      await act(command, (session) => session.move(from, to));
    });

  program
    .command('mkdir')
    .description('create a directory and its missing parents (journaled)')
    .argument('<path>', 'relative to the workspace root')
    .option('--session <id>', 'the session (default: the current one)')
    .action(async (path: string, _options, command: Command) => {
      await act(command, (session) => session.mkdir(path));
    });

  program
    .command('exec')
    .description(
      'run a command in the workspace, journaled with the files it created, modified and deleted (undoable)',
    )
    .argument('<command...>', 'the program and its arguments (put them after --)')
    .option('--timeout <seconds>', 'end the command and everything it started after this', '120')
    .option('--draft', 'journal it without running it; `rewind approve ID` runs it')
    .option('--session <id>', 'the session (default: the current one)')
    .action(async (words: string[], _options, command: Command) => {
      const timeoutMs = secondsOption(command.opts().timeout, '--timeout');
      if (command.opts().draft === true) {
        await act(command, (session) => session.exec(words, { timeoutMs, draft: true }));
        return;
      }
      await act(
        command,
        (session) => session.exec(words, { timeoutMs }),
        (value) => renderExec(value as ExecResult),
      );
    });

  program
    .command('http')
    .description(
      'send an HTTP request, journaled with its response (irreversible unless a compensation is declared)',
    )
    .argument('<method>', 'GET, POST, ...')
    .argument('<url>', 'an absolute http:// or https:// URL')
    .option(
      '--header <k:v>',
      'a request header (repeatable)',
      (value: string, previous: string[] = []) => [...previous, value],
    )
    .option('--data <data>', 'the request body')
    .option('--timeout <seconds>', 'give up after this', '30')
    .option('--compensate-command <command>', 'declare a command (run by sh) that offsets it')
    .option(
      '--compensate-request <request>',
      'declare an HTTP request that offsets it: "METHOD URL"',
    )
    .option('--draft', 'journal it without sending it; `rewind approve ID` sends it')
    .option('--session <id>', 'the session (default: the current one)')
    .action(async (method: string, url: string, _options, command: Command) => {
      const own = command.opts();
      const headers: Record<string, string> = {};
      for (const header of (own.header ?? []) as string[]) {
        const colon = header.indexOf(':');
        if (colon <= 0) {
          throw new UsageError(`The header "${header}" is not of the form Name: value.`);
        }
        headers[header.slice(0, colon).trim()] = header.slice(colon + 1).trim();
      }
      await act(
        command,
        (session) =>
          session.http(
            { method, url, headers, ...(own.data !== undefined && { body: own.data as string }) },
            {
              timeoutMs: secondsOption(own.timeout, '--timeout'),
              ...compensationOption(own),
              ...(own.draft === true && { draft: true }),
            },
          ),
        (value) => renderHttp(value as HttpResult),
      );
    });

  program
    .command('record')
    .description(
      'journal an external action before doing it (kind x.NAME); close it with `rewind report`',
    )
    .argument('<name>', 'what it is, such as deploy or send-email')
    .option(
      '--class <class>',
      'compensable or irreversible (default: compensable when a compensation is declared)',
    )
    .option('--compensate-command <command>', 'declare a command (run by sh) that offsets it')
    .option(
      '--compensate-request <request>',
      'declare an HTTP request that offsets it: "METHOD URL"',
    )
    .option('--target <target>', 'what it acts on, for people')
    .option('--detail <text>', 'more about it')
    .option('--draft', 'journal it for approval first (`rewind approve ID`)')
    .option('--session <id>', 'the session (default: the current one)')
    .action(async (name: string, _options, command: Command) => {
      const own = command.opts();
      if (own.class !== undefined && own.class !== 'compensable' && own.class !== 'irreversible') {
        throw new UsageError(`--class must be compensable or irreversible, not "${own.class}".`);
      }
      await act(command, (session) =>
        session.record(name, {
          ...(own.class !== undefined && { class: own.class as 'compensable' | 'irreversible' }),
          ...compensationOption(own),
          ...(own.target !== undefined && { target: own.target as string }),
          ...(own.detail !== undefined && { detail: own.detail as string }),
          ...(own.draft === true && { draft: true }),
        }),
      );
    });

  program
    .command('report')
    .description('close a recorded external action with its outcome')
    .argument('<id>', 'the action id that `rewind record` printed')
    .option('--failed', 'it failed (default: it succeeded)')
    .option('--detail <text>', 'what happened')
    .option('--session <id>', 'the session (default: the current one)')
    .action(async (id: string, _options, command: Command) => {
      const own = command.opts();
      await act(command, (session) =>
        session.report(actionId(id), {
          ok: own.failed !== true,
          ...(own.detail !== undefined && { detail: own.detail as string }),
        }),
      );
    });

  const confirm = async (
    options: GlobalOptions,
    isYes: boolean,
    question: string,
  ): Promise<boolean> => {
    if (isYes) return true;
    if (!io.prompt || options.json) {
      throw new UsageError('Nobody can confirm here: add --yes to run it.');
    }
    return /^y(es)?$/i.test((await io.prompt(`${question} [y/N] `)).trim());
  };

  program
    .command('approve')
    .description('show exactly what a draft will run, and run it once confirmed')
    .argument('<id>', 'the draft id')
    .option('-y, --yes', 'run it without asking (for scripts)')
    .option('--session <id>', 'the session (default: the current one)')
    .action(async (id: string, _options, command: Command) => {
      const options = globals(command);
      const number = actionId(id);
      await withSession(options, command.opts().session, async (session) => {
        const draft = await session.draft(number);
        if (!options.quiet && !options.json) io.stdout(renderDraft(draft));
        if (!(await confirm(options, command.opts().yes === true, `Run draft #${number}?`))) {
          io.stdout('Not approved; nothing ran.\n');
          state.exitCode = EXIT_FAILED;
          return;
        }
        const result = await session.approve(number, { digest: draft.digest });
        emit(options, result, (value) => {
          const detail =
            value.kind === 'exec'
              ? renderExec(value as ExecResult)
              : value.kind === 'http'
                ? renderHttp(value as HttpResult)
                : '';
          return `${detail}${renderActionLine(value)}`;
        });
        if (result.state === 'failed') state.exitCode = EXIT_FAILED;
      });
    });

  program
    .command('discard')
    .description('discard a draft, visibly and for good')
    .argument('<id>', 'the draft id')
    .option('--session <id>', 'the session (default: the current one)')
    .action(async (id: string, _options, command: Command) => {
      await act(command, (session) => session.discard(actionId(id)));
    });

  program
    .command('compensate')
    .description('show the compensation a compensable action declared, and run it once confirmed')
    .argument('<id>', 'the action id')
    .option('-y, --yes', 'run it without asking (for scripts)')
    .option('--session <id>', 'the session (default: the current one)')
    .action(async (id: string, _options, command: Command) => {
      const options = globals(command);
      const number = actionId(id);
      await withSession(options, command.opts().session, async (session) => {
        const compensation = await session.compensation(number);
        if (!options.quiet && !options.json) {
          io.stdout(`Compensation of #${number}:\n  ${JSON.stringify(compensation)}\n`);
        }
        if (!(await confirm(options, command.opts().yes === true, 'Run it?'))) {
          io.stdout('Not confirmed; nothing ran.\n');
          state.exitCode = EXIT_FAILED;
          return;
        }
        const result = await session.compensate(number);
        emit(options, result, (value) => `Compensated #${number} with ${renderActionLine(value)}`);
        if (result.state === 'failed') state.exitCode = EXIT_FAILED;
      });
    });

  program
    .command('commit')
    .description(
      "apply an isolated session's changes to the workspace, refusing when the workspace changed the same paths",
    )
    .option('--dry-run', 'list what would be written, created and deleted, and every conflict')
    .option('--session <id>', 'the session (default: the current one)')
    .action(async (_options, command: Command) => {
      const options = globals(command);
      const own = command.opts<{ dryRun?: boolean; session?: string }>();
      const result = await withSession(options, own.session, (session) =>
        session.commit({ dryRun: own.dryRun === true }),
      );
      emit(options, result, renderCommit);
      if (result.status === 'refused') state.exitCode = EXIT_FAILED;
    });

  program
    .command('destroy')
    .description("remove an isolated session's view (refused while it holds uncommitted changes)")
    .option('--force', 'drop uncommitted changes (they stay in the store)')
    .option('--session <id>', 'the session (default: the current one)')
    .action(async (_options, command: Command) => {
      const options = globals(command);
      const own = command.opts<{ force?: boolean; session?: string }>();
      await withSession(options, own.session, (session) =>
        session.destroy({ force: own.force === true }),
      );
      emit(options, { destroyed: true }, () =>
        options.quiet ? '' : 'Destroyed the session view.\n',
      );
    });

  program
    .command('test')
    .description(
      "run the session's verifier, print its verdict in words, journal it; exit 0 pass, 1 fail, 3 unknown",
    )
    .option(
      '--verifier <command>',
      'the verifier command (default: .rewind/config.json "verifier")',
    )
    .option('--retries <n>', 'retry an unknown verdict this many times', '0')
    .option('--timeout <seconds>', 'end the verifier after this (counts as unknown)', '600')
    .option('--session <id>', 'the session (default: the current one)')
    .action(async (_options, command: Command) => {
      const options = globals(command);
      const own = command.opts<{
        verifier?: string;
        retries: string;
        timeout: string;
        session?: string;
      }>();
      if (!/^\d+$/.test(own.retries)) {
        throw new UsageError(`--retries must be a whole number, not "${own.retries}".`);
      }
      const timeoutMs = secondsOption(own.timeout, '--timeout');
      const result = await withSession(options, own.session, (session) =>
        session.test(
          own.verifier !== undefined
            ? { verifier: { command: own.verifier, retries: Number(own.retries), timeoutMs } }
            : {},
        ),
      );
      emit(
        options,
        result,
        (value) => `${value.status.toUpperCase()}: ${formatVerification(value)}\n`,
      );
      state.exitCode =
        result.status === 'pass' ? EXIT_OK : result.status === 'fail' ? EXIT_FAILED : EXIT_UNKNOWN;
    });

  program
    .command('diff')
    .description(
      'show what changed between two states (checkpoint labels, action ids, or the working tree)',
    )
    .argument(
      '<from>',
      'a checkpoint label, "latest", or an action id (alone: the changes that action made)',
    )
    .argument('[to]', 'a checkpoint label or action id (default: the working tree)')
    .option('--session <id>', 'the session (default: the current one)')
    .action(async (from: string, to: string | undefined, _options, command: Command) => {
      const options = globals(command);
      const result = await withSession(options, command.opts().session, (session) =>
        session.diff(from, to),
      );
      emit(
        options,
        result,
        (value) => value.text || `No differences between ${value.from} and ${value.to}.\n`,
      );
    });

  program
    .command('note')
    .description('add a note to the session timeline, with files attached')
    .argument('<text...>', 'the note')
    .option(
      '--attach <file>',
      'attach a file (repeatable)',
      (file: string, files: string[]) => [...files, file],
      [],
    )
    .option('--session <id>', 'the session to annotate (default: the current one)')
    .action(async (words: string[], _options, command: Command) => {
      const options = globals(command);
      const own = command.opts<{ attach: string[]; session?: string }>();
      const result = await note({
        workspace: await workspaceOf(options),
        text: words.join(' '),
        attachments: own.attach.map((file) => resolve(io.cwd, file)),
        ...(own.session !== undefined && { session: own.session }),
      });
      emit(options, result, (value) =>
        options.quiet ? '' : `Added note #${value.entry.seq} to session ${value.session}.\n`,
      );
    });

  program
    .command('verify')
    .description(
      're-hash every referenced object and check every hash chain; exit 1 on any problem',
    )
    .action(async (_options, command: Command) => {
      const options = globals(command);
      const report = await verify({ workspace: await workspaceOf(options) });
      emit(
        options,
        report,
        (value) => (options.quiet && value.isOk ? '' : renderVerify(value)),
        report.warnings,
      );
      if (!report.isOk) state.exitCode = EXIT_FAILED;
    });

  program
    .command('gc')
    .description('remove objects that no ledger references, directly or through trees')
    .option('--dry-run', 'only list what would be removed')
    .addOption(
      new Option('--grace-seconds <n>', 'spare unreferenced objects younger than this')
        .default('3600')
        .argParser((value) => {
          if (!/^\d+$/.test(value))
            throw new InvalidArgumentError('give a whole number of seconds.');
          return value;
        }),
    )
    .action(async (_options, command: Command) => {
      const options = globals(command);
      const own = command.opts<{ dryRun?: boolean; graceSeconds: string }>();
      const report = await gc({
        workspace: await workspaceOf(options),
        dryRun: own.dryRun === true,
        graceMs: Number(own.graceSeconds) * 1000,
      });
      emit(options, report, (value) => (options.quiet && !value.isDryRun ? '' : renderGc(value)));
    });

  return program;
}

function jsonReplacer(_key: string, value: unknown): unknown {
  if (value instanceof Error) {
    return isRewindError(value)
      ? { code: value.code, message: value.message }
      : { message: value.message };
  }
  return value;
}

/**
 * Runs the `rewind` command line with `argv` (without the node and script paths) and returns the
 * exit code: 0 ok, 1 a refused or failed operation, 2 a usage error.
 */
export async function runCli(argv: readonly string[], io: CliIo): Promise<number> {
  const state = { exitCode: EXIT_OK };
  const program = createProgram(io, state);
  const isJson = argv.includes('--json');
  const isDebug = argv.includes('--debug');
  try {
    await program.parseAsync([...argv], { from: 'user' });
    return state.exitCode;
  } catch (error) {
    if (error instanceof CommanderError) {
      if (error.code === 'commander.helpDisplayed' || error.code === 'commander.version')
        return EXIT_OK;
      if (error.code === 'commander.executeSubCommandAsync' || error.exitCode === 0) return EXIT_OK;
      // Commander has already explained the mistake on stderr; --json still gets its document.
      if (isJson) {
        const message = error.message.replace(/^error: /, '');
        io.stdout(`${JSON.stringify({ error: { code: 'USAGE', message, data: {} } }, null, 2)}\n`);
      }
      return EXIT_USAGE;
    }
    if (error instanceof UsageError) {
      if (isJson) {
        io.stdout(
          `${JSON.stringify({ error: { code: 'USAGE', message: error.message, data: {} } }, null, 2)}\n`,
        );
      }
      io.stderr(`rewind: ${error.message}\n(run \`rewind --help\` for usage)\n`);
      return EXIT_USAGE;
    }
    if (isJson) io.stdout(`${JSON.stringify(errorDocument(error), null, 2)}\n`);
    io.stderr(describeError(error, isDebug));
    return EXIT_FAILED;
  }
}
