// The PostgreSQL ledger against a real server (Debian's package, started here).
import { type AddressInfo, connect, createServer as createNetServer } from 'node:net';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { RewindError } from '../../src/errors.js';
import {
  checkLedger,
  type LedgerEntry,
  migratePostgres,
  PostgresLedger,
} from '../../src/ledger/index.js';
import { type PostgresServer, startPostgres } from '../helpers/postgres.js';
import { ROOT, runNode } from '../helpers/processes.js';

let server: PostgresServer;

beforeAll(async () => {
  server = await startPostgres({ durable: false });
  // Several processes migrating at once: one creates the tables, the others find them.
  await Promise.all([migratePostgres(server.url), migratePostgres(server.url)]);
}, 60_000);
afterAll(async () => {
  await server?.stop();
});

describe('the PostgreSQL ledger', () => {
  it('keeps a session: entries appended by one writer are read, whole and in order, by another', async () => {
    await migratePostgres(server.url); // idempotent
    const writer = await PostgresLedger.create(server.url, 'store-a', {
      hashChain: true,
      startedBody: { workspace: '/work/a' },
    });
    await writer.append('checkpoint-created', { label: 'one' });
    await writer.append('note-added', { text: 'hello' }, [
      { type: 'blob', digest: `sha256:${'a'.repeat(64)}` },
    ]);
    await writer.close();
    const reader = await PostgresLedger.open(server.url, 'store-a', writer.session.id);
    const { entries } = await reader.read();
    expect(entries.map((entry) => [entry.seq, entry.kind])).toEqual([
      [1, 'session-started'],
      [2, 'checkpoint-created'],
      [3, 'note-added'],
    ]);
    expect(reader.isHashChained).toBe(true);
    expect(entries[2]?.refs).toEqual([{ type: 'blob', digest: `sha256:${'a'.repeat(64)}` }]);
    expect(checkLedger({ entries, damagedLastLine: undefined }, true)).toEqual([]);
    // A later read fetches what was appended since.
    await reader.append('note-added', { text: 'from the reader' });
    expect((await reader.read()).entries.map((entry) => entry.seq)).toEqual([1, 2, 3, 4]);
    await reader.close();
    // Sessions of another store with the same tables are apart.
    await expect(
      PostgresLedger.open(server.url, 'store-b', writer.session.id),
    ).rejects.toMatchObject({ code: 'SESSION_NOT_FOUND' });
  });

  it("runs an append's check under the session's lock: of many writers checking one label, one appends", async () => {
    const first = await PostgresLedger.create(server.url, 'store-checked');
    const writers = await Promise.all(
      [1, 2, 3, 4, 5, 6].map(() =>
        PostgresLedger.open(server.url, 'store-checked', first.session.id),
      ),
    );
    const seen: number[] = [];
    const labelFree = async (entries: readonly LedgerEntry[]) => {
      seen.push(entries.length);
      // Slow checks widen the window another writer would slip through without the lock.
      await new Promise((resolve) => setTimeout(resolve, 20));
      if (entries.some((entry) => entry.body.label === 'once')) {
        throw new RewindError('CHECKPOINT_EXISTS', 'taken');
      }
    };
    const outcomes = await Promise.allSettled(
      writers.map((writer) =>
        writer.append('checkpoint-created', { label: 'once' }, [], labelFree),
      ),
    );
    expect(outcomes.filter((outcome) => outcome.status === 'fulfilled')).toHaveLength(1);
    for (const outcome of outcomes.filter((outcome) => outcome.status === 'rejected')) {
      expect(outcome.reason).toMatchObject({ code: 'CHECKPOINT_EXISTS' });
    }
    // Each check saw every entry committed before it: the first one, then that and the label.
    expect(seen.sort()).toEqual([1, 2, 2, 2, 2, 2]);
    const { entries } = await first.read();
    expect(entries.map((entry) => entry.kind)).toEqual(['session-started', 'checkpoint-created']);
    await Promise.all([first, ...writers].map((ledger) => ledger.close()));
  });

  it('allocates seq without gaps or duplicates for writers in several processes at once', async () => {
    const ledger = await PostgresLedger.create(server.url, 'store-concurrent', { hashChain: true });
    const writers = ['w1', 'w2', 'w3', 'w4'].map((name) =>
      runNode(
        [
          join(ROOT, 'test/helpers/postgres-writer.mjs'),
          server.url,
          'store-concurrent',
          ledger.session.id,
          '25',
          name,
        ],
        { cwd: ROOT },
      ),
    );
    // This process writes meanwhile too.
    for (let index = 0; index < 10; index++)
      await ledger.append('note-added', { text: `main ${index}` });
    const results = await Promise.all(writers);
    for (const result of results) expect(result.stderr).toBe('');
    const { entries } = await ledger.read();
    expect(entries.map((entry) => entry.seq)).toEqual(
      Array.from({ length: 111 }, (_, index) => index + 1),
    );
    const texts = entries.slice(1).map((entry) => entry.body.text);
    expect(new Set(texts).size).toBe(110);
    expect(checkLedger({ entries, damagedLastLine: undefined }, true)).toEqual([]);
    await ledger.close();
  }, 60_000);

  it('goes on after the server restarts mid-session, with nothing lost or doubled', async () => {
    const ledger = await PostgresLedger.create(server.url, 'store-restart');
    await ledger.append('note-added', { text: 'before' });
    server.restart();
    // The pool's connections died with the server: the next append opens a new one.
    await ledger.append('note-added', { text: 'after' });
    const reader = await PostgresLedger.open(server.url, 'store-restart', ledger.session.id);
    expect((await reader.read()).entries.map((entry) => entry.body.text ?? entry.kind)).toEqual([
      'session-started',
      'before',
      'after',
    ]);
    await reader.close();
    await ledger.close();
  }, 60_000);

  it('never applies an append twice when its COMMIT answer is lost and another writer appended since', async () => {
    const created = await PostgresLedger.create(server.url, 'store-lost-answer');
    const other = await PostgresLedger.open(server.url, 'store-lost-answer', created.session.id);
    // A proxy that, once armed, lets a COMMIT through, withholds its answer, lets the other
    // writer append, then drops the connection: the append committed but was not told so.
    const target = new URL(server.url);
    let armed = false;
    const proxy = createNetServer((client) => {
      const upstream = connect(Number(target.port), target.hostname);
      let withheld = false;
      client.on('data', (chunk) => {
        upstream.write(chunk);
        if (armed && chunk.includes('COMMIT')) {
          armed = false;
          withheld = true;
          upstream.once('data', async () => {
            await other.append('note-added', { text: 'other' });
            client.destroy();
            upstream.destroy();
          });
        }
      });
      upstream.on('data', (chunk) => {
        if (!withheld) client.write(chunk);
      });
      for (const socket of [client, upstream]) socket.on('error', () => {});
      client.on('close', () => upstream.destroy());
      upstream.on('close', () => client.destroy());
    });
    await new Promise<void>((resolve) => proxy.listen(0, '127.0.0.1', resolve));
    try {
      const proxied = new URL(server.url);
      proxied.host = `127.0.0.1:${(proxy.address() as AddressInfo).port}`;
      const ledger = await PostgresLedger.open(
        proxied.toString(),
        'store-lost-answer',
        created.session.id,
      );
      armed = true;
      const entry = await ledger.append('note-added', { text: 'mine' });
      expect(armed).toBe(false);
      expect(entry.seq).toBe(2);
      await ledger.close();
    } finally {
      proxy.close();
    }
    const { entries } = await other.read();
    expect(entries.map((entry) => entry.body.text ?? entry.kind)).toEqual([
      'session-started',
      'mine',
      'other',
    ]);
    await other.close();
    await created.close();
  }, 60_000);

  it('refuses bad credentials with a clear error, and records nothing', async () => {
    await expect(
      PostgresLedger.create(server.wrongPasswordUrl, 'store-refused'),
    ).rejects.toMatchObject({
      code: 'IO_FAILED',
      message: expect.stringMatching(/refused the credentials/),
    });
    await expect(migratePostgres(server.wrongPasswordUrl)).rejects.toMatchObject({
      code: 'IO_FAILED',
      message: expect.not.stringContaining('wrong@'),
    });
    const { entries } = await (async () => {
      try {
        return await (await PostgresLedger.open(server.url, 'store-refused', 'none')).read();
      } catch {
        return { entries: [] };
      }
    })();
    expect(entries).toEqual([]);
  });
});
