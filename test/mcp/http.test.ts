import { type ChildProcess, spawn } from 'node:child_process';
import { existsSync, readdirSync, readFileSync, realpathSync } from 'node:fs';
import { readFile } from 'node:fs/promises';
import { request } from 'node:http';
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { refusalOfRequest, status } from '../../src/index.js';
import { rewind } from '../helpers/cli.js';
import { ROOT, runNode } from '../helpers/processes.js';
import { makeTempDirectory } from '../helpers/temp.js';
import { hasInotifywait } from '../helpers/watching.js';

/** The pids of the inotifywait processes watching `root`. */
function watchersOf(root: string): number[] {
  return readdirSync('/proc')
    .filter((name) => /^\d+$/.test(name))
    .filter((pid) => {
      try {
        const args = readFileSync(`/proc/${pid}/cmdline`, 'utf8').split('\0');
        return args[0]?.endsWith('inotifywait') === true && args.includes(realpathSync(root));
      } catch {
        return false;
      }
    })
    .map(Number);
}

const servers: ChildProcess[] = [];
afterEach(async () => {
  await Promise.all(
    servers.splice(0).map(async (server) => {
      if (server.exitCode === null && server.signalCode === null) {
        server.kill('SIGINT');
        await new Promise((done) => server.on('exit', done));
      }
    }),
  );
});

/** Starts `rewind mcp --http 0` on `root`; resolves with the URL it prints, token included. */
async function serve(root: string, extra: string[] = [], env: NodeJS.ProcessEnv = {}) {
  const server = spawn(
    process.execPath,
    [join(ROOT, 'bin', 'rewind.cjs'), 'mcp', '--http', '0', '--root', root, ...extra],
    { stdio: ['ignore', 'pipe', 'pipe'], env: { ...process.env, ...env } },
  );
  servers.push(server);
  const said = await new Promise<string>((resolve, reject) => {
    let text = '';
    server.stderr?.on('data', (chunk: Buffer) => {
      text += chunk.toString();
      if (/serving on \S+\n[^\n]*\n/.test(text)) resolve(text);
    });
    server.on('exit', () => reject(new Error(`the server exited: ${text}`)));
  });
  const url = new URL(/serving on (\S+)/.exec(said)?.[1] as string);
  return { url, token: url.searchParams.get('token') as string, port: Number(url.port), said };
}

/** A raw MCP call of the `write` tool (or the tool `call` names), with exactly the headers given. */
function callWrite(
  port: number,
  path: string,
  headers: Record<string, string>,
  query = '',
  call: { name: string; arguments: Record<string, unknown> } = {
    name: 'write',
    arguments: { path, content: 'written' },
  },
): Promise<{ status: number; body: string; headers: Record<string, unknown> }> {
  const payload = JSON.stringify({ jsonrpc: '2.0', id: 1, method: 'tools/call', params: call });
  return new Promise((resolve, reject) => {
    const outgoing = request(
      {
        host: '127.0.0.1',
        port,
        method: 'POST',
        path: `/mcp${query}`,
        headers: {
          'content-type': 'application/json',
          accept: 'application/json, text/event-stream',
          ...headers,
        },
      },
      (response) => {
        let body = '';
        response.on('data', (chunk: Buffer) => {
          body += chunk.toString();
        });
        response.on('end', () =>
          resolve({ status: response.statusCode ?? 0, body, headers: response.headers }),
        );
      },
    );
    outgoing.on('error', reject);
    outgoing.end(payload);
  });
}

describe('rewind mcp --http', () => {
  it('cannot be driven for another Host, from a foreign Origin, without the token or with a wrong one; can with the token', async () => {
    const root = await makeTempDirectory();
    const { token, port, said } = await serve(root);
    expect(token).toMatch(/^[\w-]{43}$/);
    expect(said).toContain('Authorization: Bearer');
    const own = `127.0.0.1:${port}`;
    const bearer = { authorization: `Bearer ${token}` };

    const refused = [
      // DNS rebinding: a page on attacker.example whose name now resolves to 127.0.0.1.
      [421, 'rebound.txt', { host: `attacker.example:${port}`, ...bearer }],
      [421, 'other-port.txt', { host: `127.0.0.1:${port + 1}`, ...bearer }],
      [403, 'origin.txt', { host: own, origin: 'http://attacker.example', ...bearer }],
      [403, 'origin-null.txt', { host: own, origin: 'null', ...bearer }],
      [403, 'origin-port.txt', { host: own, origin: `http://127.0.0.1:${port + 1}`, ...bearer }],
      [401, 'no-token.txt', { host: own }],
      [401, 'wrong-token.txt', { host: own, authorization: `Bearer ${token.slice(1)}x` }],
      [401, 'basic.txt', { host: own, authorization: `Basic ${token}` }],
    ] as const;
    for (const [status, path, headers] of refused) {
      const answer = await callWrite(port, path, headers);
      expect(answer.status, path).toBe(status);
      expect(JSON.parse(answer.body), path).toMatchObject({
        jsonrpc: '2.0',
        id: null,
        error: { code: -32000, message: expect.any(String) },
      });
      if (status === 401) expect(answer.headers['www-authenticate']).toContain('Bearer');
    }
    const wrongQuery = await callWrite(port, 'wrong-query.txt', { host: own }, '?token=nope');
    expect(wrongQuery.status).toBe(401);
    for (const [, path] of refused) expect(existsSync(join(root, path)), path).toBe(false);
    expect(existsSync(join(root, 'wrong-query.txt'))).toBe(false);
    expect((await rewind(root, ['log'])).stdout).not.toContain('action-started');

    // The token as a header, in the URL, from localhost, and with the server's own origin.
    const allowed = [
      ['header.txt', { host: own, ...bearer }, ''],
      ['query.txt', { host: own }, `?token=${token}`],
      ['localhost.txt', { host: `localhost:${port}`, ...bearer }, ''],
      ['own-origin.txt', { host: own, origin: `http://${own}`, ...bearer }, ''],
    ] as const;
    for (const [path, headers, query] of allowed) {
      const answer = await callWrite(port, path, headers, query);
      expect(answer.status, path).toBe(200);
      expect(answer.body, path).toContain('journaled as action');
      expect(await readFile(join(root, path), 'utf8')).toBe('written');
    }
    expect((await rewind(root, ['log'])).stdout.match(/action-started/g)).toHaveLength(4);
  });

  it('stopped by SIGTERM during a call, finishes it, journals and answers it, then exits', async () => {
    const root = await makeTempDirectory();
    const { token, port } = await serve(root);
    const server = servers[servers.length - 1] as ChildProcess;
    const exited = new Promise<number | null>((done) => server.on('exit', (code) => done(code)));
    const answer = callWrite(
      port,
      '',
      { host: `127.0.0.1:${port}`, authorization: `Bearer ${token}` },
      '',
      { name: 'exec', arguments: { command: 'touch started; sleep 1; echo done > out.txt' } },
    );
    for (let waited = 0; !existsSync(join(root, 'started')); waited += 20) {
      if (waited > 15_000) throw new Error('the command never started');
      await new Promise((done) => setTimeout(done, 20));
    }
    server.kill('SIGTERM');
    const answered = await answer;
    expect(answered.status).toBe(200);
    expect(answered.body).toContain('journaled as action');
    expect(await exited).toBe(0);
    expect(await readFile(join(root, 'out.txt'), 'utf8')).toBe('done\n');
    expect((await rewind(root, ['status'])).stdout).not.toMatch(/interrupted|cut short/i);
  });

  it.skipIf(!hasInotifywait)(
    'keeps one session open and watching across requests, as over stdio (skipped without inotifywait)',
    async () => {
      const root = await makeTempDirectory();
      const { token, port } = await serve(root);
      const headers = { host: `127.0.0.1:${port}`, authorization: `Bearer ${token}` };
      const checkpoint = (label: string) =>
        callWrite(port, '', headers, '', { name: 'checkpoint', arguments: { label } });
      expect((await checkpoint('one')).body).toContain('one');
      await new Promise((done) => setTimeout(done, 300));
      const first = watchersOf(root);
      expect(first).toHaveLength(1);
      expect((await callWrite(port, 'a.txt', headers)).body).toContain('journaled as action');
      expect((await checkpoint('two')).body).toContain('two');
      await new Promise((done) => setTimeout(done, 300));
      // The same watch: the second checkpoint could take what it saw, with no walk.
      expect(watchersOf(root)).toEqual(first);
    },
  );

  it('--isolated: concurrent first calls work in one isolated session, started once', async () => {
    const root = await makeTempDirectory();
    const { token, port } = await serve(root, ['--isolated']);
    const headers = { host: `127.0.0.1:${port}`, authorization: `Bearer ${token}` };
    const paths = ['a.txt', 'b.txt', 'c.txt', 'd.txt'];
    const answers = await Promise.all(paths.map((path) => callWrite(port, path, headers)));
    for (const answer of answers) expect(answer.body).toContain('journaled as action');
    const isolated = (await status({ workspace: root })).sessions.filter(
      (session) => session.isolation === 'isolated',
    );
    expect(isolated).toHaveLength(1);
    // Every write is in that session's view, none in the workspace.
    const read = await callWrite(port, '', headers, '', { name: 'list', arguments: {} });
    expect(read.body).toContain('a.txt');
    expect(read.body).toContain('d.txt');
    for (const path of paths) expect(existsSync(join(root, path)), path).toBe(false);
    // A person destroys it: the next request works in a new one, and its answer says so, once.
    const gone = isolated[0]?.id as string;
    expect((await rewind(root, ['destroy', '--session', gone, '--force'])).code).toBe(0);
    const next = await callWrite(port, 'e.txt', headers);
    expect(next.body).toContain(`The isolated session ${gone} this server worked in was destroyed`);
    expect(next.body).toContain('journaled as action');
    const after = await callWrite(port, '', headers, '', { name: 'list', arguments: {} });
    expect(after.body).toContain('e.txt');
    expect(after.body).not.toContain('a.txt');
    expect(after.body).not.toContain('was destroyed');
  });

  it('says so, exit 1, on a port in use, and creates nothing', async () => {
    const first = await makeTempDirectory();
    const { port } = await serve(first);
    const root = await makeTempDirectory();
    const bin = join(ROOT, 'bin', 'rewind.cjs');
    const busy = await runNode([bin, 'mcp', '--http', String(port)], { cwd: root });
    expect(busy.code).toBe(1);
    expect(busy.stderr).toBe(
      `rewind mcp: cannot listen on 127.0.0.1 port ${port}: the port is in use (EADDRINUSE).\n`,
    );
    expect(existsSync(join(root, '.rewind'))).toBe(false);
  });

  it('takes the token from --token or REWIND_MCP_TOKEN; refuses one too short to protect anything', async () => {
    const root = await makeTempDirectory();
    const given = 'a-token-set-by-the-person';
    const viaFlag = await serve(root, ['--token', given]);
    expect(viaFlag.token).toBe(given);
    expect(
      (await callWrite(viaFlag.port, 'flag.txt', { authorization: `Bearer ${given}` })).status,
    ).toBe(200);
    const viaEnvironment = await serve(root, [], { REWIND_MCP_TOKEN: `${given}-2` });
    expect(viaEnvironment.token).toBe(`${given}-2`);
    expect(
      (await callWrite(viaEnvironment.port, 'env.txt', { authorization: `Bearer ${given}` }))
        .status,
    ).toBe(401);
    const bin = join(ROOT, 'bin', 'rewind.cjs');
    const short = await runNode([bin, 'mcp', '--http', '0', '--token', 'short'], { cwd: root });
    expect(short.code).toBe(2);
    expect(short.stderr).toContain('at least 16 characters');
    const stdio = await runNode([bin, 'mcp', '--token', given], { cwd: root });
    expect(stdio.code).toBe(2);
    expect(stdio.stderr).toContain('--token goes with --http');
  });

  it('names its own authority only: loopback by address or localhost, any address (never a name) when listening on all', () => {
    const token = 'x'.repeat(32);
    const authorized = { authorization: `Bearer ${token}` };
    const refusal = (host: string, listen: string, origin?: string) =>
      refusalOfRequest(
        { headers: { host, ...authorized, ...(origin !== undefined && { origin }) } },
        { host: listen, port: 8765, token },
      )?.status;
    expect(refusal('127.0.0.1:8765', '127.0.0.1')).toBeUndefined();
    expect(refusal('LOCALHOST:8765', '127.0.0.1')).toBeUndefined();
    expect(refusal('[::1]:8765', '::1')).toBeUndefined();
    expect(refusal('localhost:8765', '::1')).toBeUndefined();
    expect(refusal('127.0.0.1:8765', '::1')).toBe(421);
    expect(refusal('127.0.0.1', '127.0.0.1')).toBe(421);
    expect(refusal('127.0.0.1.nip.io:8765', '127.0.0.1')).toBe(421);
    expect(refusal('192.168.1.5:8765', '0.0.0.0')).toBeUndefined();
    expect(refusal('rebind.example:8765', '0.0.0.0')).toBe(421);
    // Listening on all: localhost too (a page at localhost is this server's own), at its port only.
    expect(refusal('localhost:8765', '0.0.0.0')).toBeUndefined();
    expect(refusal('[::1]:8765', '::')).toBeUndefined();
    expect(refusal('localhost:8766', '0.0.0.0')).toBe(421);
    expect(refusal('my-laptop:8765', '0.0.0.0')).toBe(421);
    expect(refusal('127.0.0.1:8765', '127.0.0.1', 'https://127.0.0.1:8765')).toBe(403);
    expect(refusal('127.0.0.1:8765', '127.0.0.1', 'http://localhost:8765')).toBeUndefined();
  });
});
