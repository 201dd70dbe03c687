import { appendFile, chmod, mkdir, readdir, readFile, utimes, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { Ledger, resolveSession } from '../../src/ledger/index.js';
import { acquireLock } from '../../src/lib/index.js';
import {
  gc,
  init,
  log,
  note,
  openSession,
  startIsolatedSession,
  startSession,
  status,
  useSession,
  verify,
} from '../../src/session/index.js';
import { createObjectStore, putTree } from '../../src/store/index.js';
import { makeTempDirectory } from '../helpers/temp.js';

function objectFile(workspace: string, digest: string): string {
  const hex = digest.slice('sha256:'.length);
  return join(workspace, '.rewind', 'objects', hex.slice(0, 2), hex.slice(2));
}

async function age(file: string, hours: number): Promise<void> {
  const then = new Date(Date.now() - hours * 3_600_000);
  await utimes(file, then, then);
}

async function attachment(content: string, name = 'evidence.txt'): Promise<string> {
  const file = join(await makeTempDirectory(), name);
  await writeFile(file, content);
  return file;
}

describe('sessions on one store', () => {
  it('start a new session that becomes current, switch back to an old one, and refuse a destroyed view', async () => {
    const workspace = await makeTempDirectory();
    await init({ workspace, generateId: () => 'first1' });
    const started = await startSession({ workspace, hashChain: true, generateId: () => 'second' });
    expect(started).toMatchObject({ id: 'second', isCurrent: true, isHashChained: true });
    expect((await status({ workspace })).currentSession).toBe('second');
    const background = await startSession({
      workspace,
      makeCurrent: false,
      generateId: () => 'third',
    });
    expect(background.isCurrent).toBe(false);
    expect((await status({ workspace })).currentSession).toBe('second');
    expect(await useSession({ workspace, session: 'first' })).toMatchObject({
      id: 'first1',
      isCurrent: true,
    });
    const session = await openSession({ workspace });
    expect(session.id).toBe('first1');
    await session.close();
    const isolated = await startIsolatedSession({ workspace, generateId: () => 'view1' });
    await isolated.destroy();
    await expect(useSession({ workspace, session: 'view1' })).rejects.toMatchObject({
      code: 'SESSION_NOT_FOUND',
    });
    await expect(useSession({ workspace, session: 'nope' })).rejects.toMatchObject({
      code: 'SESSION_NOT_FOUND',
    });
  });
});

describe('init', () => {
  it('creates the store and a current session, and changes nothing the second time', async () => {
    const workspace = await makeTempDirectory();
    const first = await init({ workspace, hashChain: true, generateId: () => 'first1' });
    expect(first).toMatchObject({
      isNewStore: true,
      isNewSession: true,
      session: { id: 'first1', isHashChained: true },
    });
    const second = await init({ workspace, generateId: () => 'second' });
    expect(second).toMatchObject({
      isNewStore: false,
      isNewSession: false,
      session: { id: 'first1', entryCount: 1 },
    });
    expect(await readdir(join(workspace, '.rewind', 'sessions'))).toHaveLength(1);
  });

  it('starts one session when several start on a new store at once (parallel hook calls)', async () => {
    const workspace = await makeTempDirectory();
    const results = await Promise.all(
      ['one111', 'two222', 'three3', 'four44'].map((id) =>
        init({ workspace, generateId: () => id }),
      ),
    );
    expect(new Set(results.map((result) => result.session.id)).size).toBe(1);
    expect(results.filter((result) => result.isNewSession)).toHaveLength(1);
    expect(await readdir(join(workspace, '.rewind', 'sessions'))).toHaveLength(1);
  });

  it('refuses a home directory, creating nothing there', async () => {
    const home = await makeTempDirectory();
    const saved = process.env.HOME;
    process.env.HOME = home;
    try {
      await expect(init({ workspace: home })).rejects.toMatchObject({ code: 'WORKSPACE_REFUSED' });
    } finally {
      process.env.HOME = saved;
    }
    expect(await readdir(home)).toEqual([]);
  });

  it('refuses a workspace that is a file', async () => {
    const file = join(await makeTempDirectory(), 'file.txt');
    await writeFile(file, 'x');
    await expect(init({ workspace: file })).rejects.toMatchObject({
      code: 'WORKSPACE_INVALID',
      data: { path: file },
    });
  });

  it('refuses a workspace path holding a NUL byte, saying so, and creates nothing', async () => {
    const parent = await makeTempDirectory();
    for (const run of [
      () => init({ workspace: join(parent, 'a\0b') }),
      () => status({ workspace: join(parent, 'a\0b') }),
      () => openSession({ workspace: join(parent, '\0') }),
    ]) {
      await expect(run()).rejects.toMatchObject({
        code: 'WORKSPACE_INVALID',
        message: expect.stringContaining('NUL byte'),
      });
    }
    expect(await readdir(parent)).toEqual([]);
  });

  it('refuses a .rewind/ that is not ours and leaves it untouched', async () => {
    const workspace = await makeTempDirectory();
    await mkdir(join(workspace, '.rewind'));
    await writeFile(join(workspace, '.rewind', 'data.db'), 'someone else');
    await expect(init({ workspace })).rejects.toMatchObject({ code: 'STORE_NOT_OURS' });
    expect(await readdir(join(workspace, '.rewind'))).toEqual(['data.db']);
  });
});

describe('status, log and note', () => {
  it('reports sessions, the current one, entry counts and the store size', async () => {
    const workspace = await makeTempDirectory();
    await init({ workspace, generateId: () => 'sess01' });
    await note({ workspace, text: 'first', attachments: [await attachment('12345')] });
    const report = await status({ workspace });
    expect(report).toMatchObject({
      workspace,
      currentSession: 'sess01',
      sessions: [{ id: 'sess01', entryCount: 2, isCurrent: true, isHashChained: false }],
      objects: { count: 1, sizeBytes: 5 },
    });
  });

  it('fails with STORE_NOT_FOUND, saying what to do, where there is no store', async () => {
    const workspace = await makeTempDirectory();
    await expect(status({ workspace })).rejects.toThrow('rewind init');
    await expect(log({ workspace })).rejects.toMatchObject({ code: 'STORE_NOT_FOUND' });
  });

  it('shows the timeline of the current or a named session with one summary per entry', async () => {
    const workspace = await makeTempDirectory();
    await init({ workspace, generateId: () => 'sess01' });
    const result = await note({
      workspace,
      text: 'tests pass',
      attachments: [await attachment('log')],
    });
    expect(result.entry.refs).toEqual([
      { type: 'blob', digest: expect.stringMatching(/^sha256:/) },
    ]);
    const report = await log({ workspace });
    expect(report.entries.map(({ seq, kind, summary }) => ({ seq, kind, summary }))).toEqual([
      { seq: 1, kind: 'session-started', summary: expect.stringContaining('session started in') },
      { seq: 2, kind: 'note-added', summary: 'note: tests pass (1 attachment)' },
    ]);
    expect((await log({ workspace, session: 'sess01' })).session.id).toBe('sess01');
    await expect(log({ workspace, session: 'missing' })).rejects.toMatchObject({
      code: 'SESSION_NOT_FOUND',
    });
  });

  it('lists entries written by a newer Rewind, but refuses to write to that session', async () => {
    const workspace = await makeTempDirectory();
    const { session } = await init({ workspace });
    await appendFile(
      session.file,
      '{"at":"2030-01-01T00:00:00.000Z","body":{},"kind":"future-arrived","seq":2,"v":1}\n',
    );
    const report = await log({ workspace });
    expect(report.entries.map((entry) => entry.kind)).toEqual([
      'session-started',
      'future-arrived',
    ]);
    expect(report.session.unsupported?.code).toBe('ENTRY_KIND_UNKNOWN');
    const before = await readFile(session.file, 'utf8');
    await expect(note({ workspace, text: 'x' })).rejects.toMatchObject({
      code: 'ENTRY_KIND_UNKNOWN',
    });
    expect(await readFile(session.file, 'utf8')).toBe(before);
  });

  it('refuses an empty note and an attachment that cannot be read', async () => {
    const workspace = await makeTempDirectory();
    await init({ workspace });
    await expect(note({ workspace, text: '  ' })).rejects.toMatchObject({
      code: 'INVALID_ARGUMENT',
    });
    await expect(
      note({ workspace, text: 'x', attachments: ['/nonexistent/file'] }),
    ).rejects.toMatchObject({
      code: 'INVALID_ARGUMENT',
    });
    expect((await log({ workspace })).entries).toHaveLength(1);
  });
});

async function workspaceWithTree() {
  const workspace = await makeTempDirectory();
  const { session } = await init({ workspace, hashChain: true, generateId: () => 'sess01' });
  const store = createObjectStore(join(workspace, '.rewind'));
  const blob = await store.put(Buffer.from('inside the tree'));
  const sub = await putTree(store, [
    { name: 'f.txt', type: 'file', mode: 0o644, sizeBytes: 15, digest: blob.digest },
  ]);
  const root = await putTree(store, [{ name: 'dir', type: 'directory', mode: 0o755, digest: sub }]);
  const ledger = await Ledger.open(await resolveSession(join(workspace, '.rewind'), session.id));
  await ledger.append('note-added', { text: 'a tree' }, [{ type: 'tree', digest: root }]);
  await ledger.close();
  return { workspace, store, blob: blob.digest, sub, root, session };
}

describe('verify', () => {
  it('checks every session and every object reachable from the ledgers', async () => {
    const { workspace } = await workspaceWithTree();
    const report = await verify({ workspace });
    expect(report).toMatchObject({
      isOk: true,
      problems: [],
      objectsChecked: 3,
      sessions: [{ id: 'sess01', entryCount: 2 }],
    });
  });

  it('finds a corrupt object under a tree and names the entry that references it', async () => {
    const { workspace, blob } = await workspaceWithTree();
    const file = objectFile(workspace, blob);
    await chmod(file, 0o644);
    await writeFile(file, 'changed');
    const report = await verify({ workspace });
    expect(report.isOk).toBe(false);
    expect(report.problems).toEqual([
      expect.objectContaining({ type: 'object-corrupt', digest: blob }),
    ]);
  });

  it('finds a missing object referenced by an entry, with its session and seq', async () => {
    const { workspace, root } = await workspaceWithTree();
    await import('node:fs/promises').then(({ unlink }) => unlink(objectFile(workspace, root)));
    const report = await verify({ workspace });
    expect(report.problems).toEqual([
      expect.objectContaining({ type: 'object-missing', digest: root, session: 'sess01', seq: 2 }),
    ]);
  });

  it('reports the first break of a hash chain with its seq', async () => {
    const { workspace, session } = await workspaceWithTree();
    await note({ workspace, text: 'third' });
    const content = await readFile(session.file, 'utf8');
    await writeFile(session.file, content.replace('"text":"a tree"', '"text":"a forged tree"'));
    const report = await verify({ workspace });
    expect(report.problems).toEqual([
      expect.objectContaining({ type: 'chain-broken', session: 'sess01', seq: 3 }),
    ]);
  });

  it('treats a torn final line as a warning, not damage', async () => {
    const { workspace, session } = await workspaceWithTree();
    await appendFile(session.file, '{"at":"20');
    const report = await verify({ workspace });
    expect(report.isOk).toBe(true);
    expect(report.warnings).toEqual([expect.stringContaining('torn write')]);
  });
});

describe('a session opened without the lock', () => {
  it('reads (diffs of checkpoints and actions, what an action stored) while another holds the lock, and changes only under it', async () => {
    const workspace = await makeTempDirectory();
    await writeFile(join(workspace, 'a.txt'), 'one\n');
    await init({ workspace });
    const writer = await openSession({ workspace });
    await writer.checkpoint('first');
    const written = await writer.write('a.txt', 'two\n');
    await writer.checkpoint('second');
    await writer.close();
    const lock = await acquireLock(join(workspace, '.rewind', 'workspace.lock'));
    const reader = await openSession({ workspace, lockOnOpen: false, lockTimeoutMs: 200 });
    try {
      expect((await reader.diff('first', 'second')).changes).toEqual([
        { path: 'a.txt', kind: 'modified' },
      ]);
      expect((await reader.diff(String(written.id))).text).toContain('+two');
      expect((await reader.show(written.id)).state).toBe('done');
      expect((await reader.checkpoints()).map((checkpoint) => checkpoint.label)).toEqual([
        'first',
        'second',
      ]);
      // The working tree needs a snapshot, and a rollback changes files: both wait for the lock.
      await expect(reader.diff('first')).rejects.toMatchObject({ code: 'LOCK_HELD' });
      await expect(reader.rollback('first')).rejects.toMatchObject({ code: 'LOCK_HELD' });
    } finally {
      await lock.release();
    }
    await reader.rollback('first');
    expect(await readFile(join(workspace, 'a.txt'), 'utf8')).toBe('one\n');
    await reader.close();
    // Protections are recorded under the lock: asking for them without it is refused.
    await expect(
      openSession({ workspace, lockOnOpen: false, redact: { headers: true } }),
    ).rejects.toMatchObject({ code: 'INVALID_ARGUMENT' });
  });
});

describe('gc', () => {
  it('waits for the operation in progress: it never takes the objects of a checkpoint being written', async () => {
    const workspace = await makeTempDirectory();
    for (let index = 0; index < 50; index++) {
      await writeFile(join(workspace, `f${index}.txt`), `content ${index}`);
    }
    await init({ workspace });
    const lock = await acquireLock(join(workspace, '.rewind', 'workspace.lock'));
    await expect(gc({ workspace, graceMs: 0, lockTimeoutMs: 200 })).rejects.toMatchObject({
      code: 'LOCK_HELD',
    });
    await lock.release();
    const session = await openSession({ workspace });
    await Promise.all([session.checkpoint('racing'), gc({ workspace, graceMs: 0 })]);
    await session.close();
    await gc({ workspace, graceMs: 0 });
    expect((await verify({ workspace })).problems).toEqual([]);
  });

  it('removes only unreferenced objects older than the grace period, keeping trees and what they hold', async () => {
    const { workspace, store, blob, sub, root } = await workspaceWithTree();
    const garbage = await store.put(Buffer.from('nobody refers to me'));
    const fresh = await store.put(Buffer.from('just written'));
    for (const digest of [blob, sub, root, garbage.digest])
      await age(objectFile(workspace, digest), 2);

    const dryRun = await gc({ workspace, dryRun: true });
    expect(dryRun).toMatchObject({
      isDryRun: true,
      removed: [{ digest: garbage.digest }],
      keptCount: 3,
      recentCount: 1,
    });
    expect(await store.has(garbage.digest)).toBe(true);

    const report = await gc({ workspace });
    expect(report).toMatchObject({
      removed: [{ digest: garbage.digest }],
      freedBytes: garbage.sizeBytes,
    });
    expect(await store.has(garbage.digest)).toBe(false);
    for (const digest of [blob, sub, root, fresh.digest])
      expect(await store.has(digest)).toBe(true);
    expect((await verify({ workspace })).isOk).toBe(true);
  });

  it('removes temporary files of crashed writes once they are old', async () => {
    const { workspace } = await workspaceWithTree();
    const abandoned = join(workspace, '.rewind', 'objects', '.put-123-abc.tmp');
    await writeFile(abandoned, 'half an object');
    await age(abandoned, 2);
    const report = await gc({ workspace });
    expect(report.abandonedFiles).toEqual([abandoned]);
    expect(
      (await readdir(join(workspace, '.rewind', 'objects'))).some((name) =>
        name.startsWith('.put-'),
      ),
    ).toBe(false);
  });

  it('refuses to remove anything when a referenced tree cannot be read', async () => {
    const { workspace, store, sub } = await workspaceWithTree();
    const garbage = await store.put(Buffer.from('garbage'));
    await age(objectFile(workspace, garbage.digest), 2);
    const file = objectFile(workspace, sub);
    await chmod(file, 0o644);
    await writeFile(file, 'not a tree any more');
    await expect(gc({ workspace })).rejects.toMatchObject({ code: 'OBJECT_CORRUPT' });
    expect(await store.has(garbage.digest)).toBe(true);
  });
});
