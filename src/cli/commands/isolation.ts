/** `commit`, `destroy`: an isolated session's view, applied to the workspace or removed. */
import { type Command, Option } from 'commander';
import type { CommitResult } from '../../index.js';
import { commitOperation, destroyOperation } from '../../operations/index.js';
import { type CliContext, EXIT_FAILED } from '../context.js';
import { colorDiff, listLines, plural } from '../format.js';
import { commandFor, feed } from '../options.js';

function renderCommit(
  result: CommitResult,
  isVerbose: boolean | undefined,
  isColor: boolean,
): string {
  const lines: string[] = [];
  const counts = { written: 0, created: 0, deleted: 0 };
  for (const change of result.changes) counts[change.action] += 1;
  const summary = `${counts.written} written, ${counts.created} created, ${counts.deleted} deleted`;
  // What the ignore rules leave out is never committed: said whatever the status, --quiet too.
  const leftOut =
    result.leftOut.length > 0
      ? `Not committed: ${plural(result.leftOut.length, 'path')} the ignore rules leave out changed in the view:\n${listLines(result.leftOut, isVerbose, (path) => `  ${path}`).join('\n')}\n` +
        'A commit never carries them and `rewind destroy` refuses while they are there: copy what you want to keep from the view (`rewind status` names it) into the workspace, then `rewind destroy --force`.\n'
      : '';
  if (result.status === 'nothing-to-commit')
    return `Nothing to commit: the session changed nothing since it began or was last committed.\n${leftOut}`;
  if (result.status === 'dry-run') {
    lines.push(`Committing would change the workspace: ${summary}.`);
    lines.push(
      ...listLines(
        result.changes,
        isVerbose,
        (change) => `  ${change.action.padEnd(8)} ${change.path}`,
      ),
    );
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
    if (result.status === 'dry-run') {
      const diffed = result.diff === undefined ? '' : '; not in the diff';
      lines.push(`Conflicts (the commit would be refused${diffed}):`);
    }
    lines.push(
      ...listLines(
        result.conflicts,
        isVerbose,
        (conflict) =>
          `  ${conflict.path}: the session ${conflict.session}, the workspace ${conflict.host}`,
      ),
    );
  }
  // The diff comes last, whole (the lists above are bounded, it is not), coloured as `rewind diff`.
  const diff = result.diff ? `\n${isColor ? colorDiff(result.diff) : result.diff}` : '';
  return `${lines.join('\n')}\n${leftOut}${diff}`;
}

/** Registers `commit` and `destroy`. */
export function registerIsolationCommands(program: Command, cli: CliContext): void {
  const commit = commandFor(program, commitOperation);
  feed(
    commit,
    'dryRun',
    new Option('--dry-run', 'list what would be written, created and deleted, and every conflict'),
  );
  feed(
    commit,
    'diff',
    new Option(
      '--diff',
      "with --dry-run: also a unified diff from the workspace's files to what the commit would write",
    ),
  );
  commit.action((flags: { dryRun?: boolean; diff?: boolean }, command: Command) =>
    cli.perform(
      command,
      commitOperation,
      { dryRun: flags.dryRun, diff: flags.diff },
      {
        // A plan and a refusal are shown, --quiet or not; what was committed is a summary.
        text: (output, globals) =>
          globals.quiet &&
          output.leftOut.length === 0 &&
          (output.status === 'committed' || output.status === 'nothing-to-commit')
            ? ''
            : renderCommit(output, globals.verbose, globals.isColor),
        // Only a commit that happened is an action: otherwise `id` is null rather than missing.
        json: (output) => ({ ...output, id: output.id ?? null }),
        // A plan with conflicts says the commit would be refused: scripts can test it.
        exitCode: (output) =>
          output.status === 'refused' || output.conflicts.length > 0 ? EXIT_FAILED : undefined,
      },
    ),
  );

  const destroy = commandFor(program, destroyOperation);
  feed(
    destroy,
    'force',
    new Option('--force', 'drop uncommitted changes (they stay in the store)'),
  );
  destroy.action((flags: { force?: boolean }, command: Command) =>
    cli.perform(
      command,
      destroyOperation,
      { force: flags.force },
      {
        text: (output, globals) =>
          globals.quiet
            ? ''
            : `Destroyed the session view.${
                output.wasCurrent
                  ? ' No session is current now: `rewind session use ID` picks one (`rewind session list` lists them), `rewind session new` starts one.'
                  : ''
              }\n`,
      },
    ),
  );
}
