// The end-to-end demo: copies examples/sample-project to a temporary directory and drives the
// real `rewind` binary through it, then runs the examples. Exits non-zero if any step does not
// behave as it should. `npm run demo NAME` runs one: cli (the sample project), refactor-rescue
// (an agent through the MCP server), ai-sdk (a Vercel AI SDK agent), langgraph (a LangGraph.js
// agent and its time travel), db-migration (a LangGraph.js agent migrating a SQLite database),
// openai-agents (an OpenAI Agents SDK agent, its memory in Rewind, a draft a person approves).
import { spawnSync } from 'node:child_process';
import { cpSync, existsSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';

const root = fileURLToPath(new URL('..', import.meta.url));

/** The examples, each a function that runs it and throws if it went wrong. */
const EXAMPLES = {
  'refactor-rescue': async () =>
    (await import('../examples/refactor-rescue/run.mjs')).runRefactorRescue(),
  'ai-sdk': async () => (await import('../examples/ai-sdk/run.mjs')).runAiSdkAgent(),
  langgraph: async () => (await import('../examples/langgraph/run.mjs')).runLangGraphAgent(),
  'db-migration': async () => (await import('../examples/db-migration/run.mjs')).runDbMigration(),
  'openai-agents': async () => (await import('../examples/openai-agents/run.mjs')).runOpenAiAgent(),
};

async function runExample(name) {
  console.log(`\n\n# examples/${name}\n`);
  try {
    await EXAMPLES[name]();
  } catch (error) {
    console.error(`\ndemo failed: ${error.message}`);
    process.exit(1);
  }
  console.log(`\n${name} complete.`);
}

const only = process.argv[2];
if (only !== undefined && only !== 'cli' && !(only in EXAMPLES)) {
  console.error(`No demo "${only}". Run one of: cli, ${Object.keys(EXAMPLES).join(', ')}.`);
  process.exit(2);
}
if (only !== undefined && only !== 'cli') {
  await runExample(only);
  process.exit(0);
}
const bin = join(root, 'bin', 'rewind.cjs');
const workspace = mkdtempSync(join(tmpdir(), 'rewind-demo-'));
cpSync(join(root, 'examples', 'sample-project'), workspace, { recursive: true });

function rewind(args, expectedCode = 0) {
  console.log(`\n$ rewind ${args.join(' ')}`);
  const result = spawnSync(process.execPath, [bin, ...args], { cwd: workspace, encoding: 'utf8' });
  process.stdout.write(result.stdout);
  process.stderr.write(result.stderr);
  if (result.status !== expectedCode) {
    console.error(
      `\ndemo failed: \`rewind ${args.join(' ')}\` exited ${result.status}, expected ${expectedCode}`,
    );
    process.exit(1);
  }
  return result.stdout;
}

const read = (path) => readFileSync(join(workspace, path), 'utf8');
function check(condition, message) {
  if (!condition) {
    console.error(`\ndemo failed: ${message}`);
    process.exit(1);
  }
}

console.log(`Workspace: ${workspace}`);
rewind(['init', '--hash-chain']);
writeFileSync(join(workspace, 'test-output.txt'), 'greet: 1 passed, 0 failed\n');
rewind(['note', 'baseline: tests pass', '--attach', 'test-output.txt']);
rewind(['checkpoint', 'baseline']);

console.log('\n# An agent "refactors": it rewrites greet.js, deletes the README, adds a file.');
const original = read('src/greet.js');
writeFileSync(
  join(workspace, 'src/greet.js'),
  'export function greet(name) {\n  return "Hi " + nme;\n}\n',
);
rmSync(join(workspace, 'README.md'));
writeFileSync(join(workspace, 'src/helpers.js'), 'export const unused = true;\n');
rewind(['diff', 'baseline']);
rewind(['rollback', 'baseline', '--dry-run']);
rewind(['rollback', 'baseline']);
check(
  read('src/greet.js') === original && existsSync(join(workspace, 'README.md')),
  'the rollback did not restore the workspace',
);
check(
  !existsSync(join(workspace, 'src/helpers.js')),
  'the rollback left a file the checkpoint did not have',
);

console.log('\n# Changed our mind: undo the rollback (redo). Nothing was lost.');
rewind(['undo', '4']);
check(
  existsSync(join(workspace, 'src/helpers.js')),
  'the undo did not bring back the rolled-back state',
);
rewind(['rollback', 'latest']);
rewind(['checkpoints']);

console.log('\n# Journaled actions: a shell command whose file effects can be undone.');
const idOf = (stdout) => /action (\d+) \(/.exec(stdout)?.[1];
const before = read('src/greet.js');
const ran = rewind([
  'exec',
  '--',
  'sh',
  '-c',
  "sed -i 's/Hello/Bye/' src/greet.js && rm README.md",
]);
check(!existsSync(join(workspace, 'README.md')), 'the command did not run');
rewind(['diff', idOf(ran)]);
rewind(['undo', idOf(ran)]);
check(
  read('src/greet.js') === before && existsSync(join(workspace, 'README.md')),
  'undoing the command did not put its files back',
);
console.log(
  '\n# An edit by hand after an action: undoing the action would trample it, so it is refused.',
);
const written = rewind(['write', 'notes.txt', 'first draft']);
writeFileSync(join(workspace, 'notes.txt'), 'edited by hand');
rewind(['undo', idOf(written)], 1);
check(read('notes.txt') === 'edited by hand', 'a refused undo changed the file');
console.log('\n# A draft waits for approval; a discarded one never runs.');
const draft = rewind(['exec', '--draft', '--', 'sh', '-c', 'echo approved > approved.txt']);
const discarded = rewind(['exec', '--draft', '--', 'sh', '-c', 'echo oops > discarded.txt']);
rewind(['approve', idOf(draft), '--yes']);
rewind(['discard', idOf(discarded)]);
check(
  existsSync(join(workspace, 'approved.txt')) && !existsSync(join(workspace, 'discarded.txt')),
  'approve or discard did not do what it says',
);
console.log(
  '\n# A checkpoint with the conversation: a rollback hands back one the provider accepts.',
);
writeFileSync(
  join(workspace, 'chat.json'),
  JSON.stringify([
    { role: 'user', content: 'Rename greet to hello' },
    {
      role: 'assistant',
      content: [
        { type: 'tool_use', id: 'toolu_01', name: 'edit', input: { path: 'src/greet.js' } },
      ],
    },
  ]),
);
rewind(['checkpoint', 'with-chat', '--messages', 'chat.json']);
writeFileSync(join(workspace, 'src/greet.js'), 'broken\n');
rewind([
  'rollback',
  'with-chat',
  '--patch-note',
  'greet.js was fixed by hand',
  '--messages-out',
  'restored.json',
]);
const restored = JSON.parse(read('restored.json'));
check(
  restored.length === 3 &&
    restored[2].content[0].type === 'tool_result' &&
    restored[2].content[0].is_error,
  'the restored conversation does not answer the call that was in flight',
);

console.log('\n# Requests to cloud metadata addresses are refused before anything is sent.');
rewind(['http', 'GET', 'http://169.254.169.254/latest/meta-data/'], 1);
rewind(['log']);
rewind(['verify']);
rewind(['gc', '--dry-run']);
rewind(['status']);
const status = JSON.parse(rewind(['status', '--json']));
check(
  status.sessions[0]?.entryCount === 24,
  `the ledger holds ${status.sessions[0]?.entryCount} entries, expected 24`,
);
console.log(`\nDemo complete. Explore it yourself: cd ${workspace} && node ${bin} log`);

if (only === undefined) {
  for (const name of Object.keys(EXAMPLES)) await runExample(name);
}
