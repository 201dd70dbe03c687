import type { Format } from '../../conversation/index.js';
import { isRewindError, RewindError } from '../../errors.js';
import { clipped, isDigest, namedAndMore } from '../../lib/index.js';
import { lineCountsBetween, type SnapshotProgress } from '../../workspace/index.js';
import {
  isFirstSnapshotOf,
  previewOfSession,
  type SessionContext,
  snapshotWorkspace,
} from '../context.js';
import {
  appendCheckpoint,
  type CheckpointInfo,
  checkpointOf,
} from '../journal/checkpoint-records.js';
import { type Journal, readJournal, withWorkspaceLock } from '../journal/journal.js';
import { type CheckedMessages, checkMessages, storeMessages } from './conversation.js';

/** Options of `Session.checkpoint`. */
export interface CheckpointOptions {
  isAutomatic?: boolean;
  /** The conversation to record with the files (else the session's current one, if any). */
  messages?: readonly unknown[];
  /** Its format; detected when omitted. */
  format?: Format;
  /**
   * Refuse (`SNAPSHOT_TOO_LARGE`) a first checkpoint, one that must read every file, that would
   * store more than this. Default: no limit (the CLI and the MCP server set one).
   */
  budget?: { maxBytes?: number; maxFiles?: number };
  /** Called as files are read, when the checkpoint must read many (a first one reads them all). */
  onProgress?: (progress: SnapshotProgress) => void;
}

/** What `Session.checkpoint` recorded. */
export interface CheckpointResult extends CheckpointInfo {
  /** Files that had to be read (the rest were unchanged since the last snapshot). */
  readCount: number;
  warnings: string[];
}

const LABEL_PATTERN = /^[A-Za-z0-9][A-Za-z0-9._-]{0,127}$/;

/** Checks a checkpoint label: letters, digits, `.`, `_`, `-`; not only digits; not `latest`. */
export function checkLabel(label: string): string {
  if (
    typeof label !== 'string' ||
    !LABEL_PATTERN.test(label) ||
    /^\d+$/.test(label) ||
    label === 'latest' ||
    label.includes('..')
  ) {
    throw new RewindError(
      'INVALID_ARGUMENT',
      `${typeof label === 'string' ? `"${clipped(label)}"` : `${typeof label} ${clipped(String(label))}`} is not a valid checkpoint label. Use letters, digits, ".", "_" and "-" (up to 128, starting with a letter or digit, ` +
        'not only digits, not "latest"), such as "before-refactor".',
      { data: { label } },
    );
  }
  return label;
}

/** A size for people: `512 B`, `4.0 KiB`, `1.5 MiB`, `2.0 GiB`. */
function formatSize(bytes: number): string {
  const units = ['B', 'KiB', 'MiB', 'GiB', 'TiB'];
  let value = bytes;
  let unit = 0;
  while (value >= 1024 && unit < units.length - 1) {
    value /= 1024;
    unit += 1;
  }
  return unit === 0 ? `${value} B` : `${value.toFixed(1)} ${units[unit]}`;
}

/** Refuses a first snapshot (every file read and stored) larger than `budget`. */
function checkFirstSnapshot(
  context: SessionContext,
  budget: { maxBytes?: number; maxFiles?: number },
): void {
  // Only a first snapshot is previewed: the preview looks at every file, as a first one reads it.
  if (!isFirstSnapshotOf(context)) return;
  const preview = previewOfSession(context);
  const isTooBig =
    (budget.maxBytes !== undefined && preview.sizeBytes > budget.maxBytes) ||
    (budget.maxFiles !== undefined && preview.fileCount > budget.maxFiles);
  if (!isTooBig) return;
  const largest = preview.largest
    .map((directory) => `${directory.path}/ ${formatSize(directory.sizeBytes)}`)
    .join(', ');
  const limits = [
    ...(budget.maxFiles !== undefined ? [`${budget.maxFiles} files`] : []),
    ...(budget.maxBytes !== undefined ? [formatSize(budget.maxBytes)] : []),
  ].join(' or ');
  throw new RewindError(
    'SNAPSHOT_TOO_LARGE',
    `The first checkpoint would store ${preview.fileCount} files, ${formatSize(preview.sizeBytes)}` +
      (largest ? ` (largest: ${largest})` : '') +
      `, over the budget of ${limits}. ` +
      'Leave out what need not be kept (build output, dependencies) in .gitignore or .rewindignore, or raise the budget.',
    { data: { ...preview, budget } },
  );
}

/** Throws `CHECKPOINT_EXISTS` when a checkpoint of the session (not pruned) has `label`. */
function checkLabelFree(context: SessionContext, journal: Journal, label: string): void {
  const existing = journal.checkpoints().find((checkpoint) => checkpoint.label === label);
  if (!existing) return;
  throw new RewindError(
    'CHECKPOINT_EXISTS',
    `Session ${context.id} already has a checkpoint "${label}" (#${existing.seq}). Choose another label.`,
    { data: { label, seq: existing.seq } },
  );
}

/**
 * The label of a checkpoint made without one: `checkpoint-N`, N the number of checkpoints the
 * session lists plus one, or the next number free.
 */
function defaultLabelOf(journal: Journal): string {
  const checkpoints = journal.checkpoints();
  const taken = new Set(checkpoints.map((checkpoint) => checkpoint.label));
  let number = checkpoints.length + 1;
  while (taken.has(`checkpoint-${number}`)) number += 1;
  return `checkpoint-${number}`;
}

/**
 * Records the workspace under `label` with a `checkpoint-created` entry, paired with `messages`
 * when given, else with the session's current conversation. Without `label`, under
 * `checkpoint-N` (see {@link defaultLabelOf}), chosen under the workspace lock once the files are
 * stored. Throws `CHECKPOINT_EXISTS` for a `label` taken.
 */
export function createCheckpoint(
  context: SessionContext,
  label: string | undefined,
  options: {
    isAutomatic: boolean;
    messages: CheckedMessages | undefined;
    budget?: { maxBytes?: number; maxFiles?: number } | undefined;
    onProgress?: ((progress: SnapshotProgress) => void) | undefined;
  },
): Promise<CheckpointResult> {
  const purpose = label === undefined ? 'creating a checkpoint' : `creating checkpoint ${label}`;
  return withWorkspaceLock(context, purpose, async (journal) => {
    if (options.budget) checkFirstSnapshot(context, options.budget);
    if (label !== undefined) checkLabelFree(context, journal, label);
    const snapshot = await snapshotWorkspace(context, options.onProgress);
    const conversation = options.messages
      ? await storeMessages(context, options.messages)
      : journal.currentConversation();
    for (;;) {
      const chosen = label ?? defaultLabelOf(journal);
      try {
        const entry = await appendCheckpoint(context, journal, chosen, snapshot, {
          isAutomatic: options.isAutomatic,
          conversation,
          // Another copy of the workspace on a shared ledger may have taken the label meanwhile.
          check: (current) => checkLabelFree(context, current, chosen),
        });
        return {
          ...checkpointOf(entry),
          readCount: snapshot.readCount,
          warnings: snapshot.warnings,
        };
      } catch (error) {
        // The check brought the journal up to the checkpoint that took it: choose again.
        if (label !== undefined || !isRewindError(error, 'CHECKPOINT_EXISTS')) throw error;
      }
    }
  });
}

/**
 * `Session.checkpoint`: `label` and `options`, or `options` alone. Throws `INVALID_ARGUMENT` for
 * a malformed label or conversation, and what {@link createCheckpoint} throws.
 */
export async function checkpointWorkspace(
  context: SessionContext,
  label: string | CheckpointOptions | undefined,
  options: CheckpointOptions = {},
): Promise<CheckpointResult> {
  // From JavaScript, null is no label too.
  const [given, { isAutomatic, messages, format, budget, onProgress }] =
    label !== null && typeof label === 'object'
      ? [undefined, label]
      : [label ?? undefined, options];
  if (given !== undefined) checkLabel(given);
  return createCheckpoint(context, given, {
    isAutomatic: isAutomatic === true,
    messages: messages ? checkMessages(messages, format) : undefined,
    budget,
    onProgress,
  });
}

/** Why a pair's lines were not counted, as a listed checkpoint says it. */
function uncountedOf(error: RewindError): NonNullable<CheckpointInfo['linesUncounted']> {
  const digest = error.data.digest;
  return {
    code: error.code as NonNullable<CheckpointInfo['linesUncounted']>['code'],
    message: error.message,
    ...(isDigest(digest) && { digest }),
  };
}

/**
 * Every checkpoint of the session not pruned, oldest first, from the ledger alone; `withLines`:
 * with the lines added and removed since the previous one listed, from the store's cache of line
 * counts (the pairs it lacks are counted from the files that changed, and cached). A checkpoint
 * whose count needs an object missing or damaged in the store is listed without its lines, with
 * `linesUncounted` saying why; any other error is thrown.
 */
export async function listCheckpoints(
  context: SessionContext,
  options: { withLines?: boolean } = {},
): Promise<CheckpointInfo[]> {
  const checkpoints = (await readJournal(context)).checkpoints();
  if (options.withLines !== true) return checkpoints;
  const pairs = checkpoints.slice(1).map((checkpoint, index) => ({
    from: (checkpoints[index] as CheckpointInfo).tree,
    to: checkpoint.tree,
  }));
  const counts = await lineCountsBetween(context.store, context.storeDirectory, pairs);
  return checkpoints.map((checkpoint, index) => {
    // The first one listed has nothing before it to count from.
    const counted = counts[index - 1];
    if (index === 0 || counted === undefined) return checkpoint;
    return 'error' in counted
      ? { ...checkpoint, linesUncounted: uncountedOf(counted.error) }
      : { ...checkpoint, ...counted };
  });
}

/**
 * Journals that an automatic checkpoint fell out of `keepLast`: it is no longer listed and no
 * longer keeps its objects alive.
 */
export function pruneCheckpoint(
  context: SessionContext,
  checkpoint: CheckpointInfo,
): Promise<void> {
  return withWorkspaceLock(context, `pruning ${checkpoint.label}`, async (journal) => {
    await journal.append('checkpoint-pruned', {
      label: checkpoint.label,
      checkpointSeq: checkpoint.seq,
    });
  });
}

/** What an uncounted pair lacks, in words: the object and how it is damaged. */
function lackOf({ code, digest }: NonNullable<CheckpointInfo['linesUncounted']>): string {
  const object = digest === undefined ? 'an object' : `object ${digest}`;
  const how =
    code === 'OBJECT_NOT_FOUND'
      ? 'is missing from the store'
      : code === 'OBJECT_CORRUPT'
        ? 'is damaged'
        : 'is not a valid tree';
  return `${object} ${how} (${code})`;
}

/**
 * The warning of a listing ({@link listCheckpoints}) whose line counts could not all be made,
 * naming the checkpoints without them and what they lack; none when every count was made.
 */
export function uncountedLinesWarnings(checkpoints: readonly CheckpointInfo[]): string[] {
  const uncounted = checkpoints.filter((checkpoint) => checkpoint.linesUncounted !== undefined);
  if (uncounted.length === 0) return [];
  const names = uncounted.map((checkpoint) => `${checkpoint.label} (#${checkpoint.seq})`);
  const lacks = [
    ...new Set(
      uncounted.map((checkpoint) =>
        lackOf(checkpoint.linesUncounted as NonNullable<CheckpointInfo['linesUncounted']>),
      ),
    ),
  ];
  const which =
    uncounted.length === 1 ? `checkpoint ${names[0]}` : `checkpoints ${namedAndMore(names)}`;
  return [
    `the lines of ${which} since the previous one could not be counted: ${namedAndMore(lacks)}. ` +
      `${uncounted.length === 1 ? 'It is' : 'They are'} listed without line counts. ` +
      'Run `rewind verify` to see what is damaged.',
  ];
}
