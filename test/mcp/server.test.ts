import { execFileSync, spawn } from 'node:child_process';
import { existsSync } from 'node:fs';
import { readFile, symlink, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import {
  Client,
  InMemoryTransport,
  StreamableHTTPClientTransport,
} from '@modelcontextprotocol/client';
import { StdioClientTransport } from '@modelcontextprotocol/client/stdio';
import { afterEach, describe, expect, it } from 'vitest';
import { digestBytes } from '../../src/lib/index.js';
import { createMcpServer } from '../../src/mcp/server.js';
import { rewind } from '../helpers/cli.js';
import { damagePackedObject } from '../helpers/damage.js';
import { ROOT } from '../helpers/processes.js';
import { makeTempDirectory } from '../helpers/temp.js';
import { lay } from '../helpers/workspace.js';

const clients: Client[] = [];
afterEach(async () => {
  await Promise.all(clients.splice(0).map((client) => client.close()));
});

async function connected(root: string): Promise<Client> {
  const server = createMcpServer({ root });
  const [clientSide, serverSide] = InMemoryTransport.createLinkedPair();
  await server.connect(serverSide);
  const client = new Client({ name: 'test', version: '1.0.0' });
  await client.connect(clientSide);
  clients.push(client);
  return client;
}

type CallResult = { content: { type: string; text?: string }[]; isError?: boolean };
const textOf = (result: unknown): string =>
  (result as CallResult).content.map((part) => part.text ?? '').join('');
const idIn = (result: unknown): string => {
  const match = /action #(\d+)/.exec(textOf(result));
  if (!match) throw new Error(`no action id in ${textOf(result)}`);
  return match[1] as string;
};

const TOOLS = [
  'write',
  'delete',
  'move',
  'mkdir',
  'read',
  'list',
  'exec',
  'http',
  'record',
  'report',
  'show',
  'checkpoint',
  'checkpoints',
  'rollback',
  'conversation-sync',
  'conversation-show',
  'test',
  'status',
  'session-list',
  'log',
  'note',
  'verify',
  'diff',
  'undo',
  'commit',
  'policy-show',
  'policy-set',
];

describe('the MCP server', () => {
  it('lists every tool with an object schema, a description for a model, and truthful annotations', async () => {
    const client = await connected(await makeTempDirectory());
    const { tools } = await client.listTools();
    expect(tools.map((tool) => tool.name).sort()).toEqual([...TOOLS].sort());
    for (const tool of tools) {
      expect(tool.inputSchema.type).toBe('object');
      expect((tool.description ?? '').length).toBeGreaterThan(20);
    }
    const byName = new Map(tools.map((tool) => [tool.name, tool]));
    for (const name of ['read', 'list', 'status', 'log', 'diff']) {
      expect(byName.get(name)?.annotations?.readOnlyHint).toBe(true);
    }
    for (const name of ['write', 'delete', 'rollback', 'undo', 'exec']) {
      expect(byName.get(name)?.annotations?.destructiveHint).toBe(true);
    }
  });

  it('journals what an agent does; a person undoes each from the CLI, sees a refusal, approves one draft and discards another', async () => {
    const root = await makeTempDirectory();
    await lay(root, { 'lib/a.js': 'a', 'lib/b.js': 'b', 'src/main.js': 'main' });
    const agent = await connected(root);
    const written = await agent.callTool({
      name: 'write',
      arguments: { path: 'src/new.js', content: 'new' },
    });
    expect(textOf(written)).toMatch(/^journaled as action #\d+ \(reversible: rewind undo \d+\)$/);
    const deleted = await agent.callTool({ name: 'delete', arguments: { path: 'lib' } });
    const ran = await agent.callTool({
      name: 'exec',
      arguments: { command: 'echo edited > src/main.js && touch made.js' },
    });
    expect(textOf(ran)).toContain('exit 0: 1 created, 1 modified, 0 deleted');
    expect(textOf(await agent.callTool({ name: 'read', arguments: { path: 'src/main.js' } }))).toBe(
      'edited\n',
    );
    expect(textOf(await agent.callTool({ name: 'list', arguments: { path: '.' } }))).toBe(
      'made.js\nsrc/',
    );
    const missing = await agent.callTool({ name: 'read', arguments: { path: 'nope.txt' } });
    expect(textOf(missing)).toContain('[PATH_NOT_FOUND]');

    expect((await rewind(root, ['undo', idIn(ran)])).code).toBe(0);
    expect(await readFile(join(root, 'src/main.js'), 'utf8')).toBe('main');
    expect(existsSync(join(root, 'made.js'))).toBe(false);
    expect((await rewind(root, ['undo', idIn(deleted)])).code).toBe(0);
    expect(await readFile(join(root, 'lib/b.js'), 'utf8')).toBe('b');
    await writeFile(join(root, 'src/new.js'), 'edited by a person');
    const refused = await rewind(root, ['undo', idIn(written)]);
    expect(refused.code).toBe(1);
    expect(refused.stdout).toContain('src/new.js: expected');

    const deploy = await agent.callTool({
      name: 'exec',
      arguments: { command: 'touch deployed', draft: true },
    });
    expect(textOf(deploy)).toContain('a draft');
    const risky = await agent.callTool({
      name: 'exec',
      arguments: { command: 'touch dropped', draft: true },
    });
    expect(existsSync(join(root, 'deployed'))).toBe(false);
    expect((await rewind(root, ['approve', idIn(deploy), '--yes'])).code).toBe(0);
    expect((await rewind(root, ['discard', idIn(risky)])).code).toBe(0);
    expect(existsSync(join(root, 'deployed'))).toBe(true);
    expect(existsSync(join(root, 'dropped'))).toBe(false);
    expect(textOf(await agent.callTool({ name: 'log', arguments: { kind: 'action' } }))).toMatch(
      /\[discarded\]/,
    );
  });

  it('answers bad input with isError results that say what to do, changing nothing', async () => {
    const root = await makeTempDirectory();
    const agent = await connected(root);
    const outside = await agent.callTool({
      name: 'write',
      arguments: { path: '../escape.txt', content: 'x' },
    });
    expect(outside.isError).toBe(true);
    expect(textOf(outside)).toContain('[PATH_INVALID]');
    const invalid = await agent.callTool({ name: 'write', arguments: { path: 'a.txt' } });
    expect(invalid.isError).toBe(true);
    // Content that is not base64 was decoded as far as it went and written (here, nothing).
    const notBase64 = await agent.callTool({
      name: 'write',
      arguments: { path: 'a.txt', content: '!!! not base64', encoding: 'base64' },
    });
    expect(notBase64.isError).toBe(true);
    expect(textOf(notBase64)).toContain('content: must be base64 (encoding base64): only A-Z');
    // Arguments of two shapes said only "Invalid input".
    const command = await agent.callTool({ name: 'exec', arguments: { command: 3 } });
    expect(textOf(command)).toContain(
      'command: must be a shell command (a string) or a program and its arguments (an array of strings)',
    );
    const policy = await agent.callTool({
      name: 'policy-set',
      arguments: { autoCheckpoint: true },
    });
    expect(textOf(policy)).toContain('autoCheckpoint: must be false (off) or an object (on)');
    const inside = await agent.callTool({
      name: 'policy-set',
      arguments: { autoCheckpoint: { keepLast: 'x' } },
    });
    expect(textOf(inside)).toContain(
      'autoCheckpoint: keepLast: must be a whole number of 1 or more',
    );
    const base64 = await agent.callTool({
      name: 'write',
      arguments: { path: 'b.bin', content: 'AAEC/w==\n', encoding: 'base64' },
    });
    expect(base64.isError).toBeFalsy();
    expect(await readFile(join(root, 'b.bin'))).toEqual(Buffer.from([0, 1, 2, 255]));
    const metadata = await agent.callTool({
      name: 'http',
      arguments: { method: 'GET', url: 'http://169.254.169.254/' },
    });
    expect(textOf(metadata)).toContain('[ADDRESS_REFUSED]');
    const unknown = await agent
      .callTool({ name: 'no-such-tool', arguments: {} })
      .catch((error: unknown) => ({
        isError: true,
        content: [{ type: 'text', text: String(error) }],
      }));
    expect(unknown.isError).toBe(true);
    expect(existsSync(join(root, 'a.txt'))).toBe(false);
  });

  it('takes the inputs the CLI takes: exec as an argv, undo with last: true, log with last, status of the store', async () => {
    const root = await makeTempDirectory();
    const agent = await connected(root);
    const ran = await agent.callTool({
      name: 'exec',
      arguments: { command: ['touch', 'a b.txt'], timeout: 5 },
    });
    expect(textOf(ran)).toContain('exit 0: 1 created');
    expect(existsSync(join(root, 'a b.txt'))).toBe(true);
    const missing = await agent.callTool({ name: 'undo', arguments: {} });
    expect(missing.isError).toBe(true);
    const undone = await agent.callTool({ name: 'undo', arguments: { last: true } });
    expect(textOf(undone)).toMatch(/^undid #\d+/);
    expect(existsSync(join(root, 'a b.txt'))).toBe(false);
    const log = textOf(await agent.callTool({ name: 'log', arguments: { last: 1 } }));
    expect(log.split('\n')).toHaveLength(1);
    const status = JSON.parse(textOf(await agent.callTool({ name: 'status', arguments: {} })));
    expect(status).toMatchObject({ workspace: root, sessions: [{ isolation: 'shared' }] });
  });

  it('adds notes, lists checkpoints, shows the conversation and verifies the store', async () => {
    const root = await makeTempDirectory();
    await lay(root, { 'build.log': 'green' });
    const agent = await connected(root);
    const noted = await agent.callTool({
      name: 'note',
      arguments: { text: 'tests pass', attachments: ['build.log'] },
    });
    expect(textOf(noted)).toMatch(/^added note #\d+/);
    const escaping = await agent.callTool({
      name: 'note',
      arguments: { text: 'x', attachments: ['../outside.txt'] },
    });
    expect(textOf(escaping)).toContain('[PATH_INVALID]');
    const messages = [{ role: 'user', content: 'go' }];
    await agent.callTool({ name: 'checkpoint', arguments: { label: 'base', messages } });
    expect(textOf(await agent.callTool({ name: 'checkpoints', arguments: {} }))).toMatch(
      /^base \(#\d+, .*\): \+1 ~0 -0, with 1 messages$/,
    );
    const shown = await agent.callTool({ name: 'conversation-show', arguments: { label: 'base' } });
    expect(textOf(shown)).toContain('"content":"go"');
    expect(textOf(await agent.callTool({ name: 'verify', arguments: {} }))).toContain(
      'no problems',
    );
  });

  it("shows what an action stored: a command's output and how it ended", async () => {
    const agent = await connected(await makeTempDirectory());
    const ran = await agent.callTool({
      name: 'exec',
      arguments: { command: 'echo out; echo err >&2; exit 3' },
    });
    const shown = await agent.callTool({ name: 'show', arguments: { id: Number(idIn(ran)) } });
    expect(textOf(shown)).toMatch(
      /^action #\d+ exec echo out; .* \(reversible, failed, .*\)\nout\n\n\[stderr\]\nerr\n\nexit 3 after \d+ ms$/,
    );
  });

  it('under the rollback policy, rolls back a command that exits non-zero, as session.run does, and still shows its output', async () => {
    const root = await makeTempDirectory();
    await lay(root, { 'a.txt': 'good\n' });
    const agent = await connected(root);
    await agent.callTool({
      name: 'policy-set',
      arguments: { autoCheckpoint: {}, autoRollback: {} },
    });
    const ran = await agent.callTool({
      name: 'exec',
      arguments: { command: 'echo broken > a.txt; echo said; exit 3' },
    });
    expect(ran.isError).toBe(true);
    expect(textOf(ran)).toContain('said');
    expect(textOf(ran)).toContain('Command failed (exit 3)');
    expect(await readFile(join(root, 'a.txt'), 'utf8')).toBe('good\n');
    // A command that succeeds is left as it is.
    await agent.callTool({ name: 'exec', arguments: { command: 'echo better > a.txt' } });
    expect(await readFile(join(root, 'a.txt'), 'utf8')).toBe('better\n');
  });

  it('rolls back only the paths given, leaving the rest as it is', async () => {
    const root = await makeTempDirectory();
    await lay(root, { 'a.txt': 'one\n', 'b.txt': 'b\n' });
    const agent = await connected(root);
    await agent.callTool({ name: 'checkpoint', arguments: { label: 'base' } });
    await lay(root, { 'a.txt': 'two\n', 'b.txt': 'c\n' });
    const rolled = await agent.callTool({
      name: 'rollback',
      arguments: { label: 'base', paths: ['a.txt'] },
    });
    expect(textOf(rolled)).toMatch(/^rolled back a\.txt to base: 1 written, 0 created, 0 deleted;/);
    expect(await readFile(join(root, 'a.txt'), 'utf8')).toBe('one\n');
    expect(await readFile(join(root, 'b.txt'), 'utf8')).toBe('c\n');
  });

  it('gives checkpoints made at once without a label each its own checkpoint-N', async () => {
    const root = await makeTempDirectory();
    await lay(root, { 'a.txt': 'one\n' });
    const agent = await connected(root);
    await agent.callTool({ name: 'checkpoint', arguments: {} });
    const made = await Promise.all(
      [1, 2, 3].map(() => agent.callTool({ name: 'checkpoint', arguments: {} })),
    );
    expect(made.map((result) => result.isError)).toEqual([undefined, undefined, undefined]);
    expect(made.map((result) => /^checkpoint (\S+) /.exec(textOf(result))?.[1]).sort()).toEqual([
      'checkpoint-2',
      'checkpoint-3',
      'checkpoint-4',
    ]);
  });

  it('lists per checkpoint the files, and with lines: true the lines of text, added and removed', async () => {
    const root = await makeTempDirectory();
    await lay(root, { 'a.txt': 'one\n', 'b.txt': 'b\n' });
    const agent = await connected(root);
    await agent.callTool({ name: 'checkpoint', arguments: { label: 'base' } });
    await lay(root, { 'a.txt': 'two\n', 'b.txt': 'c\n' });
    await agent.callTool({ name: 'checkpoint', arguments: { label: 'next' } });
    const listed = textOf(
      await agent.callTool({ name: 'checkpoints', arguments: { lines: true } }),
    );
    expect(listed.split('\n')).toEqual([
      expect.stringMatching(/^base \(#\d+, .*\): \+2 ~0 -0$/),
      expect.stringMatching(/^next \(#\d+, .*\): \+0 ~2 -0 files, \+2 -2 lines$/),
    ]);
    // Lines only when asked for: the list comes from the ledger alone.
    const plain = await agent.callTool({ name: 'checkpoints', arguments: {} });
    expect(textOf(plain).split('\n')).toEqual([
      expect.stringMatching(/^base \(#\d+, .*\): \+2 ~0 -0$/),
      expect.stringMatching(/^next \(#\d+, .*\): \+0 ~2 -0$/),
    ]);
  });

  it('lists a checkpoint whose lines cannot be counted without them, and says why in a warning', async () => {
    const root = await makeTempDirectory();
    await lay(root, { 'a.txt': 'one\n' });
    const agent = await connected(root);
    await agent.callTool({ name: 'checkpoint', arguments: { label: 'base' } });
    await lay(root, { 'a.txt': 'two\n', 'b.txt': 'only in next\n' });
    await agent.callTool({ name: 'checkpoint', arguments: { label: 'next' } });
    const digest = digestBytes(Buffer.from('only in next\n'));
    await damagePackedObject(root, digest);
    const listed = await agent.callTool({ name: 'checkpoints', arguments: { lines: true } });
    expect(listed.isError).toBeFalsy();
    const warning = `the lines of checkpoint next (#3) since the previous one could not be counted: object ${digest} is damaged (OBJECT_CORRUPT). It is listed without line counts. Run \`rewind verify\` to see what is damaged.`;
    expect(textOf(listed).split('\n')).toEqual([
      expect.stringMatching(/^base \(#2, .*\): \+1 ~0 -0$/),
      expect.stringMatching(/^next \(#3, .*\): \+1 ~1 -0 files, lines unknown$/),
      `warning: ${warning}`,
    ]);
    expect(listed.structuredContent).toMatchObject({
      checkpoints: [
        { label: 'base' },
        { label: 'next', linesUncounted: { code: 'OBJECT_CORRUPT', digest } },
      ],
      warnings: [warning],
    });
  });

  it('puts the warnings of a checkpoint, a command and a rollback in the text a model reads', async () => {
    const root = await makeTempDirectory();
    await lay(root, { 'a.txt': 'one\n' });
    execFileSync('mkfifo', [join(root, 'pipe')]);
    const agent = await connected(root);
    const left =
      'pipe is not a file, directory or symbolic link (a socket or device?); it was left out';
    const checkpoint = await agent.callTool({ name: 'checkpoint', arguments: { label: 'base' } });
    expect(textOf(checkpoint).split('\n')).toEqual([
      expect.stringMatching(/^checkpoint base \(#2\): 1 files;/),
      `warning: ${left}`,
    ]);
    const ran = await agent.callTool({
      name: 'exec',
      arguments: { command: 'mkfifo other && echo two > a.txt' },
    });
    expect(textOf(ran)).toMatch(/journaled as action #\d+ \(reversible: rewind undo \d+\)\n/);
    expect(textOf(ran)).toContain(
      'warning: other is not a file, directory or symbolic link (a socket or device?); it was left out',
    );
    const rolled = await agent.callTool({ name: 'rollback', arguments: { label: 'base' } });
    expect(textOf(rolled)).toMatch(/^rolled back to base: 1 written.*\nwarning: /s);
    // An answer with no warnings has no such line.
    expect(
      textOf(await agent.callTool({ name: 'write', arguments: { path: 'b.txt', content: 'b' } })),
    ).not.toContain('warning');
  });

  it("lists the sessions of the store, the server's and the current one marked", async () => {
    const agent = await connected(await makeTempDirectory());
    const sessions = textOf(await agent.callTool({ name: 'session-list', arguments: {} }));
    expect(sessions).toMatch(
      /^\w+ \(this server's session, the store's current session\): started .*, 1 entry, shared$/,
    );
  });

  it('refuses a first checkpoint over its budget, telling the agent to leave build output out or ask a person', async () => {
    const root = await makeTempDirectory();
    await lay(root, { 'bundle.js': 'x'.repeat(4000) });
    const agent = await connected(root);
    const refused = await agent.callTool({
      name: 'checkpoint',
      arguments: { label: 'base', maxSize: '1KB' },
    });
    expect(refused.isError).toBe(true);
    expect(textOf(refused)).toContain('[SNAPSHOT_TOO_LARGE]');
    expect(textOf(refused)).toContain(
      'Do not raise maxSize yourself: leave build output and dependencies out of snapshots (add them to .gitignore or .rewindignore), or ask a person',
    );
    expect(textOf(await agent.callTool({ name: 'checkpoints', arguments: {} }))).toBe(
      'no checkpoints yet',
    );
    const unreadable = await agent.callTool({
      name: 'checkpoint',
      arguments: { label: 'base', maxSize: 'lots' },
    });
    expect(unreadable.isError).toBe(true);
    const stored = await agent.callTool({
      name: 'checkpoint',
      arguments: { label: 'base', maxSize: '1MiB' },
    });
    expect(textOf(stored)).toMatch(/^checkpoint base \(#\d+\): 1 files/);
  });

  it('serves over stdio as `rewind mcp`', async () => {
    const root = await makeTempDirectory();
    const transport = new StdioClientTransport({
      command: process.execPath,
      args: [join(ROOT, 'bin', 'rewind.cjs'), 'mcp', '--root', root],
    });
    const client = new Client({ name: 'stdio-test', version: '1.0.0' });
    await client.connect(transport);
    clients.push(client);
    expect((await client.listTools()).tools.length).toBe(TOOLS.length);
    const result = await client.callTool({
      name: 'write',
      arguments: { path: 'hello.txt', content: 'hi' },
    });
    expect(textOf(result)).toContain('rewind undo');
    expect(await readFile(join(root, 'hello.txt'), 'utf8')).toBe('hi');
  });

  it('says on stderr why it does not watch the workspace where inotifywait is missing', async () => {
    const root = await makeTempDirectory();
    const bin = await makeTempDirectory();
    await symlink('/bin/sh', join(bin, 'sh'));
    const transport = new StdioClientTransport({
      command: process.execPath,
      args: [join(ROOT, 'bin', 'rewind.cjs'), 'mcp', '--root', root],
      env: { PATH: bin },
      stderr: 'pipe',
    });
    let stderr = '';
    transport.stderr?.on('data', (chunk: Buffer) => {
      stderr += chunk.toString();
    });
    const client = new Client({ name: 'stdio-test', version: '1.0.0' });
    await client.connect(transport);
    clients.push(client);
    const stored = await client.callTool({ name: 'checkpoint', arguments: { label: 'base' } });
    expect(textOf(stored)).toMatch(/^checkpoint base/);
    for (let waited = 0; !stderr.includes('not watching'); waited += 20) {
      if (waited > 5_000) throw new Error(`not said: ${stderr}`);
      await new Promise((resolve) => setTimeout(resolve, 20));
    }
    expect(stderr).toContain(`not watching ${root} (inotifywait is not installed)`);
  });

  it('says on stderr that it retries the watch while inotifywait keeps failing, and when it watches again', async () => {
    const root = await makeTempDirectory();
    // An inotifywait that fails its first 8 starts, then is the real one.
    const bin = await makeTempDirectory();
    const count = join(bin, 'starts');
    await writeFile(
      join(bin, 'inotifywait'),
      `#!/bin/sh\nn=$(($(cat ${count} 2>/dev/null || echo 0) + 1))\necho $n > ${count}\nif [ $n -le 8 ]; then echo "busy $n" >&2; exit 1; fi\nexec /usr/bin/inotifywait "$@"\n`,
      { mode: 0o755 },
    );
    const transport = new StdioClientTransport({
      command: process.execPath,
      args: [join(ROOT, 'bin', 'rewind.cjs'), 'mcp', '--root', root],
      env: { PATH: `${bin}:${process.env.PATH}` },
      stderr: 'pipe',
    });
    let stderr = '';
    transport.stderr?.on('data', (chunk: Buffer) => {
      stderr += chunk.toString();
    });
    const client = new Client({ name: 'stdio-test', version: '1.0.0' });
    await client.connect(transport);
    clients.push(client);
    const stored = await client.callTool({ name: 'checkpoint', arguments: { label: 'base' } });
    expect(textOf(stored)).toMatch(/^checkpoint base/);
    for (let waited = 0; !stderr.includes(`watching ${root} again`); waited += 50) {
      if (waited > 40_000) throw new Error(`not said: ${stderr}`);
      await new Promise((resolve) => setTimeout(resolve, 50));
    }
    expect(stderr).toContain(
      `rewind mcp: cannot watch ${root} yet (inotifywait failed 8 times in a row; last: inotifywait could not watch it (busy 8)): it keeps trying, less and less often (at most once a minute); meanwhile its checkpoints look at every entry.\n` +
        `rewind mcp: watching ${root} again: its checkpoints look only at what changed.\n`,
    );
    expect(stderr).not.toContain('not watching');
  }, 60_000);

  it('serves two clients at once over streamable HTTP, each call journaled once, and stops cleanly', async () => {
    const root = await makeTempDirectory();
    const server = spawn(
      process.execPath,
      [join(ROOT, 'bin', 'rewind.cjs'), 'mcp', '--http', '0', '--root', root],
      {
        stdio: ['ignore', 'pipe', 'pipe'],
      },
    );
    try {
      const url = await new Promise<string>((resolve, reject) => {
        let said = '';
        server.stderr.on('data', (chunk: Buffer) => {
          said += chunk.toString();
          const match = /serving on (http:\/\/\S+)/.exec(said);
          if (match) resolve(match[1] as string);
        });
        server.on('exit', () => reject(new Error(`the server exited: ${said}`)));
      });
      // The launch's token: one client passes it in the URL printed, the other as a header.
      const token = new URL(url).searchParams.get('token') as string;
      const bare = new URL(url);
      bare.search = '';
      const pair = await Promise.all(
        [
          new StreamableHTTPClientTransport(new URL(url)),
          new StreamableHTTPClientTransport(bare, {
            requestInit: { headers: { authorization: `Bearer ${token}` } },
          }),
        ].map(async (transport, index) => {
          const client = new Client({ name: `client-${index}`, version: '1.0.0' });
          await client.connect(transport);
          clients.push(client);
          return client;
        }),
      );
      const results = await Promise.all(
        pair.flatMap((client, index) =>
          [0, 1, 2].map((n) =>
            client.callTool({
              name: 'write',
              arguments: { path: `c${index}/f${n}.txt`, content: `${index}${n}` },
            }),
          ),
        ),
      );
      const ids = results.map(idIn);
      expect(new Set(ids).size).toBe(6);
      expect(await readFile(join(root, 'c1/f2.txt'), 'utf8')).toBe('12');
      const log = await rewind(root, ['log', '--kind', 'action-started']);
      expect(log.stdout.match(/action-started/g)).toHaveLength(6);
    } finally {
      server.kill('SIGINT');
      await new Promise((done) => server.on('exit', done));
    }
    expect(server.exitCode === 0 || server.signalCode === 'SIGINT').toBe(true);
  });

  it('finishes the call in flight when a stdio client disconnects mid-call, then shuts down cleanly', async () => {
    const root = await makeTempDirectory();
    const transport = new StdioClientTransport({
      command: process.execPath,
      args: [join(ROOT, 'bin', 'rewind.cjs'), 'mcp', '--root', root],
    });
    const client = new Client({ name: 'leaving', version: '1.0.0' });
    await client.connect(transport);
    const pending = client
      .callTool({ name: 'exec', arguments: { command: 'sleep 0.5; echo done > finished.txt' } })
      .catch(() => undefined);
    await new Promise((resolve) => setTimeout(resolve, 150));
    await client.close();
    await pending;
    // The action was journaled before it ran, and closed after: nothing torn, nothing left open.
    let kinds: string[] = [];
    for (let attempt = 0; attempt < 50; attempt++) {
      kinds =
        (await rewind(root, ['log'])).stdout.match(/action-(started|completed|failed)/g) ?? [];
      if (kinds.length >= 2) break;
      await new Promise((resolve) => setTimeout(resolve, 100));
    }
    expect(kinds).toEqual(['action-started', 'action-completed']);
    expect(await readFile(join(root, 'finished.txt'), 'utf8')).toBe('done\n');
    expect((await rewind(root, ['verify'])).code).toBe(0);
  });
});
