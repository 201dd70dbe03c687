import { existsSync } from 'node:fs';
import { readFile, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
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
});
