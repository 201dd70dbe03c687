import { readFile } from 'node:fs/promises';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { rewind } from '../helpers/cli.js';
import { makeTempDirectory } from '../helpers/temp.js';
import { lay } from '../helpers/workspace.js';

describe('rewind history commands', () => {
  it('lists per checkpoint the files and the lines of text added and removed since the previous one', async () => {
    const cwd = await makeTempDirectory();
    await lay(cwd, { 'a.txt': 'a\nb\nc\n' });
    await rewind(cwd, ['init']);
    await rewind(cwd, ['checkpoint', 'one']);
    await lay(cwd, { 'a.txt': 'a\nB\nc\nd\ne\n', 'b.txt': '1\n2\n3\n4\n5\n' });
    await rewind(cwd, ['checkpoint', 'two']);

    const listed = await rewind(cwd, ['checkpoints']);
    expect(listed.code).toBe(0);
    const [header, first, second] = listed.stdout.trimEnd().split('\n');
    expect(header).toMatch(/^LABEL +SEQ +TIME +CHANGED SINCE PREVIOUS$/);
    // The first has nothing before it to count lines from.
    expect(first).toMatch(/^one +2 .* \+1 ~0 -0 files$/);
    expect(second).toMatch(/^two +3 .* \+1 ~1 -0 files, \+8 -1 lines$/);

    const { checkpoints } = JSON.parse((await rewind(cwd, ['--json', 'checkpoints'])).stdout);
    expect(checkpoints[0]).not.toHaveProperty('linesAdded');
    expect(checkpoints[1]).toMatchObject({ id: 3, label: 'two', linesAdded: 8, linesRemoved: 1 });
  });

  it('rolls back only the paths given, after -- or after the label, and undoes that like any rollback', async () => {
    const cwd = await makeTempDirectory();
    await lay(cwd, { 'src/a.txt': 'a1', 'src/b.txt': 'b1', 'docs/c.md': 'c1' });
    await rewind(cwd, ['init']);
    await rewind(cwd, ['checkpoint', 'base']);
    await lay(cwd, { 'src/a.txt': 'a2', 'src/b.txt': 'b2', 'docs/c.md': 'c2' });
    const read = (path: string) => readFile(join(cwd, path), 'utf8');

    const planned = await rewind(cwd, ['rollback', 'base', '--dry-run', '--', 'src/a.txt']);
    expect(planned.stdout).toMatch(/^Rolling back src\/a\.txt to base would change 1 path:\n/);
    expect(await read('src/a.txt')).toBe('a2');

    const rolled = await rewind(cwd, ['rollback', 'base', '--', 'src/a.txt', 'docs']);
    expect(rolled.code).toBe(0);
    expect(rolled.stdout).toMatch(
      /^Rolled back src\/a\.txt, docs to base: 2 written, 0 created, 0 deleted\. The previous state is saved: `rewind undo (\d+)`/,
    );
    expect([await read('src/a.txt'), await read('src/b.txt'), await read('docs/c.md')]).toEqual([
      'a1',
      'b2',
      'c1',
    ]);
    const id = /rewind undo (\d+)/.exec(rolled.stdout)?.[1] as string;
    expect((await rewind(cwd, ['undo', id])).code).toBe(0);
    expect([await read('src/a.txt'), await read('docs/c.md')]).toEqual(['a2', 'c2']);

    // Paths right after the label work as well.
    expect((await rewind(cwd, ['rollback', 'base', 'src/b.txt'])).code).toBe(0);
    expect([await read('src/a.txt'), await read('src/b.txt')]).toEqual(['a2', 'b1']);

    const missing = await rewind(cwd, ['rollback', 'base', '--', 'nowhere.txt']);
    expect(missing).toMatchObject({ code: 1, stderr: expect.stringContaining('[PATH_NOT_FOUND]') });
  });
});
