import { execFile } from 'node:child_process';
import {
  chmod,
  cp,
  lstat,
  mkdir,
  readdir,
  readFile,
  rm,
  symlink,
  writeFile,
} from 'node:fs/promises';
import { dirname, join } from 'node:path';
import { promisify } from 'node:util';
import fc from 'fast-check';
import { beforeAll, describe, expect, it } from 'vitest';
import { gc, log, note, openSession, status, verify } from '../../src/session/index.js';
import {
  expectDocumentedFailure,
  FIXTURE_STORE,
  mutated,
  outcomeOf,
  RUNS,
  randomBytes,
  readFixtureFiles,
  trickyString,
  withinBound,
} from '../helpers/fuzz.js';
import { makeTempDirectory } from '../helpers/temp.js';

/**
 * The golden store of SPEC.md (test/fixtures/v1-workspace), damaged one file at a time in every
 * way a disk, a crash or a careless hand damages a store, then read by every entry point that
 * reads a whole store: each answers, or refuses with a documented RewindError, within a bound.
 */

const execFileAsync = promisify(execFile);

/** Link targets that name the stand-in for what is not Rewind's, beside the workspace. */
const ELSEWHERE = '<elsewhere>';
const ELSEWHERE_FILE = '<elsewhere>/target';

/** A link target, with the stand-in's place filled in. */
const targetOf = (store: string, target: string): string =>
  target.replace('<elsewhere>', join(store, '..', '..', 'elsewhere'));

/** Every file of the golden store, by its path under `.rewind`. */
let fixture = new Map<string, Buffer>();
let paths: string[] = [];

beforeAll(async () => {
  fixture = await readFixtureFiles();
  paths = [...fixture.keys()].sort();
});

/** One way a store is damaged: a file's bytes, what is at a path, or a file added. */
type Damage =
  | { type: 'bytes'; path: number; bytes: Buffer }
  | { type: 'removed'; path: number }
  | { type: 'directory'; path: number }
  | { type: 'link'; path: number; target: string }
  | { type: 'unreadable'; path: number }
  | { type: 'pipe'; path: number }
  | { type: 'directory-replaced'; directory: string; by: 'file' | 'link' }
  | { type: 'added'; name: string; bytes: Buffer }
  | { type: 'store-is-file'; bytes: Buffer };

/** Names a damaged store may hold that Rewind did not write: odd sessions, objects, currents. */
const addedName = fc.oneof(
  fc.constantFrom(
    'sessions/2026-11-29_extra.jsonl',
    'sessions/2026-11-29_golden0001.lock',
    'sessions/.jsonl',
    'sessions/not-a-session.jsonl',
    'objects/zz/notanobject',
    `objects/ba/${'0'.repeat(62)}`,
    'objects/.put-1-0000000000000000.tmp',
    'cache/snapshot-v1',
    'cache/changes-v3.json',
    'config.json',
    'workspace.lock',
    'drafts/0000.json',
  ),
  trickyString(['sessions', 'objects', 'current']).map(
    // A file name holds neither a slash nor NUL, and fits in 255 bytes.
    (name) => `sessions/${name.replaceAll(/[/\0]/g, '_').slice(0, 40) || '_'}.jsonl`,
  ),
);

const damage: fc.Arbitrary<Damage> = fc.oneof(
  {
    weight: 6,
    arbitrary: fc.record({
      type: fc.constant('bytes' as const),
      path: fc.nat(),
      bytes: fc.oneof(
        { weight: 4, arbitrary: fc.constant(null).chain(() => mutated([...fixture.values()])) },
        { weight: 1, arbitrary: randomBytes() },
        {
          weight: 1,
          // `current` naming another session, a path, or nothing.
          arbitrary: trickyString(['golden0001', 'golden0002', '../../../etc/passwd']).map((text) =>
            Buffer.from(text),
          ),
        },
      ),
    }),
  },
  { weight: 1, arbitrary: fc.record({ type: fc.constant('removed' as const), path: fc.nat() }) },
  { weight: 1, arbitrary: fc.record({ type: fc.constant('directory' as const), path: fc.nat() }) },
  {
    weight: 1,
    arbitrary: fc.record({
      type: fc.constant('link' as const),
      path: fc.nat(),
      // Read through, these would never end, or read what is not Rewind's; written through, they
      // would change what is not Rewind's (ELSEWHERE is checked after each run).
      target: fc.constantFrom('nowhere', '/dev/zero', '.', '../rewind.json', ELSEWHERE_FILE),
    }),
  },
  { weight: 1, arbitrary: fc.record({ type: fc.constant('unreadable' as const), path: fc.nat() }) },
  { weight: 1, arbitrary: fc.record({ type: fc.constant('pipe' as const), path: fc.nat() }) },
  {
    weight: 1,
    arbitrary: fc.record({
      type: fc.constant('directory-replaced' as const),
      directory: fc.constantFrom('objects', 'sessions', 'objects/ba', 'cache', 'drafts'),
      by: fc.constantFrom('file' as const, 'link' as const),
    }),
  },
  {
    weight: 2,
    arbitrary: fc.record({
      type: fc.constant('added' as const),
      name: addedName,
      bytes: fc.oneof(
        fc.constant(null).chain(() => mutated([...fixture.values()])),
        randomBytes(),
      ),
    }),
  },
  {
    weight: 1,
    arbitrary: fc.record({ type: fc.constant('store-is-file' as const), bytes: randomBytes(200) }),
  },
);

/**
 * A copy of the golden workspace (`<temp>/ws`) with `damages` done to its store, beside
 * `<temp>/elsewhere`, where its links point.
 */
async function damagedCopy(damages: readonly Damage[]): Promise<string> {
  const base = await makeTempDirectory('rewind-fuzz-fixture-');
  const workspace = join(base, 'ws');
  await mkdir(join(base, 'elsewhere'));
  await writeFile(join(base, 'elsewhere', 'target'), "not Rewind's\n");
  await cp(dirname(FIXTURE_STORE), workspace, { recursive: true });
  const store = join(workspace, '.rewind');
  // Files first, then what replaces directories: the harness itself never writes through a link.
  const isLast = (change: Damage) =>
    change.type === 'directory-replaced' || change.type === 'store-is-file';
  for (const change of [...damages.filter((c) => !isLast(c)), ...damages.filter(isLast)]) {
    // A damage that cannot be done over an earlier one (its directory is a file now) is left out.
    await damageStore(store, change).catch(() => {});
    if (change.type === 'store-is-file') return workspace;
  }
  return workspace;
}

/** Does one damage to the store at `store`. */
async function damageStore(store: string, change: Damage): Promise<void> {
  if (change.type === 'store-is-file') {
    await rm(store, { recursive: true, force: true });
    await writeFile(store, change.bytes);
    return;
  }
  if (change.type === 'directory-replaced') {
    const directory = join(store, change.directory);
    // Its parent replaced before (`objects` by a link, then `objects/ba`): left as it is, since
    // replacing it would write through that link.
    if (!(await lstat(dirname(directory))).isDirectory()) return;
    await rm(directory, { recursive: true, force: true });
    if (change.by === 'file') await writeFile(directory, 'not a directory');
    else await symlink(targetOf(store, ELSEWHERE), directory);
    return;
  }
  if (change.type === 'added') {
    const file = join(store, change.name);
    await mkdir(dirname(file), { recursive: true });
    await rm(file, { recursive: true, force: true });
    await writeFile(file, change.bytes);
    return;
  }
  const file = join(store, paths[change.path % paths.length] as string);
  await rm(file, { recursive: true, force: true });
  await mkdir(dirname(file), { recursive: true });
  if (change.type === 'bytes') await writeFile(file, change.bytes);
  else if (change.type === 'directory') await mkdir(file);
  else if (change.type === 'link') await symlink(targetOf(store, change.target), file);
  else if (change.type === 'pipe') await execFileAsync('mkfifo', [file]);
  else if (change.type === 'unreadable') {
    await writeFile(file, fixture.get(paths[change.path % paths.length] as string) as Buffer);
    await chmod(file, 0o000);
  }
}

/** The whole-store readers, each given a bound: verify re-hashes every object. */
const READERS: Record<string, (workspace: string) => Promise<unknown>> = {
  status: (workspace) => status({ workspace }),
  log: (workspace) => log({ workspace }),
  'log of golden0002': (workspace) => log({ workspace, session: 'golden0002' }),
  verify: (workspace) => verify({ workspace }),
  'gc --dry-run': (workspace) => gc({ workspace, dryRun: true, lockTimeoutMs: 1_000 }),
  'open, checkpoint, close': async (workspace) => {
    const session = await openSession({ workspace, lockTimeoutMs: 1_000 });
    try {
      return await session.checkpoint('fuzz');
    } finally {
      await session.close();
    }
  },
  note: (workspace) => note({ workspace, text: 'fuzz' }),
};

/** Nothing was written through a link: what the links point to is as it was. */
async function expectNothingElsewhere(workspace: string): Promise<void> {
  const elsewhere = join(workspace, '..', 'elsewhere');
  expect(await readdir(elsewhere)).toEqual(['target']);
  expect(await readFile(join(elsewhere, 'target'), 'utf8')).toBe("not Rewind's\n");
}

describe('fuzzing the golden store of SPEC.md', () => {
  it('damages a store without writing through a link it made there (its own check)', async () => {
    const workspace = await damagedCopy([
      { type: 'directory-replaced', directory: 'objects', by: 'link' },
      { type: 'directory-replaced', directory: 'objects/ba', by: 'file' },
    ]);
    await expectNothingElsewhere(workspace);
  });

  it('every reader of a store answers for the store damaged in any way, or refuses it with a documented error', async () => {
    await fc.assert(
      fc.asyncProperty(
        fc.array(damage, { minLength: 1, maxLength: 3 }),
        fc.constantFrom(...Object.keys(READERS)),
        async (damages, reader) => {
          const workspace = await damagedCopy(damages);
          const read = await outcomeOf(() =>
            withinBound(
              () => (READERS[reader] as (w: string) => Promise<unknown>)(workspace),
              5_000,
            ),
          );
          if (read.isThrown) expectDocumentedFailure(read.error);
          await expectNothingElsewhere(workspace);
          // Whatever happened, verify says what it finds (or refuses the store as a whole).
          const checked = await outcomeOf(() => withinBound(() => verify({ workspace }), 5_000));
          if (checked.isThrown) expectDocumentedFailure(checked.error);
        },
      ),
      { numRuns: RUNS.slow * 2 },
    );
  });

  it('the golden store itself reads, verifies and takes a checkpoint', async () => {
    const workspace = await damagedCopy([]);
    for (const [name, reader] of Object.entries(READERS)) {
      const read = await outcomeOf(() => withinBound(() => reader(workspace), 5_000));
      if (read.isThrown) expect.fail(`${name}: ${String(read.error)}`);
    }
    expect(await readFile(join(workspace, '.rewind', 'current'), 'utf8')).toContain('golden0001');
  });
});

describe('what fuzzing the golden store found', () => {
  const OBJECT = 'objects/db/da41e5491e6961b47646ef1ac31aece9ce46c94f1c2b71686687dbbee071ab';
  const LEDGER = 'sessions/2026-11-29_golden0001.jsonl';
  const storeOf = (workspace: string) => join(workspace, '.rewind');

  it('verify reports an object that is a link to an endless device as damaged, instead of reading it forever', async () => {
    const workspace = await damagedCopy([]);
    await rm(join(storeOf(workspace), OBJECT));
    await symlink('/dev/zero', join(storeOf(workspace), OBJECT));
    const report = await withinBound(() => verify({ workspace }), 5_000);
    expect(report.problems).toEqual([
      expect.objectContaining({
        type: 'object-corrupt',
        message: expect.stringContaining('is a symbolic link, not a file'),
      }),
    ]);
  });

  it('refuses a ledger that is a link to an endless device or a named pipe as LEDGER_CORRUPT, instead of waiting forever', async () => {
    for (const make of ['link', 'pipe'] as const) {
      const workspace = await damagedCopy([]);
      const file = join(storeOf(workspace), LEDGER);
      await rm(file);
      if (make === 'link') await symlink('/dev/zero', file);
      else await execFileAsync('mkfifo', [file]);
      const readers: (() => Promise<unknown>)[] = [
        () => status({ workspace }),
        () => verify({ workspace }),
      ];
      for (const reader of readers) {
        await expect(withinBound(reader, 5_000)).rejects.toMatchObject({
          code: 'LEDGER_CORRUPT',
          message: expect.stringMatching(/is a (symbolic link|named pipe), not a ledger file/),
        });
      }
    }
  });

  it('refuses a current, a rewind.json or a sessions that is not what it should be with a RewindError saying what it is', async () => {
    const current = await damagedCopy([]);
    await rm(join(storeOf(current), 'current'));
    await mkdir(join(storeOf(current), 'current'));
    await expect(note({ workspace: current, text: 'x' })).rejects.toMatchObject({
      code: 'SESSION_NOT_FOUND',
      message: expect.stringContaining(
        'current is a directory, not the file naming the current session',
      ),
    });
    const marker = await damagedCopy([]);
    await rm(join(storeOf(marker), 'rewind.json'));
    await mkdir(join(storeOf(marker), 'rewind.json'));
    await expect(status({ workspace: marker })).rejects.toMatchObject({
      code: 'STORE_NOT_OURS',
      message: expect.stringContaining('its rewind.json is a directory'),
    });
    const sessions = await damagedCopy([]);
    await rm(join(storeOf(sessions), 'sessions'), { recursive: true });
    await writeFile(join(storeOf(sessions), 'sessions'), 'x');
    await expect(status({ workspace: sessions })).rejects.toMatchObject({
      code: 'STORE_NOT_OURS',
      message: expect.stringContaining('sessions is a file, not a directory'),
    });
  });

  it('writes no object through a link where the objects directory or a fan-out directory should be', async () => {
    for (const name of ['objects', 'objects/ba']) {
      const workspace = await damagedCopy([]);
      await writeFile(join(workspace, 'new.txt'), 'new content\n');
      await rm(join(storeOf(workspace), name), { recursive: true });
      await symlink(targetOf(storeOf(workspace), ELSEWHERE), join(storeOf(workspace), name));
      const session = await openSession({ workspace }).catch((error: unknown) => error);
      if (session instanceof Error) {
        expect(session).toMatchObject({ code: 'STORE_NOT_OURS' });
      } else {
        // Within a fan-out link: only objects that would be written through it are refused.
        await expect(
          (session as Awaited<ReturnType<typeof openSession>>).checkpoint('after'),
        ).resolves.toBeDefined();
        await (session as Awaited<ReturnType<typeof openSession>>).close();
      }
      await expectNothingElsewhere(workspace);
    }
  });

  it('refuses a lock whose record no Rewind process wrote at once, instead of waiting out the timeout', async () => {
    const workspace = await damagedCopy([]);
    await writeFile(join(storeOf(workspace), 'sessions', '2026-11-29_golden0001.lock'), 'junk');
    const started = performance.now();
    await expect(note({ workspace, text: 'x' })).rejects.toMatchObject({
      code: 'LOCK_HELD',
      message: expect.stringContaining('holds no record that a Rewind process wrote'),
    });
    expect(performance.now() - started).toBeLessThan(2_000);
  });

  it('takes a checkpoint when the cache directory is a file, putting the directory back', async () => {
    const workspace = await damagedCopy([]);
    await writeFile(join(storeOf(workspace), 'cache'), 'not a directory');
    const session = await openSession({ workspace });
    try {
      await session.checkpoint('after');
    } finally {
      await session.close();
    }
    expect((await verify({ workspace })).isOk).toBe(true);
  });
});
