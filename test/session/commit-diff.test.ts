import { existsSync } from 'node:fs';
import { chmod, readFile, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { init, openSession } from '../../src/session/index.js';
import { makeTempDirectory } from '../helpers/temp.js';
import { type Layout, lay } from '../helpers/workspace.js';

async function isolatedOn(layout: Layout) {
  const workspace = await makeTempDirectory();
  await lay(workspace, layout);
  await init({ workspace });
  const session = await openSession({ workspace, isolation: 'isolated' });
  return { workspace, session };
}

describe('commit with dryRun and diff', () => {
  it('diffs exactly the paths the commit would write, create and delete, from what the host holds now', async () => {
    const { workspace, session } = await isolatedOn({
      'a.txt': 'one\ntwo\nthree\n',
      'gone.txt': 'bye\n',
      'same.txt': 'old\n',
      'bin.dat': 'x',
      'dir/keep.txt': 'k\n',
    });
    await session.write('a.txt', 'one\n2\nthree\n');
    await session.write('new/b.txt', 'b\n');
    await session.delete('gone.txt');
    await session.write('same.txt', 'new\n');
    await session.write('bin.dat', Buffer.from([0, 1, 2]));
    await chmod(join(session.workspace, 'dir'), 0o700);
    // The host already holds same.txt as the session left it: no change, so no diff either.
    await writeFile(join(workspace, 'same.txt'), 'new\n');

    const plan = await session.commit({ dryRun: true, diff: true });
    expect(plan.changes.map((change) => `${change.action} ${change.path}`).sort()).toEqual([
      'created new/b.txt',
      'deleted gone.txt',
      'written a.txt',
      'written bin.dat',
    ]);
    // The directory whose mode alone changed is not committed, so not diffed.
    expect(plan.diff).toBe(
      [
        '--- a/a.txt',
        '+++ b/a.txt',
        '@@ -1,3 +1,3 @@',
        ' one',
        '-two',
        '+2',
        ' three',
        'Binary files a/bin.dat and b/bin.dat differ (a file of 1 bytes (mode 644) -> a file of 3 bytes (mode 644))',
        '--- a/gone.txt',
        '+++ /dev/null',
        '@@ -1,1 +0,0 @@',
        '-bye',
        '--- /dev/null',
        '+++ b/new/b.txt',
        '@@ -0,0 +1,1 @@',
        '+b',
        '',
      ].join('\n'),
    );
    // Nothing was written, and a plan without diff carries none.
    expect(await readFile(join(workspace, 'a.txt'), 'utf8')).toBe('one\ntwo\nthree\n');
    expect(existsSync(join(workspace, 'new'))).toBe(false);
    expect(await session.commit({ dryRun: true })).not.toHaveProperty('diff');

    // The plan's diff is what the commit then does, as `diff ID` shows the commit's action.
    const committed = await session.commit();
    expect(committed.status).toBe('committed');
    expect((await session.diff(String(committed.id))).text).toBe(plan.diff);
    await session.close();
  });

  it('lists a conflict without diffing it (nor what is under it), and diffs the rest', async () => {
    const { workspace, session } = await isolatedOn({
      'a.txt': 'one\n',
      'b.txt': 'bee\n',
      'lib/x.txt': 'x\n',
      'lib/y.txt': 'y\n',
    });
    await session.write('a.txt', 'session\n');
    await session.write('b.txt', 'B\n');
    await session.delete('lib');
    await writeFile(join(workspace, 'a.txt'), 'host\n');
    await writeFile(join(workspace, 'lib/y.txt'), 'host y\n');

    const plan = await session.commit({ dryRun: true, diff: true });
    expect(plan.conflicts.map((conflict) => conflict.path).sort()).toEqual([
      'a.txt',
      'lib',
      'lib/y.txt',
    ]);
    // lib/x.txt, which the session deletes and the host left alone, is under lib, a conflict.
    expect(plan.diff).toBe('--- a/b.txt\n+++ b/b.txt\n@@ -1,1 +1,1 @@\n-bee\n+B\n');
    await session.close();
  });

  it('gives a diff with a dry run only: asked with a commit, it refuses and writes nothing', async () => {
    const { workspace, session } = await isolatedOn({ 'a.txt': 'one\n' });
    await session.write('a.txt', 'two\n');
    await expect(session.commit({ diff: true })).rejects.toMatchObject({
      code: 'INVALID_ARGUMENT',
    });
    expect(await readFile(join(workspace, 'a.txt'), 'utf8')).toBe('one\n');
    await session.close();
  });
});
