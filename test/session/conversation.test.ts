import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { type Format, type Message, validate } from '../../src/conversation/index.js';
import { Ledger, listSessions } from '../../src/ledger/index.js';
import { log, openSession } from '../../src/session/index.js';
import { createObjectStore } from '../../src/store/index.js';
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

const toolCall = { id: 'c1', type: 'function', function: { name: 'exec', arguments: '{}' } };

/** How many objects the store holds, packed or as files. */
async function objectCount(workspace: string): Promise<number> {
  let count = 0;
  for await (const _ of createObjectStore(join(workspace, '.rewind')).list()) count += 1;
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
      ],
    });
    // The request made since the checkpoint stays at the end, so the agent knows what it was
    // asked; the note goes with it.
    expect(restored.messages[5]).toEqual({
      role: 'user',
      content: [
        { type: 'text', text: 'now break it' },
        {
          type: 'text',
          text: expect.stringContaining('Patch applied since: the build script was fixed'),
        },
      ],
    });
    expect(restored.messages).toHaveLength(6);
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
    // The agent summarizes its history down to three messages...
    await session.syncConversation([user('summary of 20 messages'), assistant('ok'), user('q20')], {
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

describe("a rollback keeps the person's current request", () => {
  it('at the end of the restored history, once, in every rollback and dry run, unless told not to', async () => {
    const { session } = await sessionOn({ 'a.txt': 'one' });
    const first = [user('add a test'), assistant('added it')];
    await session.checkpoint('done', { messages: first, format: 'anthropic' });
    await session.syncConversation([...first, user('now fix the bug'), call('toolu_9')]);
    const shown = await session.rollback('done', { dryRun: true });
    const expected = [
      ...first,
      {
        role: 'user',
        content: [
          { type: 'text', text: 'now fix the bug' },
          { type: 'text', text: expect.stringContaining('rolled back to checkpoint "done"') },
        ],
      },
    ];
    expect(shown.conversation?.messages).toEqual(expected);
    expect((await session.rollback('done')).conversation?.messages).toEqual(expected);
    const current = (await session.conversation())?.messages ?? [];
    expect(current).toEqual(expected);
    // Rolled back again (the note of the first rollback is not part of the request): one request.
    await session.syncConversation([...current, assistant('trying again')], {
      format: 'anthropic',
    });
    const again = await session.rollback('done');
    expect(again.conversation?.messages).toEqual(current);
    // A checkpoint that holds the request gets no second copy.
    await session.checkpoint('asked');
    await session.syncConversation([...(again.conversation?.messages ?? []), assistant('broke')], {
      format: 'anthropic',
    });
    const atAsked = await session.rollback('asked');
    expect(
      atAsked.conversation?.messages.filter((message) =>
        JSON.stringify(message).includes('now fix the bug'),
      ),
    ).toHaveLength(1);
    // Tool results are not requests, and keepRequest: false restores the checkpoint as it was.
    await session.syncConversation([...first, user('something else')], { format: 'anthropic' });
    const plain = await session.rollback('done', { keepRequest: false });
    expect(plain.conversation?.messages.slice(0, 2)).toEqual(first);
    expect(JSON.stringify(plain.conversation?.messages)).not.toContain('something else');
  });

  it('in every format: the newest turn a person wrote, never a tool result or a note', async () => {
    const { session } = await sessionOn({});
    const cases: [Format, Message[], Message[], Message][] = [
      [
        'openai-chat',
        [
          { role: 'user', content: 'a' },
          { role: 'assistant', content: 'b' },
        ],
        [
          { role: 'user', content: 'fix it' },
          { role: 'assistant', content: null, tool_calls: [toolCall] },
          { role: 'tool', tool_call_id: 'c1', content: 'done' },
        ],
        { role: 'user', content: 'fix it' },
      ],
      [
        'gemini',
        [
          { role: 'user', parts: [{ text: 'a' }] },
          { role: 'model', parts: [{ text: 'b' }] },
        ],
        [
          { role: 'user', parts: [{ text: 'fix it' }] },
          { role: 'model', parts: [{ functionCall: { name: 'exec', args: {} } }] },
          { role: 'user', parts: [{ functionResponse: { name: 'exec', response: {} } }] },
        ],
        { role: 'user', parts: [{ text: 'fix it' }] },
      ],
      [
        'ai-sdk',
        [
          { role: 'user', content: 'a' },
          { role: 'assistant', content: 'b' },
        ],
        [
          { role: 'user', content: [{ type: 'text', text: 'fix it' }] },
          {
            role: 'assistant',
            content: [{ type: 'tool-call', toolCallId: 'c1', toolName: 'exec', input: {} }],
          },
          {
            role: 'tool',
            content: [
              {
                type: 'tool-result',
                toolCallId: 'c1',
                toolName: 'exec',
                output: { type: 'text', value: 'ok' },
              },
            ],
          },
        ],
        { role: 'user', content: [{ type: 'text', text: 'fix it' }] },
      ],
    ];
    for (const [format, before, after, request] of cases) {
      await session.checkpoint(`at-${format}`, { messages: before, format });
      await session.syncConversation([...before, ...after], { format });
      const restored = await session.rollback(`at-${format}`, { dryRun: true });
      const messages = restored.conversation?.messages ?? [];
      expect(messages.slice(0, 2)).toEqual(before);
      // The request, with the note merged in where roles must alternate, else after it.
      const kept = messages.filter((message) => JSON.stringify(message).includes('fix it'));
      expect(kept).toHaveLength(1);
      expect(messages[2]).toMatchObject({ role: 'user' });
      expect(messages).toHaveLength(format === 'gemini' || format === 'ai-sdk' ? 3 : 4);
      if (messages.length === 4) expect(messages[2]).toEqual(request);
      expect(validate(messages, format).problems).toEqual([]);
    }
  });
});

describe('a rollback of the files or of the conversation only', () => {
  it('restores one side, leaves the other, and undo brings it back', async () => {
    const { workspace, session, stateOf } = await sessionOn({ 'a.txt': 'one' });
    const early = [user('start'), assistant('started')];
    await session.checkpoint('base', { messages: early, format: 'anthropic' });
    const base = await stateOf();
    await lay(workspace, { 'a.txt': 'two', 'b.txt': 'new' });
    const later = [...early, assistant('more')];
    await session.syncConversation(later, { format: 'anthropic' });
    const changed = await stateOf();

    const filesOnly = await session.rollback('base', { scope: 'files' });
    expect(await stateOf()).toBe(base);
    expect(filesOnly.conversation).toBeUndefined();
    expect((await session.conversation())?.messages).toEqual(later);
    await session.undo(filesOnly.id as number);
    expect(await stateOf()).toBe(changed);

    const talkOnly = await session.rollback('base', { scope: 'conversation' });
    expect(talkOnly.changes).toEqual([]);
    expect(await stateOf()).toBe(changed);
    expect((await session.conversation())?.messages.slice(0, 2)).toEqual(early);
    await session.undo(talkOnly.id as number);
    expect((await session.conversation())?.messages).toEqual(later);
    expect(await stateOf()).toBe(changed);

    // A checkpoint with no conversation has none to restore.
    const bare = await sessionOn({ 'a.txt': 'x' });
    await bare.session.checkpoint('files');
    await expect(bare.session.rollback('files', { scope: 'conversation' })).rejects.toMatchObject({
      code: 'CONVERSATION_NOT_FOUND',
    });
    await expect(
      session.rollback('base', { scope: 'conversation', paths: ['a.txt'] }),
    ).rejects.toMatchObject({ code: 'INVALID_ARGUMENT' });
  });
});

describe('binary message content', () => {
  it('comes back byte for byte, as the kind of value it was', async () => {
    const { workspace, session } = await sessionOn({ 'a.txt': 'one' });
    const png = new Uint8Array([137, 80, 78, 71, 13, 10, 26, 10, 0, 255]);
    const framed = new Uint8Array(new Uint8Array([9, 9, 1, 2, 3, 9]).buffer, 2, 3);
    const messages = [
      {
        role: 'user',
        content: [
          { type: 'text', text: 'what is in this picture?' },
          { type: 'image', image: png, mediaType: 'image/png' },
          { type: 'file', data: Buffer.from('%PDF-1.7'), mediaType: 'application/pdf' },
          { type: 'file', data: framed, mediaType: 'application/octet-stream' },
          { type: 'file', data: new Uint8Array([7, 8]).buffer, mediaType: 'text/plain' },
        ],
      },
      { role: 'assistant', content: [{ type: 'text', text: 'a logo' }] },
    ];
    await session.checkpoint('seen', { messages, format: 'ai-sdk' });
    await lay(workspace, { 'a.txt': 'two' });
    await session.syncConversation([...messages, { role: 'user', content: 'thanks' }], {
      format: 'ai-sdk',
    });
    const restored = (await session.rollback('seen', { keepRequest: false })).conversation;
    const data = ((restored?.messages[0]?.content ?? []) as Record<string, unknown>[]).map(
      (part) => part.image ?? part.data,
    );
    expect(data[1]).toBeInstanceOf(Uint8Array);
    expect(Buffer.from(data[1] as Uint8Array).equals(Buffer.from(png))).toBe(true);
    expect(Buffer.isBuffer(data[2])).toBe(true);
    expect(String(data[2])).toBe('%PDF-1.7');
    expect(Array.from(data[3] as Uint8Array)).toEqual([1, 2, 3]);
    expect(data[4]).toBeInstanceOf(ArrayBuffer);
    expect(Array.from(new Uint8Array(data[4] as ArrayBuffer))).toEqual([7, 8]);
    // Shown without rolling back, it is the same.
    expect((await session.conversationAt('seen'))?.messages[0]).toEqual(restored?.messages[0]);
  });
});
