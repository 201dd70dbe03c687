// An OpenAI Agents SDK agent (the SDK's real run loop, a scripted model so that it runs offline)
// with its memory in Rewind: its items are the session's conversation, its tools are journaled,
// a failed test rolls back files and items together (the request kept), and a deploy that needs
// approval waits as a Rewind draft until a person approves it with `rewind approve`.
//   node examples/openai-agents/run.mjs        (after npm run build)
// Exits non-zero if any step does not behave as it should.
import { spawnSync } from 'node:child_process';
import { existsSync, mkdtempSync, readFileSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { Agent, setTracingDisabled, Usage } from '@openai/agents';
import { z } from 'zod';
import {
  applyApprovals,
  RewindAgentsSession,
  rewindRun,
  rewindTool,
} from '../../dist/adapters/openai-agents/index.js';
import { init, openSession } from '../../dist/index.js';

const root = fileURLToPath(new URL('../..', import.meta.url));
setTracingDisabled(true);

let calls = 0;
const call = (name, args) => ({
  type: 'function_call',
  callId: `call_${++calls}`,
  name,
  arguments: JSON.stringify(args),
  status: 'completed',
});
const says = (text) => ({
  type: 'message',
  role: 'assistant',
  status: 'completed',
  content: [{ type: 'output_text', text }],
});

/** Runs the example in a fresh workspace; returns what happened, throws if it went wrong. */
export async function runOpenAiAgent({ say = console.log } = {}) {
  const workspace = mkdtempSync(join(tmpdir(), 'rewind-openai-agents-'));
  const check = (condition, message) => {
    if (!condition) throw new Error(`openai-agents: ${message}`);
  };
  const read = (path) => readFileSync(join(workspace, path), 'utf8');
  writeFileSync(join(workspace, 'VERSION'), '1.0.0\n');
  await init({ workspace });
  const session = await openSession({ workspace });
  try {
    // The tests: the version must be semver.
    session.autoRollback({
      verifier: {
        command: `grep -Eq '^[0-9]+\\.[0-9]+\\.[0-9]+$' VERSION && echo '{"status":"pass"}' || echo '{"status":"fail","errors":["VERSION is not semver"]}'`,
      },
    });
    const tools = [
      rewindTool(session, {
        name: 'write_file',
        description: 'Write a file',
        parameters: z.object({ path: z.string(), content: z.string() }),
        execute: async ({ path, content }) => {
          await session.write(path, content);
          return `wrote ${path}`;
        },
      }),
      rewindTool(session, {
        name: 'run_tests',
        description: 'Run the tests',
        parameters: z.object({}),
        execute: async () => `tests ${(await session.check()).status}`,
      }),
      rewindTool(session, {
        name: 'publish',
        description: 'Publish the release',
        parameters: z.object({ version: z.string() }),
        needsApproval: true,
        execute: async ({ version }) => {
          await session.write('PUBLISHED', `${version}\n`);
          return `published ${version}`;
        },
      }),
    ];
    const script = [
      [call('write_file', { path: 'VERSION', content: '1.1\n' })],
      [call('run_tests', {})],
      // The run stops at the rollback; the next one goes on from the restored items.
      [call('write_file', { path: 'VERSION', content: '1.1.0\n' })],
      [call('run_tests', {})],
      [call('publish', { version: '1.1.0' })],
      [says('Released 1.1.0.')],
    ];
    const model = {
      async getResponse() {
        return { usage: new Usage(), output: script.shift(), responseId: `r${calls}` };
      },
      // biome-ignore lint/correctness/useYield: a scripted model never streams.
      async *getStreamedResponse() {
        throw new Error('not streamed');
      },
    };
    const agent = new Agent({
      name: 'releaser',
      instructions: 'Release the next minor version.',
      model,
      tools,
    });
    const memory = new RewindAgentsSession(session);

    say('# Run 1: "Bump the version to 1.1"');
    const first = await rewindRun(session, agent, 'Bump the version to the next minor');
    check(first.rolledBack?.event === 'test-failure', 'the failing tests did not roll back');
    check(read('VERSION') === '1.0.0\n', 'VERSION is not back to 1.0.0');
    const items = await memory.getItems();
    check(
      items.some((item) => item.content === 'Bump the version to the next minor'),
      'the restored items lost the request',
    );
    say(
      `rolled back to ${first.rolledBack.to}: VERSION is 1.0.0 again; the memory holds ${items.length} items, the request and a note`,
    );

    say('\n# Run 2: the agent goes on from the restored items');
    const second = await rewindRun(session, agent, 'Go on');
    const stopped = second.result;
    check(stopped?.interruptions?.length === 1, 'publish did not wait for approval');
    const draft = (await session.actions()).findLast((action) => action.state === 'draft');
    say(`publish waits as draft #${draft.id} (${draft.target}); a person approves it:`);
    const approved = spawnSync(
      process.execPath,
      [join(root, 'bin', 'rewind.cjs'), 'approve', String(draft.id), '--yes'],
      {
        cwd: workspace,
        encoding: 'utf8',
      },
    );
    say(`$ rewind approve ${draft.id} --yes\n${approved.stdout.trim()}`);
    check(approved.status === 0, `rewind approve exited ${approved.status}`);
    check(
      (await applyApprovals(session, stopped)).approved === 1,
      'the approval did not reach the run',
    );
    const third = await rewindRun(session, agent, stopped.state, { checkpoint: false });
    say(`agent: ${third.result.finalOutput}`);
    check(
      read('VERSION') === '1.1.0\n' && existsSync(join(workspace, 'PUBLISHED')),
      'not released',
    );
    return { workspace };
  } finally {
    await session.close();
  }
}

if (process.argv[1] === fileURLToPath(import.meta.url)) {
  await runOpenAiAgent();
}
