// A workspace whose sessions keep their ledgers in PostgreSQL (Debian's, started here).
import { mkdir, readdir, readFile, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import {
  attachShared,
  init,
  log,
  note,
  openSession,
  status,
  verify,
} from '../../src/session/index.js';
import { startUi } from '../../src/ui/server.js';
import { type PostgresServer, startPostgres } from '../helpers/postgres.js';
import { ROOT, runNode } from '../helpers/processes.js';
import { startS3Server } from '../helpers/s3.js';
import { rollbackKilledAfter } from '../helpers/session.js';
import { readState, without } from '../helpers/state.js';
import { makeTempDirectory } from '../helpers/temp.js';
import { lay } from '../helpers/workspace.js';

let server: PostgresServer;
/** What the page reads from /api/read/log. */
type Logged = { output: { entries: { kind: string }[] } };

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
    const bin = join(ROOT, 'bin', 'rewind.cjs');
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

  it('resumes a session on another machine: its last checkpoint restored from the bucket', async () => {
    const s3 = await startS3Server();
    const saved = { ...process.env };
    Object.assign(process.env, s3.environment);
    try {
      const objects = `s3://${s3.bucket}/team`;
      const first = await makeTempDirectory();
      await lay(first, { 'src/app.ts': 'export const v = 1;\n', 'README.md': 'hi\n' });
      await init({ workspace: first, ledger: server.url, objects });
      const session = await openSession({ workspace: first });
      await session.checkpoint('handoff');
      await session.close();

      // The other machine: an empty directory, the session's id, the shared backends.
      const second = await makeTempDirectory();
      const bin = join(ROOT, 'bin', 'rewind.cjs');
      const attached = await runNode(
        [bin, 'attach', session.id, '--ledger', server.url, '--objects', objects],
        { cwd: second, env: process.env },
      );
      expect(attached.stderr).toBe('');
      expect(attached.stdout).toContain('checkpoint handoff restored');
      expect(await readFile(join(second, 'src/app.ts'), 'utf8')).toBe('export const v = 1;\n');
      const there = await openSession({ workspace: second });
      await there.write('src/app.ts', 'export const v = 2;\n');
      await there.close();
      // The first machine sees what the second did, in the one ledger.
      const kinds = (await log({ workspace: first })).entries.map((line) => line.kind);
      expect(kinds).toEqual(expect.arrayContaining(['rollback-completed', 'action-completed']));
      expect((await verify({ workspace: first })).problems).toEqual([]);
      // --json: one document, naming the session and the checkpoint restored.
      const third = await makeTempDirectory();
      const document = await runNode(
        [bin, '--json', 'attach', session.id, '--ledger', server.url, '--objects', objects],
        { cwd: third, env: process.env },
      );
      expect(JSON.parse(document.stdout)).toMatchObject({
        session: session.id,
        checkpoint: 'handoff',
        workspace: third,
      });
      // Into a directory that is not empty: refused, nothing changed.
      const refused = await runNode(
        [bin, 'attach', session.id, '--ledger', server.url, '--objects', objects],
        { cwd: first, env: process.env },
      );
      expect(refused.code).toBe(1);
      expect(refused.stderr).toContain('already has a Rewind store');
    } finally {
      process.env = saved;
      await s3.close();
    }
  }, 60_000);

  it('serves its timeline in rewind ui, with new entries live, and lets a command exit at once', async () => {
    const workspace = await makeTempDirectory();
    await init({ workspace, ledger: server.url });
    const ui = await startUi({ workspace, assets: join(ROOT, 'dist/ui-assets'), pollMs: 100 });
    const base = ui.url.slice(0, ui.url.indexOf('/?'));
    const headers = { authorization: `Bearer ${ui.endpoint.token}` };
    const stream = new AbortController();
    try {
      const logged = (await (await fetch(`${base}/api/read/log`, { headers })).json()) as Logged;
      expect(logged.output.entries.map((line) => line.kind)).toEqual(['session-started']);
      const events = await fetch(`${base}/api/events`, { headers, signal: stream.signal });
      const reader = (events.body as ReadableStream<Uint8Array>).getReader();
      const decoder = new TextDecoder();
      let seen = '';
      const nextEvent = async () => {
        const count = seen.split('event: ledger').length;
        while (seen.split('event: ledger').length === count) {
          const { value, done } = await reader.read();
          if (done) throw new Error('the event stream ended');
          seen += decoder.decode(value);
        }
      };
      await nextEvent();
      await note({ workspace, text: 'written while the page watches' });
      await nextEvent();
      const after = (await (await fetch(`${base}/api/read/log`, { headers })).json()) as Logged;
      expect(after.output.entries.map((line) => line.kind)).toEqual([
        'session-started',
        'note-added',
      ]);
    } finally {
      stream.abort();
      await ui.close();
    }
    // The connection pool lingers for the next use, but never keeps a command from exiting.
    const started = Date.now();
    const logged = await runNode([join(ROOT, 'bin', 'rewind.cjs'), 'log'], { cwd: workspace });
    expect(logged.stdout).toContain('written while the page watches');
    expect(Date.now() - started).toBeLessThan(4_000);
  });

  it("leaves a copy's interrupted rollback to that copy: another machine's commands do not finish it", async () => {
    const s3 = await startS3Server();
    const saved = { ...process.env };
    Object.assign(process.env, s3.environment);
    try {
      const objects = `s3://${s3.bucket}/copies`;
      const first = await makeTempDirectory();
      const layout: Record<string, string> = {};
      for (let index = 0; index < 120; index++)
        layout[`d${index % 6}/f${index}.txt`] = `base ${index}\n`;
      await lay(first, layout);
      await init({ workspace: first, ledger: server.url, objects });
      const session = await openSession({ workspace: first });
      await session.checkpoint('base');
      await session.close();
      for (let index = 0; index < 120; index++) {
        await writeFile(join(first, `d${index % 6}/f${index}.txt`), `edited ${index}\n`);
      }
      const second = await makeTempDirectory();
      await attachShared({ workspace: second, session: session.id, ledger: server.url, objects });
      const secondBefore = await readState(second);

      // The first machine's rollback is killed midway: its files are half base, half edited.
      const run = await rollbackKilledAfter(first, 'base', 40);
      expect(run.signal).toBe('SIGKILL');
      const intent = (await log({ workspace: first })).entries.at(-1);
      expect(intent?.kind).toBe('rollback-started');
      const torn = await readState(first);

      // Each copy says what it has pending: the first its rollback, the second nothing.
      expect((await log({ workspace: first })).session.interrupted).toMatchObject({
        id: intent?.seq,
        kind: 'rollback',
      });
      expect((await log({ workspace: second })).session.interrupted).toBeUndefined();

      // The second machine works on: its commands leave the first one's rollback open.
      const there = await openSession({ workspace: second });
      await there.write('notes.txt', 'from the second machine\n');
      await there.close();
      expect(await readState(first)).toEqual(torn);
      expect(without(await readState(second), (path) => path === 'notes.txt')).toEqual(
        secondBefore,
      );
      const closings = (await log({ workspace: second })).entries.filter(
        (line) => line.kind === 'rollback-completed' && line.entry.body.startedSeq === intent?.seq,
      );
      expect(closings).toEqual([]);

      // The first machine's next command finishes it there.
      const back = await openSession({ workspace: first });
      await back.close();
      expect(await readState(first)).toEqual(secondBefore);
      const finished = (await log({ workspace: first })).entries.find(
        (line) => line.kind === 'rollback-completed' && line.entry.body.startedSeq === intent?.seq,
      );
      expect(finished?.entry.body).toMatchObject({ isRecovery: true });
    } finally {
      process.env = saved;
      await s3.close();
    }
  }, 60_000);

  it('takes the database from a .rewind/config.json written by hand', async () => {
    const workspace = await makeTempDirectory();
    await mkdir(join(workspace, '.rewind'));
    await writeFile(
      join(workspace, '.rewind', 'config.json'),
      JSON.stringify({ ledger: server.url, store: 'written-by-hand' }),
    );
    const made = await init({ workspace });
    expect(made.session.file).toContain('#written-by-hand/');
    expect(await readdir(join(workspace, '.rewind', 'sessions'))).toEqual([]);
    await note({ workspace, text: 'into the database' });
    expect((await log({ workspace })).entries.map((line) => line.kind)).toEqual([
      'session-started',
      'note-added',
    ]);
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
