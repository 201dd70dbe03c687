import { execFileSync } from 'node:child_process';
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { join } from 'node:path';
import { Client, InMemoryTransport } from '@modelcontextprotocol/client';
import { afterEach, describe, expect, it } from 'vitest';
import { readLedgerFile } from '../../src/ledger/index.js';
import { createMcpServer } from '../../src/mcp/server.js';
import {
  init,
  openSession,
  startIsolatedSession,
  startSession,
  status,
} from '../../src/session/index.js';
import { makeTempDirectory } from '../helpers/temp.js';

const SECRET = 'sk-abcdefgh12345';
const PATTERN = 'sk-[a-z0-9]{8,}';

/** The files under `directory` that hold `text` ('' for none). */
function filesHolding(text: string, directory: string): string {
  try {
    return execFileSync('grep', ['-rlF', text, directory], { encoding: 'utf8' });
  } catch (error) {
    if ((error as { status?: number }).status === 1) return '';
    throw error;
  }
}

const servers: Server[] = [];
const clients: Client[] = [];
afterEach(async () => {
  await Promise.all(clients.splice(0).map((client) => client.close()));
  await Promise.all(servers.splice(0).map((server) => new Promise((done) => server.close(done))));
});

async function loopbackUrl(): Promise<string> {
  const server = createServer((_request, response) => response.end('ok'));
  servers.push(server);
  await new Promise<void>((done) => server.listen(0, '127.0.0.1', done));
  return `http://127.0.0.1:${(server.address() as AddressInfo).port}/`;
}

describe('session protections', () => {
  it('are recorded when a session starts and applied by every later opening, given nothing', async () => {
    const workspace = await makeTempDirectory();
    await init({ workspace, redact: { patterns: [PATTERN] }, blockPrivate: true });
    const session = await openSession({ workspace });
    const drafted = await session.exec(`echo ${SECRET}`, { draft: true });
    await session.close();
    const approving = await openSession({ workspace });
    const ran = await approving.approve(drafted.id);
    expect((ran as { stdout?: string }).stdout).toBe('[redacted]\n');
    await expect(approving.http({ method: 'GET', url: await loopbackUrl() })).rejects.toMatchObject(
      { code: 'ADDRESS_REFUSED' },
    );
    await approving.close();
    expect(filesHolding(SECRET, join(workspace, '.rewind'))).toBe('');
    const [summary] = (await status({ workspace })).sessions;
    expect(summary?.protections).toEqual({
      redact: { headers: false, patterns: [PATTERN] },
      blockPrivate: true,
    });
  });

  it('are added to, once and for good, by an opening that gives more; an opening that gives less changes nothing', async () => {
    const workspace = await makeTempDirectory();
    await init({ workspace, redact: { headers: true } });
    for (let round = 0; round < 2; round++) {
      await (await openSession({ workspace, redact: { patterns: [PATTERN] } })).close();
    }
    await (await openSession({ workspace, redact: { headers: false, patterns: [] } })).close();
    const current = (await status({ workspace })).sessions[0];
    const { entries } = await readLedgerFile(current?.file as string);
    expect(entries.filter((entry) => entry.kind === 'settings-tightened')).toHaveLength(1);
    expect(entries.at(-1)?.body).toEqual({ redact: { patterns: [PATTERN] } });
    expect(current?.protections.redact).toEqual({ headers: true, patterns: [PATTERN] });
    const session = await openSession({ workspace });
    expect((await session.exec(`echo ${SECRET} https://u:PASSWORD-1@h`)).stdout).toBe(
      '[redacted] https://u:[redacted]@h\n',
    );
    await session.close();
  });

  it('apply to sessions started by startSession and startIsolatedSession, and refuse a bad pattern before creating anything', async () => {
    const workspace = await makeTempDirectory();
    await expect(init({ workspace, redact: { patterns: ['(unclosed'] } })).rejects.toMatchObject({
      code: 'INVALID_ARGUMENT',
    });
    await expect(status({ workspace })).rejects.toMatchObject({ code: 'STORE_NOT_FOUND' });
    await init({ workspace });
    await startSession({ workspace, blockPrivate: true });
    const shared = await openSession({ workspace });
    await expect(shared.http({ method: 'GET', url: await loopbackUrl() })).rejects.toMatchObject({
      code: 'ADDRESS_REFUSED',
    });
    await shared.close();
    const isolated = await startIsolatedSession({ workspace, redact: { patterns: [PATTERN] } });
    await isolated.close();
    const reopened = await openSession({ workspace, session: isolated.id });
    expect((await reopened.exec(`echo ${SECRET}`)).stdout).toBe('[redacted]\n');
    await reopened.close();
  });

  it('given to the MCP server, are recorded in the store it creates', async () => {
    const workspace = await makeTempDirectory();
    const server = createMcpServer({ root: workspace, session: { redact: { headers: true } } });
    const [clientSide, serverSide] = InMemoryTransport.createLinkedPair();
    await server.connect(serverSide);
    const client = new Client({ name: 'test', version: '1.0.0' });
    await client.connect(clientSide);
    clients.push(client);
    await client.callTool({ name: 'exec', arguments: { command: 'true' } });
    const [summary] = (await status({ workspace })).sessions;
    expect(summary?.protections.redact.headers).toBe(true);
    // No tightening entry: the session was started with it.
    const { entries } = await readLedgerFile(summary?.file as string);
    expect(entries.some((entry) => entry.kind === 'settings-tightened')).toBe(false);
  });
});
