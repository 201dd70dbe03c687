/** `attach`, `push`, `pull`: sessions across machines, through the shared backends. */
import { Argument, type Command, Option } from 'commander';
import type { CopyResult, SharedSessionInfo } from '../../index.js';
import {
  attachOperation,
  pullOperation,
  pushOperation,
  sessionFindOperation,
} from '../../operations/index.js';
import type { CliContext } from '../context.js';
import { formatBytes, formatLocalTime, plural } from '../format.js';
import { commandFor, feed, numberOf } from '../options.js';

/** The database of `push`, `pull` and `session find`. */
const sharedLedgerOption = () =>
  new Option('--ledger <url>', 'the PostgreSQL URL of the shared ledgers (default: REWIND_LEDGER)');

/** The session `attach` and `pull` find in the database. */
const sessionArgument = () =>
  new Argument('<session>', "the session's id, or a unique prefix of four characters or more");

export function registerSharingCommands(program: Command, cli: CliContext): void {
  const attach = commandFor(program, attachOperation);
  feed(attach, 'session', sessionArgument());
  feed(
    attach,
    'ledger',
    new Option('--ledger <url>', 'the PostgreSQL URL its ledger is in').makeOptionMandatory(),
  );
  feed(
    attach,
    'objects',
    new Option('--objects <url>', 'the bucket its objects are in (default: REWIND_OBJECTS)'),
  );
  attach.action((session: string, flags: { ledger: string; objects?: string }, command: Command) =>
    cli.perform(
      command,
      attachOperation,
      { session, ledger: flags.ledger, objects: flags.objects },
      {
        text: (output, globals) =>
          globals.quiet
            ? ''
            : `Attached to session ${output.session} in ${output.workspace}${
                output.checkpoint === undefined
                  ? ': it has no checkpoint yet, so nothing was restored.'
                  : `: checkpoint ${output.checkpoint} restored (${plural(output.restored?.changes.length ?? 0, 'path')}).`
              }\n`,
      },
    ),
  );

  const sharedOptions = (command: Command) => {
    feed(command, 'ledger', sharedLedgerOption());
    feed(
      command,
      'objects',
      new Option('--objects <url>', 'the bucket of the shared objects (default: REWIND_OBJECTS)'),
    );
  };
  const copied = (output: CopyResult, sent: string) =>
    `${plural(output.appended, 'entry', 'entries')} and ${plural(output.objects.objects, 'object')} (${formatBytes(output.objects.bytes)}) ${sent}`;

  const push = commandFor(program, pushOperation);
  sharedOptions(push);
  push.action((flags: { ledger?: string; objects?: string }, command: Command) =>
    cli.perform(command, pushOperation, flags, {
      text: (output, globals) => {
        if (globals.quiet) return '';
        const head =
          output.appended === 0
            ? `Session ${output.session} is up to date in the shared ledger (store ${output.store}).`
            : `Pushed session ${output.session} to store ${output.store}: ${copied(output, 'sent')}.`;
        const ahead =
          output.ahead > 0
            ? ` The shared copy holds ${plural(output.ahead, 'entry', 'entries')} more: \`rewind pull ${output.session}\` brings them here.`
            : '';
        return `${head}${ahead}\n`;
      },
      warnings: (output) => output.warnings,
    }),
  );

  const pull = commandFor(program, pullOperation);
  feed(pull, 'session', sessionArgument());
  sharedOptions(pull);
  pull.action((session: string, flags: { ledger?: string; objects?: string }, command: Command) =>
    cli.perform(
      command,
      pullOperation,
      { session, ...flags },
      {
        text: (output, globals) => {
          if (globals.quiet) return '';
          const head =
            output.appended === 0
              ? `Session ${output.session} is up to date here.`
              : `Pulled session ${output.session}: ${copied(output, 'received')}.`;
          const ahead =
            output.ahead > 0
              ? ` This copy holds ${plural(output.ahead, 'entry', 'entries')} more: \`rewind push --session ${output.session}\` sends them.`
              : '';
          const current = output.isCurrent
            ? ' It is the current session.'
            : ` \`rewind session use ${output.session}\` makes it the current session.`;
          return `${head}${ahead}${current} The workspace's files were left as they are: \`rewind rollback latest --session ${output.session}\` restores its last checkpoint (or name another).\n`;
        },
        warnings: (output) => output.warnings,
      },
    ),
  );
}

/** One session of a shared ledger, on one line. */
function renderSharedSession(session: SharedSessionInfo): string {
  const where = [
    session.host !== undefined && `on ${session.host}`,
    session.workspace !== undefined && `in ${session.workspace}`,
  ].filter(Boolean);
  const traits = [session.isHashChained && 'hash-chained', session.isIsolated && 'isolated'].filter(
    Boolean,
  );
  return [
    session.id,
    `last written ${formatLocalTime(session.lastAt)}`,
    plural(session.entryCount, 'entry', 'entries'),
    ...where,
    `store ${session.store}`,
    ...traits,
  ].join('  ');
}

/** `rewind session find`: the sessions of a shared ledger, to attach or pull one. */
export function registerSessionFind(group: Command, cli: CliContext): void {
  const find = commandFor(group, sessionFindOperation);
  feed(
    find,
    'query',
    new Argument('[query]', 'an id prefix, or part of a host name or workspace path'),
  );
  feed(find, 'ledger', sharedLedgerOption());
  feed(
    find,
    'last',
    new Option('--last <n>', 'at most N sessions, the most recently written (default 20)'),
  );
  find.action(
    (query: string | undefined, flags: { ledger?: string; last?: string }, command: Command) =>
      cli.perform(
        command,
        sessionFindOperation,
        { query, ledger: flags.ledger, last: numberOf(flags.last) },
        {
          text: (output) =>
            output.sessions.length === 0
              ? `No session${query === undefined ? '' : ` matches "${query}"`} in the shared ledgers.\n`
              : `${output.sessions.map(renderSharedSession).join('\n')}\n\`rewind pull ID\` copies one here; \`rewind attach ID\` resumes one in an empty directory.\n`,
        },
      ),
  );
}
