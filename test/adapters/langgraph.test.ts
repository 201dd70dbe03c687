import { readFile } from 'node:fs/promises';
import { join } from 'node:path';
import { BaseChatModel } from '@langchain/core/language_models/chat_models';
import { AIMessage, type BaseMessage, HumanMessage, ToolMessage } from '@langchain/core/messages';
import type { ChatResult } from '@langchain/core/outputs';
import { tool } from '@langchain/core/tools';
import { END, MessagesAnnotation, START, StateGraph } from '@langchain/langgraph';
import { toolsCondition } from '@langchain/langgraph/prebuilt';
import { describe, expect, it } from 'vitest';
import { z } from 'zod';
import { RewindCheckpointer, rewindToolNode } from '../../src/adapters/langgraph/index.js';
import { HaltError, log, type Session } from '../../src/index.js';
import { sessionOn } from '../helpers/session.js';

/** A chat model that answers from a script: each call gives the next message. */
class ScriptedModel extends BaseChatModel {
  readonly script: AIMessage[];
  readonly seen: BaseMessage[][] = [];
  constructor(script: AIMessage[]) {
    super({});
    this.script = script;
  }
  _llmType(): string {
    return 'scripted';
  }
  override bindTools(): this {
    return this;
  }
  async _generate(messages: BaseMessage[]): Promise<ChatResult> {
    this.seen.push(messages);
    const next = this.script.shift();
    if (!next) throw new Error('the script ran out');
    return { generations: [{ message: next, text: '' }] };
  }
}

let calls = 0;
const callTool = (name: string, args: Record<string, unknown>) =>
  new AIMessage({
    content: '',
    tool_calls: [{ id: `call-${++calls}`, name, args, type: 'tool_call' }],
  });
const say = (text: string) => new AIMessage(text);

function agentOn(session: Session, model: ScriptedModel, options: { keepLast?: number } = {}) {
  const tools = [
    tool(async ({ path }) => readFile(join(session.workspace, path), 'utf8'), {
      name: 'read_file',
      description: 'Read a file',
      schema: z.object({ path: z.string() }),
    }),
    tool(
      async ({ path, content }) => {
        await session.write(path, content);
        return `wrote ${path}`;
      },
      {
        name: 'write_file',
        description: 'Write a file',
        schema: z.object({ path: z.string(), content: z.string() }),
      },
    ),
    tool(async () => `tests ${(await session.check()).status}`, {
      name: 'run_tests',
      description: 'Run the tests',
      schema: z.object({}),
    }),
  ];
  const checkpointer = new RewindCheckpointer(session, options);
  const graph = new StateGraph(MessagesAnnotation)
    .addNode('agent', async (state) => ({ messages: [await model.invoke(state.messages)] }))
    .addNode('tools', rewindToolNode(session, tools, { readOnly: ['read_file'] }))
    .addEdge(START, 'agent')
    .addConditionalEdges('agent', toolsCondition, ['tools', END])
    .addEdge('tools', 'agent')
    .compile({ checkpointer });
  return { graph, checkpointer };
}

const text = (workspace: string) => readFile(join(workspace, 'a.txt'), 'utf8');

describe('rewind-agent/langgraph', () => {
  it("pairs every checkpoint with the files: LangGraph's own time travel brings them back, and reads never touch them", async () => {
    const { workspace, session } = await sessionOn({ 'a.txt': 'v0' });
    const model = new ScriptedModel([
      callTool('write_file', { path: 'a.txt', content: 'v1' }),
      say('wrote v1'),
      callTool('write_file', { path: 'a.txt', content: 'v2' }),
      say('wrote v2'),
      // The fork from the end of the first turn: the model reads the file first.
      callTool('read_file', { path: 'a.txt' }),
      callTool('write_file', { path: 'a.txt', content: 'v3' }),
      say('wrote v3'),
    ]);
    const { graph } = agentOn(session, model);
    const thread = { configurable: { thread_id: 'thread-1' } };
    await graph.invoke({ messages: [new HumanMessage('write v1')] }, thread);
    await graph.invoke({ messages: [new HumanMessage('write v2')] }, thread);
    expect(await text(workspace)).toBe('v2');

    // Reads: the whole history, and one past state, leave the files as they are.
    const history = [];
    for await (const state of graph.getStateHistory(thread)) history.push(state);
    const endOfFirst = history.find(
      (state) => state.values.messages.at(-1)?.content === 'wrote v1' && state.next.length === 0,
    );
    expect(endOfFirst).toBeDefined();
    await graph.getState(endOfFirst?.config as never);
    expect(await text(workspace)).toBe('v2');
    const rollbacksBefore = (await log({ workspace, kind: 'rollback' })).entries.length;

    // A fork from the end of the first turn starts from its files: the model reads v1.
    await graph.invoke({ messages: [new HumanMessage('write v3 instead')] }, endOfFirst?.config);
    const read = model.seen.at(-2)?.at(-1);
    expect(read?.content).toBe('v1');
    expect(await text(workspace)).toBe('v3');
    // It is an undoable rollback, in the ledger like any.
    const rollbacks = (await log({ workspace, kind: 'rollback' })).entries;
    expect(rollbacks.length).toBeGreaterThan(rollbacksBefore);
    const restore = rollbacks.find((line) => line.kind === 'rollback-started');
    expect(restore?.entry.body).toMatchObject({ scope: 'files' });
    // The thread's own latest goes on without a restore.
    expect((await graph.getState(thread)).values.messages.at(-1)?.content).toBe('wrote v3');
  });

  it('restores the files of a past checkpoint when its state is updated, before the new branch runs', async () => {
    const { workspace, session } = await sessionOn({ 'a.txt': 'v0' });
    const model = new ScriptedModel([
      callTool('write_file', { path: 'a.txt', content: 'v1' }),
      say('wrote v1'),
      callTool('write_file', { path: 'a.txt', content: 'v2' }),
      say('wrote v2'),
      callTool('read_file', { path: 'a.txt' }),
      say('read it'),
    ]);
    const { graph } = agentOn(session, model);
    const thread = { configurable: { thread_id: 'thread-2' } };
    await graph.invoke({ messages: [new HumanMessage('write v1')] }, thread);
    await graph.invoke({ messages: [new HumanMessage('write v2')] }, thread);
    const history = [];
    for await (const state of graph.getStateHistory(thread)) history.push(state);
    const endOfFirst = history.find(
      (state) => state.values.messages.at(-1)?.content === 'wrote v1' && state.next.length === 0,
    );
    const updated = await graph.updateState(
      endOfFirst?.config as never,
      { messages: [new HumanMessage('now just read it')] },
      'tools',
    );
    expect(await text(workspace)).toBe('v1');
    await graph.invoke(null, updated);
    expect(model.seen.at(-1)?.at(-1)?.content).toBe('v1');
  });

  it('lets a halt out of the graph, and keeps the files of the newest keepLast checkpoints only', async () => {
    const { workspace, session } = await sessionOn({ 'a.txt': 'v0' });
    session.autoRollback({ verifier: { command: 'echo no verdict' } });
    const model = new ScriptedModel([
      callTool('write_file', { path: 'a.txt', content: 'v1' }),
      callTool('run_tests', {}),
      say('never said'),
    ]);
    const { graph } = agentOn(session, model, { keepLast: 2 });
    const thread = { configurable: { thread_id: 'thread-3' } };
    await expect(
      graph.invoke({ messages: [new HumanMessage('write v1, then test')] }, thread),
    ).rejects.toBeInstanceOf(HaltError);
    expect(model.script).toHaveLength(1);
    expect(await text(workspace)).toBe('v1');
    const pairings = (await session.checkpoints()).filter((checkpoint) =>
      checkpoint.label.startsWith('lg-'),
    );
    expect(pairings).toHaveLength(2);
    // The first checkpoint's files are gone: going on from it is refused, saying why.
    const history = [];
    for await (const state of graph.getStateHistory(thread)) history.push(state);
    await expect(
      graph.invoke({ messages: [new HumanMessage('again')] }, history.at(-1)?.config),
    ).rejects.toThrow(/are not kept/);
  });

  it('takes live LangChain messages as they are, stored in their serialized form', async () => {
    const { session } = await sessionOn({ 'a.txt': 'v0' });
    const live = [
      new HumanMessage('write v1'),
      new AIMessage({
        content: '',
        tool_calls: [{ id: 'c1', name: 'write_file', args: { content: 'v1' }, type: 'tool_call' }],
      }),
      new ToolMessage({ content: 'wrote a.txt', tool_call_id: 'c1' }),
      new AIMessage({
        content: '',
        tool_calls: [{ id: 'c2', name: 'write_file', args: { content: 'v2' }, type: 'tool_call' }],
      }),
    ];
    const taken = await session.checkpoint('live', { messages: live });
    expect(taken.conversation).toEqual({ format: 'langchain', messageCount: 4 });
    const shown = await session.conversationAt('live');
    expect(shown?.messages[0]).toMatchObject({ lc: 1, kwargs: { content: 'write v1' } });
    // The call in flight is answered, as for any LangChain history.
    expect(JSON.stringify(shown?.messages[4])).toContain('"tool_call_id":"c2"');
  });

  it("keeps the graph's messages true when a call of the step rolls the files back", async () => {
    const { workspace, session } = await sessionOn({ 'a.txt': 'v0' });
    session.autoRollback({ on: ['exception'] });
    const tools = [
      tool(
        async ({ path, content }) => {
          await session.write(path, content);
          return `wrote ${path}`;
        },
        {
          name: 'write_file',
          description: 'Write a file',
          schema: z.object({ path: z.string(), content: z.string() }),
        },
      ),
      tool(
        async (): Promise<string> => {
          await session.write('half.txt', 'x');
          throw new Error('boom');
        },
        { name: 'explode', description: 'Explode', schema: z.object({}) },
      ),
    ];
    const model = new ScriptedModel([
      new AIMessage({
        content: '',
        tool_calls: [
          {
            id: 'w1',
            name: 'write_file',
            args: { path: 'a.txt', content: 'v1' },
            type: 'tool_call',
          },
          { id: 'e1', name: 'explode', args: {}, type: 'tool_call' },
          {
            id: 'w2',
            name: 'write_file',
            args: { path: 'b.txt', content: 'b' },
            type: 'tool_call',
          },
        ],
      }),
      say('understood'),
    ]);
    const graph = new StateGraph(MessagesAnnotation)
      .addNode('agent', async (state) => ({ messages: [await model.invoke(state.messages)] }))
      .addNode('tools', rewindToolNode(session, tools))
      .addEdge(START, 'agent')
      .addConditionalEdges('agent', toolsCondition, ['tools', END])
      .addEdge('tools', 'agent')
      .compile({ checkpointer: new RewindCheckpointer(session) });
    const out = await graph.invoke(
      { messages: [new HumanMessage('write, then explode')] },
      { configurable: { thread_id: 'thread-5' } },
    );
    // The files went back to before the tools ran; the siblings after the failure never ran.
    expect(await text(workspace)).toBe('v0');
    await expect(readFile(join(workspace, 'b.txt'), 'utf8')).rejects.toThrow();
    await expect(readFile(join(workspace, 'half.txt'), 'utf8')).rejects.toThrow();
    const results = new Map(
      out.messages
        .filter((message: BaseMessage): message is ToolMessage => message instanceof ToolMessage)
        .map((message: ToolMessage) => [message.tool_call_id, String(message.content)]),
    );
    // No result claims a change the rollback undid, and none says the graph's messages moved.
    expect(results.get('w1')).toMatch(/^ERROR: this call ran, .*undid its changes/);
    expect(results.get('e1')).toContain('boom');
    expect(results.get('e1')).toContain('The conversation was not rolled back');
    expect(results.get('w2')).toContain('Rewind did not run this call');
    for (const result of results.values()) {
      expect(result).not.toContain('workspace and conversation were rolled back');
    }
  });
});
