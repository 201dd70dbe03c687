// A Vercel AI SDK agent (a real generateText loop, with a scripted model so that it runs offline)
// works on a project through rewind-agent/ai-sdk: its tools are journaled, each turn is
// checkpointed with the conversation, and when the tests fail the files and the conversation roll
// back together, the person's request kept, and the next turn goes on from there.
//   node examples/ai-sdk/run.mjs        (after npm run build)
// Exits non-zero if any step does not behave as it should.
import { cpSync, mkdtempSync, readFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { generateText, stepCountIs, tool } from 'ai';
import { MockLanguageModelV3 } from 'ai/test';
import { z } from 'zod';
import { rewindTools, rewindTurn } from '../../dist/adapters/ai-sdk/index.js';
import { init, openSession } from '../../dist/index.js';

const root = fileURLToPath(new URL('../..', import.meta.url));
const usage = {
  inputTokens: { total: 10, noCache: 10, cacheRead: 0, cacheWrite: 0 },
  outputTokens: { total: 5, text: 5, reasoning: 0 },
};
let calls = 0;
const step = (toolName, input) => ({
  content: [
    { type: 'tool-call', toolCallId: `call-${++calls}`, toolName, input: JSON.stringify(input) },
  ],
  finishReason: { unified: 'tool-calls', raw: undefined },
  usage,
  warnings: [],
});
const answer = (text) => ({
  content: [{ type: 'text', text }],
  finishReason: { unified: 'stop', raw: undefined },
  usage,
  warnings: [],
});

const WITH_MUL = 'export const add = (a, b) => a + b;\nexport const mul = (a, b) => a * b;\n';
const BROKEN = 'export const add = (a, b) => a + b;\nexport const times = (a, b) => a + b;\n';
const WITH_TIMES = 'export const add = (a, b) => a + b;\nexport const times = (a, b) => a * b;\n';

/** Runs the example in a fresh copy of the project; returns what happened, throws if it went wrong. */
export async function runAiSdkAgent({ say = console.log } = {}) {
  const workspace = mkdtempSync(join(tmpdir(), 'rewind-ai-sdk-'));
  cpSync(join(root, 'examples', 'ai-sdk', 'project'), workspace, { recursive: true });
  const check = (condition, message) => {
    if (!condition) throw new Error(`ai-sdk: ${message}`);
  };
  const read = () => readFileSync(join(workspace, 'src/math.js'), 'utf8');
  await init({ workspace });
  const session = await openSession({ workspace });
  try {
    session.autoRollback({ verifier: { command: 'node check.mjs' } });
    const tools = rewindTools(
      session,
      {
        read_file: tool({
          description: 'Read a file of the project',
          inputSchema: z.object({ path: z.string() }),
          execute: async ({ path }) => readFileSync(join(workspace, path), 'utf8'),
        }),
        write_file: tool({
          description: 'Write a file of the project',
          inputSchema: z.object({ path: z.string(), content: z.string() }),
          execute: async ({ path, content }) => {
            await session.write(path, content);
            return `wrote ${path}`;
          },
        }),
        run_tests: tool({
          description: 'Run the tests',
          inputSchema: z.object({}),
          execute: async () => `tests ${(await session.check()).status}`,
        }),
      },
      { readOnly: ['read_file'] },
    );
    // What the model does, step by step: a real generateText loop asks it each time.
    const script = [
      step('read_file', { path: 'src/math.js' }),
      step('write_file', { path: 'src/math.js', content: WITH_MUL }),
      step('run_tests', {}),
      answer('Added mul.'),
      step('write_file', { path: 'src/math.js', content: BROKEN }),
      step('run_tests', {}),
      // After the rollback, the model sees the restored history with the request and the note.
      step('write_file', { path: 'src/math.js', content: WITH_TIMES }),
      step('run_tests', {}),
      answer('Renamed mul to times; the tests pass.'),
    ];
    const model = new MockLanguageModelV3({ doGenerate: async () => script.shift() });
    const turn = (messages) =>
      rewindTurn(session, messages, ({ messages, stopWhen }) =>
        generateText({ model, tools, messages, stopWhen: [stepCountIs(8), stopWhen] }),
      );

    say('# Turn 1: "Add mul to src/math.js"');
    let messages = [{ role: 'user', content: 'Add mul to src/math.js' }];
    const first = await turn(messages);
    say(`model: ${first.result.text}`);
    check(read() === WITH_MUL && !first.rolledBack, 'turn 1 did not add mul');
    messages = [...first.messages, { role: 'user', content: 'Rename mul to times' }];

    say('\n# Turn 2: "Rename mul to times": the model gets it wrong');
    const second = await turn(messages);
    const failed = second.result.steps.at(-1).content.find((part) => part.type === 'tool-result');
    say(`run_tests answered the model:\n${failed.output}`);
    check(second.rolledBack?.event === 'test-failure', 'the failing tests did not roll back');
    check(read() === WITH_MUL, 'the files are not back to the passing state');
    const request = second.messages.at(-1);
    check(
      request.role === 'user' && request.content[0].text === 'Rename mul to times',
      'the restored conversation lost the request',
    );
    say(
      `rolled back to ${second.rolledBack.to}: src/math.js has mul again; the conversation has ${second.messages.length} messages, the request last`,
    );

    say('\n# Turn 3: the agent goes on from the restored history');
    const third = await turn(second.messages);
    say(`model: ${third.result.text}`);
    check(read() === WITH_TIMES && !third.rolledBack, 'turn 3 did not rename mul');
    const checkpoints = await session.checkpoints();
    say(`\n${checkpoints.length} checkpoints: ${checkpoints.map((c) => c.label).join(', ')}`);
    return { workspace, messages: third.messages };
  } finally {
    await session.close();
  }
}

if (process.argv[1] === fileURLToPath(import.meta.url)) {
  await runAiSdkAgent();
}
