/** History: checkpoints, rollback to one, undo of any action, the changes between states, pruning. */
import * as z from 'zod';
import {
  type CheckpointOptions,
  FORMATS,
  type PruneResult,
  uncountedLinesWarnings,
} from '../index.js';
import { defineOperation } from './define-operation.js';
import {
  actionId,
  durationText,
  parseDuration,
  parseSize,
  sizeText,
  wholeNumber,
  workspacePath,
} from './inputs.js';

/** A conversation as a model's provider holds it; its messages are checked by the library. */
export const messagesInput = () =>
  z
    .array(z.unknown())
    .describe("The conversation: a JSON array of messages in your provider's format.");

/** One of the message formats Rewind knows; detected when left out. */
export const formatInput = () =>
  z.enum(FORMATS).optional().describe('The message format (default: detected).');

const label = () => z.string().describe('Letters, digits, ".", "_", "-", such as before-refactor.');

/** What a first checkpoint (one that reads and stores every file) may take unless told otherwise. */
export const FIRST_CHECKPOINT_BUDGET = { maxBytes: 1024 ** 3, maxFiles: 100_000 } as const;

/** The budget `maxSize` asks for: the default, that many bytes (any number of files), or none. */
function budgetOf(maxSize: string | undefined): CheckpointOptions['budget'] {
  if (maxSize === undefined) return FIRST_CHECKPOINT_BUDGET;
  if (maxSize.trim().toLowerCase() === 'unlimited') return undefined;
  return { maxBytes: parseSize(maxSize) as number };
}

const UNLIMITED_OR_SIZE =
  'must be a size such as 500MB, 2GiB or 1.5G, a number of bytes, or unlimited';

export const checkpointOperation = defineOperation({
  name: 'checkpoint',
  title: 'Checkpoint the workspace',
  summary: 'record the workspace under a label',
  description:
    'Record the workspace (and the conversation: the one given, else the one last synced) under a label to roll back to later (without one: checkpoint-N, the next number free). A first checkpoint (one that reads and stores every file) over 1 GiB or 100,000 files is refused with what it would store: leave build output and dependencies out (.gitignore or .rewindignore) rather than raising maxSize.',
  input: () =>
    z.object({
      label: label().optional(),
      messages: messagesInput().optional(),
      format: formatInput(),
      maxSize: z
        .string({ error: UNLIMITED_OR_SIZE })
        .refine(
          (text) => text.trim().toLowerCase() === 'unlimited' || parseSize(text) !== undefined,
          { error: UNLIMITED_OR_SIZE },
        )
        .optional()
        .describe(
          'The most a first checkpoint may store, such as "2GiB", or "unlimited" (default: 1 GiB or 100,000 files).',
        ),
    }),
  scope: 'session',
  annotations: {},
  run: async (target, { label: name, messages, format, maxSize }) => {
    const budget = budgetOf(maxSize);
    const { progress } = target;
    const session = await target.session();
    return session.checkpoint(name, {
      ...(messages && { messages }),
      ...(format && { format }),
      ...(budget && { budget }),
      ...(progress && {
        onProgress: ({ filesRead, filesToRead }) =>
          progress({ step: 'reading', done: filesRead, total: filesToRead }),
      }),
    });
  },
});

export const checkpointsOperation = defineOperation({
  name: 'checkpoints',
  title: 'List the checkpoints',
  summary: 'list the checkpoints of a session',
  description:
    'The checkpoints of the session, oldest first: label, time, and how many files each added, modified and deleted since the previous one; with lines: true, also how many lines of text it added and removed (a checkpoint whose lines cannot be counted, as an object they need is missing or damaged in the store, is listed without them, with a warning).',
  input: () =>
    z.object({
      lines: z
        .boolean()
        .optional()
        .describe(
          'Also count the lines of text each checkpoint added and removed since the previous one (reads the files that changed, the first time; the counts are cached).',
        ),
    }),
  scope: 'session',
  annotations: { readOnly: true },
  run: async (target, { lines }) => {
    const checkpoints = await (await target.session()).checkpoints({ withLines: lines === true });
    return { checkpoints, warnings: uncountedLinesWarnings(checkpoints) };
  },
});

export const rollbackOperation = defineOperation({
  name: 'rollback',
  title: 'Roll back to a checkpoint (undoable)',
  summary:
    'restore the workspace (and the conversation, if the checkpoint has one), or only some paths, to a checkpoint; the current state is saved first',
  description:
    "Restore the workspace (and the conversation, if the checkpoint has one) to a checkpoint; with scope, only the files or only the conversation; with paths, only those files or directories (the rest of the workspace and the conversation stay). The current state is saved first, so the rollback can be undone. Returns the restored conversation when there is one: the person's current request stays at its end. With dryRun: true, lists what would change and changes nothing.",
  input: () =>
    z.object({
      label: z.string().describe('The checkpoint label, or "latest".'),
      dryRun: z.boolean().optional().describe('List what would change; change nothing.'),
      patchNote: z
        .string()
        .optional()
        .describe('What changed since the checkpoint, told to the model in the resume note.'),
      paths: z
        .array(workspacePath())
        .optional()
        .describe('Restore only these files or directories (default: the whole workspace).'),
      scope: z
        .enum(['both', 'files', 'conversation'])
        .optional()
        .describe(
          'What to restore: both (default) the files and the conversation, only the files, or only the conversation.',
        ),
      keepRequest: z
        .boolean()
        .optional()
        .describe(
          "Keep the person's current request at the end of the restored conversation when the checkpoint lacks it (default true).",
        ),
    }),
  scope: 'session',
  annotations: { destructive: true },
  run: async (target, { label: name, dryRun, patchNote, paths, scope, keepRequest }) => {
    const { progress } = target;
    return (await target.session()).rollback(name, {
      dryRun: dryRun === true,
      ...(patchNote !== undefined && { patchNote }),
      ...(paths !== undefined && { paths }),
      ...(scope !== undefined && { scope }),
      ...(keepRequest !== undefined && { keepRequest }),
      ...(progress && {
        onProgress: ({ done, total }) => progress({ step: 'restoring', done, total }),
      }),
    });
  },
});

export const undoOperation = defineOperation({
  name: 'undo',
  title: 'Undo an action',
  summary:
    'undo an action (file action, command, rollback, undo) unless later edits would be trampled',
  description:
    'Undo a reversible action: give its id, or last: true for the most recent one that can still be undone. Refused, with each path listed, when a later edit would be overwritten. An undo is an action too: undoing it redoes.',
  input: () =>
    z
      .object({
        id: actionId().optional(),
        last: z
          .boolean()
          .optional()
          .describe('The most recent action that can still be undone, instead of an id.'),
      })
      .refine((input) => (input.id === undefined) === (input.last === true), {
        error: 'Give either an action `id` or `last`.',
      }),
  scope: 'session',
  annotations: { destructive: true },
  run: async (target, { id, last }) => {
    const { progress } = target;
    return (await target.session()).undo(last === true || id === undefined ? 'last' : id, {
      ...(progress && {
        onProgress: ({ done, total }) => progress({ step: 'restoring', done, total }),
      }),
    });
  },
});

export const diffOperation = defineOperation({
  name: 'diff',
  title: 'Show changes',
  summary:
    'show what changed between two states (checkpoint labels, action ids, or the working tree)',
  description:
    'What an action changed (give its id), or what changed since a checkpoint (give its label; none: the latest), or between two states.',
  input: () =>
    z.object({
      from: z
        .string()
        .optional()
        .describe(
          'A checkpoint label, "latest" (the default), or an action id (alone: the changes it made).',
        ),
      to: z
        .string()
        .optional()
        .describe('A checkpoint label or an action id (default: the working tree).'),
    }),
  scope: 'session',
  annotations: { readOnly: true },
  run: async (target, { from, to }) => (await target.session()).diff(from ?? 'latest', to),
});

export const pruneOperation = defineOperation({
  name: 'prune',
  title: 'Drop checkpoints for good',
  summary:
    'drop checkpoints by count, age or size (never the newest); `rewind gc` then frees their space',
  description:
    'Drop checkpoints: all but the newest keepLast, those older than olderThan, or the oldest beyond maxSize of distinct files (any criterion selects). The newest checkpoint, and the one an automatic rollback aims at, are always kept. Nothing undoes it. With dryRun: true, only lists them.',
  input: () =>
    z
      .object({
        keepLast: wholeNumber(1).optional().describe('Keep the newest this many, drop the rest.'),
        olderThan: durationText()
          .optional()
          .describe(
            'Drop those recorded longer ago than this, such as "30m", "12h", "7d" or "2w".',
          ),
        maxSize: sizeText()
          .optional()
          .describe(
            'Keep the newest checkpoints whose files (each counted once) fit in this, such as "500MB" or "2GiB"; drop the older ones.',
          ),
        dryRun: z.boolean().optional().describe('Only list what would be dropped.'),
      })
      .refine(
        (input) =>
          input.keepLast !== undefined ||
          input.olderThan !== undefined ||
          input.maxSize !== undefined,
        { error: 'Say which checkpoints to drop: `keepLast`, `olderThan` or `maxSize`.' },
      ),
  scope: 'session',
  annotations: { destructive: true },
  excludedFrom: {
    mcp: 'it drops checkpoints for good (nothing undoes it): retention is for a person to decide',
  },
  run: async (target, { keepLast, olderThan, maxSize, dryRun }): Promise<PruneResult> =>
    (await target.session()).prune({
      ...(keepLast !== undefined && { keepLast }),
      ...(olderThan !== undefined && { olderThanMs: parseDuration(olderThan) as number }),
      ...(maxSize !== undefined && { maxSizeBytes: parseSize(maxSize) as number }),
      dryRun: dryRun === true,
    }),
});
