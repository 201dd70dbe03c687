import { readdir } from 'node:fs/promises';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { type Message, validate } from '../../src/conversation/index.js';
import { Ledger, listSessions } from '../../src/ledger/index.js';
import { log, openSession } from '../../src/session/index.js';
import { sessionOn } from '../helpers/session.js';
import { lay } from '../helpers/workspace.js';

const user = (text: string): Message => ({ role: 'user', content: text });
const assistant = (text: string): Message => ({ role: 'assistant', content: text });
const call = (id: string): Message => ({
  role: 'assistant',
  content: [
    { type: 'thinking', thinking: 'plan', signature: `sig-${id}` },
    { type: 'tool_use', id, name: 'exec', input: { cmd: 'make' } },
  ],
});
const result = (id: string): Message => ({
  role: 'user',
  content: [{ type: 'tool_result', tool_use_id: id, content: `ran ${id}` }],
});

async function objectCount(workspace: string): Promise<number> {
  let count = 0;
  for (const entry of await readdir(join(workspace, '.rewind', 'objects'), {
    recursive: true,
    withFileTypes: true,
  })) {
    if (entry.isFile()) count += 1;
  }
  return count;
}

describe('conversation checkpoints', () => {
  it('rolls back files and conversation together, repairs it for the provider, and undo brings both back', async () => {
    const { workspace, session, stateOf } = await sessionOn({ 'a.txt': 'one' });
    // A call answered before the checkpoint, and one still in flight when it was taken.
    const atCheckpoint = [user('build it'), call('toolu_1'), result('toolu_1'), call('toolu_2')];
    await session.checkpoint('base', { messages: atCheckpoint, format: 'anthropic' });
    const base = await stateOf();
    await lay(workspace, { 'a.txt': 'broken' });
    const later = [
      ...atCheckpoint,
      result('toolu_2'),
      assistant('done'),
      user('now break it'),
      assistant('broke it'),
    ];
    expect(await session.syncConversation(later)).toMatchObject({
      format: 'anthropic',
      isChanged: true,
      messageCount: 8,
    });
    const broken = await stateOf();

    const rolled = await session.rollback('base', { patchNote: 'the build script was fixed' });
    expect(await stateOf()).toBe(base);
    const restored = rolled.conversation;
    if (!restored) throw new Error('no conversation');
    expect(restored.format).toBe('anthropic');
    expect(restored.messages.slice(0, 4)).toEqual(atCheckpoint);
    expect(restored.answered).toEqual([{ id: 'toolu_2', name: 'exec' }]);
    expect(restored.messages[4]).toEqual({
      role: 'user',
      content: [
        {
          type: 'tool_result',
          tool_use_id: 'toolu_2',
          content: expect.stringContaining('rolled back'),
          is_error: true,
        },
        {
          type: 'text',
          text: expect.stringContaining('Patch applied since: the build script was fixed'),
        },
      ],
    });
    expect(validate(restored.messages, 'anthropic').problems).toEqual([]);
    expect((await session.conversation())?.messages).toEqual(restored.messages);

    if (rolled.id === undefined) throw new Error('no id');
    await session.undo(rolled.id);
    expect(await stateOf()).toBe(broken);
    expect((await session.conversation())?.messages).toEqual(later);
  });

  it('brings back the exact list whatever happened to the history since, and stores only new messages', async () => {
    const { workspace, session } = await sessionOn({});
    const history = Array.from({ length: 20 }, (_, index) =>
      index % 2 === 0 ? user(`q${index}`) : assistant(`a${index}`),
    );
    await session.syncConversation(history, { format: 'anthropic' });
    const before = await objectCount(workspace);
    await session.syncConversation([...history, user('q20')], { format: 'anthropic' });
    // One new message, and one new list.
    expect((await objectCount(workspace)) - before).toBe(2);
    const entries = (await log({ workspace })).entries.length;
    expect(
      (await session.syncConversation([...history, user('q20')], { format: 'anthropic' }))
        .isChanged,
    ).toBe(false);
    expect((await log({ workspace })).entries).toHaveLength(entries);
    await session.checkpoint('long');
    // The agent summarizes its history down to two messages...
    await session.syncConversation([user('summary of 21 messages'), assistant('ok')], {
      format: 'anthropic',
    });
    const rolled = await session.rollback('long');
    // ...and the rollback hands back all 21, not the first N of the short one (the last user turn
    // also carries the resume note: Anthropic wants roles to alternate).
    expect(rolled.conversation?.messages.slice(0, 20)).toEqual(history);
    expect(rolled.conversation?.messages[20]).toEqual({
      role: 'user',
      content: [
        { type: 'text', text: 'q20' },
        { type: 'text', text: expect.stringContaining('rolled back') },
      ],
    });
    expect(rolled.conversation?.messages).toHaveLength(21);
  });

  it('finishes the conversation side of a rollback interrupted after the files moved', async () => {
    const { workspace, session } = await sessionOn({ 'a.txt': 'one' });
    await session.checkpoint('base', {
      messages: [user('hi'), assistant('hello')],
      format: 'anthropic',
    });
    await lay(workspace, { 'a.txt': 'two' });
    await session.syncConversation([user('hi'), assistant('hello'), user('more')], {
      format: 'anthropic',
    });
    const rolled = await session.rollback('base');
    const expected = rolled.conversation?.messages;
    await session.undo(rolled.id as number);
    await session.close();
    // Replay the rollback's intent alone, as if the process died right after it.
    const intent = (await log({ workspace })).entries.find((line) => line.seq === rolled.id);
    const [file] = await listSessions(join(workspace, '.rewind'));
    if (!file || !intent) throw new Error('missing');
    const ledger = await Ledger.open(file);
    await ledger.append('rollback-started', intent.entry.body, intent.entry.refs);
    await ledger.close();
    await lay(workspace, { 'a.txt': 'one' }); // the files moved
    const reopened = await openSession({ workspace });
    expect((await reopened.conversation())?.messages).toEqual(expected);
    await reopened.close();
  });

  it('shows a checkpoint conversation as a rollback would restore it, and refuses unknown formats', async () => {
    const { session } = await sessionOn({});
    await session.checkpoint('c', { messages: [{ role: 'user', content: 'x' }] });
    const shown = await session.conversationAt('c');
    expect(shown?.format).toBe('openai-chat');
    expect(shown?.messages.at(-1)).toEqual({
      role: 'system',
      content: expect.stringContaining('checkpoint "c"'),
    });
    await expect(session.syncConversation([{ nonsense: true }])).rejects.toMatchObject({
      code: 'CONVERSATION_FORMAT_UNKNOWN',
    });
    await expect(session.syncConversation([user('x')], { format: 'gemini' })).rejects.toMatchObject(
      {
        code: 'CONVERSATION_FORMAT_MISMATCH',
      },
    );
    await session.checkpoint('files-only-but-current-conversation');
    expect(await session.conversationAt('files-only-but-current-conversation')).toBeDefined();
  });
});
