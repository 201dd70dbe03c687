// A LangGraph.js agent (StateGraph + ToolNode, a scripted model so that it runs offline) whose
// checkpointer is Rewind's: every LangGraph checkpoint is paired with the files, so LangGraph's
// own time travel brings the files back. Two turns edit a file; a fork from the end of the first
// turn starts from its files; a halt raised by a tool leaves the graph.
//   node examples/langgraph/run.mjs        (after npm run build)
// Exits non-zero if any step does not behave as it should.
import { mkdtempSync, readFileSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { BaseChatModel } from '@langchain/core/language_models/chat_models';
import { AIMessage, HumanMessage } from '@langchain/core/messages';
import { tool } from '@langchain/core/tools';
import { END, MessagesAnnotation, START, StateGraph } from '@langchain/langgraph';
import { toolsCondition } from '@langchain/langgraph/prebuilt';
import { z } from 'zod';
import { RewindCheckpointer, rewindToolNode } from '../../dist/adapters/langgraph/index.js';
import { HaltError, init, openSession } from '../../dist/index.js';

/** A chat model that answers from a script, as a real one would answer with tool calls. */
class ScriptedModel extends BaseChatModel {
  constructor(script) {
    super({});
    this.script = script;
  }
  _llmType() {
    return 'scripted';
  }
  bindTools() {
    return this;
  }
  async _generate() {
    const next = this.script.shift();
    if (!next) throw new Error('the script ran out');
    return { generations: [{ message: next, text: '' }] };
  }
}

let calls = 0;
const use = (name, args) =>
  new AIMessage({
    content: '',
    tool_calls: [{ id: `call_${++calls}`, name, args, type: 'tool_call' }],
  });

/** Runs the example in a fresh workspace; returns what happened, throws if it went wrong. */
export async function runLangGraphAgent({ say = console.log } = {}) {
  const workspace = mkdtempSync(join(tmpdir(), 'rewind-langgraph-'));
  const check = (condition, message) => {
    if (!condition) throw new Error(`langgraph: ${message}`);
  };
  writeFileSync(join(workspace, 'greeting.txt'), 'hello\n');
  const read = () => readFileSync(join(workspace, 'greeting.txt'), 'utf8');
  await init({ workspace });
  const session = await openSession({ workspace });
  try {
    // An unknown verdict stops the agent: a halt, which must reach the caller.
    session.autoRollback({ verifier: { command: 'echo "no verdict"' } });
    const tools = [
      tool(async () => read(), {
        name: 'read_greeting',
        description: 'Read greeting.txt',
        schema: z.object({}),
      }),
      tool(
        async ({ text }) => {
          await session.write('greeting.txt', text);
          return 'written';
        },
        {
          name: 'write_greeting',
          description: 'Write greeting.txt',
          schema: z.object({ text: z.string() }),
        },
      ),
      tool(async () => (await session.check()).status, {
        name: 'run_tests',
        description: 'Run the tests',
        schema: z.object({}),
      }),
    ];
    const model = new ScriptedModel([
      use('write_greeting', { text: 'hello, world\n' }),
      new AIMessage('Done.'),
      use('write_greeting', { text: 'HELLO, WORLD!!!\n' }),
      new AIMessage('Done, louder.'),
      // The fork: the agent reads what is there.
      use('read_greeting', {}),
      new AIMessage('It says hello, world.'),
      // A check with no verdict: the agent is stopped.
      use('run_tests', {}),
    ]);
    const graph = new StateGraph(MessagesAnnotation)
      .addNode('agent', async (state) => ({ messages: [await model.invoke(state.messages)] }))
      .addNode('tools', rewindToolNode(session, tools, { readOnly: ['read_greeting'] }))
      .addEdge(START, 'agent')
      .addConditionalEdges('agent', toolsCondition, ['tools', END])
      .addEdge('tools', 'agent')
      .compile({ checkpointer: new RewindCheckpointer(session) });
    const thread = { configurable: { thread_id: 'greeter' }, durability: 'sync' };

    await graph.invoke({ messages: [new HumanMessage('Make it hello, world')] }, thread);
    say(`turn 1: ${JSON.stringify(read())}`);
    await graph.invoke({ messages: [new HumanMessage('Louder')] }, thread);
    say(`turn 2: ${JSON.stringify(read())}`);
    check(read() === 'HELLO, WORLD!!!\n', 'turn 2 did not write');

    let endOfFirst;
    for await (const state of graph.getStateHistory(thread)) {
      if (state.values.messages.at(-1)?.content === 'Done.' && state.next.length === 0)
        endOfFirst = state;
    }
    check(read() === 'HELLO, WORLD!!!\n', 'reading the history changed the files');
    const fork = await graph.invoke(
      { messages: [new HumanMessage('What does it say now?')] },
      { ...endOfFirst.config, durability: 'sync' },
    );
    say(`fork from turn 1: the agent read ${fork.messages.at(-2).content.trim()}`);
    check(read() === 'hello, world\n', 'the fork did not start from the files of turn 1');

    let halted;
    try {
      await graph.invoke({ messages: [new HumanMessage('Run the tests')] }, thread);
    } catch (error) {
      halted = error;
    }
    check(halted instanceof HaltError, 'the halt did not leave the graph');
    say(`halt: ${halted.message.split('\n')[0]}`);
    return { workspace };
  } finally {
    await session.close();
  }
}

if (process.argv[1] === fileURLToPath(import.meta.url)) {
  await runLangGraphAgent();
}
