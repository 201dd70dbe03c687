// A workspace whose sessions keep their ledgers in PostgreSQL (Debian's, started here).
import { readdir, readFile, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { init, log, openSession, status, verify } from '../../src/session/index.js';
import { type PostgresServer, startPostgres } from '../helpers/postgres.js';
import { ROOT, runNode } from '../helpers/processes.js';
import { makeTempDirectory } from '../helpers/temp.js';

let server: PostgresServer;

beforeAll(async () => {
  server = await startPostgres({ durable: false });
}, 60_000);
afterAll(async () => {
  await server?.stop();
});

describe('a store whose ledgers are in PostgreSQL', () => {
  it('journals, checkpoints, undoes and rolls back with every entry in the database', async () => {
    const workspace = await makeTempDirectory();
    await writeFile(join(workspace, 'a.txt'), 'one\n');
    const made = await init({ workspace, ledger: server.url, hashChain: true });
    const config = JSON.parse(await readFile(join(workspace, '.rewind', 'config.json'), 'utf8'));
    expect(config).toMatchObject({ ledger: server.url, store: expect.any(String) });
    expect(made.session.file).toContain(`#${config.store}/${made.session.id}`);
    // Nothing under sessions/: the ledger is the database's.
    expect(await readdir(join(workspace, '.rewind', 'sessions'))).toEqual([]);

    const session = await openSession({ workspace });
    await session.checkpoint('start');
    const written = await session.write('a.txt', 'two\n');
    await session.undo(written.id);
    expect(await readFile(join(workspace, 'a.txt'), 'utf8')).toBe('one\n');
    await session.write('b.txt', 'new\n');
    await session.rollback('start');
    await session.close();
    expect(await readdir(workspace)).not.toContain('b.txt');

    const kinds = (await log({ workspace })).entries.map((line) => line.kind);
    expect(kinds).toEqual(
      expect.arrayContaining(['session-started', 'checkpoint-created', 'undo-completed']),
    );
    const report = await verify({ workspace });
    expect(report.problems).toEqual([]);
    expect(report.sessions[0]).toMatchObject({ isHashChained: true });
  });

  it('takes entries from several processes at once, and keeps each store apart', async () => {
    const workspace = await makeTempDirectory();
    const bin = join(ROOT, 'bin', 'rewind.js');
    expect((await runNode([bin, 'init', '--ledger', server.url], { cwd: workspace })).code).toBe(0);
    const notes = await Promise.all(
      [1, 2, 3, 4].map((writer) =>
        runNode([bin, 'note', `from writer ${writer}`], { cwd: workspace }),
      ),
    );
    for (const note of notes) expect(note.stderr).toBe('');
    const { entries } = await log({ workspace });
    expect(entries.map((line) => line.seq)).toEqual([1, 2, 3, 4, 5]);
    expect((await verify({ workspace })).problems).toEqual([]);

    // Another workspace on the same database: its own store, its own sessions.
    const other = await makeTempDirectory();
    await init({ workspace: other, ledger: server.url });
    expect((await status({ workspace: other })).sessions).toHaveLength(1);
    expect((await log({ workspace: other })).entries).toHaveLength(1);
    expect((await status({ workspace })).sessions).toHaveLength(1);

    // A store's ledgers never move.
    const moved = await runNode([bin, 'init', '--ledger', `${server.url}2`], { cwd: workspace });
    expect(moved.code).toBe(1);
    expect(moved.stderr).toContain('cannot move them');
  });

  it('says plainly when the database refuses the credentials, and makes no store', async () => {
    const workspace = await makeTempDirectory();
    await expect(init({ workspace, ledger: server.wrongPasswordUrl })).rejects.toMatchObject({
      code: 'IO_FAILED',
      message: expect.stringContaining('refused the credentials'),
    });
    expect(await readdir(workspace)).toEqual([]);
  });
});
