import {
  type Call,
  checkFormat,
  detectFormat,
  type Format,
  type Message,
  noteText,
  plainMessages,
  RESUME_NOTE_OPENING,
  type RepairStrategy,
  type Result,
  readConversation,
  repair,
  requestToKeep,
  storeConversation,
  withResumeNote,
} from '../../conversation/index.js';
import type { Digest } from '../../lib/index.js';
import type { SessionContext } from '../context.js';
import type { CheckpointInfo } from '../journal/checkpoint-records.js';
import type { ConversationRef } from '../journal/conversation-refs.js';
import { type Journal, readJournal, withWorkspaceLock } from '../journal/journal.js';

/** The conversation a rollback hands back: repaired for its provider, with the resume note. */
export interface RestoredConversation {
  format: Format;
  messages: Message[];
  /** The note added at the end (as its own message, or merged into the last user turn). */
  note: string;
  /** Calls answered with a synthetic result, or dropped, and results removed, by the repair. */
  answered: Call[];
  dropped: Call[];
  droppedResults: Result[];
}

/** The session's conversation as recorded. */
export interface ConversationState {
  format: Format;
  messages: Message[];
  /** The stored tree of its messages. */
  tree: Digest;
}

/** How a rollback hands the conversation back. */
export interface RestoreOptions {
  /** What changed since the checkpoint, told to the model in the resume note. */
  patchNote?: string;
  /** Why it was rolled back, told to the model in the resume note (an automatic rollback's). */
  reason?: string;
  /** What to do with tool calls left without a result: see {@link RepairStrategy}. */
  repairStrategy?: RepairStrategy;
  /** Only compute it: nothing is stored. */
  dryRun?: boolean;
  /**
   * Keep the person's current request (the newest turn they wrote in the conversation recorded
   * now) at the end of the restored history when the checkpoint does not hold it, so the agent
   * still knows what it was asked. Default true.
   */
  keepRequest?: boolean;
}

/** A message list checked against its format (detected when not given). */
export interface CheckedMessages {
  messages: Message[];
  format: Format;
}

/**
 * Checks messages against their format, detected unless given. Throws
 * `CONVERSATION_FORMAT_UNKNOWN` and `CONVERSATION_FORMAT_MISMATCH`.
 */
export function checkMessages(
  messages: readonly unknown[],
  format: Format | undefined,
): CheckedMessages {
  // Live framework objects (LangChain messages) are taken in their serialized form.
  const plain = plainMessages(messages);
  const resolved = format ?? detectFormat(plain);
  return { messages: checkFormat(plain, resolved), format: resolved };
}

/** Stores messages one object each (a longer history costs only its new messages). */
export async function storeMessages(
  context: SessionContext,
  given: CheckedMessages,
): Promise<ConversationRef> {
  const batch = context.store.batch();
  try {
    const stored = await storeConversation(given.messages, batch);
    return { tree: stored.tree, format: given.format, messageCount: stored.messageCount };
  } finally {
    await batch.commit();
  }
}

/** Records the conversation, journaling `conversation-synced` only when it changed. */
export function syncConversation(
  context: SessionContext,
  given: CheckedMessages,
): Promise<ConversationRef & { isChanged: boolean }> {
  return withWorkspaceLock(context, 'recording the conversation', async (journal) => {
    const ref = await storeMessages(context, given);
    const current = journal.currentConversation();
    const isChanged = current?.tree !== ref.tree || current.format !== ref.format;
    if (isChanged) {
      await journal.append('conversation-synced', { conversation: ref }, [
        { type: 'tree', digest: ref.tree },
      ]);
    }
    return { ...ref, isChanged };
  });
}

/** The session's current conversation, exactly as recorded; undefined when it has none. */
export async function readCurrentConversation(
  context: SessionContext,
): Promise<ConversationState | undefined> {
  const ref = (await readJournal(context)).currentConversation();
  if (!ref) return undefined;
  return {
    format: ref.format,
    messages: await readConversation(context.store, ref.tree),
    tree: ref.tree,
  };
}

/** The person's current request, when the conversation recorded now holds one `restored` lacks. */
async function requestMissingFrom(
  context: SessionContext,
  current: ConversationRef | undefined,
  recorded: ConversationRef,
  restored: readonly Message[],
): Promise<Message | undefined> {
  if (!current || current.format !== recorded.format || current.tree === recorded.tree) {
    return undefined;
  }
  const messages = await readConversation(context.store, current.tree);
  return requestToKeep(messages, restored, current.format);
}

/**
 * The conversation a checkpoint recorded, as a rollback to it hands it back: repaired for its
 * provider, with the resume note; stored unless `dryRun`. Undefined when it recorded none.
 */
export async function restoreConversation(
  context: SessionContext,
  journal: Journal,
  target: CheckpointInfo,
  options: RestoreOptions,
): Promise<{ ref: ConversationRef; result: RestoredConversation } | undefined> {
  const recorded = journal.conversationAt(target);
  if (!recorded) return undefined;
  const messages = await readConversation(context.store, recorded.tree);
  const repaired = repair(messages, recorded.format, {
    ...(options.repairStrategy && { strategy: options.repairStrategy }),
    resultText: `Rewind: this tool call was rolled back with the workspace to checkpoint "${target.label}" before it completed, so it had no effect. Call it again if it is still needed.`,
  });
  const note = `${RESUME_NOTE_OPENING} to checkpoint "${target.label}". Everything done after it was undone (it is still recorded); tool calls that were in flight were cancelled. Resume from this exact state.`;
  const request =
    options.keepRequest === false
      ? undefined
      : await requestMissingFrom(context, journal.currentConversation(), recorded, messages);
  const restored = withResumeNote(
    request ? [...repaired.messages, request] : repaired.messages,
    recorded.format,
    note,
    {
      ...(options.patchNote && { patchNote: options.patchNote }),
      ...(options.reason && { reason: options.reason }),
    },
  );
  const ref = options.dryRun
    ? { ...recorded, messageCount: restored.length }
    : await storeMessages(context, { messages: restored, format: recorded.format });
  return {
    ref,
    result: {
      format: recorded.format,
      messages: restored,
      note: noteText(note, options),
      answered: repaired.answered,
      dropped: repaired.dropped,
      droppedResults: repaired.droppedResults,
    },
  };
}

/** The conversation at a checkpoint, as a rollback would hand it back (nothing is stored). */
export async function conversationAt(
  context: SessionContext,
  label: string,
  options: Omit<RestoreOptions, 'dryRun'>,
): Promise<RestoredConversation | undefined> {
  const journal = await readJournal(context);
  const target = journal.findCheckpoint(label);
  return (await restoreConversation(context, journal, target, { ...options, dryRun: true }))
    ?.result;
}
