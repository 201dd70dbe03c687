// The first seed's example, in TypeScript's world: a LangGraph.js agent migrates a real SQLite
// database file (sql.js: no native build), the verifier finds the migration lost money and
// fails, and LangGraph's own time travel takes files and conversation back together (the
// RewindCheckpointer restores the files of the checkpoint the run forks from); the agent retries
// with the patch note and passes. The model is scripted, so it runs offline.
//   node examples/db-migration/run.mjs        (after npm run build)
// Exits non-zero if any step does not behave as it should.
import { createHash } from 'node:crypto';
import { existsSync, mkdtempSync, readFileSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { BaseChatModel } from '@langchain/core/language_models/chat_models';
import { AIMessage, HumanMessage, SystemMessage } from '@langchain/core/messages';
import { tool } from '@langchain/core/tools';
import { END, MessagesAnnotation, START, StateGraph } from '@langchain/langgraph';
import { toolsCondition } from '@langchain/langgraph/prebuilt';
import { z } from 'zod';
import { RewindCheckpointer, rewindToolNode } from '../../dist/adapters/langgraph/index.js';
import { init, log, openSession } from '../../dist/index.js';
import { seededDatabase } from './seed.mjs';
import { openDatabase, queryFile } from './sqlite.mjs';

const here = fileURLToPath(new URL('.', import.meta.url));

const TASK = `Migrate shop.db: replace users.credits with users.balance_usd (dollars). Credits convert by tier:
entry (under 100) at $0.05, standard (100 up through 500) at $0.10, premium (500 and above) at $0.15.
Write the migration to migration.sql, run it, then run the tests. One action at a time.`;

const PATCH_NOTE =
  'Patch note: a user with exactly 500 credits is premium ($0.15): "500 and above" wins over "up through 500". Start again from the unmigrated database.';

const migration = (standardUpTo) => `ALTER TABLE users ADD COLUMN balance_usd REAL;
UPDATE users SET balance_usd = CASE
  WHEN credits < 100 THEN credits * 0.05
  WHEN credits ${standardUpTo} THEN credits * 0.10
  ELSE credits * 0.15
END;
ALTER TABLE users DROP COLUMN credits;
`;

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

const sha256 = (path) => createHash('sha256').update(readFileSync(path)).digest('hex');

/** Runs the example in a fresh workspace; returns what happened, throws if it went wrong. */
export async function runDbMigration({ say = console.log } = {}) {
  const workspace = mkdtempSync(join(tmpdir(), 'rewind-db-migration-'));
  const check = (condition, message) => {
    if (!condition) throw new Error(`db-migration: ${message}`);
  };
  const db = join(workspace, 'shop.db');
  writeFileSync(db, await seededDatabase());
  const seedHash = sha256(db);
  await init({ workspace });
  const session = await openSession({ workspace });
  try {
    const tools = [
      tool(async ({ query }) => JSON.stringify(await queryFile(db, query)), {
        name: 'run_sql',
        description: 'Run a read-only SQL query on shop.db; returns the rows as JSON.',
        schema: z.object({ query: z.string() }),
      }),
      tool(
        async ({ path, content }) => {
          await session.write(path, content);
          return `wrote ${path}`;
        },
        {
          name: 'write_file',
          description: 'Write a file of the workspace.',
          schema: z.object({ path: z.string(), content: z.string() }),
        },
      ),
      tool(
        async ({ path }) => {
          const sql = readFileSync(join(workspace, path), 'utf8');
          const database = await openDatabase(readFileSync(db));
          database.exec(sql);
          const bytes = Buffer.from(database.export());
          database.close();
          // Through the session: journaled, its old bytes kept, undoable.
          await session.write('shop.db', bytes);
          return `applied ${path} to shop.db`;
        },
        {
          name: 'run_migration',
          description: 'Apply a SQL migration file to shop.db.',
          schema: z.object({ path: z.string() }),
        },
      ),
      tool(
        async () => {
          const verdict = await session.test({
            verifier: { command: ['node', join(here, 'verify.mjs'), 'shop.db'] },
          });
          return `${verdict.status.toUpperCase()}: ${verdict.summary ?? ''}${verdict.errors.length > 0 ? `\n${verdict.errors.join('\n')}` : ''}`;
        },
        {
          name: 'run_tests',
          description: 'Verify the migration of shop.db.',
          schema: z.object({}),
        },
      ),
    ];
    const model = new ScriptedModel([
      use('run_sql', { query: 'SELECT id, credits FROM users ORDER BY id' }),
      use('write_file', { path: 'migration.sql', content: migration('<= 500') }),
      use('run_migration', { path: 'migration.sql' }),
      use('run_tests', {}),
      new AIMessage('The verifier failed: some balances are wrong.'),
      // The retry, from the checkpoint before the migration, with the patch note.
      use('run_sql', { query: 'PRAGMA table_info(users)' }),
      use('write_file', { path: 'migration.sql', content: migration('< 500') }),
      use('run_migration', { path: 'migration.sql' }),
      use('run_tests', {}),
      new AIMessage('Migrated: all balances verified.'),
    ]);
    const graph = new StateGraph(MessagesAnnotation)
      .addNode('agent', async (state) => ({ messages: [await model.invoke(state.messages)] }))
      .addNode('tools', rewindToolNode(session, tools, { readOnly: ['run_sql', 'run_tests'] }))
      .addEdge(START, 'agent')
      .addConditionalEdges('agent', toolsCondition, ['tools', END])
      .addEdge('tools', 'agent')
      .compile({ checkpointer: new RewindCheckpointer(session) });
    const thread = { configurable: { thread_id: 'migration' }, durability: 'sync' };

    say('# The agent migrates shop.db');
    const first = await graph.invoke(
      {
        messages: [
          new SystemMessage('You are a careful database migration agent.'),
          new HumanMessage(TASK),
        ],
      },
      thread,
    );
    const failed = first.messages.findLast((message) => message.name === 'run_tests');
    say(`run_tests: ${failed.content}`);
    check(String(failed.content).startsWith('FAIL'), 'the wrong migration passed');
    check(
      sha256(db) !== seedHash && existsSync(join(workspace, 'migration.sql')),
      'nothing was migrated',
    );

    // Time travel: the checkpoint where the agent had looked at the data and not yet written.
    let before;
    for await (const state of graph.getStateHistory(thread)) {
      const last = state.values.messages.at(-1);
      if (last?.name === 'run_sql' && state.next.includes('agent')) before = state;
    }
    check(before !== undefined, 'no checkpoint before the migration');
    say('\n# Fork from the checkpoint before the migration, with the patch note');
    const second = await graph.invoke(
      { messages: [new HumanMessage(PATCH_NOTE)] },
      { ...before.config, durability: 'sync' },
    );
    const looked = second.messages.find(
      (message) => message.name === 'run_sql' && String(message.content).includes('credits'),
    );
    check(looked !== undefined, 'the retry did not start from the unmigrated database');
    const passed = second.messages.findLast((message) => message.name === 'run_tests');
    say(`run_tests: ${passed.content}`);
    check(String(passed.content).startsWith('PASS'), 'the corrected migration did not pass');
    check(
      !second.messages.some((message) => String(message.content).includes('<= 500')),
      'the conversation still holds the wrong attempt',
    );
    const balances = await queryFile(db, 'SELECT id, balance_usd FROM users ORDER BY id');
    say(`balances: ${balances.map((row) => row.balance_usd.toFixed(2)).join(', ')}`);
    const kinds = (await log({ workspace })).entries.map((line) => line.kind);
    const verdicts = (await log({ workspace, kind: 'verification' })).entries.map(
      (line) => line.entry.body.status,
    );
    check(verdicts.join(',') === 'fail,pass', `the verdicts were ${verdicts.join(',')}`);
    check(kinds.includes('rollback-started'), 'the files were not rolled back');
    say(
      `\nledger: ${verdicts.join(' then ')}; the fork rolled the files back (undoable: rewind undo).`,
    );
    return { workspace, seedHash };
  } finally {
    await session.close();
  }
}

if (process.argv[1] === fileURLToPath(import.meta.url)) {
  await runDbMigration();
}
