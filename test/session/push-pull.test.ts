// Copying sessions between local stores and the shared backends (`rewind push`, `rewind pull`),
// against PostgreSQL from Debian's package and s3rver, both started here.
import { randomBytes } from 'node:crypto';
import { mkdir, readdir, readFile, rename, rm, utimes, writeFile } from 'node:fs/promises';
import { hostname } from 'node:os';
import { basename, join } from 'node:path';
import pg from 'pg';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import {
  encodeEntry,
  type LedgerEntry,
  listSessions,
  postgresLedgers,
  readLedgerFile,
} from '../../src/ledger/index.js';
import type { Digest } from '../../src/lib/index.js';
import {
  findSharedSessions,
  init,
  openSession,
  pullSession,
  pushSession,
  startIsolatedSession,
  verify,
} from '../../src/session/index.js';
import {
  createObjectStore,
  createS3ObjectStore,
  initStore,
  openObjectStore,
  openStore,
  parseS3Url,
  walkReferences,
} from '../../src/store/index.js';
import { type PostgresServer, startPostgres } from '../helpers/postgres.js';
import { ROOT, runNode } from '../helpers/processes.js';
import { type S3Server, startS3Server } from '../helpers/s3.js';
import { readState, type State } from '../helpers/state.js';
import { makeTempDirectory } from '../helpers/temp.js';
import { listAll, random } from '../helpers/trees.js';
import { lay } from '../helpers/workspace.js';

let database: PostgresServer;
let s3: S3Server;
let objects: string;
const saved = { ...process.env };
const bin = join(ROOT, 'bin', 'rewind.cjs');

beforeAll(async () => {
  [database, s3] = await Promise.all([startPostgres({ durable: false }), startS3Server()]);
  // The SDK's standard way: an endpoint, a region and credentials from the environment.
  Object.assign(process.env, s3.environment);
  objects = `s3://${s3.bucket}/shared`;
}, 60_000);
afterAll(async () => {
  process.env = saved;
  await Promise.all([database?.stop(), s3?.close()]);
});

const backends = () => ({ ledger: database.url, objects });

/** The entries of the local session `id` of `workspace`, as their lines. */
async function localLines(workspace: string, id: string): Promise<string[]> {
  const { directory } = await openStore(workspace);
  const session = (await listSessions(directory)).find((listed) => listed.id === id);
  if (!session) return [];
  return (await readLedgerFile(session.file)).entries.map((entry) => encodeEntry(entry));
}

/** The entries of session `id` in the database, as their lines. */
async function sharedLines(store: string, id: string): Promise<string[]> {
  const ledgers = postgresLedgers(database.url, store);
  const session = (await ledgers.list()).find((listed) => listed.id === id);
  if (!session) return [];
  return (await ledgers.read(session)).entries.map((entry) => encodeEntry(entry));
}

/** Every object the entries of `workspace`'s session reach, read from its own store. */
async function reachable(workspace: string, entries: readonly LedgerEntry[]): Promise<Set<Digest>> {
  const store = openObjectStore(await openStore(workspace));
  const found = new Set<Digest>();
  await walkReferences(
    store,
    entries.flatMap((entry) => entry.refs ?? []),
    (reference) => {
      found.add(reference.digest);
    },
    (reference, error) => {
      throw new Error(`tree ${reference.digest} unreadable: ${String(error)}`);
    },
  );
  return found;
}

/** Expects the bucket to hold every object the session of `workspace` reaches: the slow, obvious check. */
async function expectBucketHoldsAll(workspace: string, id: string): Promise<void> {
  const { directory } = await openStore(workspace);
  const session = (await listSessions(directory)).find((listed) => listed.id === id);
  const { entries } = await readLedgerFile(session?.file ?? '');
  const { directory: scratch } = await initStore(await makeTempDirectory());
  const bucket = createS3ObjectStore({ ...parseS3Url(objects), cache: createObjectStore(scratch) });
  const inBucket = new Set<Digest>();
  for await (const object of bucket.list()) inBucket.add(object.digest);
  const missing = [...(await reachable(workspace, entries))].filter(
    (digest) => !inBucket.has(digest),
  );
  expect(missing).toEqual([]);
}

/** The workspace's files, `.rewind` left out. */
const filesOf = (workspace: string): Promise<State> => readState(workspace);

describe('rewind push and rewind pull', () => {
  it('pushes a session, then only what was added, and pulls it whole on another machine', async () => {
    const first = await makeTempDirectory();
    const layout: Record<string, string> = { 'README.md': 'hello\n', '.gitignore': 'dist/\n' };
    for (let index = 0; index < 40; index++) {
      layout[`src/module-${index}.ts`] = `export const n${index} = ${index};\n`;
    }
    await lay(first, layout);
    await writeFile(join(first, 'assets.bin'), randomBytes(3 * 1024 * 1024));
    await init({ workspace: first, hashChain: true });
    const session = await openSession({ workspace: first });
    await session.checkpoint('one');
    await session.write('src/module-1.ts', 'export const n1 = 100;\n');
    await session.checkpoint('two');
    await session.close();

    const pushed = await pushSession({ workspace: first, ...backends() });
    const lines = await localLines(first, session.id);
    expect(pushed).toMatchObject({ session: session.id, appended: lines.length, ahead: 0 });
    // Every file's content, the trees, the pre-image: more than the 42 files.
    expect(pushed.objects.objects).toBeGreaterThan(42);
    expect(pushed.objects.bytes).toBeGreaterThan(3 * 1024 * 1024);
    expect(await sharedLines(pushed.store, session.id)).toEqual(lines);
    await expectBucketHoldsAll(first, session.id);

    // Again: nothing to send.
    expect(await pushSession({ workspace: first, ...backends() })).toMatchObject({
      appended: 0,
      ahead: 0,
      objects: { objects: 0, bytes: 0 },
    });

    // A new file and a checkpoint: its content and the trees on its path, not the workspace.
    const more = await openSession({ workspace: first });
    await more.write('src/new.ts', 'export const fresh = true;\n');
    await more.checkpoint('three');
    await more.close();
    const again = await pushSession({ workspace: first, ...backends() });
    expect(again.appended).toBe((await localLines(first, session.id)).length - lines.length);
    expect(again.objects.objects).toBeGreaterThan(0);
    expect(again.objects.objects).toBeLessThanOrEqual(4);
    await expectBucketHoldsAll(first, session.id);

    // Another machine: a directory with nothing in it, the session's id prefix.
    const second = await makeTempDirectory();
    const pulled = await pullSession({
      workspace: second,
      session: session.id.slice(0, 6),
      ...backends(),
    });
    expect(pulled).toMatchObject({ session: session.id, isCurrent: true, ahead: 0 });
    expect(pulled.objects.objects).toBe(pushed.objects.objects + again.objects.objects);
    expect(await localLines(second, session.id)).toEqual(await localLines(first, session.id));
    // Its files are left alone; every object is here, whole.
    expect(await readdir(second)).toEqual(['.rewind']);
    const checked = await verify({ workspace: second });
    expect(checked.problems).toEqual([]);
    expect(checked.sessions[0]).toMatchObject({ id: session.id, isHashChained: true });
    const there = await openSession({ workspace: second });
    await there.rollback('latest');
    await there.close();
    expect(await filesOf(second)).toEqual(await filesOf(first));
    // Pulled again: nothing to fetch; the rollback made here is this copy's own.
    const ownEntries =
      (await localLines(second, session.id)).length -
      (await sharedLines(pushed.store, session.id)).length;
    expect(ownEntries).toBeGreaterThan(0);
    expect(
      await pullSession({ workspace: second, session: session.id, ...backends() }),
    ).toMatchObject({
      appended: 0,
      ahead: ownEntries,
      objects: { objects: 0 },
    });
  }, 60_000);

  it('hands a session back and forth, says which copy is ahead, and refuses copies that went apart', async () => {
    const first = await makeTempDirectory();
    await lay(first, { 'app.ts': 'v1\n' });
    await init({ workspace: first });
    const session = await openSession({ workspace: first });
    await session.checkpoint('start');
    await session.close();
    const { store } = await pushSession({ workspace: first, ...backends() });

    // The second machine takes over, through the command.
    const second = await makeTempDirectory();
    const pulled = await runNode(
      [bin, '--json', 'pull', session.id, '--ledger', database.url, '--objects', objects],
      { cwd: second, env: process.env },
    );
    expect(pulled.stderr).toBe('');
    expect(JSON.parse(pulled.stdout)).toMatchObject({
      session: session.id,
      store,
      isCurrent: true,
    });
    const there = await openSession({ workspace: second });
    await there.rollback('start');
    await there.write('app.ts', 'v2 from the second machine\n');
    await there.checkpoint('second');
    await there.close();
    const sent = await runNode([bin, 'push'], {
      cwd: second,
      env: { ...process.env, REWIND_LEDGER: database.url, REWIND_OBJECTS: objects },
    });
    expect(sent.stderr).toBe('');
    expect(sent.stdout).toContain(`Pushed session ${session.id} to store ${store}`);

    // Found in the shared ledgers by its id's start, or by where it started (case ignored).
    const entryCount = (await sharedLines(store, session.id)).length;
    expect(
      await findSharedSessions({ ledger: database.url, query: session.id.slice(0, 5) }),
    ).toEqual([
      expect.objectContaining({
        id: session.id,
        store,
        host: hostname(),
        workspace: first,
        entryCount,
      }),
    ]);
    const byPath = await findSharedSessions({
      ledger: database.url,
      query: basename(first).toUpperCase(),
    });
    expect(byPath.map((found) => found.id)).toEqual([session.id]);
    const listed = await runNode(
      [bin, '--json', 'session', 'find', '--ledger', database.url, '--last', '500'],
      { cwd: second, env: process.env },
    );
    expect(listed.stderr).toBe('');
    const { sessions } = JSON.parse(listed.stdout) as {
      sessions: { id: string; lastAt: string }[];
    };
    expect(sessions.map((found) => found.id)).toContain(session.id);
    // Most recently written first.
    const times = sessions.map((found) => found.lastAt);
    expect(times).toEqual([...times].sort().reverse());
    const shown = await runNode([bin, 'session', 'find', session.id, '--ledger', database.url], {
      cwd: second,
    });
    expect(shown.stdout).toContain(`${session.id}  last written`);
    expect(shown.stdout).toContain(`${entryCount} entries  on ${hostname()}  in ${first}`);

    // The first machine is behind: a push sends nothing and says so; a pull brings it all.
    const added =
      (await sharedLines(store, session.id)).length - (await localLines(first, session.id)).length;
    expect(added).toBeGreaterThan(0);
    const behind = await pushSession({ workspace: first, ...backends() });
    expect(behind).toMatchObject({ appended: 0, ahead: added });
    const caughtUp = await pullSession({ workspace: first, session: session.id, ...backends() });
    expect(caughtUp).toMatchObject({ appended: added, ahead: 0, isCurrent: false });
    expect(await localLines(first, session.id)).toEqual(await sharedLines(store, session.id));
    const back = await openSession({ workspace: first });
    await back.rollback('second');
    await back.close();
    expect(await readFile(join(first, 'app.ts'), 'utf8')).toBe('v2 from the second machine\n');

    // Both go on without the other: whoever pushes first wins, the other is refused.
    const mine = await openSession({ workspace: first });
    await mine.write('app.ts', 'v3 first\n');
    await mine.close();
    const theirs = await openSession({ workspace: second });
    await theirs.write('app.ts', 'v3 second\n');
    await theirs.close();
    expect((await pushSession({ workspace: first, ...backends() })).appended).toBeGreaterThan(0);
    const before = await sharedLines(store, session.id);
    const localBefore = await localLines(second, session.id);
    await expect(pushSession({ workspace: second, ...backends() })).rejects.toMatchObject({
      code: 'SESSION_DIVERGED',
      message: expect.stringContaining('Nothing was copied'),
    });
    await expect(
      pullSession({ workspace: second, session: session.id, ...backends() }),
    ).rejects.toMatchObject({ code: 'SESSION_DIVERGED' });
    expect(await sharedLines(store, session.id)).toEqual(before);
    expect(await localLines(second, session.id)).toEqual(localBefore);
    const refused = await runNode([bin, 'push', '--ledger', database.url, '--objects', objects], {
      cwd: second,
      env: process.env,
    });
    expect(refused.code).toBe(1);
    expect(refused.stderr).toContain('differ from entry');
  }, 60_000);

  it('pushes one session from two processes at once without a duplicate', async () => {
    const workspace = await makeTempDirectory();
    await lay(workspace, { 'a.txt': 'a\n', 'b/c.txt': 'c\n' });
    await init({ workspace });
    const session = await openSession({ workspace });
    for (let index = 0; index < 5; index++) await session.checkpoint(`c${index}`);
    await session.close();
    const runs = await Promise.all(
      [1, 2, 3].map(() =>
        runNode([bin, '--json', 'push', '--ledger', database.url, '--objects', objects], {
          cwd: workspace,
          env: process.env,
        }),
      ),
    );
    for (const run of runs) expect(run.stderr).toBe('');
    const reports = runs.map(
      (run) => JSON.parse(run.stdout) as { appended: number; store: string },
    );
    const lines = await localLines(workspace, session.id);
    // One of them inserted everything; the others found it there.
    expect(reports.map((report) => report.appended).sort()).toEqual([0, 0, lines.length]);
    expect(await sharedLines(reports[0]?.store ?? '', session.id)).toEqual(lines);
  }, 60_000);

  it('refuses what it cannot copy, saying what to do, and writes nothing', async () => {
    // No shared backends named.
    const workspace = await makeTempDirectory();
    await lay(workspace, { 'a.txt': 'a\n' });
    await init({ workspace });
    const environment = { ...process.env };
    delete environment.REWIND_LEDGER;
    delete environment.REWIND_OBJECTS;
    const bare = await runNode([bin, 'push'], { cwd: workspace, env: environment });
    expect(bare.code).toBe(1);
    expect(bare.stderr).toContain('--ledger postgres://USER@HOST/DB (or REWIND_LEDGER)');

    // A store whose ledgers are in the database already.
    const shared = await makeTempDirectory();
    await init({ workspace: shared, ledger: database.url });
    await expect(pushSession({ workspace: shared, ...backends() })).rejects.toMatchObject({
      code: 'INVALID_ARGUMENT',
      message: expect.stringContaining('already'),
    });

    // An isolated session goes up (for the record) but does not come down: its view stays.
    const isolated = await startIsolatedSession({ workspace });
    const id = isolated.id;
    await isolated.close();
    await pushSession({ workspace, session: id, ...backends() });
    const elsewhere = await makeTempDirectory();
    await expect(
      pullSession({ workspace: elsewhere, session: id, ...backends() }),
    ).rejects.toMatchObject({
      code: 'INVALID_ARGUMENT',
      message: expect.stringContaining('isolated'),
    });
    expect(await readdir(elsewhere)).toEqual([]);

    // An object gone from the bucket: the pull stops before writing the session's entries.
    const gone = await makeTempDirectory();
    await lay(gone, { 'only.txt': `only here ${Date.now()}\n` });
    await init({ workspace: gone });
    const session = await openSession({ workspace: gone });
    await session.checkpoint('one');
    await session.close();
    await pushSession({ workspace: gone, ...backends() });
    const { directory: scratch } = await initStore(await makeTempDirectory());
    const bucket = createS3ObjectStore({
      ...parseS3Url(objects),
      cache: createObjectStore(scratch),
    });
    const content = await readFile(join(gone, 'only.txt'));
    const { digest } = await createObjectStore(scratch).put(content);
    await bucket.remove([digest]);
    const third = await makeTempDirectory();
    await expect(
      pullSession({ workspace: third, session: session.id, ...backends() }),
    ).rejects.toMatchObject({ code: 'OBJECT_NOT_FOUND' });
    expect(await localLines(third, session.id)).toEqual([]);
  }, 60_000);

  it('leaves the shared ledger as it was when the bucket cannot be reached', async () => {
    const own = await startS3Server('unreachable');
    const bucketUrl = `s3://${own.bucket}/x`;
    const workspace = await makeTempDirectory();
    await lay(workspace, { 'a.txt': 'a\n' });
    await init({ workspace });
    const session = await openSession({ workspace });
    await session.checkpoint('one');
    await session.close();
    const saved = { ...process.env };
    Object.assign(process.env, own.environment);
    try {
      await own.close();
      await expect(
        pushSession({ workspace, ledger: database.url, objects: bucketUrl }),
      ).rejects.toMatchObject({ code: 'IO_FAILED' });
    } finally {
      process.env = saved;
    }
    const client = new pg.Client(database.url);
    await client.connect();
    try {
      const { rows } = await client.query(
        'SELECT count(*)::int AS n FROM rewind_sessions WHERE session = $1',
        [session.id],
      );
      expect(rows[0]).toEqual({ n: 0 });
    } finally {
      await client.end();
    }
  }, 60_000);

  it('randomized hand-offs between two machines: each push leaves the bucket whole, each pull restores what was pushed', async () => {
    const seed = Number(process.env.REWIND_PUSH_SEED ?? Date.now() % 1_000_000);
    const next = random(seed);
    const pick = <T>(items: readonly T[]): T => items[Math.floor(next() * items.length)] as T;
    const machines = [await makeTempDirectory(), await makeTempDirectory()];
    const [first] = machines as [string, string];
    await lay(first, {
      'src/a/one.ts': 'one\n',
      'src/a/two.ts': 'two\n',
      'src/b/three.ts': 'three\n',
      'docs/readme.md': 'docs\n',
    });
    await init({ workspace: first });
    const id = (await openSession({ workspace: first }).then(async (opened) => {
      await opened.close();
      return opened.id;
    })) as string;
    /** What each checkpoint held, by label, as the machine that took it saw its files. */
    const held = new Map<string, State>();
    let owner = 0;
    let label = 0;
    for (let round = 0; round < 10; round++) {
      const workspace = machines[owner] as string;
      const session = await openSession({ workspace, session: id });
      try {
        for (let step = 0, steps = 1 + Math.floor(next() * 4); step < steps; step++) {
          const { files, dirs: directories } = await listAll(workspace);
          const kind = pick(['write', 'edit', 'delete', 'rename-dir', 'swap-dirs', 'move-in']);
          const file = files.length > 0 ? pick(files) : undefined;
          if (kind === 'write') {
            await session.write(
              `src/${pick(['a', 'b', 'c'])}/f${Math.floor(next() * 50)}.ts`,
              `${next()}\n`,
            );
          } else if (kind === 'edit' && file) {
            await writeFile(join(workspace, file), `edited ${next()}\n`);
          } else if (kind === 'delete' && file) {
            await rm(join(workspace, file));
          } else if (kind === 'rename-dir' && directories.length > 0) {
            const directory = pick(directories);
            await rename(
              join(workspace, directory),
              join(workspace, `${directory}-${round}`),
            ).catch(() => {});
          } else if (kind === 'swap-dirs' && directories.length > 1) {
            const [one, two] = [pick(directories), pick(directories)];
            if (one !== two && !one.startsWith(`${two}/`) && !two.startsWith(`${one}/`)) {
              await rename(join(workspace, one), join(workspace, `${one}.swap`));
              await rename(join(workspace, two), join(workspace, one));
              await rename(join(workspace, `${one}.swap`), join(workspace, two));
            }
          } else {
            // A tree moved in from elsewhere, its files old.
            const outside = await makeTempDirectory();
            await lay(outside, { 'x.ts': `moved ${next()}\n`, 'deep/y.ts': 'y\n' });
            const old = new Date('2020-01-01T00:00:00Z');
            for (const path of ['x.ts', 'deep/y.ts', 'deep'])
              await utimes(join(outside, path), old, old);
            await rename(outside, join(workspace, `moved-${round}`)).catch(async () => {
              await mkdir(join(workspace, `moved-${round}`), { recursive: true });
            });
          }
        }
        const name = `r${label++}`;
        await session.checkpoint(name);
        held.set(name, await filesOf(workspace));
      } finally {
        await session.close();
      }
      await pushSession({ workspace, session: id, ...backends() });
      await expectBucketHoldsAll(workspace, id);

      // The other machine takes over at that checkpoint.
      owner = 1 - owner;
      const taker = machines[owner] as string;
      await pullSession({ workspace: taker, session: id, ...backends() });
      expect((await verify({ workspace: taker })).problems, `seed ${seed}`).toEqual([]);
      const resumed = await openSession({ workspace: taker, session: id });
      const target = pick([...held.keys()]);
      await resumed.rollback(target);
      await resumed.close();
      expect(await filesOf(taker), `seed ${seed}, round ${round}, ${target}`).toEqual(
        held.get(target),
      );
      // The rollback is the taker's: it is pushed with its next round, or now.
      await pushSession({ workspace: taker, session: id, ...backends() });
      const [, other] = owner === 0 ? [taker, machines[1]] : [taker, machines[0]];
      await pullSession({ workspace: other as string, session: id, ...backends() });
      expect(await localLines(other as string, id)).toEqual(await localLines(taker, id));
    }
  }, 120_000);
});
