import type { Format } from '../conversation/index.js';
import type { LedgerEntry } from '../ledger/index.js';
import type { Digest } from '../lib/index.js';

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
 * The session's current conversation, from the ledger alone: the last one synced or recorded by a
 * checkpoint, or set by a completed rollback or undo (their intents name the conversation they
 * restore, so a rollback finished after a crash sets it too).
 */
export function currentConversation(entries: readonly LedgerEntry[]): ConversationRef | undefined {
  const intents = new Map<number, LedgerEntry>();
  let current: ConversationRef | undefined;
  for (const entry of entries) {
    if (entry.kind === 'conversation-synced' || entry.kind === 'checkpoint-created') {
      current = conversationIn(entry.body, 'conversation') ?? current;
    } else if (entry.kind === 'rollback-started' || entry.kind === 'undo-started') {
      intents.set(entry.seq, entry);
    } else if (entry.kind === 'rollback-completed' || entry.kind === 'undo-completed') {
      const intent = intents.get(Number(entry.body.startedSeq));
      if (intent && intent.body.conversationAfter !== undefined) {
        current = conversationIn(intent.body, 'conversationAfter');
      }
    }
  }
  return current;
}
