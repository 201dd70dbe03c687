import type { Format } from '../../conversation/index.js';
import type { LedgerEntry } from '../../ledger/index.js';
import type { Digest } from '../../lib/index.js';
import {
  diffTrees,
  fileChangeKind,
  type SnapshotResult,
  type TreeChange,
} from '../../workspace/index.js';
import type { SessionContext } from '../context.js';
import { type ConversationRef, conversationIn } from './conversation-refs.js';
import type { Journal } from './journal.js';

/** A checkpoint as the ledger records it. */
export interface CheckpointInfo {
  label: string;
  /** The seq of its `checkpoint-created` entry. */
  seq: number;
  at: string;
  tree: Digest;
  fileCount: number;
  sizeBytes: number;
  /** Files changed since the previous checkpoint of the session. */
  added: number;
  modified: number;
  deleted: number;
  isAutomatic: boolean;
  /** The conversation recorded with the files, if any. */
  conversation?: { format: Format; messageCount: number };
  /**
   * Lines added and removed in text files since the previous checkpoint listed, only when asked
   * for (`checkpoints({ withLines: true })`); absent for the first one.
   */
  linesAdded?: number;
  linesRemoved?: number;
  /**
   * Why its lines could not be counted, when they were asked for: an object the count needs
   * (a tree or a file of it or of the previous checkpoint listed) is missing from the store or
   * damaged; `linesAdded` and `linesRemoved` are absent then. `rewind verify` lists what is
   * damaged.
   */
  linesUncounted?: {
    code: 'OBJECT_NOT_FOUND' | 'OBJECT_CORRUPT' | 'TREE_INVALID';
    message: string;
    /** The object, when the error names it. */
    digest?: Digest;
  };
  /**
   * The paths it could not read (no permission, changing at every read), left out of its tree:
   * a rollback to it leaves them as they are.
   */
  unreadable?: string[];
}

/** The checkpoint a `checkpoint-created` entry records. */
export function checkpointOf(entry: LedgerEntry): CheckpointInfo {
  const body = entry.body;
  const conversation = conversationIn(body, 'conversation');
  return {
    label: String(body.label),
    seq: entry.seq,
    at: entry.at,
    tree: body.tree as Digest,
    fileCount: Number(body.fileCount),
    sizeBytes: Number(body.sizeBytes),
    added: Number(body.added),
    modified: Number(body.modified),
    deleted: Number(body.deleted),
    isAutomatic: body.isAutomatic === true,
    ...(Array.isArray(body.unreadable) && {
      unreadable: body.unreadable.filter((path): path is string => typeof path === 'string'),
    }),
    ...(conversation && {
      conversation: { format: conversation.format, messageCount: conversation.messageCount },
    }),
  };
}

function countFiles(changes: readonly TreeChange[]): {
  added: number;
  modified: number;
  deleted: number;
} {
  const counts = { added: 0, modified: 0, deleted: 0 };
  for (const change of changes) {
    const kind = fileChangeKind(change);
    if (kind) counts[kind] += 1;
  }
  return counts;
}

/**
 * Records a snapshot as the checkpoint `label` (a `checkpoint-created` entry, with the files
 * changed since the previous checkpoint), paired with `conversation` when given. Inside the
 * workspace lock; the caller has checked the label, and `check`, when given, checks it again as
 * the entry is appended (see `Journal.append`).
 */
export async function appendCheckpoint(
  context: SessionContext,
  journal: Journal,
  label: string,
  snapshot: SnapshotResult,
  options: {
    isAutomatic: boolean;
    conversation: ConversationRef | undefined;
    check?: (journal: Journal) => void;
  },
): Promise<LedgerEntry> {
  const previous = journal.checkpoints().at(-1);
  // Against nothing, every file and link is added: no need to list them all.
  const counts = previous
    ? countFiles(await diffTrees(context.store, previous.tree, snapshot.tree))
    : { added: snapshot.fileCount, modified: 0, deleted: 0 };
  const { conversation } = options;
  return journal.append(
    'checkpoint-created',
    {
      label,
      tree: snapshot.tree,
      fileCount: snapshot.fileCount,
      sizeBytes: snapshot.sizeBytes,
      ...counts,
      isAutomatic: options.isAutomatic,
      ...(conversation && { conversation }),
      ...(snapshot.rules && { rules: snapshot.rules }),
      ...(snapshot.unreadable.length > 0 && {
        unreadable: snapshot.unreadable.map(({ path }) => path),
      }),
    },
    [
      { type: 'tree', digest: snapshot.tree },
      ...(conversation ? [{ type: 'tree' as const, digest: conversation.tree }] : []),
      ...(snapshot.rules ? [{ type: 'blob' as const, digest: snapshot.rules }] : []),
    ],
    options.check,
  );
}

/**
 * A session's checkpoints (those pruned by `keepLast` left out), kept current entry by entry,
 * with the conversation and the outside rules each recorded, and the last rollback to each.
 */
export class CheckpointIndex {
  readonly #bySeq = new Map<
    number,
    { info: CheckpointInfo; conversation: ConversationRef | undefined; rules: Digest | undefined }
  >();
  /** The first live checkpoint of each label (a pruned label may be used again). */
  readonly #byLabel = new Map<string, CheckpointInfo>();
  readonly #lastRollbackTo = new Map<string, LedgerEntry>();

  /** Folds one ledger entry in; entries must come in order. */
  add(entry: LedgerEntry): void {
    if (entry.kind === 'checkpoint-created') {
      const info = checkpointOf(entry);
      const conversation = conversationIn(entry.body, 'conversation');
      const rules = typeof entry.body.rules === 'string' ? (entry.body.rules as Digest) : undefined;
      this.#bySeq.set(entry.seq, { info, conversation, rules });
      if (!this.#byLabel.has(info.label)) this.#byLabel.set(info.label, info);
    } else if (entry.kind === 'checkpoint-pruned') {
      const seq = Number(entry.body.checkpointSeq);
      const pruned = this.#bySeq.get(seq);
      if (!pruned) return;
      this.#bySeq.delete(seq);
      if (this.#byLabel.get(pruned.info.label) === pruned.info) {
        this.#byLabel.delete(pruned.info.label);
        const next = [...this.#bySeq.values()].find(
          (checkpoint) => checkpoint.info.label === pruned.info.label,
        );
        if (next) this.#byLabel.set(next.info.label, next.info);
      }
    } else if (entry.kind === 'rollback-started') {
      this.#lastRollbackTo.set(String(entry.body.label), entry);
    }
  }

  /** Every live checkpoint, oldest first. */
  list(): CheckpointInfo[] {
    return [...this.#bySeq.values()].map((checkpoint) => checkpoint.info);
  }

  /** The newest checkpoint, if any. */
  latest(): CheckpointInfo | undefined {
    let latest: CheckpointInfo | undefined;
    for (const checkpoint of this.#bySeq.values()) latest = checkpoint.info;
    return latest;
  }

  /** The live checkpoint labelled `label` (the oldest, should two share it). */
  byLabel(label: string): CheckpointInfo | undefined {
    return this.#byLabel.get(label);
  }

  /** The conversation a checkpoint recorded, if it recorded one. */
  conversationOf(seq: number): ConversationRef | undefined {
    return this.#bySeq.get(seq)?.conversation;
  }

  /** The rules from outside the workspace a checkpoint recorded, if it recorded any. */
  rulesOf(seq: number): Digest | undefined {
    return this.#bySeq.get(seq)?.rules;
  }

  /** The newest `rollback-started` entry naming the checkpoint `label`, if any. */
  lastRollbackTo(label: string): LedgerEntry | undefined {
    return this.#lastRollbackTo.get(label);
  }
}
