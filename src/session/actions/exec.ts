import { isUtf8 } from 'node:buffer';
import { lstatSync } from 'node:fs';
import { join } from 'node:path';
import { isRewindError, RewindError } from '../../errors.js';
import { diskPath, namedAndMore, REDACTION_LOOKAHEAD_BYTES } from '../../lib/index.js';
import { type Command, DEFAULT_MAX_OUTPUT_BYTES, type RunResult } from '../../sandbox/index.js';
import type { TreeEntry } from '../../store/index.js';
import {
  diffTrees,
  fileChangeKind,
  isAtOrUnder,
  type SnapshotResult,
} from '../../workspace/index.js';
import { refuseNulIn, type SessionContext, sandboxFor, snapshotWorkspace } from '../context.js';
import { type Journal, withWorkspaceLock } from '../journal/journal.js';
import {
  type ActionResult,
  type ExecSpec,
  journaledSpec,
  redactCapped,
  targetOf,
} from './journaled-spec.js';

/** Options of `Session.exec`. */
export interface ExecOptions {
  /** Journal the command without running it; `Session.approve` runs it. */
  draft?: boolean;
  /** Ends the command and everything it started after this long. Default 120 000 ms. */
  timeoutMs?: number;
  /** Variables added to the command's clean environment. */
  env?: Record<string, string>;
  /** Bytes of stdout and of stderr kept as evidence. Default 1 MiB each. */
  maxOutputBytes?: number;
}

/** What `Session.exec` recorded. */
export interface ExecResult extends ActionResult {
  exitCode: number | null;
  signal: string | null;
  timedOut: boolean;
  durationMs: number;
  /** What it printed, as UTF-8 text; `stdoutBase64`, the exact bytes, too when they are not UTF-8. */
  stdout: string;
  stderr: string;
  stdoutTruncated: boolean;
  stderrTruncated: boolean;
  stdoutBase64?: string;
  stderrBase64?: string;
  /** Files the command created, modified and deleted in the workspace. */
  created: string[];
  modified: string[];
  deleted: string[];
  /**
   * Paths the command left unreadable (no permission, ...): what they hold is unknown, so they
   * are in none of the lists above, and undoing the command leaves them as they are.
   */
  unreadable: string[];
}

/** Paths an entry lists, per kind of change, at most. */
const MAX_LISTED_PATHS = 1000;

/**
 * The command as it will run, defaults applied. Throws `INVALID_ARGUMENT` for an empty one, and
 * for a NUL byte in it or its environment (the system ends an argument there: another command
 * would run than the one journaled).
 */
export function execSpecOf(
  context: SessionContext,
  command: Command,
  options: ExecOptions,
): ExecSpec {
  if ((typeof command === 'string' ? command : command.join('')) === '') {
    throw new RewindError(
      'INVALID_ARGUMENT',
      'The command is empty. Give the program to run and its arguments.',
    );
  }
  refuseNulIn(command, 'The command');
  const variable = Object.entries(options.env ?? {}).find(
    ([name, value]) => name === '' || name.includes('=') || `${name}${value}`.includes('\0'),
  );
  if (variable !== undefined) {
    throw new RewindError(
      'INVALID_ARGUMENT',
      `The environment variable ${JSON.stringify(variable[0])} has an empty name, an "=" in its name or a NUL byte. Give NAME=value pairs without them.`,
    );
  }
  return {
    action: 'exec',
    command: typeof command === 'string' ? command : [...command],
    timeoutMs: options.timeoutMs ?? context.settings.execTimeoutMs,
    ...(options.env && { env: options.env }),
    ...(options.maxOutputBytes !== undefined && { maxOutputBytes: options.maxOutputBytes }),
  };
}

/**
 * Journals a command (with the workspace before it) and runs it; `compensates` names the action
 * it compensates, if any. See `Session.exec`.
 */
export function execCommand(
  context: SessionContext,
  spec: ExecSpec,
  compensates?: number,
): Promise<ExecResult> {
  return withWorkspaceLock(context, `running ${targetOf(context.redactor, spec)}`, (journal) =>
    startCommandAction(context, journal, spec, compensates),
  );
}

/** Inside the lock: journals a command before it runs, then runs it. */
export async function startCommandAction(
  context: SessionContext,
  journal: Journal,
  spec: ExecSpec,
  compensates?: number,
): Promise<ExecResult> {
  const before = await snapshotWorkspace(context);
  const started = await journal.append(
    'action-started',
    {
      ...journaledSpec(context.redactor, spec),
      class: 'reversible',
      beforeTree: before.tree,
      ...(compensates !== undefined && { compensates }),
    },
    [{ type: 'tree', digest: before.tree }],
  );
  return runCommandAction(context, journal, started.seq, spec, before);
}

/**
 * Runs a journaled command in the sandbox and closes its action with the workspace after it, the
 * files it created, modified and deleted, and its output as evidence.
 */
export async function runCommandAction(
  context: SessionContext,
  journal: Journal,
  id: number,
  spec: ExecSpec,
  before: SnapshotResult,
): Promise<ExecResult> {
  const redactor = context.redactor;
  const cap = spec.maxOutputBytes ?? DEFAULT_MAX_OUTPUT_BYTES;
  let run: RunResult;
  try {
    // Read past the cap, so that a secret the cap cuts is redacted whole, not stored in part.
    run = await sandboxFor(context).run(spec.command, {
      cwd: context.workspace,
      timeoutMs: spec.timeoutMs,
      ...(spec.env && { env: spec.env }),
      maxOutputBytes: cap + REDACTION_LOOKAHEAD_BYTES,
    });
  } catch (error) {
    const code = isRewindError(error) ? error.code : 'EXEC_FAILED';
    await journal.append(
      'action-failed',
      {
        startedSeq: id,
        afterTree: before.tree,
        error: {
          code,
          message: redactor.text(error instanceof Error ? error.message : String(error)).text,
        },
      },
      [{ type: 'tree', digest: before.tree }],
    );
    throw error;
  }
  const after = await snapshotWorkspace(context);
  // The URL passwords the command carries are scrubbed wherever it prints them, too.
  const secrets = redactor.secretsIn(
    typeof spec.command === 'string' ? spec.command : spec.command.join(' '),
  );
  const stdoutText = redactCapped(redactor, run.stdout, cap, secrets);
  const stderrText = redactCapped(redactor, run.stderr, cap, secrets);
  const stdoutTruncated = run.stdoutTruncated || stdoutText.truncated;
  const stderrTruncated = run.stderrTruncated || stderrText.truncated;
  const batch = context.store.batch();
  const stdout = await batch.put(stdoutText.bytes);
  const stderr = await batch.put(stderrText.bytes);
  await batch.commit();
  // What the command left unreadable is not in the snapshot after it, yet is there: not deleted.
  const unreadable = after.unreadable.map(({ path }) => path);
  const changes = (await diffTrees(context.store, before.tree, after.tree)).filter(
    (change) => !isAtOrUnder(change.path, unreadable),
  );
  const files = { created: [] as string[], modified: [] as string[], deleted: [] as string[] };
  const keys = { added: 'created', modified: 'modified', deleted: 'deleted' } as const;
  // A file gone from the snapshot but still on disk, as a file (a link as a link), was not
  // deleted: rules this command wrote (a .gitignore, a .rewindignore) now leave it out. A folder
  // in its place (left out or not) means it was.
  const hidden: string[] = [];
  for (const change of changes) {
    const kind = fileChangeKind(change);
    if (kind === 'deleted' && isStillThere(join(context.workspace, change.path), change.before)) {
      hidden.push(change.path);
    } else if (kind) files[keys[kind]].push(change.path);
  }
  const hiddenWarning =
    hidden.length === 0
      ? []
      : [
          `${namedAndMore(hidden)} ${hidden.length === 1 ? 'is' : 'are'} still there but now left out by the ignore rules this command changed: ` +
            'Rewind no longer records changes to them. Undo this command to track them again.',
        ];
  const isDone = run.exitCode === 0 && !run.timedOut;
  const sandbox = sandboxFor(context);
  const redacted = [
    ...(stdoutText.count > 0 ? ['stdout'] : []),
    ...(stderrText.count > 0 ? ['stderr'] : []),
  ];
  await journal.append(
    isDone ? 'action-completed' : 'action-failed',
    {
      startedSeq: id,
      afterTree: after.tree,
      created: files.created.slice(0, MAX_LISTED_PATHS),
      modified: files.modified.slice(0, MAX_LISTED_PATHS),
      deleted: files.deleted.slice(0, MAX_LISTED_PATHS),
      counts: {
        created: files.created.length,
        modified: files.modified.length,
        deleted: files.deleted.length,
      },
      ...(unreadable.length > 0 && { unreadable: unreadable.slice(0, MAX_LISTED_PATHS) }),
      evidence: {
        exitCode: run.exitCode,
        signal: run.signal,
        timedOut: run.timedOut,
        durationMs: Math.round(run.durationMs),
        sandbox: sandbox.backend,
        stdout: { ...stdout, truncated: stdoutTruncated },
        stderr: { ...stderr, truncated: stderrTruncated },
      },
      ...(redacted.length > 0 && { redacted }),
      ...(!isDone && {
        error: run.timedOut
          ? { code: 'TIMED_OUT', message: `It ran longer than ${spec.timeoutMs} ms and was ended.` }
          : {
              code: 'EXIT_NONZERO',
              message:
                run.signal !== null
                  ? `It was ended by ${run.signal}.`
                  : `It exited with ${run.exitCode}.`,
            },
      }),
    },
    [
      { type: 'tree', digest: after.tree },
      { type: 'blob', digest: stdout.digest },
      { type: 'blob', digest: stderr.digest },
    ],
  );
  return {
    id,
    kind: 'exec',
    class: 'reversible',
    state: isDone ? 'done' : 'failed',
    target: targetOf(redactor, spec),
    changes: changes
      .filter((change) => fileChangeKind(change) !== undefined)
      .map((change) => ({ path: change.path, before: change.before, after: change.after })),
    warnings: [...sandbox.warnings, ...before.warnings, ...after.warnings, ...hiddenWarning],
    exitCode: run.exitCode,
    signal: run.signal,
    timedOut: run.timedOut,
    durationMs: run.durationMs,
    stdout: stdoutText.bytes.toString('utf8'),
    stderr: stderrText.bytes.toString('utf8'),
    stdoutTruncated,
    stderrTruncated,
    ...(!isUtf8(stdoutText.bytes) && { stdoutBase64: stdoutText.bytes.toString('base64') }),
    ...(!isUtf8(stderrText.bytes) && { stderrBase64: stderrText.bytes.toString('base64') }),
    ...files,
    unreadable,
  };
}

/** The message of a command that failed: how it ended and the tail of its stderr. */
export function commandFailureMessage(result: ExecResult): string {
  const how = result.timedOut
    ? `timed out after ${Math.round(result.durationMs)} ms`
    : result.signal !== null
      ? `ended by ${result.signal}`
      : `exit ${result.exitCode}`;
  const stderr = result.stderr.trim().split('\n').slice(-5).join('\n');
  return `Command failed (${how}): ${result.target}${stderr ? `\n${stderr}` : ''}`;
}

/** Whether `path` still holds an entry of the type `entry` had (a file, a link), not another. */
function isStillThere(path: string, entry: TreeEntry | undefined): boolean {
  try {
    const stats = lstatSync(diskPath(path));
    return entry?.type === 'symlink' ? stats.isSymbolicLink() : stats.isFile();
  } catch {
    return false;
  }
}
