import type { Format } from '../../conversation/index.js';
import type { LedgerEntry } from '../../ledger/index.js';
import type { Digest } from '../../lib/index.js';

/** A conversation as the ledger names it: a stored tree of messages and their format. */
export interface ConversationRef {
  tree: Digest;
  format: Format;
  messageCount: number;
}

/** The conversation fields an entry carries under `prefix` (`conversation`, `conversationAfter`...). */
export function conversationIn(
  body: Record<string, unknown>,
  key: string,
): ConversationRef | undefined {
  const value = body[key] as Record<string, unknown> | undefined;
  if (!value || typeof value.tree !== 'string') return undefined;
  return {
    tree: value.tree as Digest,
    format: value.format as Format,
    messageCount: Number(value.messageCount),
  };
}

/**
 * The session's current conversation, from the ledger alone, kept current entry by entry: the
 * last one synced or recorded by a checkpoint, or set by a completed rollback or undo (their
 * intents name the conversation they restore, so a rollback finished after a crash sets it too).
 */
export class ConversationTracker {
  #current: ConversationRef | undefined;
  #movedAt = 0;
  /** Rollbacks and undos under way that move the conversation, by the seq of their intent. */
  readonly #moving = new Map<number, ConversationRef | undefined>();

  get current(): ConversationRef | undefined {
    return this.#current;
  }

  /**
   * The seq of the newest entry that changed the conversation or began to (the intent of a
   * rollback or undo that moves it); 0 when none has.
   */
  get movedAt(): number {
    return this.#movedAt;
  }

  /** Folds one ledger entry in; entries must come in order. */
  add(entry: LedgerEntry): void {
    if (entry.kind === 'conversation-synced' || entry.kind === 'checkpoint-created') {
      const recorded = conversationIn(entry.body, 'conversation');
      if (recorded && recorded.tree !== this.#current?.tree) this.#movedAt = entry.seq;
      this.#current = recorded ?? this.#current;
    } else if (entry.kind === 'rollback-started' || entry.kind === 'undo-started') {
      if (entry.body.conversationAfter !== undefined) {
        this.#movedAt = entry.seq;
        this.#moving.set(entry.seq, conversationIn(entry.body, 'conversationAfter'));
      }
    } else if (entry.kind === 'rollback-completed' || entry.kind === 'undo-completed') {
      const seq = Number(entry.body.startedSeq);
      if (this.#moving.has(seq)) this.#current = this.#moving.get(seq);
      this.#moving.delete(seq);
    }
  }
}
