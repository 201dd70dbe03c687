import { execFileSync } from 'node:child_process';
import { existsSync } from 'node:fs';
import { chmod, readFile, rm, stat, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { probeBwrap } from '../../src/sandbox/index.js';
import {
  attachSession,
  gc,
  init,
  log,
  openSession,
  startIsolatedSession,
  withIsolatedSession,
} from '../../src/session/index.js';
import { hasStatCache } from '../../src/workspace/index.js';
import { git } from '../helpers/git.js';
import { sandboxWorkspace } from '../helpers/nobody.js';
import { ROOT, runNode } from '../helpers/processes.js';
import { makeTempDirectory } from '../helpers/temp.js';
import { referenceTree } from '../helpers/trees.js';
import { type Layout, lay } from '../helpers/workspace.js';

async function isolatedOn(layout: Layout) {
  const workspace = await makeTempDirectory();
  await lay(workspace, layout);
  await init({ workspace });
  const session = await openSession({ workspace, isolation: 'isolated' });
  return { workspace, session };
}

const read = (root: string, path: string) => readFile(join(root, path), 'utf8');

describe('isolated sessions', () => {
  it('work on a private view: the host is untouched until commit, which propagates writes and deletions', async () => {
    const { workspace, session } = await isolatedOn({
      'a.txt': 'one',
      'gone/x.txt': 'x',
      'keep.txt': 'k',
    });
    expect(session.isolation).toBe('isolated');
    expect(session.workspace).not.toBe(workspace);
    await session.write('a.txt', 'two');
    await session.write('new/b.txt', 'b');
    await session.delete('gone');
    await session.exec('echo made > made.txt');
    await session.checkpoint('in-view');
    expect(await read(workspace, 'a.txt')).toBe('one');
    expect(existsSync(join(workspace, 'new'))).toBe(false);
    expect(existsSync(join(workspace, 'gone/x.txt'))).toBe(true);

    const plan = await session.commit({ dryRun: true });
    expect(plan.status).toBe('dry-run');
    expect(plan.changes.map((change) => `${change.action} ${change.path}`).sort()).toEqual([
      'created made.txt',
      'created new/b.txt',
      'deleted gone/x.txt',
      'written a.txt',
    ]);
    expect(await read(workspace, 'a.txt')).toBe('one');
    const committed = await session.commit();
    expect(committed.status).toBe('committed');
    expect(await read(workspace, 'a.txt')).toBe('two');
    expect(await read(workspace, 'new/b.txt')).toBe('b');
    expect(await read(workspace, 'made.txt')).toBe('made\n');
    expect(existsSync(join(workspace, 'gone'))).toBe(false);
    expect(await read(workspace, 'keep.txt')).toBe('k');
    // Nothing new: the next commit has nothing to do.
    expect((await session.commit()).status).toBe('nothing-to-commit');

    // A commit is an action: undo puts the host back as it was.
    await session.undo(committed.id as number);
    expect(await read(workspace, 'a.txt')).toBe('one');
    expect(existsSync(join(workspace, 'gone/x.txt'))).toBe(true);
    expect(existsSync(join(workspace, 'made.txt'))).toBe(false);
    await session.close();
  });

  it('refuses a commit that would overwrite host edits, lists every conflict, and changes nothing', async () => {
    const { workspace, session } = await isolatedOn({
      'a.txt': 'one',
      'dir/x.txt': 'x',
      'b.txt': 'b',
    });
    await session.write('a.txt', 'session');
    await session.delete('dir');
    await session.write('b.txt', 'same');
    await writeFile(join(workspace, 'a.txt'), 'host edit');
    await writeFile(join(workspace, 'dir/new.txt'), 'host file');
    await writeFile(join(workspace, 'b.txt'), 'same');
    await writeFile(join(workspace, 'host-only.txt'), 'h');
    const result = await session.commit();
    expect(result.status).toBe('refused');
    // b.txt changed the same way on both sides: no conflict.
    expect(result.conflicts).toEqual([
      { path: 'a.txt', session: 'modified', host: 'modified' },
      { path: 'dir', session: 'removed a directory', host: 'changed dir/new.txt' },
    ]);
    expect(await read(workspace, 'a.txt')).toBe('host edit');
    expect(await read(workspace, 'dir/x.txt')).toBe('x');
    expect((await log({ workspace })).entries.at(-1)?.kind).toBe('commit-refused');
    await session.close();
  });

  it('puts back what a killed commit had written when the host was edited before recovery, leaving the edit', async () => {
    const layout: Layout = {};
    for (let index = 0; index < 200; index++) layout[`d${index % 10}/f${index}.txt`] = 'host\n';
    const { workspace, session } = await isolatedOn(layout);
    const ran = await session.exec(`for f in d*/f*.txt; do echo view > "$f"; done`);
    expect(ran.exitCode).toBe(0);
    const id = session.id;
    await session.close();
    const run = await runNode([join(ROOT, 'test/helpers/commit-child.mjs'), workspace, id, '100']);
    expect(run.signal).toBe('SIGKILL');
    const contents = async () =>
      Promise.all(Object.keys(layout).map((path) => readFile(join(workspace, path), 'utf8')));
    expect((await contents()).filter((text) => text === 'view\n').length).toBeGreaterThan(0);
    // A person edits a file the commit had not reached, before any command runs.
    const reached = new Set(
      (await contents()).flatMap((text, index) => (text === 'view\n' ? [index] : [])),
    );
    const untouched = Object.keys(layout)
      .filter((_, index) => !reached.has(index))
      .at(-1) as string;
    await writeFile(join(workspace, untouched), 'by hand\n');

    const reopened = await openSession({ workspace, session: id });
    expect(reopened.recoveries()).toEqual([
      expect.stringContaining(
        `1 of its paths changed in the workspace since (${untouched}), so it was not finished, and what it had written was put back`,
      ),
    ]);
    await reopened.close();
    const after = await contents();
    expect(after.filter((text) => text !== 'host\n')).toEqual(['by hand\n']);
    const failed = (await log({ workspace, session: id, kind: 'action-failed' })).entries.at(-1);
    expect(failed?.entry.body).toMatchObject({
      error: { code: 'DRIFTED' },
      drifted: [untouched],
      isReverted: true,
    });
  }, 60_000);

  it('starts from a snapshot of the host: the view is recorded as the host is, and the first commit finds the host known', async () => {
    const workspace = await makeTempDirectory();
    await lay(workspace, { 'a.txt': 'one', 'src/b.txt': 'b', 'src/c.txt': 'c' });
    await init({ workspace });
    // Older than the change window: the host's snapshot vouches for these files.
    await new Promise((resolve) => setTimeout(resolve, 150));
    const session = await startIsolatedSession({ workspace, makeCurrent: false });
    const created = (await log({ workspace, session: session.id })).entries.find(
      (line) => line.kind === 'view-created',
    )?.entry.body as { baseTree: string; hostTree: string; fileCount: number };
    // Copied unchanged: the view holds what the host's snapshot holds.
    expect(created).toMatchObject({ fileCount: 3 });
    expect(created.baseTree).toBe(created.hostTree);
    expect(created.baseTree).toBe(await referenceTree(session.workspace));
    // The host's snapshot at the start left its stat cache: the first commit need not read it all.
    expect(hasStatCache(join(workspace, '.rewind'))).toBe(true);
    await writeFile(join(workspace, 'src/b.txt'), 'host');
    await session.write('a.txt', 'two');
    expect(await session.commit()).toMatchObject({ status: 'committed', conflicts: [] });
    expect(await read(workspace, 'a.txt')).toBe('two');
    expect(await read(workspace, 'src/b.txt')).toBe('host');
    await session.close();
  });

  it('is resumed after a restart by its id, and destroy refuses to drop uncommitted work unless forced', async () => {
    const { workspace, session } = await isolatedOn({ 'a.txt': 'one' });
    await session.write('a.txt', 'two');
    const id = session.id;
    await session.close();
    const attached = await attachSession(workspace, id);
    expect(attached.isolation).toBe('isolated');
    await expect(attached.destroy()).rejects.toMatchObject({
      code: 'UNCOMMITTED_CHANGES',
      data: { paths: ['a.txt'] },
    });
    await attached.destroy({ force: true });
    expect(existsSync(join(workspace, '.rewind', 'views', id))).toBe(false);
    await expect(openSession({ workspace, session: id })).rejects.toMatchObject({
      code: 'SESSION_NOT_FOUND',
    });
    expect(await read(workspace, 'a.txt')).toBe('one');
    // The view's content is still in the store, and gc keeps what ledgers refer to.
    expect((await gc({ workspace, graceMs: 0 })).removed).toEqual([]);
  });

  it('keeps everything when the host cannot be written, and a second process commits nothing twice', async () => {
    const { workspace, session } = await isolatedOn({ 'locked/a.txt': 'one' });
    await session.write('locked/a.txt', 'two');
    await session.write('locked/b.txt', 'new');
    // A host file that cannot be replaced: immutable (even root cannot), or a read-only directory.
    const isRoot = process.getuid?.() === 0;
    const locked = join(workspace, 'locked', 'a.txt');
    if (isRoot) execFileSync('chattr', ['+i', locked]);
    else await chmod(join(workspace, 'locked'), 0o555);
    try {
      await expect(session.commit()).rejects.toMatchObject({ data: { isReverted: true } });
      expect(await read(workspace, 'locked/a.txt')).toBe('one');
      expect(existsSync(join(workspace, 'locked/b.txt'))).toBe(false);
    } finally {
      if (isRoot) execFileSync('chattr', ['-i', locked]);
      else await chmod(join(workspace, 'locked'), 0o755);
    }
    const id = session.id;
    await session.close();
    const script = `
      const { openSession } = await import(${JSON.stringify(new URL('../../dist/index.js', import.meta.url).href)});
      const session = await openSession({ workspace: process.argv[1], session: process.argv[2] });
      console.log((await session.commit()).status);
      await session.close();
    `;
    const runs = await Promise.all(
      [1, 2].map(() => runNode(['--input-type=module', '-e', script, workspace, id])),
    );
    expect(runs.map((run) => run.stdout.trim()).sort()).toEqual(['committed', 'nothing-to-commit']);
    expect(await read(workspace, 'locked/b.txt')).toBe('new');
  });

  it.runIf(probeBwrap().works)(
    'runs sandboxed commands in the view, mounted at the workspace path, with the host store out of sight',
    async () => {
      const workspace = await sandboxWorkspace({ 'a.txt': 'one' });
      await init({ workspace });
      const session = await startIsolatedSession({ workspace, sandbox: 'bwrap' });
      const result = await session.exec(
        `pwd; cat ${join(workspace, 'a.txt')}; ls -A ${join(workspace, '.rewind')}; echo two > ${join(workspace, 'a.txt')}`,
      );
      expect(result.modified).toEqual(['a.txt']);
      // The workspace's own path leads to the view, which has no store at all.
      expect(result.stdout.trim()).toBe(`${workspace}\none`);
      expect(result.stderr).toContain('No such file or directory');
      expect(await read(session.workspace, 'a.txt')).toBe('two\n');
      expect(await read(workspace, 'a.txt')).toBe('one');
      // What Rewind puts back in the view (here by undo) stays the commands' to change.
      await session.undo(result.id);
      expect((await session.exec('echo three > a.txt')).modified).toEqual(['a.txt']);
      expect((await session.commit()).status).toBe('committed');
      expect(await read(workspace, 'a.txt')).toBe('three\n');
      expect((await stat(join(workspace, 'a.txt'))).uid).toBe((await stat(workspace)).uid);
      await session.close();
    },
  );

  it.runIf(probeBwrap().works)(
    "lets git in a sandboxed command see the host's repository read-only, with the view's files",
    async () => {
      const workspace = await sandboxWorkspace({ 'a.txt': 'one\n', 'b.txt': 'two\n' });
      const owner = await stat(workspace);
      const asRoot = (args: string[]) => git(workspace, ['-c', 'safe.directory=*', ...args]);
      asRoot(['init', '-q']);
      asRoot(['add', '.']);
      asRoot(['-c', 'user.name=t', '-c', 'user.email=t@t', 'commit', '-qm', 'first']);
      execFileSync('chown', ['-R', `${owner.uid}:${owner.gid}`, join(workspace, '.git')]);
      const index = await readFile(join(workspace, '.git', 'index'));
      await init({ workspace });
      const session = await startIsolatedSession({ workspace, sandbox: 'bwrap' });
      await session.exec('echo changed >> a.txt && rm b.txt && echo new > c.txt');
      const status = await session.exec(
        'git status --porcelain && git diff --stat && git log --format=%s',
      );
      expect(status.exitCode).toBe(0);
      expect(status.stdout.toString()).toBe(
        ' M a.txt\n D b.txt\n?? c.txt\n a.txt | 1 +\n b.txt | 1 -\n 2 files changed, 1 insertion(+), 1 deletion(-)\nfirst\n',
      );
      // What writes to the repository fails: the host's history and index stay as they were.
      const add = await session.exec('git add -A');
      expect(add.exitCode).not.toBe(0);
      expect(add.stderr.toString()).toContain('Read-only file system');
      expect(await readFile(join(workspace, '.git', 'index'))).toEqual(index);
      expect(asRoot(['status', '--porcelain'])).toBe('');
      expect((await session.commit()).status).toBe('committed');
      expect(asRoot(['status', '--porcelain'])).toBe(' M a.txt\n D b.txt\n?? c.txt\n');
      await session.close();
    },
  );

  it("keeps git in an unsandboxed command of an isolated session away from the host's repository", async () => {
    const workspace = await makeTempDirectory();
    await lay(workspace, { 'a.txt': 'one\n' });
    git(workspace, ['init', '-q']);
    git(workspace, ['add', '.']);
    git(workspace, ['-c', 'user.name=t', '-c', 'user.email=t@t', 'commit', '-qm', 'first']);
    await writeFile(join(workspace, 'a.txt'), 'edited on the host\n');
    await init({ workspace });
    const session = await startIsolatedSession({ workspace, sandbox: 'none' });
    // Found above the view, the host's repository would stash (and so undo) the host's edit.
    const stash = await session.exec('git stash');
    expect(stash.exitCode).not.toBe(0);
    expect(stash.stderr.toString()).toContain('not a git repository');
    expect(await read(workspace, 'a.txt')).toBe('edited on the host\n');
    await session.close();
  });

  it('lists as a commit change only what the host does not already hold', async () => {
    const { workspace, session } = await isolatedOn({ 'a.txt': 'one', 'gone.txt': 'g' });
    await session.write('a.txt', 'two');
    await session.write('same.txt', 'same');
    await session.write('new.txt', 'new');
    await session.delete('gone.txt');
    // The host made the same changes meanwhile, all but new.txt.
    await writeFile(join(workspace, 'a.txt'), 'two');
    await writeFile(join(workspace, 'same.txt'), 'same');
    await rm(join(workspace, 'gone.txt'));
    const plan = await session.commit({ dryRun: true });
    expect(plan).toMatchObject({ conflicts: [] });
    expect(plan.changes.map((change) => `${change.action} ${change.path}`)).toEqual([
      'created new.txt',
    ]);
    const committed = await session.commit();
    expect(committed.status).toBe('committed');
    expect(committed.changes.map((change) => change.path)).toEqual(['new.txt']);
    expect(await read(workspace, 'new.txt')).toBe('new');
    await session.close();
  });

  it('refuses commit on a session that is not isolated', async () => {
    const workspace = await makeTempDirectory();
    await init({ workspace });
    const session = await openSession({ workspace });
    await expect(session.commit()).rejects.toMatchObject({ code: 'INVALID_ARGUMENT' });
    await session.close();
    await rm(workspace, { recursive: true });
    await expect(startIsolatedSession({ workspace })).rejects.toMatchObject({
      code: 'STORE_NOT_FOUND',
    });
  });

  it('ends its work as asked: auto-commit on a clean exit only, never destroying uncommitted work', async () => {
    const workspace = await makeTempDirectory();
    await lay(workspace, { 'a.txt': 'one' });
    await init({ workspace });
    const clean = await withIsolatedSession(
      { workspace, autoCommit: true, destroyOnExit: true },
      async (session) => {
        await session.write('a.txt', 'two');
        expect((await session.status()).pendingChanges).toEqual([
          { path: 'a.txt', action: 'written', isUnrecorded: false },
        ]);
        return session.id;
      },
    );
    expect(clean.end).toMatchObject({ isDestroyed: true, commit: { status: 'committed' } });
    expect(await read(workspace, 'a.txt')).toBe('two');
    expect(existsSync(join(workspace, '.rewind', 'views', clean.value))).toBe(false);

    // A failure commits nothing; the uncommitted work is kept.
    let failedId = '';
    await expect(
      withIsolatedSession({ workspace, autoCommit: true, destroyOnExit: true }, async (session) => {
        failedId = session.id;
        await session.write('a.txt', 'three');
        throw new Error('the agent gave up');
      }),
    ).rejects.toThrow('the agent gave up');
    expect(await read(workspace, 'a.txt')).toBe('two');
    const kept = await openSession({ workspace, session: failedId });
    expect((await kept.status()).pendingChanges).toHaveLength(1);

    // A refused auto-commit keeps the session too.
    await writeFile(join(workspace, 'a.txt'), 'host edit');
    const refused = await kept.end({ autoCommit: true, destroyOnExit: true });
    expect(refused).toMatchObject({
      isDestroyed: false,
      isPreserved: true,
      commit: { status: 'refused' },
    });
    expect(existsSync(join(workspace, '.rewind', 'views', failedId))).toBe(true);

    // Agent mode keeps a failed session for a person to look at, even with nothing to commit.
    let agentId = '';
    await expect(
      withIsolatedSession({ workspace, destroyOnExit: true, mode: 'agent' }, async (session) => {
        agentId = session.id;
        throw new Error('halt');
      }),
    ).rejects.toThrow('halt');
    expect(existsSync(join(workspace, '.rewind', 'views', agentId))).toBe(true);
  });

  it('run in withIsolatedSession leave the current session as it was, during the work and after it', async () => {
    const workspace = await makeTempDirectory();
    await lay(workspace, { 'a.txt': 'one' });
    await init({ workspace });
    const currentId = async () => {
      const current = await openSession({ workspace });
      await current.close();
      return current.id;
    };
    const before = await currentId();
    for (const destroyOnExit of [false, true]) {
      const { value } = await withIsolatedSession(
        { workspace, autoCommit: true, destroyOnExit },
        async (session) => {
          await session.write('a.txt', `two ${destroyOnExit}`);
          expect(await currentId()).toBe(before);
          return session.id;
        },
      );
      expect(value).not.toBe(before);
      expect(await currentId()).toBe(before);
    }
    const current = await openSession({ workspace });
    await current.write('person.txt', 'hello');
    await current.close();
    expect(await read(workspace, 'person.txt')).toBe('hello');
    expect(await read(workspace, 'a.txt')).toBe('two true');
  });
});
