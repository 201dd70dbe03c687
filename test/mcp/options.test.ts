import { existsSync } from 'node:fs';
import { readFile, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { Client, InMemoryTransport } from '@modelcontextprotocol/client';
import { afterEach, describe, expect, it } from 'vitest';
import { mcpOptions, UsageMessage } from '../../src/mcp/main.js';
import { createMcpServer, type McpServerOptions } from '../../src/mcp/server.js';
import { status } from '../../src/session/index.js';
import { rewind } from '../helpers/cli.js';
import { makeTempDirectory } from '../helpers/temp.js';
import { lay } from '../helpers/workspace.js';

const open: { client: Client; close: () => Promise<void> }[] = [];
afterEach(async () => {
  await Promise.all(open.splice(0).map(({ close }) => close()));
});

/** A client of a server made with `options`; closing it closes the server and its session. */
async function connected(options: McpServerOptions): Promise<Client> {
  const server = createMcpServer(options);
  const [clientSide, serverSide] = InMemoryTransport.createLinkedPair();
  await server.connect(serverSide);
  const client = new Client({ name: 'test', version: '1.0.0' });
  await client.connect(clientSide);
  open.push({ client, close: () => client.close().then(() => server.close()) });
  return client;
}

async function closeAll(): Promise<void> {
  await Promise.all(open.splice(0).map(({ close }) => close()));
}

type CallResult = { content: { type: string; text?: string }[]; isError?: boolean };
const textOf = (result: unknown): string =>
  (result as CallResult).content.map((part) => part.text ?? '').join('');

describe('rewind mcp options', () => {
  it('tells every client how the tools fit together, and prefixes tool names when asked', async () => {
    const root = await makeTempDirectory();
    const plain = await connected({ root });
    expect(plain.getInstructions()).toMatch(/undo.*checkpoint.*rollback/s);
    const prefixed = await connected({ root, toolPrefix: 'rewind_' });
    const names = (await prefixed.listTools()).tools.map((tool) => tool.name);
    expect(names).toContain('rewind_write');
    expect(names).toContain('rewind_conversation-show');
    expect(names.every((name) => name.startsWith('rewind_'))).toBe(true);
    const wrote = await prefixed.callTool({
      name: 'rewind_write',
      arguments: { path: 'a.txt', content: 'hi' },
    });
    expect(textOf(wrote)).toContain('journaled as action');
    expect(await readFile(join(root, 'a.txt'), 'utf8')).toBe('hi');
    expect(() => createMcpServer({ root, toolPrefix: 'no spaces' })).toThrow(/tool prefix/);
    expect(() => mcpOptions(['--tool-prefix', 'a b'], root)).toThrow(UsageMessage);
    expect(mcpOptions(['--tool-prefix', 'rw.', '--hash-chain'], root)).toMatchObject({
      toolPrefix: 'rw.',
      hashChain: true,
      session: { watch: true },
    });
    expect(mcpOptions(['--no-watch'], root)).toMatchObject({ session: { watch: false } });
  });

  it('answers every tool with structured content that fits the output schema it lists', async () => {
    const root = await makeTempDirectory();
    await lay(root, { 'a.txt': 'one\n' });
    const client = await connected({ root });
    const { tools } = await client.listTools();
    for (const tool of tools) expect(tool.outputSchema?.type, tool.name).toBe('object');
    const call = async (name: string, args: Record<string, unknown>) => {
      const result = await client.callTool({ name, arguments: args });
      expect(result.isError, `${name}: ${textOf(result)}`).toBeFalsy();
      return result.structuredContent as Record<string, unknown>;
    };
    expect(await call('checkpoint', { label: 'base' })).toMatchObject({ label: 'base' });
    const wrote = await call('write', { path: 'a.txt', content: 'two\n' });
    expect(wrote).toMatchObject({
      kind: 'write',
      class: 'reversible',
      undo: { way: 'undo', id: expect.any(Number) },
    });
    expect(await call('exec', { command: 'echo hi > b.txt' })).toMatchObject({
      exitCode: 0,
      created: ['b.txt'],
    });
    expect(await call('exec', { command: 'rm -rf /', draft: true })).toMatchObject({
      state: 'draft',
      undo: { way: 'approve-or-discard' },
    });
    expect(await call('read', { path: 'a.txt' })).toEqual({ path: 'a.txt', content: 'two\n' });
    expect(await call('list', {})).toMatchObject({ entries: ['a.txt', 'b.txt'] });
    expect(await call('diff', { from: 'base' })).toMatchObject({
      changes: [
        { path: 'a.txt', kind: 'modified' },
        { path: 'b.txt', kind: 'added' },
      ],
    });
    const rolled = await call('rollback', { label: 'base' });
    expect(rolled).toMatchObject({ isDryRun: false, applied: { written: 1, deleted: 1 } });
    expect(await call('undo', { id: rolled.id })).toMatchObject({ status: 'undone' });
    expect(await call('checkpoints', {})).toMatchObject({ checkpoints: [{ label: 'base' }] });
    expect(await call('log', { last: 2 })).toMatchObject({ entries: [{}, {}] });
    expect(await call('status', {})).toMatchObject({ sessions: [{ isCurrent: true }] });
    expect(await call('session-list', {})).toMatchObject({ sessions: [{ isCurrent: true }] });
    expect(await call('verify', {})).toMatchObject({ isOk: true });
    expect(await call('note', { text: 'done' })).toMatchObject({ id: expect.any(Number) });
    expect(
      await call('conversation-sync', { messages: [{ role: 'user', content: 'hi' }] }),
    ).toMatchObject({ isChanged: true, messageCount: 1 });
    expect(await call('conversation-show', {})).toMatchObject({ format: 'openai-chat' });
    expect(
      await call('test', { verifier: `echo '{"status":"pass","summary":"ok"}'` }),
    ).toMatchObject({ status: 'pass', summary: 'ok' });
    expect(await call('show', { id: rolled.id })).toMatchObject({ kind: 'rollback' });
    // A refused undo is an error result, and still carries what was refused.
    await writeFile(join(root, 'a.txt'), 'edited by a person\n');
    const refused = await client.callTool({ name: 'undo', arguments: { id: wrote.id } });
    expect(refused.isError).toBe(true);
    expect(refused.structuredContent).toMatchObject({ status: 'refused' });
  });

  it('sets and reads the policies: a checkpoint before each call that changes something, a rollback when one fails or the tests fail', async () => {
    const root = await makeTempDirectory();
    await lay(root, { 'a.txt': 'one\n' });
    const client = await connected({ root });
    const call = (name: string, args: Record<string, unknown>) =>
      client.callTool({ name, arguments: args });
    const off = await call('policy-show', {});
    expect(off.structuredContent).toEqual({ autoCheckpoint: null, autoRollback: null });
    expect(textOf(off)).toBe('autoCheckpoint: off\nautoRollback: off');
    const on = await call('policy-set', {
      autoCheckpoint: { keepLast: 5 },
      autoRollback: {
        verifier: `grep -q broken a.txt && echo '{"status":"fail","errors":["a.txt is broken"]}' || echo '{"status":"pass"}'`,
      },
    });
    expect(on.structuredContent).toMatchObject({
      autoCheckpoint: { keepLast: 5 },
      autoRollback: { on: ['exception', 'test-failure'], to: 'latest', scope: 'both' },
    });
    expect(textOf(on)).toContain('to the newest checkpoint not already broken');
    await call('write', { path: 'a.txt', content: 'two\n' });
    expect(textOf(await call('test', {}))).toMatch(/^PASS/);
    await call('write', { path: 'a.txt', content: 'broken\n' });
    const failed = await call('test', {});
    expect(failed.isError).toBe(true);
    expect(textOf(failed)).toContain('[REWIND]');
    expect(textOf(failed)).toContain('a.txt is broken');
    expect(await readFile(join(root, 'a.txt'), 'utf8')).toBe('two\n');
    const automatic = (structured: unknown) =>
      (structured as { checkpoints: { label: string }[] }).checkpoints.map((c) => c.label);
    expect(automatic((await call('checkpoints', {})).structuredContent)).toEqual([
      expect.stringMatching(/^auto-0001-write-/),
      expect.stringMatching(/^auto-0002-write-/),
    ]);
    // A call that fails is answered with ERROR and, nothing having changed, no rollback.
    const missing = await call('delete', { path: 'nope.txt' });
    expect(missing.isError).toBe(true);
    expect(textOf(missing)).toMatch(/^ERROR: .*nope\.txt/);
    const cleared = await call('policy-set', { autoCheckpoint: false, autoRollback: false });
    expect(cleared.structuredContent).toEqual({ autoCheckpoint: null, autoRollback: null });
    await call('write', { path: 'a.txt', content: 'broken\n' });
    expect(textOf(await call('test', { verifier: 'echo \'{"status":"fail"}\'' }))).toMatch(/^FAIL/);
    expect(await readFile(join(root, 'a.txt'), 'utf8')).toBe('broken\n');
  });

  it('--hash-chain starts a hash-chained store, and refuses a session that is not', async () => {
    const chained = await makeTempDirectory();
    const client = await connected({ root: chained, hashChain: true });
    await client.callTool({ name: 'write', arguments: { path: 'a.txt', content: 'x' } });
    const [session] = (await status({ workspace: chained })).sessions;
    expect(session?.isHashChained).toBe(true);
    expect((await rewind(chained, ['verify'])).code).toBe(0);

    const plain = await makeTempDirectory();
    await rewind(plain, ['init']);
    const refused = await (await connected({ root: plain, hashChain: true })).callTool({
      name: 'write',
      arguments: { path: 'a.txt', content: 'x' },
    });
    expect(refused.isError).toBe(true);
    expect(textOf(refused)).toContain('rewind session new --hash-chain');
    expect(existsSync(join(plain, 'a.txt'))).toBe(false);
  });

  it('--isolated --hash-chain works in a hash-chained isolated session, and refuses to resume one that is not', async () => {
    const root = await makeTempDirectory();
    await lay(root, { 'a.txt': 'host\n' });
    const options = { root, hashChain: true, session: { isolation: 'isolated' as const } };
    const agent = await connected(options);
    const wrote = await agent.callTool({
      name: 'write',
      arguments: { path: 'a.txt', content: 'x' },
    });
    expect(wrote.isError, textOf(wrote)).toBeFalsy();
    const [isolated] = (await status({ workspace: root })).sessions.filter(
      (session) => session.isolation === 'isolated',
    );
    expect(isolated?.isHashChained).toBe(true);
    expect((await rewind(root, ['verify'])).code).toBe(0);
    await closeAll();

    // The isolated session of a server started without --hash-chain is not resumed as chained.
    const plain = await makeTempDirectory();
    await (await connected({ root: plain, session: { isolation: 'isolated' } })).callTool({
      name: 'write',
      arguments: { path: 'a.txt', content: 'x' },
    });
    await closeAll();
    const refused = await (await connected({ ...options, root: plain })).callTool({
      name: 'read',
      arguments: { path: 'a.txt' },
    });
    expect(refused.isError).toBe(true);
    expect(textOf(refused)).toMatch(
      /isolated session \S+ is not hash-chained.*rewind destroy --session/,
    );
  });

  it('--isolated resumes its own isolated session across restarts, and starts another once that one is destroyed', async () => {
    const root = await makeTempDirectory();
    await lay(root, { 'a.txt': 'host' });
    const isolated = { root, session: { isolation: 'isolated' as const } };
    const first = await connected(isolated);
    await first.callTool({ name: 'write', arguments: { path: 'a.txt', content: 'in the view' } });
    expect(await readFile(join(root, 'a.txt'), 'utf8')).toBe('host');
    const started = (await status({ workspace: root })).sessions.filter(
      (session) => session.isolation === 'isolated',
    );
    expect(started).toHaveLength(1);
    expect(started[0]?.startedBy).toBe('mcp');
    await closeAll();

    // A restart (a new server process would do the same) finds the work where it was left.
    const second = await connected(isolated);
    expect(textOf(await second.callTool({ name: 'read', arguments: { path: 'a.txt' } }))).toBe(
      'in the view',
    );
    const committed = await second.callTool({ name: 'commit', arguments: {} });
    expect(committed.isError).toBeFalsy();
    expect(await readFile(join(root, 'a.txt'), 'utf8')).toBe('in the view');
    await closeAll();
    // An isolated session a person started is not the server's.
    await rewind(root, ['init', '--isolated']);
    expect(
      (await status({ workspace: root })).sessions.filter(
        (session) => session.isolation === 'isolated',
      ),
    ).toHaveLength(2);
    const id = started[0]?.id as string;
    expect((await rewind(root, ['destroy', '--session', id])).code).toBe(0);

    const third = await connected(isolated);
    await third.callTool({ name: 'write', arguments: { path: 'b.txt', content: 'new' } });
    const mine = (await status({ workspace: root })).sessions.filter(
      (session) => session.startedBy === 'mcp',
    );
    expect(mine).toHaveLength(2);
    expect(existsSync(join(root, 'b.txt'))).toBe(false);
  });

  it('--isolated: once a person destroys its isolated session, the next call works in a new one and says so', async () => {
    const root = await makeTempDirectory();
    await lay(root, { 'a.txt': 'host' });
    const client = await connected({ root, session: { isolation: 'isolated' } });
    await client.callTool({ name: 'write', arguments: { path: 'a.txt', content: 'in the view' } });
    const [gone] = (await status({ workspace: root })).sessions.filter(
      (session) => session.isolation === 'isolated',
    );
    const goneId = gone?.id as string;
    expect((await rewind(root, ['destroy', '--session', goneId, '--force'])).code).toBe(0);

    // Two calls at once: one new session for both, said by one of them.
    const [read, again] = await Promise.all(
      [0, 1].map(() => client.callTool({ name: 'read', arguments: { path: 'a.txt' } })),
    );
    const texts = [read, again].map((result) => {
      expect(result?.isError).toBeFalsy();
      return (result as CallResult).content.map((part) => part.text);
    });
    const told = texts.filter((parts) => parts.length === 2);
    expect(told).toHaveLength(1);
    const [notice, content] = told[0] as string[];
    expect(notice).toMatch(new RegExp(`isolated session ${goneId} .*was destroyed`));
    expect(notice).toMatch(/fresh copy of the workspace/);
    expect(content).toBe('host');
    expect(texts.find((parts) => parts.length === 1)).toEqual(['host']);
    // Said once; the calls after work in the new session as usual.
    const wrote = await client.callTool({
      name: 'write',
      arguments: { path: 'b.txt', content: 'new' },
    });
    expect(textOf(wrote)).toMatch(/^journaled as action/);
    const isolated = (await status({ workspace: root })).sessions.filter(
      (session) => session.isolation === 'isolated' && session.id !== goneId,
    );
    expect(isolated).toHaveLength(1);
    expect(existsSync(join(root, 'b.txt'))).toBe(false);
  });

  it("--isolated leaves the store's current session alone: a person's commands act on the workspace, not the agent's view", async () => {
    const root = await makeTempDirectory();
    await lay(root, { 'a.txt': 'host\n' });
    await rewind(root, ['init']);
    const before = (await status({ workspace: root })).sessions.find((s) => s.isCurrent);
    const agent = await connected({ root, session: { isolation: 'isolated' } });
    await agent.callTool({ name: 'write', arguments: { path: 'a.txt', content: 'view\n' } });
    const after = await status({ workspace: root });
    expect(after.sessions.filter((s) => s.isolation === 'isolated')).toHaveLength(1);
    expect(after.sessions.find((s) => s.isCurrent)?.id).toBe(before?.id);
    // The person's checkpoint stores the workspace as it is, not the agent's view.
    const stored = await rewind(root, ['checkpoint', 'mine']);
    expect(stored.code).toBe(0);
    await writeFile(join(root, 'a.txt'), 'later\n');
    expect((await rewind(root, ['rollback', 'mine'])).code).toBe(0);
    expect(await readFile(join(root, 'a.txt'), 'utf8')).toBe('host\n');
  });

  it("status and session-list name the session the server works in, not only the store's current one", async () => {
    const root = await makeTempDirectory();
    await rewind(root, ['init']);
    const agent = await connected({ root, session: { isolation: 'isolated' } });
    await agent.callTool({ name: 'write', arguments: { path: 'a.txt', content: 'x' } });
    const { sessions } = await status({ workspace: root });
    const own = sessions.find((session) => session.isolation === 'isolated')?.id as string;
    const current = sessions.find((session) => session.isCurrent)?.id as string;
    expect(own).not.toBe(current);
    const reported = await agent.callTool({ name: 'status', arguments: {} });
    expect(reported.structuredContent).toMatchObject({
      workingSession: own,
      currentSession: current,
    });
    expect(JSON.parse(textOf(reported))).toMatchObject({ workingSession: own });
    const listed = await agent.callTool({ name: 'session-list', arguments: {} });
    expect(listed.structuredContent).toMatchObject({ workingSession: own });
    expect(textOf(listed)).toContain(`${own} (this server's session)`);
    expect(textOf(listed)).toContain(`${current} (the store's current session`);
  });

  it('--isolated: commit with dryRun and diff shows the model the diff of what the commit would write', async () => {
    const root = await makeTempDirectory();
    await lay(root, { 'a.txt': 'host\n' });
    const agent = await connected({ root, session: { isolation: 'isolated' } });
    await agent.callTool({ name: 'write', arguments: { path: 'a.txt', content: 'view\n' } });
    const diff = '--- a/a.txt\n+++ b/a.txt\n@@ -1,1 +1,1 @@\n-host\n+view\n';
    const plan = (await agent.callTool({
      name: 'commit',
      arguments: { dryRun: true, diff: true },
    })) as CallResult & { structuredContent: Record<string, unknown> };
    expect(plan.isError).toBeFalsy();
    // The plan as JSON, then the diff as it reads (not escaped inside the JSON).
    const [body, shown] = textOf(plan).split('\n}\n');
    expect(JSON.parse(`${body}}`)).toMatchObject({
      status: 'dry-run',
      changes: [{ path: 'a.txt' }],
    });
    expect(JSON.parse(`${body}}`)).not.toHaveProperty('diff');
    expect(shown).toBe(diff);
    expect(plan.structuredContent.diff).toBe(diff);
    const tool = (await agent.listTools()).tools.find((listed) => listed.name === 'commit');
    expect(tool?.outputSchema?.properties).toHaveProperty('diff', { type: 'string' });
    const refused = await agent.callTool({ name: 'commit', arguments: { diff: true } });
    expect(refused.isError).toBe(true);
    expect(textOf(refused)).toContain(
      '`diff` shows a plan, before a commit: give it with `dryRun`.',
    );
    expect(await readFile(join(root, 'a.txt'), 'utf8')).toBe('host\n');
  });
});
