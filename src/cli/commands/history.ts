/** `checkpoint`, `checkpoints`, `rollback`, `undo`, `diff`, `prune`: the session's history. */
import { resolve } from 'node:path';
import { Argument, type Command, Option } from 'commander';
import {
  type CheckpointInfo,
  type CheckpointResult,
  checkUserFile,
  isRewindError,
  type PruneResult,
  RewindError,
  type RollbackResult,
  type RollbackScope,
  type SnapshotPreview,
  type UndoResult,
  writeUserFile,
} from '../../index.js';
import {
  checkpointOperation,
  checkpointsOperation,
  diffOperation,
  type OperationTarget,
  pruneOperation,
  rollbackOperation,
  undoOperation,
} from '../../operations/index.js';
import { type CliContext, type CliInput, EXIT_DONE_UNWRITTEN, EXIT_FAILED } from '../context.js';
import { UsageError } from '../errors.js';
import {
  colorDiff,
  formatBytes,
  formatLocalTime,
  listInline,
  listLines,
  plural,
} from '../format.js';
import { addCliOnly, commandFor, feed, numberOf, readMessages } from '../options.js';
import { type Budget, renderPreviewQuestion } from '../preview.js';

interface CheckpointFlags {
  messages?: string;
  format?: string;
  maxSize?: string;
  yes?: boolean;
}

interface RollbackFlags {
  dryRun?: boolean;
  patchNote?: string;
  scope?: string;
  keepRequest?: boolean;
  messagesOut?: string;
}

interface PruneFlags {
  keepLast?: string;
  olderThan?: string;
  maxSize?: string;
  dryRun?: boolean;
}

/** A checkpoint in `--json`: its entry's number is its `id`, as for every entry a command names. */
function checkpointDocument<Checkpoint extends CheckpointInfo>({ seq, ...checkpoint }: Checkpoint) {
  return { id: seq, ...checkpoint };
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
    return 'No checkpoints yet. Create one with `rewind checkpoint` (a label is optional).\n';
  const width = Math.max(5, ...checkpoints.map((checkpoint) => checkpoint.label.length));
  const lines = [
    `${'LABEL'.padEnd(width)}  ${'SEQ'.padStart(5)}  ${'TIME'.padEnd(23)}  CHANGED SINCE PREVIOUS`,
  ];
  for (const checkpoint of checkpoints) {
    // The first one listed has no lines counted: there is nothing before it to count from. One
    // whose objects are missing or damaged has them unknown (a warning says why).
    const changedLines = checkpoint.linesUncounted
      ? ', +? -? lines'
      : checkpoint.linesAdded === undefined
        ? ''
        : `, +${checkpoint.linesAdded} -${checkpoint.linesRemoved ?? 0} lines`;
    lines.push(
      `${checkpoint.label.padEnd(width)}  ${String(checkpoint.seq).padStart(5)}  ${formatLocalTime(checkpoint.at)}  ` +
        `+${checkpoint.added} ~${checkpoint.modified} -${checkpoint.deleted} files${changedLines}${checkpoint.isAutomatic ? '  (automatic)' : ''}`,
    );
  }
  return `${lines.join('\n')}\n`;
}

/** The refusal of a first checkpoint over its budget, with how to go on from the command line. */
function withWayOn(error: RewindError): RewindError {
  return new RewindError(
    'SNAPSHOT_TOO_LARGE',
    `${error.message} To store it anyway, pass --max-size SIZE (such as --max-size 4GiB, or --max-size unlimited) or --yes.`,
    { data: error.data, cause: error },
  );
}

/**
 * Takes the checkpoint; a first one over its budget is shown to a person on a terminal, who is
 * asked whether to store it anyway. Elsewhere (no terminal, `--json`) the refusal stands, saying
 * how to go on. Undefined when the person said no.
 */
async function checkpointAsking(
  cli: CliContext,
  command: Command,
  target: OperationTarget,
  input: CliInput<typeof checkpointOperation>,
): Promise<CheckpointResult | undefined> {
  try {
    return await cli.run(command, target, checkpointOperation, input);
  } catch (error) {
    if (!isRewindError(error, 'SNAPSHOT_TOO_LARGE')) throw error;
    const globals = cli.globalsOf(command);
    if (!cli.io.prompt || globals.json) throw withWayOn(error);
    cli.io.stdout(
      renderPreviewQuestion(
        target.workspace,
        error.data as unknown as SnapshotPreview,
        (error.data.budget ?? {}) as Budget,
        globals.verbose,
      ),
    );
    if (!(await cli.confirm(command, false, 'Store it anyway?'))) return undefined;
    return cli.run(command, target, checkpointOperation, { ...input, maxSize: 'unlimited' });
  }
}

function renderRollback(
  result: RollbackResult,
  paths: readonly string[],
  isVerbose: boolean | undefined,
): string {
  // A rollback of some paths names them: `Rolled back src/a.ts to base`.
  const what = paths.length > 0 ? `${listInline(paths, isVerbose)} ` : '';
  if (!result.isDryRun) {
    const applied = result.applied;
    const skipped =
      applied && applied.skipped.length > 0
        ? `; left alone (left out of snapshots): ${listInline(applied.skipped, isVerbose)}`
        : '';
    return (
      `Rolled back ${what}to ${result.label}: ${applied?.written ?? 0} written, ${applied?.created ?? 0} created, ` +
      `${applied?.deleted ?? 0} deleted${skipped}. The previous state is saved: \`rewind undo ${result.id}\` brings it back.\n`
    );
  }
  const leftAlone =
    result.leftAlone && result.leftAlone.length > 0
      ? `It would leave alone (ignored): ${listInline(result.leftAlone, isVerbose)}.\n`
      : '';
  if (result.changes.length === 0)
    return `Rolling back ${what}to ${result.label} would change nothing.\n${leftAlone}`;
  const lines = [
    `Rolling back ${what}to ${result.label} would change ${plural(result.changes.length, 'path')}:`,
    ...listLines(result.changes, isVerbose, (change) => {
      const note = change.isUnrecorded
        ? '   (never recorded by this session: saved before the rollback)'
        : '';
      return `  ${change.action.padEnd(7)}  ${change.path}${note}`;
    }),
  ];
  return `${lines.join('\n')}\n${leftAlone}`;
}

/** What an error says, as a clause: its own words (a system error's, not advice to retry), no final stop. */
function messageOf(error: unknown): string {
  const message = error instanceof Error ? error.message : String(error);
  return message.replace(/\.$/, '');
}

/** Where the restored conversation went: written to `file` (when given, and not a dry run), or how to see it. */
async function placeConversation(
  result: RollbackResult,
  file: string | undefined,
): Promise<string> {
  if (!result.conversation) return '';
  const count = plural(result.conversation.messages.length, 'message');
  if (file !== undefined && !result.isDryRun) {
    await writeUserFile(file, `${JSON.stringify(result.conversation.messages, null, 2)}\n`);
    return `The restored conversation (${count}, ${result.conversation.format}) is in ${file}.\n`;
  }
  return `The ${result.isDryRun ? 'conversation would be restored to' : 'restored conversation has'} ${count} (${result.conversation.format}): \`rewind conversation show\` prints it${result.isDryRun ? '' : ', or pass --messages-out FILE'}.\n`;
}

function renderUndo(result: UndoResult, isVerbose: boolean | undefined): string {
  if (result.status === 'undone') {
    return (
      `Undid #${result.undoes}: ${result.applied.written} written, ${result.applied.created} created, ` +
      `${result.applied.deleted} deleted. Redo with \`rewind undo ${result.id}\`.\n`
    );
  }
  return [
    `Refused to undo #${result.undoes}: ${plural(result.conflicts.length, 'path')} it changed ${result.conflicts.length === 1 ? 'has' : 'have'} been edited since, and undoing would overwrite those edits:`,
    ...listLines(
      result.conflicts,
      isVerbose,
      (conflict) => `  ${conflict.path}: expected ${conflict.expected}, found ${conflict.found}`,
    ),
    'Nothing was changed. Save or revert those edits first, or roll back to a checkpoint instead.',
    '',
  ].join('\n');
}

/**
 * What `prune` dropped (or would drop), each with the criterion that selected it, then what it
 * spared and why, how many are kept, and what frees the space.
 */
function renderPrune(result: PruneResult, isVerbose: boolean | undefined): string {
  const lines =
    result.pruned.length === 0
      ? [`${result.isDryRun ? 'Would drop' : 'Dropped'} no checkpoint.`]
      : [
          `${result.isDryRun ? 'Would drop' : 'Dropped'} ${plural(result.pruned.length, 'checkpoint')}${result.isDryRun ? '' : ' for good'}:`,
          ...listLines(
            result.pruned,
            isVerbose,
            (pruned) => `  ${pruned.label} (#${pruned.seq}): ${REASONS[pruned.reason]}`,
          ),
        ];
  if (result.spared.length > 0) {
    lines.push(
      `Spared ${plural(result.spared.length, 'checkpoint')} the criteria selected:`,
      ...listLines(
        result.spared,
        isVerbose,
        (spared) => `  ${spared.label} (#${spared.seq}): ${spared.why}`,
      ),
    );
  }
  const kept = `${result.isDryRun ? 'Would keep' : 'Kept'} ${plural(result.keptCount, 'checkpoint')}.`;
  lines.push(
    result.pruned.length === 0
      ? kept
      : result.isDryRun
        ? `${kept} Nothing was dropped: without --dry-run they are dropped for good (nothing undoes it), and \`rewind gc\` then frees the space only they held.`
        : `${kept} \`rewind gc\` frees the space only the dropped ones held.`,
  );
  return `${lines.join('\n')}\n`;
}

const REASONS: Record<PruneResult['pruned'][number]['reason'], string> = {
  'keep-last': 'beyond --keep-last',
  'older-than': 'older than --older-than',
  'max-size': 'beyond --max-size',
};

/** Registers `checkpoint`, `checkpoints`, `rollback`, `undo`, `diff` and `prune`. */
export function registerHistoryCommands(program: Command, cli: CliContext): void {
  const checkpoint = commandFor(program, checkpointOperation);
  feed(
    checkpoint,
    'label',
    new Argument(
      '[label]',
      'letters, digits, ".", "_" and "-", unique in the session (default: checkpoint-N)',
    ),
  );
  feed(
    checkpoint,
    'messages',
    new Option(
      '--messages <file>',
      'the conversation to record with the files (a JSON array of messages; - reads stdin)',
    ),
  );
  feed(
    checkpoint,
    'format',
    new Option('--format <format>', 'its message format (default: detected)'),
  );
  feed(
    checkpoint,
    'maxSize',
    new Option(
      '--max-size <size>',
      'the most a first checkpoint may store, such as 4GiB, or unlimited (default: 1 GiB or 100,000 files)',
    ),
  );
  addCliOnly(
    checkpoint,
    new Option('-y, --yes', 'store a first checkpoint whatever its size, without asking'),
    'it answers the question a first checkpoint over its budget asks: how a person confirms on the command line',
  );
  checkpoint.action(async (label: string | undefined, flags: CheckpointFlags, command: Command) => {
    if (flags.yes === true && flags.maxSize !== undefined) {
      throw new UsageError(
        'Give --max-size or --yes, not both: --yes stores a first checkpoint whatever its size.',
      );
    }
    const messages =
      flags.messages === undefined
        ? undefined
        : await readMessages(
            flags.messages === '-' ? undefined : resolve(cli.io.cwd, flags.messages),
            cli.io.stdin,
          );
    const input = {
      label,
      messages,
      format: flags.format,
      maxSize: flags.yes === true ? 'unlimited' : flags.maxSize,
    };
    const output = await cli.withTarget(command, (target) =>
      checkpointAsking(cli, command, target, input),
    );
    if (output === undefined) {
      cli.io.stdout('Not stored; no checkpoint was made.\n');
      cli.setExitCode(EXIT_FAILED);
      return;
    }
    cli.emit(command, output, {
      text: (value, globals) => (globals.quiet ? '' : renderCheckpoint(value)),
      json: checkpointDocument,
      warnings: (value) => value.warnings,
    });
  });

  const checkpoints = commandFor(program, checkpointsOperation);
  feed(
    checkpoints,
    'lines',
    new Option(
      '--lines',
      'also count the lines of text each added and removed (cached after the first time)',
    ),
  );
  checkpoints.action((flags: { lines?: boolean }, command: Command) =>
    cli.perform(
      command,
      checkpointsOperation,
      { lines: flags.lines },
      {
        text: (listed) => renderCheckpoints(listed.checkpoints),
        json: (listed) => ({ ...listed, checkpoints: listed.checkpoints.map(checkpointDocument) }),
        warnings: (listed) => listed.warnings,
      },
    ),
  );

  const rollback = commandFor(program, rollbackOperation);
  feed(rollback, 'label', new Argument('<label>', 'the checkpoint, or "latest"'));
  feed(
    rollback,
    'paths',
    new Argument(
      '[paths...]',
      'restore only these files or directories, relative to the workspace root (after --, or after the label)',
    ),
  );
  feed(
    rollback,
    'dryRun',
    new Option('--dry-run', 'list what would be written, created and deleted, and change nothing'),
  );
  feed(
    rollback,
    'patchNote',
    new Option('--patch-note <text>', 'tell the model what changed since the checkpoint'),
  );
  feed(
    rollback,
    'scope',
    new Option(
      '--scope <what>',
      'restore both (default) the files and the conversation, only the files, or only the conversation',
    ),
  );
  feed(
    rollback,
    'keepRequest',
    new Option(
      '--no-keep-request',
      "restore the checkpoint's conversation as it was, without the current request at its end",
    ),
  );
  addCliOnly(
    rollback,
    new Option(
      '--messages-out <file>',
      'write the restored conversation (repaired, with the resume note) to this JSON file',
    ),
    'where the command line puts the restored conversation: a way to show the result',
  );
  rollback.action(
    async (label: string, paths: string[], flags: RollbackFlags, command: Command) => {
      const messagesOut =
        flags.messagesOut === undefined ? undefined : resolve(cli.io.cwd, flags.messagesOut);
      // A file that cannot take the conversation is refused before anything is rolled back.
      if (messagesOut !== undefined && flags.dryRun !== true) await checkUserFile(messagesOut);
      const output = await cli.withTarget(command, (target) =>
        cli.run(command, target, rollbackOperation, {
          label,
          dryRun: flags.dryRun,
          patchNote: flags.patchNote,
          paths: paths.length > 0 ? paths : undefined,
          scope: flags.scope as RollbackScope | undefined,
          keepRequest: flags.keepRequest === false ? false : undefined,
        }),
      );
      let where = '';
      let unwritten: { path: string; message: string } | undefined;
      try {
        where = await placeConversation(output, messagesOut);
      } catch (error) {
        // The rollback is done and journaled: what failed is only the copy of its conversation.
        if (messagesOut === undefined) throw error;
        unwritten = { path: messagesOut, message: messageOf(error) };
      }
      cli.emit(command, output, {
        text: (value, globals) =>
          globals.quiet && !value.isDryRun
            ? ''
            : `${renderRollback(value, paths, globals.verbose)}${where}`,
        // A dry run names no action: `id` is null rather than missing.
        json: (value) => ({
          ...value,
          id: value.id ?? null,
          ...(unwritten && { messagesOutError: unwritten }),
        }),
        warnings: (value) => value.warnings,
      });
      if (unwritten) {
        cli.io.stderr(
          `rewind: The rollback to ${output.label} was done (#${output.id}: \`rewind undo ${output.id}\` takes it back), but its conversation could not be written to ${unwritten.path}: ${unwritten.message}. Nothing is lost: \`rewind conversation show > FILE\` writes it (the restored conversation is the session's current one).\n`,
        );
        cli.setExitCode(EXIT_DONE_UNWRITTEN);
      }
    },
  );

  const undo = commandFor(program, undoOperation);
  feed(
    undo,
    'id',
    new Argument(
      '[id]',
      'the action id, as `rewind log` and every action command show it, or `last` (as --last)',
    ),
  );
  feed(undo, 'last', new Option('--last', 'the most recent action that can still be undone'));
  undo.action((id: string | undefined, flags: { last?: boolean }, command: Command) =>
    cli.perform(
      command,
      undoOperation,
      id === 'last' ? { last: true } : { id: numberOf(id), last: flags.last },
      {
        text: (output, globals) =>
          globals.quiet && output.status === 'undone' ? '' : renderUndo(output, globals.verbose),
        // A refusal is journaled but is no action: `id` is null rather than missing.
        json: (output) => (output.status === 'undone' ? output : { ...output, id: null }),
        warnings: (output) => (output.status === 'undone' ? output.warnings : []),
        exitCode: (output) => (output.status === 'refused' ? EXIT_FAILED : undefined),
      },
    ),
  );

  const diff = commandFor(program, diffOperation);
  feed(
    diff,
    'from',
    new Argument(
      '[from]',
      'a checkpoint label, "latest" (the default), or an action id (alone: the changes that action made)',
    ),
  );
  feed(
    diff,
    'to',
    new Argument('[to]', 'a checkpoint label or action id (default: the working tree)'),
  );
  diff.action(
    (from: string | undefined, to: string | undefined, _flags: object, command: Command) =>
      cli.perform(
        command,
        diffOperation,
        { from, to },
        {
          text: (output, presentation) =>
            output.text === ''
              ? `No differences between ${output.from} and ${output.to}.\n`
              : presentation.isColor
                ? colorDiff(output.text)
                : output.text,
        },
      ),
  );

  const prune = commandFor(program, pruneOperation);
  feed(
    prune,
    'keepLast',
    new Option('--keep-last <n>', 'keep the newest N checkpoints, drop the rest'),
  );
  feed(
    prune,
    'olderThan',
    new Option('--older-than <duration>', 'drop those older than this: 30m, 12h, 7d, 2w'),
  );
  feed(
    prune,
    'maxSize',
    new Option(
      '--max-size <size>',
      'keep the newest checkpoints whose files fit in this (500MB, 2GiB), drop the older ones',
    ),
  );
  feed(prune, 'dryRun', new Option('--dry-run', 'only list what would be dropped'));
  prune.action((flags: PruneFlags, command: Command) =>
    cli.perform(
      command,
      pruneOperation,
      {
        keepLast: numberOf(flags.keepLast),
        olderThan: flags.olderThan,
        maxSize: flags.maxSize,
        dryRun: flags.dryRun,
      },
      {
        text: (output, globals) =>
          globals.quiet && !output.isDryRun ? '' : renderPrune(output, globals.verbose),
        json: ({ pruned, spared, ...output }) => ({
          ...output,
          pruned: pruned.map(({ seq, ...checkpoint }) => ({ id: seq, ...checkpoint })),
          spared: spared.map(({ seq, ...checkpoint }) => ({ id: seq, ...checkpoint })),
        }),
      },
    ),
  );
}
