/** The agent's conversation: recording it, and showing it as a rollback would restore it. */
import * as z from 'zod';
import { type Format, type Message, RewindError } from '../index.js';
import { defineOperation } from './define-operation.js';
import { formatInput, messagesInput } from './history.js';

export const conversationSyncOperation = defineOperation({
  name: 'conversation-sync',
  title: 'Record the conversation',
  summary: 'record the current conversation (a JSON array of messages; - reads stdin)',
  description:
    "Record your conversation (a JSON array of messages in your provider's format) so checkpoints and rollbacks include it. Only new messages are stored; an unchanged conversation records nothing.",
  input: () => z.object({ messages: messagesInput(), format: formatInput() }),
  scope: 'session',
  annotations: { idempotent: true },
  run: async (target, { messages, format }) =>
    (await target.session()).syncConversation(messages, { ...(format && { format }) }),
});

export const conversationShowOperation = defineOperation({
  name: 'conversation-show',
  title: 'Show a recorded conversation',
  summary:
    'print the conversation at a checkpoint, repaired as a rollback would restore it (default: the current one)',
  description:
    'The conversation as recorded now, or at a checkpoint (give its label) as a rollback would restore it: repaired for its provider, with the resume note.',
  input: () =>
    z.object({
      label: z.string().optional().describe('A checkpoint label, or "latest".'),
      patchNote: z.string().optional().describe('The patch note a rollback would pass.'),
    }),
  scope: 'session',
  annotations: { readOnly: true },
  run: async (target, { label, patchNote }): Promise<{ format: Format; messages: Message[] }> => {
    const session = await target.session();
    const shown =
      label === undefined
        ? await session.conversation()
        : await session.conversationAt(label, { ...(patchNote !== undefined && { patchNote }) });
    if (!shown) {
      throw new RewindError(
        'CONVERSATION_NOT_FOUND',
        label === undefined
          ? 'This session has no conversation yet. Record one first (`rewind conversation sync`, the conversation-sync tool, or `session.syncConversation`).'
          : `Checkpoint ${label} has no conversation. Give the messages to the checkpoint, or sync a conversation before checkpointing.`,
        { data: { label } },
      );
    }
    return { format: shown.format, messages: shown.messages };
  },
});
