import { RewindError } from '../../errors.js';
import type { Digest } from '../../lib/index.js';
import { readTree } from '../../store/index.js';
import type { SessionContext } from '../context.js';
import type { CheckpointInfo } from '../journal/checkpoint-records.js';
import { withWorkspaceLock } from '../journal/journal.js';

/** Which checkpoints `Session.prune` drops; a checkpoint any of them selects is dropped. */
export interface PruneOptions {
  /** Keep the newest this many (1 or more), drop the rest. */
  keepLast?: number;
  /** Drop those recorded longer ago than this. */
  olderThanMs?: number;
  /**
   * Keep the newest checkpoints whose files, counted once however many checkpoints share them,
   * fit in this many bytes; drop the older ones.
   */
  maxSizeBytes?: number;
  /** Only say what would be dropped. */
  dryRun?: boolean;
  /** Labels to keep whatever the criteria say (a policy's rollback target). */
  protect?: readonly string[];
  /**
   * Only the checkpoints whose label starts with this are looked at (counted by `keepLast`,
   * dropped by any criterion); the others stay. An adapter prunes its own pairings this way.
   */
  labelPrefix?: string;
}

/** What `Session.prune` dropped, or would drop. */
export interface PruneResult {
  isDryRun: boolean;
  pruned: { label: string; seq: number; reason: 'keep-last' | 'older-than' | 'max-size' }[];
  /** Checkpoints left, the newest always among them. */
  keptCount: number;
  /** Kept though a criterion selected them: the newest, or a label asked to be kept. */
  spared: { label: string; seq: number; why: string }[];
}

/** The newest checkpoints, newest first, whose distinct files fit in `maxSizeBytes`. */
async function fittingNewest(
  context: SessionContext,
  newestFirst: readonly CheckpointInfo[],
  maxSizeBytes: number,
): Promise<Set<number>> {
  const seenTrees = new Set<Digest>();
  const seenBlobs = new Set<Digest>();
  let total = 0;
  const add = async (tree: Digest): Promise<void> => {
    if (seenTrees.has(tree)) return;
    seenTrees.add(tree);
    for (const entry of (await readTree(context.store, tree)).entries) {
      if (entry.type === 'directory') await add(entry.digest);
      else if (entry.type === 'file' && !seenBlobs.has(entry.digest)) {
        seenBlobs.add(entry.digest);
        total += entry.sizeBytes;
      }
    }
  };
  const fitting = new Set<number>();
  for (const checkpoint of newestFirst) {
    await add(checkpoint.tree);
    if (total > maxSizeBytes) break;
    fitting.add(checkpoint.seq);
  }
  return fitting;
}

/**
 * Drops checkpoints by age, count or size: each gets a `checkpoint-pruned` entry (undone by
 * nothing), stops being listed and stops keeping its objects alive, so `gc` frees what only it
 * held. The newest checkpoint is never dropped, nor one named in `protect`. Throws
 * `INVALID_ARGUMENT` when no criterion is given or one is out of range.
 */
export function pruneCheckpoints(
  context: SessionContext,
  options: PruneOptions,
): Promise<PruneResult> {
  const { keepLast, olderThanMs, maxSizeBytes } = options;
  if (keepLast === undefined && olderThanMs === undefined && maxSizeBytes === undefined) {
    throw new RewindError(
      'INVALID_ARGUMENT',
      'Say which checkpoints to drop: keep the last N, those older than a duration, or those beyond a size.',
    );
  }
  if (keepLast !== undefined && (!Number.isInteger(keepLast) || keepLast < 1)) {
    throw new RewindError(
      'INVALID_ARGUMENT',
      `keepLast must be a whole number of 1 or more (the newest checkpoint is always kept), not ${keepLast}.`,
      { data: { keepLast } },
    );
  }
  for (const [name, value] of [
    ['olderThanMs', olderThanMs],
    ['maxSizeBytes', maxSizeBytes],
  ] as const) {
    if (value !== undefined && (!Number.isFinite(value) || value < 0)) {
      throw new RewindError('INVALID_ARGUMENT', `${name} must be 0 or more, not ${value}.`, {
        data: { [name]: value },
      });
    }
  }
  return withWorkspaceLock(context, 'pruning checkpoints', async (journal) => {
    const all = journal.checkpoints();
    const newest = all.at(-1);
    const prefix = options.labelPrefix;
    const newestFirst = all
      .filter((checkpoint) => prefix === undefined || checkpoint.label.startsWith(prefix))
      .reverse();
    const nowMs = context.settings.now().getTime();
    const fitting =
      maxSizeBytes === undefined
        ? undefined
        : await fittingNewest(context, newestFirst, maxSizeBytes);
    const result: PruneResult = {
      isDryRun: options.dryRun === true,
      pruned: [],
      keptCount: all.length - newestFirst.length,
      spared: [],
    };
    for (const [index, checkpoint] of newestFirst.entries()) {
      const reason =
        keepLast !== undefined && index >= keepLast
          ? 'keep-last'
          : olderThanMs !== undefined && nowMs - Date.parse(checkpoint.at) > olderThanMs
            ? 'older-than'
            : fitting !== undefined && !fitting.has(checkpoint.seq)
              ? 'max-size'
              : undefined;
      const why =
        checkpoint === newest
          ? 'the newest checkpoint is always kept'
          : options.protect?.includes(checkpoint.label)
            ? 'an automatic rollback aims at it'
            : undefined;
      if (reason === undefined || why !== undefined) {
        result.keptCount += 1;
        if (reason !== undefined && why !== undefined) {
          result.spared.push({ label: checkpoint.label, seq: checkpoint.seq, why });
        }
        continue;
      }
      result.pruned.push({ label: checkpoint.label, seq: checkpoint.seq, reason });
    }
    result.pruned.reverse();
    if (result.isDryRun) return result;
    for (const pruned of result.pruned) {
      await journal.append('checkpoint-pruned', {
        label: pruned.label,
        checkpointSeq: pruned.seq,
        reason: pruned.reason,
      });
    }
    return result;
  });
}
