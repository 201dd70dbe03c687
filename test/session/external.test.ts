import { execFileSync } from 'node:child_process';
import { existsSync } from 'node:fs';
import { readdir, readFile, writeFile } from 'node:fs/promises';
import { createServer, type IncomingMessage, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { refusalOf } from '../../src/sandbox/index.js';
import {
  init,
  log,
  type OpenSessionOptions,
  openSession,
  type Session,
} from '../../src/session/index.js';
import { createObjectStore } from '../../src/store/index.js';
import { makeTempDirectory } from '../helpers/temp.js';

const servers: Server[] = [];
afterEach(async () => {
  await Promise.all(servers.splice(0).map((server) => new Promise((done) => server.close(done))));
});

/** A server on the loopback that answers with what it received, and counts requests. */
async function echoServer(): Promise<{ url: string; received: IncomingMessage[] }> {
  const received: IncomingMessage[] = [];
  const server = createServer((request, response) => {
    received.push(request);
    const chunks: Buffer[] = [];
    request.on('data', (chunk: Buffer) => chunks.push(chunk));
    request.on('end', () => {
      response.setHeader('set-cookie', 'session=COOKIE-SECRET');
      response.statusCode = request.url === '/missing' ? 404 : 200;
      response.end(
        JSON.stringify({ headers: request.headers, body: Buffer.concat(chunks).toString() }),
      );
    });
  });
  servers.push(server);
  await new Promise<void>((done) => server.listen(0, '127.0.0.1', done));
  return { url: `http://127.0.0.1:${(server.address() as AddressInfo).port}`, received };
}

async function sessionIn(options: Partial<OpenSessionOptions> = {}) {
  const workspace = await makeTempDirectory();
  await init({ workspace });
  const session = await openSession({ workspace, ...options });
  return { workspace, session };
}

async function statesOf(workspace: string): Promise<Record<number, string>> {
  const states: Record<number, string> = {};
  for (const line of (await log({ workspace })).entries) {
    if (line.action) states[line.seq] = line.action.state;
  }
  return states;
}

/** The files under `directory` that hold `text`, as grep lists them ('' for none). */
function grep(text: string, directory: string): string {
  try {
    return execFileSync('grep', ['-rlF', text, directory], { encoding: 'utf8' });
  } catch (error) {
    if ((error as { status?: number }).status === 1) return '';
    throw error;
  }
}

/** Every file under a directory, as one string: the grep of the whole store. */
/** Every file of the store as it is on disk, and every object's content (packs compress them). */
async function everything(directory: string): Promise<string> {
  let text = '';
  for (const entry of await readdir(directory, { withFileTypes: true, recursive: true })) {
    if (entry.isFile()) text += await readFile(join(entry.parentPath, entry.name), 'latin1');
  }
  const store = createObjectStore(directory);
  for await (const { digest } of store.list()) text += (await store.get(digest)).toString('latin1');
  return text;
}

describe('http', () => {
  it('sends a request and keeps status, headers and body as evidence; irreversible without a compensation', async () => {
    const server = await echoServer();
    const { workspace, session } = await sessionIn();
    const result = await session.http({ method: 'POST', url: `${server.url}/hook`, body: 'hello' });
    expect(result).toMatchObject({ kind: 'http', class: 'irreversible', state: 'done' });
    expect(result.response?.status).toBe(200);
    expect(JSON.parse(result.response?.body ?? '{}').body).toBe('hello');
    await expect(session.undo(result.id)).rejects.toMatchObject({ code: 'ACTION_NOT_ALLOWED' });
    const failed = await session.http({ method: 'GET', url: `${server.url}/missing` });
    expect(failed.state).toBe('failed');
    expect(await statesOf(workspace)).toMatchObject({ [result.id]: 'done', [failed.id]: 'failed' });
    await session.close();
  });

  it('shows what a request and a command stored, redacted as stored', async () => {
    const server = await echoServer();
    const { session } = await sessionIn({ redact: { headers: true, patterns: ['tok-[a-z]+'] } });
    const sent = await session.http({
      method: 'POST',
      url: `${server.url}/hook`,
      headers: { authorization: 'Bearer tok-secret', 'x-kind': 'test' },
      body: 'hello tok-abc',
    });
    const shown = await session.show(sent.id);
    expect(shown.request).toMatchObject({
      method: 'POST',
      headers: { authorization: '[redacted]', 'x-kind': 'test' },
      body: { text: 'hello [redacted]' },
    });
    expect(shown.response).toMatchObject({ status: 200, headers: { 'set-cookie': '[redacted]' } });
    expect(shown.response?.body.text).toContain('hello [redacted]');
    expect(shown.response?.body.text).not.toContain('tok-');
    const ran = await session.exec(['sh', '-c', 'echo out; echo err >&2; exit 3']);
    expect((await session.show(ran.id)).command).toMatchObject({
      exitCode: 3,
      stdout: { text: 'out\n', truncated: false },
      stderr: { text: 'err\n' },
    });
    await expect(session.show(9999)).rejects.toMatchObject({ code: 'ACTION_NOT_FOUND' });
    await session.close();
  });

  it.each([
    ['169.254.169.254', 'link-local'],
    ['0.0.0.0', 'unspecified'],
    ['224.0.0.1', 'multicast'],
    ['240.0.0.1', 'reserved'],
    ['255.255.255.255', 'reserved'],
    ['192.0.2.10', 'documentation'],
    ['198.18.0.1', 'benchmarking'],
    ['::', 'unspecified'],
    ['fe80::1', 'link-local'],
    ['ff02::1', 'multicast'],
    ['2001:db8::1', 'documentation'],
    ['::ffff:169.254.169.254', 'link-local'],
    ['::ffff:a9fe:a9fe', 'link-local'],
    ['64:ff9b::a9fe:a9fe', 'link-local'],
  ])('refuses %s (%s), always', (address, why) => {
    expect(refusalOf(address, false)).toContain(why);
  });

  it.each([
    ['127.0.0.1', 'loopback'],
    ['10.1.2.3', 'private'],
    ['172.16.0.1', 'private'],
    ['192.168.1.1', 'private'],
    ['100.64.0.1', 'shared'],
    ['::1', 'loopback'],
    ['fd00::1', 'private'],
    ['::ffff:127.0.0.1', 'loopback'],
  ])('refuses %s (%s) only with block-private', (address, why) => {
    expect(refusalOf(address, false)).toBeUndefined();
    expect(refusalOf(address, true)).toContain(why);
  });

  it('lets public addresses through', () => {
    for (const address of ['93.184.216.34', '8.8.8.8', '2606:4700::1111', '172.32.0.1']) {
      expect(refusalOf(address, true)).toBeUndefined();
    }
  });

  it('refuses before sending, after resolving the name, and journals nothing', async () => {
    const server = await echoServer();
    const { workspace, session } = await sessionIn({ blockPrivate: true });
    const before = (await log({ workspace })).entries.length;
    await expect(
      session.http({ method: 'GET', url: 'http://169.254.169.254/latest/meta-data/' }),
    ).rejects.toMatchObject({ code: 'ADDRESS_REFUSED' });
    await expect(
      session.http({ method: 'GET', url: server.url.replace('127.0.0.1', 'localhost') }),
    ).rejects.toMatchObject({ code: 'ADDRESS_REFUSED', data: { host: 'localhost' } });
    await expect(session.http({ method: 'GET', url: server.url })).rejects.toMatchObject({
      code: 'ADDRESS_REFUSED',
    });
    expect(server.received).toHaveLength(0);
    expect((await log({ workspace })).entries).toHaveLength(before);
    await session.close();
  });

  it('refuses malformed URLs and headers with a clear error, changing nothing', async () => {
    const { workspace, session } = await sessionIn();
    const before = (await log({ workspace })).entries.length;
    await expect(session.http({ method: 'GET', url: 'not a url' })).rejects.toMatchObject({
      code: 'INVALID_ARGUMENT',
    });
    await expect(session.http({ method: 'GET', url: 'file:///etc/passwd' })).rejects.toMatchObject({
      code: 'INVALID_ARGUMENT',
    });
    await expect(
      session.http({ method: 'GET', url: 'http://example.test/', headers: { 'Bad Name': 'x' } }),
    ).rejects.toMatchObject({ code: 'INVALID_ARGUMENT' });
    await expect(
      session.http({
        method: 'GET',
        url: 'http://example.test/',
        headers: { X: 'a\r\nInjected: 1' },
      }),
    ).rejects.toMatchObject({ code: 'INVALID_ARGUMENT' });
    expect((await log({ workspace })).entries).toHaveLength(before);
    await session.close();
  });
});

describe('record, report and compensate', () => {
  it('journals an external action before it happens and closes it with its report', async () => {
    const { workspace, session } = await sessionIn();
    const recorded = await session.record('deploy', {
      compensation: { command: 'echo rolled-back > rollback.txt' },
      target: 'production',
    });
    expect(recorded).toMatchObject({ kind: 'x.deploy', class: 'compensable' });
    expect(await statesOf(workspace)).toMatchObject({ [recorded.id]: 'interrupted' });
    await session.report(recorded.id, { ok: true, detail: 'v2 is live' });
    expect(await statesOf(workspace)).toMatchObject({ [recorded.id]: 'done' });
    await expect(session.report(recorded.id, { ok: true })).rejects.toMatchObject({
      code: 'ACTION_NOT_ALLOWED',
    });
    expect(await session.compensation(recorded.id)).toEqual({
      command: 'echo rolled-back > rollback.txt',
    });
    const compensation = await session.compensate(recorded.id);
    expect(compensation.state).toBe('done');
    expect(await readFile(join(workspace, 'rollback.txt'), 'utf8')).toBe('rolled-back\n');
    expect(await statesOf(workspace)).toMatchObject({ [recorded.id]: 'compensated' });
    await expect(session.compensate(recorded.id)).rejects.toMatchObject({
      code: 'ACTION_NOT_ALLOWED',
    });
    const irreversible = await session.record('send-email');
    expect(irreversible.class).toBe('irreversible');
    await expect(session.undo(irreversible.id)).rejects.toMatchObject({
      code: 'ACTION_NOT_ALLOWED',
    });
    await expect(session.compensate(irreversible.id)).rejects.toMatchObject({
      code: 'ACTION_NOT_ALLOWED',
    });
    await expect(session.record('bad name')).rejects.toMatchObject({ code: 'INVALID_ARGUMENT' });
    await expect(session.record('x', { class: 'compensable' })).rejects.toMatchObject({
      code: 'INVALID_ARGUMENT',
    });
    await session.close();
  });
});

describe('drafts', () => {
  async function draftedExec(session: Session) {
    return session.exec('echo ran > ran.txt', { draft: true });
  }

  it('journals a draft without running it, shows it, and runs it on approval', async () => {
    const { workspace, session } = await sessionIn();
    const draft = await draftedExec(session);
    expect(draft.state).toBe('draft');
    expect(existsSync(join(workspace, 'ran.txt'))).toBe(false);
    const shown = await session.draft(draft.id);
    expect(shown.spec).toMatchObject({ action: 'exec', command: 'echo ran > ran.txt' });
    const approved = await session.approve(draft.id, { digest: shown.digest });
    expect(approved).toMatchObject({ id: draft.id, state: 'done' });
    expect(await readFile(join(workspace, 'ran.txt'), 'utf8')).toBe('ran\n');
    const kinds = (await log({ workspace })).entries.map((line) => line.kind);
    expect(kinds.slice(-3)).toEqual(['action-started', 'action-approved', 'action-completed']);
    // An approved command's file effects are undoable like any other.
    await session.undo(draft.id);
    expect(existsSync(join(workspace, 'ran.txt'))).toBe(false);
    await expect(session.approve(draft.id)).rejects.toMatchObject({ code: 'ACTION_NOT_ALLOWED' });
    await session.close();
  });

  it('discards a draft for good: it never runs, and cannot be approved', async () => {
    const { workspace, session } = await sessionIn();
    const draft = await draftedExec(session);
    await session.discard(draft.id);
    expect(await statesOf(workspace)).toMatchObject({ [draft.id]: 'discarded' });
    await expect(session.approve(draft.id)).rejects.toMatchObject({ code: 'ACTION_NOT_ALLOWED' });
    await expect(session.discard(draft.id)).rejects.toMatchObject({ code: 'ACTION_NOT_ALLOWED' });
    expect(existsSync(join(workspace, 'ran.txt'))).toBe(false);
    await session.close();
  });

  it('runs nothing when the draft differs from what was approved', async () => {
    const { workspace, session } = await sessionIn();
    const draft = await draftedExec(session);
    const { digest } = await session.draft(draft.id);
    await expect(
      session.approve(draft.id, { digest: `sha256:${'0'.repeat(64)}` }),
    ).rejects.toMatchObject({
      code: 'ACTION_NOT_ALLOWED',
    });
    const file = join(workspace, '.rewind', 'drafts', `${digest.slice(7)}.json`);
    await writeFile(file, (await readFile(file, 'utf8')).replace('echo ran', 'echo pwned'));
    await expect(session.approve(draft.id, { digest })).rejects.toMatchObject({
      code: 'ACTION_NOT_ALLOWED',
    });
    await expect(session.approve(draft.id)).rejects.toMatchObject({ code: 'ACTION_NOT_ALLOWED' });
    expect(existsSync(join(workspace, 'ran.txt'))).toBe(false);
    expect(await statesOf(workspace)).toMatchObject({ [draft.id]: 'draft' });
    await session.close();
  });

  it('approves a recorded draft, which then waits for its report', async () => {
    const { workspace, session } = await sessionIn();
    const draft = await session.record('migrate-db', { draft: true });
    await expect(session.report(draft.id, { ok: true })).rejects.toMatchObject({
      code: 'ACTION_NOT_ALLOWED',
    });
    const approved = await session.approve(draft.id);
    expect(approved.state).toBe('approved');
    expect(await statesOf(workspace)).toMatchObject({ [draft.id]: 'approved' });
    await session.report(draft.id, { ok: false, detail: 'lock timeout' });
    expect(await statesOf(workspace)).toMatchObject({ [draft.id]: 'failed' });
    await session.close();
  });

  it('sends an http draft on approval', async () => {
    const server = await echoServer();
    const { session } = await sessionIn();
    const draft = await session.http(
      { method: 'POST', url: `${server.url}/x`, body: 'b' },
      { draft: true },
    );
    expect(server.received).toHaveLength(0);
    const sent = await session.approve(draft.id);
    expect(sent.state).toBe('done');
    expect(server.received).toHaveLength(1);
    await session.close();
  });
});

describe('redaction', () => {
  it('strips secrets before anything is hashed or stored, and says where', async () => {
    const server = await echoServer();
    const { workspace, session } = await sessionIn({
      redact: { headers: true, patterns: ['sk-[a-z0-9]{8,}'] },
    });
    const request = await session.http({
      method: 'POST',
      url: `${server.url}/api?key=sk-abcdef123456`,
      headers: { Authorization: 'Bearer HEADER-SECRET', 'X-Trace': 'visible' },
      body: 'token=sk-abcdef123456',
    });
    // The request itself went out with the real values.
    expect(server.received[0]?.headers.authorization).toBe('Bearer HEADER-SECRET');
    expect(request.response?.headers['set-cookie']).toBe('[redacted]');
    const command = await session.exec('echo sk-abcdef123456; echo sk-abcdef123456 >&2');
    expect(command).toMatchObject({ stdout: '[redacted]\n', stderr: '[redacted]\n' });
    const draft = await session.exec('echo DRAFT-sk-zzzzzzzz9', { draft: true });
    // A draft keeps its exact content until it runs...
    expect((await session.draft(draft.id)).spec).toMatchObject({
      command: 'echo DRAFT-sk-zzzzzzzz9',
    });
    await session.approve(draft.id);
    const diff = await session.diff(String(request.id));
    expect(diff.redacted).toEqual(
      expect.arrayContaining([
        'request.url',
        'request.headers.Authorization',
        'response.headers.set-cookie',
        'request.body',
      ]),
    );
    expect(diff.text).toContain('Redacted before storing');
    await session.close();
    const store = await everything(join(workspace, '.rewind'));
    for (const secret of ['HEADER-SECRET', 'COOKIE-SECRET', 'sk-abcdef123456', 'sk-zzzzzzzz9']) {
      expect(store).not.toContain(secret);
      expect(grep(secret, join(workspace, '.rewind'))).toBe('');
    }
  });

  it('with --redact, strips URL passwords from commands, outputs, requests and what comes back', async () => {
    const server = await echoServer();
    const { workspace, session } = await sessionIn({ redact: { headers: true } });
    const command = await session.exec(
      'echo connecting to postgres://app:PG-PASSWORD-1@db/app; echo "password: PG-PASSWORD-1" >&2',
    );
    expect(command.target).toBe(
      'echo connecting to postgres://app:[redacted]@db/app; echo "password: [redacted]" >&2',
    );
    expect(command).toMatchObject({
      stdout: 'connecting to postgres://app:[redacted]@db/app\n',
      stderr: 'password: [redacted]\n',
    });
    const url = server.url.replace('http://', 'http://bob:HTTP-PASSWORD-2@');
    const request = await session.http({
      method: 'POST',
      url: `${url}/hook`,
      body: JSON.stringify({ callback: 'https://hook:BODY-PASSWORD-3@example.test/x' }),
    });
    // The request went out with the credentials; the server echoed them (as Basic) in its body.
    expect(server.received[0]?.headers.authorization).toBe(
      `Basic ${Buffer.from('bob:HTTP-PASSWORD-2').toString('base64')}`,
    );
    expect(request.target).toMatch(/^POST http:\/\/bob:\[redacted\]@127\.0\.0\.1:\d+\/hook$/);
    expect(request.response?.body).toContain('https://hook:[redacted]@example.test/x');
    await session.close();
    const store = await everything(join(workspace, '.rewind'));
    for (const secret of [
      'PG-PASSWORD-1',
      'HTTP-PASSWORD-2',
      'BODY-PASSWORD-3',
      Buffer.from('bob:HTTP-PASSWORD-2').toString('base64'),
    ]) {
      expect(store).not.toContain(secret);
    }
  });

  it('stores no part of a secret that the output cap cuts', async () => {
    const { workspace, session } = await sessionIn({
      redact: { headers: true, patterns: ['sk-[a-z0-9]{8,}'] },
    });
    const mebibyte = 1024 * 1024;
    // The default cap (1 MiB) falls three characters into each secret.
    const pad = (length: number) => `head -c ${length} /dev/zero | tr '\\0' a`;
    const result = await session.exec(
      `${pad(mebibyte - 3)}; echo sk-abcdefghij1234; ${pad(mebibyte - 3 - 'https://u:'.length)} >&2; echo https://u:URLPASSWORD9@host >&2`,
    );
    expect(result).toMatchObject({ stdoutTruncated: true, stderrTruncated: true });
    expect(result.stdout.endsWith('aaa[redacted]')).toBe(true);
    expect(result.stderr.endsWith('https://u:[redacted]')).toBe(true);
    await session.close();
    const store = await everything(join(workspace, '.rewind'));
    expect(store).toContain('aaa[redacted]');
    for (const prefix of ['aaask-', 'aaask', 'u:URL', 'URLPASS'])
      expect(store).not.toContain(prefix);
  });

  it('refuses a pattern that does not compile before opening anything', async () => {
    const workspace = await makeTempDirectory();
    await init({ workspace });
    await expect(
      openSession({ workspace, redact: { patterns: ['(unclosed'] } }),
    ).rejects.toMatchObject({
      code: 'INVALID_ARGUMENT',
      data: { pattern: '(unclosed' },
    });
  });
});
