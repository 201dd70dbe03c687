// A scripted agent refactors a project through the real `rewind mcp` server, breaks things, and
// a person rescues them from the CLI: undo brings back a deleted tree, undo refuses to trample a
// later edit, and a risky deploy waits as a draft until it is discarded.
//   node examples/refactor-rescue/run.mjs        (after npm run build)
// Exits non-zero if any step does not behave as it should.
import { spawnSync } from 'node:child_process';
import { cpSync, existsSync, mkdtempSync, readFileSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { Client } from '@modelcontextprotocol/client';
import { StdioClientTransport } from '@modelcontextprotocol/client/stdio';

const root = fileURLToPath(new URL('../..', import.meta.url));
const bin = join(root, 'bin', 'rewind.cjs');

/** Runs the example in a fresh copy of the project; returns what happened, throws if it went wrong. */
export async function runRefactorRescue({ say = console.log } = {}) {
  const workspace = mkdtempSync(join(tmpdir(), 'rewind-refactor-rescue-'));
  cpSync(join(root, 'examples', 'refactor-rescue', 'project'), workspace, { recursive: true });
  const read = (path) => readFileSync(join(workspace, path), 'utf8');
  const check = (condition, message) => {
    if (!condition) throw new Error(`refactor-rescue: ${message}`);
  };
  const person = (args, expected = 0) => {
    say(`\n$ rewind ${args.join(' ')}`);
    const result = spawnSync(process.execPath, [bin, ...args], {
      cwd: workspace,
      encoding: 'utf8',
      input: '',
    });
    say((result.stdout + result.stderr).trimEnd());
    check(
      result.status === expected,
      `rewind ${args.join(' ')} exited ${result.status}, expected ${expected}`,
    );
    return result.stdout;
  };

  const client = new Client({ name: 'scripted-agent', version: '1.0.0' });
  await client.connect(
    new StdioClientTransport({
      command: process.execPath,
      args: [bin, 'mcp', '--root', workspace],
    }),
  );
  const call = async (name, args) => {
    const result = await client.callTool({ name, arguments: args });
    const text = result.content.map((part) => part.text ?? '').join('');
    say(`agent: ${name} ${JSON.stringify(args)}\n  -> ${text.split('\n').join('\n     ')}`);
    return { text, id: /action #(\d+)/.exec(text)?.[1], isError: result.isError === true };
  };

  try {
    say(
      `Workspace: ${workspace}\n\n# The agent refactors: inlines the legacy helper, deletes lib/legacy, runs a codemod.`,
    );
    await call('checkpoint', { label: 'before-refactor' });
    await call('write', {
      path: 'src/greet.js',
      content: 'export function greet(name) {\n  return `Hello, ${name}!`.trim();\n}\n',
    });
    const deleted = await call('delete', { path: 'lib/legacy' });
    const codemod = await call('exec', {
      command: "sed -i 's/Hello/Goodbye/' src/greet.js && echo '// codemod' >> src/greet.js",
    });
    const deploy = await call('exec', { command: 'touch DEPLOYED', draft: true });
    check(
      !existsSync(join(workspace, 'lib/legacy')) && read('src/greet.js').includes('Goodbye'),
      'the agent did not act',
    );
    check(!existsSync(join(workspace, 'DEPLOYED')), 'the draft ran');

    say('\n# A person looks at what happened.');
    person(['log', '--kind', 'action']);
    person(['diff', codemod.id]);

    say('\n# The legacy helpers were still needed elsewhere: bring the deleted tree back.');
    person(['undo', deleted.id]);
    check(read('lib/legacy/format.js').includes('trim'), 'undo did not restore the deleted tree');

    say('\n# The person fixes greet.js by hand; undoing the codemod now would trample that fix.');
    writeFileSync(
      join(workspace, 'src/greet.js'),
      'export function greet(name) {\n  return `Hello, ${name}!`;\n}\n',
    );
    person(['undo', codemod.id], 1);
    check(read('src/greet.js').includes('return `Hello'), 'a refused undo changed the file');

    say('\n# The risky deploy waits as a draft: the person discards it.');
    person(['discard', deploy.id]);
    check(!existsSync(join(workspace, 'DEPLOYED')), 'the discarded draft ran');
    person(['log', '--kind', 'action']);
    return { workspace, actions: { deleted: deleted.id, codemod: codemod.id, deploy: deploy.id } };
  } finally {
    await client.close();
  }
}

if (process.argv[1] === fileURLToPath(import.meta.url)) {
  try {
    const { workspace } = await runRefactorRescue();
    console.log(`\nrefactor-rescue complete. Look around: cd ${workspace} && node ${bin} log`);
  } catch (error) {
    console.error(`\n${error.message}`);
    process.exit(1);
  }
}
