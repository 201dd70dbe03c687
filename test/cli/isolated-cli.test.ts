import { existsSync } from 'node:fs';
import { readFile, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { stripVTControlCharacters } from 'node:util';
import { describe, expect, it } from 'vitest';
import { rewind } from '../helpers/cli.js';
import { makeTempDirectory } from '../helpers/temp.js';

describe('rewind init --isolated, commit, destroy', () => {
  it('works on a view, shows the commit plan, refuses conflicts, commits, and destroys the view', async () => {
    const cwd = await makeTempDirectory();
    await writeFile(join(cwd, 'a.txt'), 'one');
    const initialized = await rewind(cwd, ['init', '--isolated']);
    expect(initialized.stdout).toContain('Started isolated session');
    expect((await rewind(cwd, ['status'])).stdout).toMatch(/\* \S+ .* isolated/);
    await rewind(cwd, ['write', 'a.txt', 'two']);
    await rewind(cwd, ['write', 'b.txt', 'new']);
    expect(await readFile(join(cwd, 'a.txt'), 'utf8')).toBe('one');
    expect((await rewind(cwd, ['status'])).stdout).toContain(
      'Pending    2 changes to commit from the isolated view\n',
    );
    // Without a checkpoint, `rewind diff` alone points to what shows the view's changes.
    expect(await rewind(cwd, ['diff'])).toMatchObject({
      code: 1,
      stderr: expect.stringContaining('is what `rewind commit --dry-run --diff` shows'),
    });
    const plan = await rewind(cwd, ['commit', '--dry-run']);
    expect(plan.stdout).toBe(
      'Committing would change the workspace: 1 written, 1 created, 0 deleted.\n  written  a.txt\n  created  b.txt\n',
    );
    expect(plan.code).toBe(0);
    await writeFile(join(cwd, 'a.txt'), 'host');
    // A plan that would be refused says so with its exit code too, as the commit would.
    const conflicted = await rewind(cwd, ['commit', '--dry-run']);
    expect(conflicted.code).toBe(1);
    expect(conflicted.stdout).toContain(
      'Conflicts (the commit would be refused):\n  a.txt: the session modified, the workspace modified\n',
    );
    const refused = await rewind(cwd, ['commit']);
    expect(refused.code).toBe(1);
    expect(refused.stdout).toContain('a.txt: the session modified, the workspace modified');
    await writeFile(join(cwd, 'a.txt'), 'one');
    const committed = await rewind(cwd, ['commit']);
    expect(committed.code).toBe(0);
    expect(await readFile(join(cwd, 'b.txt'), 'utf8')).toBe('new');
    const isolated = JSON.parse((await rewind(cwd, ['status', '--json'])).stdout).currentSession;
    const destroyed = await rewind(cwd, ['destroy']);
    expect(destroyed.code).toBe(0);
    // It was the current session: none is now, and the commands say how to go on.
    expect(destroyed.stdout).toContain('No session is current now: `rewind session use ID`');
    const gone = await rewind(cwd, ['status']);
    expect(gone.code).toBe(0);
    expect(gone.stdout).not.toMatch(/^\* /m);
    expect((await rewind(cwd, ['checkpoints'])).stderr).toContain(
      'This store has no current session.',
    );
    expect((await rewind(cwd, ['checkpoints', '--session', isolated])).stderr).toContain(
      'its view is gone (the session was destroyed). Pick another with `rewind session use ID`',
    );
    expect(existsSync(join(cwd, 'b.txt'))).toBe(true);
  });

  it('init --isolated --hash-chain starts a hash-chained isolated session, on a new store or one that has a session', async () => {
    const chainedIn = async (cwd: string, id: string) => {
      const report = JSON.parse((await rewind(cwd, ['status', '--json'])).stdout);
      return report.sessions.find((session: { id: string }) => session.id === id);
    };
    const fresh = await makeTempDirectory();
    const started = await rewind(fresh, ['init', '--isolated', '--hash-chain']);
    expect(started).toMatchObject({ code: 0, stderr: '' });
    const id = /Started isolated session (\w+) \(hash-chained\)/.exec(started.stdout)?.[1];
    expect(id, started.stdout).toBeDefined();
    expect(await chainedIn(fresh, id ?? '')).toMatchObject({
      isolation: 'isolated',
      isHashChained: true,
    });
    await rewind(fresh, ['write', 'a.txt', 'one']);
    expect(await rewind(fresh, ['verify'])).toMatchObject({
      code: 0,
      stdout: expect.stringContaining('no problems'),
    });

    const existing = await makeTempDirectory();
    await rewind(existing, ['init']);
    const json = JSON.parse(
      (await rewind(existing, ['--json', 'init', '--isolated', '--hash-chain'])).stdout,
    );
    expect(json).toMatchObject({ ignoredOptions: [] });
    expect(await chainedIn(existing, json.isolatedSession)).toMatchObject({ isHashChained: true });
    // Without the option, an isolated session is not chained, and nothing says it is.
    const plain = await rewind(existing, ['init', '--isolated']);
    expect(plain.stdout).not.toContain('hash-chained');
  });

  it('commit --dry-run --diff shows what the commit would write as rewind diff shows it, conflicts listed apart', async () => {
    const cwd = await makeTempDirectory();
    await writeFile(join(cwd, 'a.txt'), 'one\ntwo\n');
    await writeFile(join(cwd, 'c.txt'), 'see\n');
    await rewind(cwd, ['init', '--isolated']);
    await rewind(cwd, ['write', 'a.txt', 'one\n2\n']);
    await rewind(cwd, ['write', 'b.txt', 'new\n']);
    await rewind(cwd, ['write', 'c.txt', 'session\n']);
    await rewind(cwd, ['write', 'same.txt', 'same\n']);
    // The workspace already holds same.txt as the session left it, and changed c.txt too.
    await writeFile(join(cwd, 'same.txt'), 'same\n');
    await writeFile(join(cwd, 'c.txt'), 'host\n');

    const plan = await rewind(cwd, ['commit', '--dry-run', '--diff']);
    expect(plan.code).toBe(1);
    expect(plan.stdout).toBe(
      [
        'Committing would change the workspace: 2 written, 1 created, 0 deleted.',
        '  written  a.txt',
        '  created  b.txt',
        '  written  c.txt',
        'Conflicts (the commit would be refused; not in the diff):',
        '  c.txt: the session modified, the workspace modified',
        '',
        '--- a/a.txt',
        '+++ b/a.txt',
        '@@ -1,2 +1,2 @@',
        ' one',
        '-two',
        '+2',
        '--- /dev/null',
        '+++ b/b.txt',
        '@@ -0,0 +1,1 @@',
        '+new',
        '',
      ].join('\n'),
    );
    // Coloured as rewind diff colours, where it colours.
    const coloured = await rewind(cwd, ['commit', '--dry-run', '--diff'], {
      env: { FORCE_COLOR: '1' },
    });
    expect(coloured.stdout).toContain('\u001b[31m-two\u001b[39m\n\u001b[32m+2\u001b[39m\n');
    expect(stripVTControlCharacters(coloured.stdout)).toBe(plan.stdout);
    const json = JSON.parse(
      (
        await rewind(cwd, ['--json', 'commit', '--dry-run', '--diff'], {
          env: { FORCE_COLOR: '1' },
        })
      ).stdout,
    );
    expect(json.diff).toBe(plan.stdout.slice(plan.stdout.indexOf('--- a/a.txt')));
    // Without --diff, the plan is what it was.
    expect((await rewind(cwd, ['commit', '--dry-run'])).stdout).not.toContain('---');
    expect(
      JSON.parse((await rewind(cwd, ['--json', 'commit', '--dry-run'])).stdout),
    ).not.toHaveProperty('diff');

    // --diff shows a plan: with a commit it is a usage error, and nothing is written.
    await writeFile(join(cwd, 'c.txt'), 'see\n');
    const refused = await rewind(cwd, ['commit', '--diff']);
    expect(refused.code).toBe(2);
    expect(refused.stderr).toContain(
      '--diff shows a plan, before a commit: give it with --dry-run.',
    );
    expect(await readFile(join(cwd, 'a.txt'), 'utf8')).toBe('one\ntwo\n');
  });
});
