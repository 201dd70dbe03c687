/**
 * `init`, `status`, `session new|list|use`, `log`, `note`, `verify`, `gc`: the store as a whole,
 * its sessions, and a session's timeline.
 */
import { resolve } from 'node:path';
import { Argument, type Command, Option } from 'commander';
import type {
  GcReport,
  LogReport,
  SessionSummary,
  StatusReport,
  VerifyReport,
} from '../../index.js';
import {
  FIRST_CHECKPOINT_BUDGET,
  gcOperation,
  type InitOutput,
  initOperation,
  logOperation,
  noteOperation,
  type StatusOutput,
  sessionListOperation,
  sessionNewOperation,
  sessionUseOperation,
  statusOperation,
  verifyOperation,
} from '../../operations/index.js';
import { type CliContext, EXIT_FAILED, type GlobalFlags } from '../context.js';
import { formatBytes, formatLocalTime, listLines, plural } from '../format.js';
import { addCliOnly, commandFor, feed, numberOf, repeatable, spellingOf } from '../options.js';
import { describeBudget, isOverBudget, renderPreviewLine } from '../preview.js';
import { registerSessionFind, registerSharingCommands } from './sharing.js';

interface InitFlags {
  hashChain?: boolean;
  sandbox?: string;
  network?: boolean;
  isolated?: boolean;
  objects?: string;
  ledger?: string;
}

interface LogFlags {
  kind?: string;
  checkpoint?: string;
  last?: string;
}

interface SessionNewFlags {
  hashChain?: boolean;
  sandbox?: string;
  network?: boolean;
  switch?: boolean;
}

interface GcFlags {
  dryRun?: boolean;
  graceSeconds?: string;
}

/**
 * What the first checkpoint will take, while it is still to come, and whether `checkpoint` will
 * ask before storing it (over the budget every edge gives it by default).
 */
function renderFirstCheckpoint(result: InitOutput, globals: GlobalFlags): string {
  const preview = result.preview;
  if (!preview.isFirst) return '';
  const over = isOverBudget(preview, FIRST_CHECKPOINT_BUDGET)
    ? `That is over the budget of ${describeBudget(FIRST_CHECKPOINT_BUDGET)}: \`rewind checkpoint\` will show what it would store and ask first (--max-size SIZE raises the budget, --yes stores it without asking).\n`
    : '';
  return `${renderPreviewLine(result.workspace, preview, globals.verbose)}${over}`;
}

function renderInit(result: InitOutput, isHashChained: boolean): string {
  const session = result.session;
  const isolated =
    result.isolatedSession === undefined
      ? ''
      : `Started isolated session ${result.isolatedSession}${isHashChained ? ' (hash-chained)' : ''}: it works on a private view of the workspace, which changes only with \`rewind commit\`.\n`;
  if (!result.isNewStore && !result.isNewSession) {
    // With --isolated, the isolated session is what changed.
    return isolated
      ? `Rewind store already in ${result.storeDirectory}.\n${isolated}`
      : `Rewind store already in ${result.storeDirectory}; nothing changed. Current session: ${session.id} (${plural(session.entryCount, 'entry', 'entries')}).\n` +
          (session.interrupted ? `Interrupted ${describeInterrupted(session)}\n` : '');
  }
  const store = result.isNewStore ? `Initialized a Rewind store in ${result.storeDirectory}\n` : '';
  return `${store}Started session ${session.id}${session.isHashChained ? ' (hash-chained)' : ''}.\n${isolated}`;
}

/** How a session was started, for people: `no hash chain, sandbox none`. */
function describeSession(session: InitOutput['session']): string {
  const sandbox =
    session.sandbox === 'none'
      ? 'no sandbox'
      : `sandbox ${session.sandbox}${session.network ? ' with network' : ', no network'}`;
  const isolated = session.isolation === 'isolated' ? 'isolated, ' : '';
  const protections = describeProtections(session);
  return `${isolated}${session.isHashChained ? 'hash-chained' : 'no hash chain'}, ${sandbox}${protections ? `, ${protections}` : ''}`;
}

/** `redacts credentials and 2 patterns, refuses private addresses`, or '' for none. */
function describeProtections(session: SessionSummary): string {
  const { redact, blockPrivate } = session.protections;
  const count = redact.patterns.length;
  const patterns = count > 0 ? `${count} ${count === 1 ? 'pattern' : 'patterns'}` : '';
  const redacted = [redact.headers ? 'credentials' : '', patterns].filter(Boolean).join(' and ');
  return [redacted ? `redacts ${redacted}` : '', blockPrivate ? 'refuses private addresses' : '']
    .filter(Boolean)
    .join(', ');
}

/** What `init` did with the options that shape a session, when it could not apply some of them. */
function ignoredOptionWarnings(result: InitOutput, typed: (key: string) => string): string[] {
  const ignored = result.ignoredOptions;
  if (ignored.length === 0) return [];
  const session = result.session;
  const flags = ignored.map(typed);
  const listed =
    flags.length === 1 ? flags[0] : `${flags.slice(0, -1).join(', ')} and ${flags.at(-1)}`;
  const warnings = [
    `${listed} ${flags.length === 1 ? 'shapes' : 'shape'} a session as it starts, and this store has one already: its current session ${session.id} keeps how it was started (${describeSession(session)}); nothing changed.`,
  ];
  const sandboxing = ignored.filter((key) => key !== 'hashChain');
  if (sandboxing.length > 0) {
    warnings.push(
      `\`rewind init --isolated ${sandboxing.map(typed).join(' ')}\` starts a new, isolated session with ${sandboxing.length === 1 ? 'it' : 'them'}.`,
    );
  }
  if (ignored.includes('hashChain')) {
    warnings.push('`rewind session new --hash-chain` starts a new, hash-chained session.');
  }
  return warnings;
}

/**
 * The sessions, one on a line, `*` for the current one: id, start time, entry count (right-aligned)
 * and how it was started, each column as wide as its widest cell, whatever the counts' digits.
 */
function renderSessionLines(sessions: readonly SessionSummary[]): string[] {
  const rows = sessions.map((session) => ({
    session,
    id: session.id,
    time: formatLocalTime(session.startedAt),
    count: String(session.entryCount),
    unit: session.entryCount === 1 ? 'entry' : 'entries',
  }));
  const widthOf = (column: 'id' | 'time' | 'count' | 'unit'): number =>
    Math.max(0, ...rows.map((row) => row[column].length));
  const width = {
    id: widthOf('id'),
    time: widthOf('time'),
    count: widthOf('count'),
    unit: widthOf('unit'),
  };
  return rows.map(({ session, id, time, count, unit }) => {
    const flags = [
      session.isHashChained ? 'hash-chained' : '',
      session.tornLine ? 'torn last line ignored' : '',
      session.isolation === 'isolated' ? 'isolated' : '',
      session.sandbox !== 'none'
        ? `sandbox ${session.sandbox}${session.network ? ' with network' : ', no network'}`
        : '',
      describeProtections(session),
    ]
      .filter(Boolean)
      .join(', ');
    const note = session.unsupported
      ? `(written by a newer Rewind: ${session.unsupported.code})`
      : '';
    return [
      `  ${session.isCurrent ? '*' : ' '} ${id.padEnd(width.id)}`,
      time.padEnd(width.time),
      `${count.padStart(width.count)} ${unit.padEnd(width.unit)}`,
      flags,
      note,
    ]
      .filter(Boolean)
      .join('  ')
      .trimEnd();
  });
}

function renderStatus(report: StatusReport): string {
  const lines = [
    `Workspace  ${report.workspace}`,
    `Store      ${report.storeDirectory}: ${plural(report.objects.count, 'object')}, ${formatBytes(report.objects.sizeBytes)}` +
      (report.objects.bucketError === undefined
        ? ''
        : ` in the local cache; the bucket cannot be counted now. ${report.objects.bucketError}`),
    `Current    ${report.currentSession ?? '(none: run `rewind init`)'}`,
    `Sessions   ${report.sessions.length}`,
    ...renderSessionLines(report.sessions),
    ...report.sessions.flatMap((session) =>
      session.interrupted ? [`Interrupted ${describeInterrupted(session)}`] : [],
    ),
    ...report.sessions.flatMap(({ id, running }) =>
      running
        ? [
            `Running    ${running.kind} #${running.id} (${running.target}) in session ${id}: still running in process ${running.pid}; \`rewind log\` shows how it ends.`,
          ]
        : [],
    ),
  ];
  return `${lines.join('\n')}\n`;
}

/** A pending interrupted operation, said plainly: what it is and what will finish it. */
function describeInterrupted(session: SessionSummary): string {
  const { id, kind, target } = session.interrupted ?? { id: 0, kind: '', target: '' };
  return (
    `${kind} #${id} (${target}) in session ${session.id} was cut short: the next command in that ` +
    'session finishes it, saving first whatever was edited since.'
  );
}

/** A session as `session new` and `session use` name it: its id and how it was started. */
function describeStarted(session: SessionSummary): string {
  return `${session.id} (${describeSession(session)})`;
}

function renderPending(output: StatusOutput): string {
  const pending = output.pending;
  if (!pending) return '';
  return (
    `Pending    ${plural(pending.pendingChanges.length, 'change')} to commit from the isolated view` +
    (pending.conflicts.length > 0
      ? ` (${plural(pending.conflicts.length, 'conflict')}: \`rewind commit --dry-run\`)`
      : '') +
    '\n' +
    (pending.leftOut.length > 0
      ? `Left out   ${plural(pending.leftOut.length, 'path')} the ignore rules leave out changed in the view and will not be committed: ${pending.leftOut.slice(0, 5).join(', ')}${pending.leftOut.length > 5 ? ', ...' : ''}\n` +
        `           copy what you want to keep from ${pending.workspace} into the workspace; \`rewind destroy\` refuses until --force\n`
      : '')
  );
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
  if (report.session.interrupted) {
    lines.push(`Interrupted: ${describeInterrupted(report.session)}`);
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

function renderVerify(report: VerifyReport, isVerbose: boolean | undefined): string {
  const entryCount = report.sessions.reduce((sum, session) => sum + session.entryCount, 0);
  const checked =
    `${plural(report.sessions.length, 'session')} (${plural(entryCount, 'entry', 'entries')}) ` +
    `and ${plural(report.objectsChecked, 'object')}`;
  if (report.isOk) return `Verified ${checked}: no problems.\n`;
  const lines = [`Checked ${checked}: ${plural(report.problems.length, 'problem')}.`];
  lines.push(
    ...listLines(report.problems, isVerbose, (problem) => {
      const where = [
        problem.session && `session ${problem.session}`,
        problem.seq !== undefined && `#${problem.seq}`,
      ]
        .filter(Boolean)
        .join(' ');
      return `  ${problem.type}${where ? ` (${where})` : ''}: ${problem.message}`;
    }),
  );
  const firstBreak = report.problems.find((problem) => problem.type === 'chain-broken');
  if (firstBreak)
    lines.push(
      `The hash chain first breaks at entry #${firstBreak.seq} of session ${firstBreak.session}.`,
    );
  return `${lines.join('\n')}\n`;
}

function renderGc(report: GcReport, isVerbose: boolean | undefined): string {
  const verb = report.isDryRun ? 'Would remove' : 'Removed';
  const lines = report.isDryRun
    ? listLines(
        report.removed,
        isVerbose,
        (object) => `  ${object.digest}  ${formatBytes(object.sizeBytes)}`,
      )
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

/** The options that shape a session as it starts, for `init` and `session new`. */
function feedSessionOptions(command: Command): void {
  feed(
    command,
    'hashChain',
    new Option(
      '--hash-chain',
      'make every ledger entry of the new session commit to the previous one',
    ),
  );
  feed(
    command,
    'sandbox',
    new Option('--sandbox <backend>', 'where `rewind exec` runs commands (default: none)'),
  );
  feed(command, 'network', new Option('--network', 'let sandboxed commands use the network'));
}

/** Registers `init`, `status`, the `session` group, `log`, `note`, `verify` and `gc`. */
export function registerStoreCommands(program: Command, cli: CliContext): void {
  const init = commandFor(program, initOperation);
  addCliOnly(
    init,
    new Argument('[dir]', 'the workspace directory (default: --dir, else the current directory)'),
    'it names the workspace, as the global --dir does: the target, not an input',
  );
  feedSessionOptions(init);
  feed(
    init,
    'isolated',
    new Option(
      '--isolated',
      'start an isolated session: it works on a private view, and the workspace changes only with `rewind commit`',
    ),
  );
  feed(
    init,
    'objects',
    new Option(
      '--objects <url>',
      'keep the objects in an S3-compatible bucket, s3://BUCKET/PREFIX (default: REWIND_OBJECTS, else .rewind/objects)',
    ),
  );
  feed(
    init,
    'ledger',
    new Option(
      '--ledger <url>',
      'keep the ledgers in PostgreSQL, postgres://USER@HOST/DB (default: REWIND_LEDGER, else .rewind/sessions)',
    ),
  );
  init.action((dir: string | undefined, flags: InitFlags, command: Command) =>
    cli.perform(
      command,
      initOperation,
      {
        hashChain: flags.hashChain,
        sandbox: flags.sandbox,
        network: flags.network,
        isolated: flags.isolated,
        objects: flags.objects,
        ledger: flags.ledger,
      },
      {
        text: (output, globals) =>
          globals.quiet
            ? ''
            : `${renderInit(output, flags.hashChain === true)}${renderFirstCheckpoint(output, globals)}`,
        json: ({ warnings: _warnings, ...document }) => document,
        warnings: (output) => [
          ...output.warnings,
          // The options as they were typed: `--sandbox bwrap`.
          ...ignoredOptionWarnings(output, (key) =>
            key === 'sandbox' ? `${spellingOf(init, key)} ${flags.sandbox}` : spellingOf(init, key),
          ),
        ],
      },
      resolve(cli.io.cwd, dir ?? cli.globalsOf(command).dir ?? '.'),
    ),
  );

  registerSharingCommands(program, cli);

  commandFor(program, statusOperation).action((_flags: object, command: Command) =>
    cli.perform(
      command,
      statusOperation,
      {},
      {
        text: (output) => `${renderStatus(output)}${renderPending(output)}`,
      },
    ),
  );

  registerSessionCommands(program, cli);

  const log = commandFor(program, logOperation);
  feed(
    log,
    'kind',
    new Option(
      '--kind <kind>',
      'only entries of this kind or family (verification, action, rollback...)',
    ),
  );
  feed(log, 'checkpoint', new Option('--checkpoint <label>', 'only entries about this checkpoint'));
  feed(log, 'last', new Option('--last <n>', 'only the last N entries (after filtering)'));
  log.action((flags: LogFlags, command: Command) =>
    cli.perform(
      command,
      logOperation,
      { kind: flags.kind, checkpoint: flags.checkpoint, last: numberOf(flags.last) },
      {
        text: renderLog,
        json: (report) => ({
          ...report,
          entries: report.entries.map(({ seq, ...line }) => ({ id: seq, ...line })),
        }),
        warnings: logWarnings,
      },
    ),
  );

  const note = commandFor(program, noteOperation);
  feed(note, 'text', new Argument('<text...>', 'the note'));
  feed(
    note,
    'attachments',
    repeatable(new Option('--attach <file>', 'attach a file (repeatable)')).default([]),
  );
  note.action((words: string[], flags: { attach: string[] }, command: Command) =>
    cli.perform(
      command,
      noteOperation,
      { text: words.join(' '), attachments: flags.attach },
      {
        text: (output, globals) =>
          globals.quiet ? '' : `Added note #${output.entry.seq} to session ${output.session}.\n`,
        json: (output) => ({ id: output.entry.seq, ...output }),
      },
    ),
  );

  commandFor(program, verifyOperation).action((_flags: object, command: Command) =>
    cli.perform(
      command,
      verifyOperation,
      {},
      {
        text: (output, globals) =>
          globals.quiet && output.isOk ? '' : renderVerify(output, globals.verbose),
        warnings: (output) => output.warnings,
        exitCode: (output) => (output.isOk ? undefined : EXIT_FAILED),
      },
    ),
  );

  const gc = commandFor(program, gcOperation);
  feed(gc, 'dryRun', new Option('--dry-run', 'only list what would be removed'));
  feed(
    gc,
    'graceSeconds',
    new Option(
      '--grace-seconds <n>',
      'spare unreferenced objects younger than this (default: 3600)',
    ),
  );
  gc.action((flags: GcFlags, command: Command) =>
    cli.perform(
      command,
      gcOperation,
      { dryRun: flags.dryRun, graceSeconds: numberOf(flags.graceSeconds) },
      {
        text: (output, globals) =>
          globals.quiet && !output.isDryRun ? '' : renderGc(output, globals.verbose),
        warnings: (output) => output.warnings,
      },
    ),
  );
}

/** Registers the `session` group: `session new`, `session list` and `session use`. */
function registerSessionCommands(program: Command, cli: CliContext): void {
  const group = program
    .command('session')
    .description(
      'start a new session on the store, list its sessions, switch the current one, find one in the shared ledgers',
    );

  const started = commandFor(group, sessionNewOperation);
  feedSessionOptions(started);
  feed(
    started,
    'switch',
    new Option(
      '--no-switch',
      'leave the current session as it is (default: the new one becomes it)',
    ),
  );
  started.action((flags: SessionNewFlags, command: Command) =>
    cli.perform(
      command,
      sessionNewOperation,
      {
        hashChain: flags.hashChain,
        sandbox: flags.sandbox,
        network: flags.network,
        switch: flags.switch,
      },
      {
        text: (output, globals) =>
          globals.quiet
            ? ''
            : output.session.isCurrent
              ? `Started session ${describeStarted(output.session)}; it is now the current session.\n`
              : `Started session ${describeStarted(output.session)}; the current session is unchanged (\`rewind session use ${output.session.id}\` switches to it).\n`,
        json: ({ warnings: _warnings, ...document }) => document,
        warnings: (output) => output.warnings,
      },
    ),
  );

  commandFor(group, sessionListOperation).action((_flags: object, command: Command) =>
    cli.perform(
      command,
      sessionListOperation,
      {},
      {
        text: (output) =>
          output.sessions.length === 0
            ? 'No sessions yet. Start one with `rewind init`.\n'
            : `${[
                ...renderSessionLines(output.sessions),
                ...output.sessions.flatMap((session) =>
                  session.interrupted ? [`Interrupted ${describeInterrupted(session)}`] : [],
                ),
              ].join('\n')}\n`,
      },
    ),
  );

  const use = commandFor(group, sessionUseOperation);
  feed(
    use,
    'id',
    new Argument(
      '<id>',
      'the session: its id, a unique prefix of four characters or more, or its ledger file name',
    ),
  );
  use.action((id: string, _flags: object, command: Command) =>
    cli.perform(
      command,
      sessionUseOperation,
      { id },
      {
        text: (output, globals) =>
          globals.quiet
            ? ''
            : `The current session is now ${describeStarted(output.session)}: ${plural(output.session.entryCount, 'entry', 'entries')}.\n`,
      },
    ),
  );

  registerSessionFind(group, cli);
}
