import { readFile, rm, symlink } from 'node:fs/promises';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { runCli } from '../../src/cli/main.js';
import { rewind } from '../helpers/cli.js';
import { makeTempDirectory } from '../helpers/temp.js';
import { lay } from '../helpers/workspace.js';

const labelsOf = async (cwd: string): Promise<string[]> =>
  (
    JSON.parse((await rewind(cwd, ['--json', 'checkpoints'])).stdout) as {
      checkpoints: { label: string }[];
    }
  ).checkpoints.map((checkpoint) => checkpoint.label);

describe('rewind history commands', () => {
  it('lists per checkpoint the files, and with --lines the lines of text, added and removed since the previous one', async () => {
    const cwd = await makeTempDirectory();
    await lay(cwd, { 'a.txt': 'a\nb\nc\n' });
    await rewind(cwd, ['init']);
    await rewind(cwd, ['checkpoint', 'one']);
    await lay(cwd, { 'a.txt': 'a\nB\nc\nd\ne\n', 'b.txt': '1\n2\n3\n4\n5\n' });
    await rewind(cwd, ['checkpoint', 'two']);

    const plain = await rewind(cwd, ['checkpoints']);
    expect(plain).toMatchObject({ code: 0, stderr: '' });
    expect(plain.stdout.trimEnd().split('\n')).toEqual([
      expect.stringMatching(/^LABEL +SEQ +TIME +CHANGED SINCE PREVIOUS$/),
      expect.stringMatching(/^one +2 .* \+1 ~0 -0 files$/),
      expect.stringMatching(/^two +3 .* \+1 ~1 -0 files$/),
    ]);
    const listed = await rewind(cwd, ['checkpoints', '--lines']);
    expect(listed.code).toBe(0);
    const [header, first, second] = listed.stdout.trimEnd().split('\n');
    expect(header).toMatch(/^LABEL +SEQ +TIME +CHANGED SINCE PREVIOUS$/);
    // The first has nothing before it to count lines from.
    expect(first).toMatch(/^one +2 .* \+1 ~0 -0 files$/);
    expect(second).toMatch(/^two +3 .* \+1 ~1 -0 files, \+8 -1 lines$/);

    const json = async (args: string[]) =>
      JSON.parse((await rewind(cwd, ['--json', 'checkpoints', ...args])).stdout).checkpoints;
    const withLines = await json(['--lines']);
    expect(withLines[0]).not.toHaveProperty('linesAdded');
    expect(withLines[1]).toMatchObject({ id: 3, label: 'two', linesAdded: 8, linesRemoved: 1 });
    const { linesAdded: _added, linesRemoved: _removed, ...withoutLines } = withLines[1];
    expect(await json([])).toEqual([withLines[0], withoutLines]);
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

  it('counts in what a rollback and its undo applied the files its plan lists, not directories', async () => {
    const cwd = await makeTempDirectory();
    await lay(cwd, {
      'gone/deep/a.txt': 'a',
      'top.txt': 'x',
      link: 'a file, a link later',
      'was-dir/inner.txt': 'i',
      'was-file': 'f',
    });
    await rewind(cwd, ['init', '--sandbox', 'none']);
    await rewind(cwd, ['checkpoint', 'one']);
    await rm(join(cwd, 'gone'), { recursive: true });
    await rm(join(cwd, 'link'));
    await symlink('top.txt', join(cwd, 'link'));
    await rm(join(cwd, 'was-dir'), { recursive: true });
    await rm(join(cwd, 'was-file'));
    await lay(cwd, {
      'new/er/b.txt': 'b',
      'top.txt': 'y',
      'was-dir': 'now a file',
      'was-file/q.txt': 'q',
    });
    const json = async (args: string[]) =>
      JSON.parse((await rewind(cwd, ['--json', ...args])).stdout);
    const counted = (changes: { action: 'written' | 'created' | 'deleted' }[]) => {
      const counts = { written: 0, created: 0, deleted: 0 };
      for (const change of changes) counts[change.action] += 1;
      return counts;
    };
    const plan = counted((await json(['rollback', 'one', '--dry-run'])).changes);
    expect(plan).toEqual({ written: 2, created: 3, deleted: 3 });
    // It said 6 created and 4 deleted: each directory made or removed was counted (gone,
    // gone/deep, new, new/er...), and a file removed to put a directory in its place was not.
    const rolled = await rewind(cwd, ['rollback', 'one']);
    expect(rolled.stdout).toMatch(/^Rolled back to one: 2 written, 3 created, 3 deleted\. /);
    const id = /rewind undo (\d+)/.exec(rolled.stdout)?.[1] as string;
    // The log's intent entry counts them so too (it said 12 paths: the directories as well).
    expect((await rewind(cwd, ['log'])).stdout).toContain(
      'rollback to one started: 8 paths to restore',
    );
    const undone = await json(['undo', id]);
    // The directories it made (new, new/er, was-file) and removed (gone, gone/deep, was-dir) apart.
    expect(undone.applied).toMatchObject({
      written: 2,
      created: 3,
      deleted: 3,
      directoriesCreated: 3,
      directoriesDeleted: 3,
    });
  });

  it('drops checkpoints by count, age or size, says what it spared and why, and that gc frees their space', async () => {
    const cwd = await makeTempDirectory();
    await rewind(cwd, ['init']);
    for (const label of ['c1', 'c2', 'c3']) {
      await lay(cwd, { 'a.txt': `content of ${label}\n` });
      await rewind(cwd, ['checkpoint', label]);
    }

    const planned = await rewind(cwd, ['prune', '--keep-last', '1', '--dry-run']);
    expect(planned).toMatchObject({ code: 0, stderr: '' });
    expect(planned.stdout).toContain('Would drop 2 checkpoints:\n  c1 (#2): beyond --keep-last\n');
    expect(planned.stdout).toContain('Nothing was dropped');
    expect(await labelsOf(cwd)).toEqual(['c1', 'c2', 'c3']);

    const spared = await rewind(cwd, ['prune', '--max-size', '1', '--dry-run']);
    expect(spared.stdout).toContain(
      'Spared 1 checkpoint the criteria selected:\n  c3 (#4): the newest checkpoint is always kept\n',
    );

    expect((await rewind(cwd, ['prune', '--older-than', '1h'])).stdout).toBe(
      'Dropped no checkpoint.\nKept 3 checkpoints.\n',
    );

    const dropped = await rewind(cwd, ['prune', '--keep-last', '2']);
    expect(dropped.stdout).toBe(
      'Dropped 1 checkpoint for good:\n  c1 (#2): beyond --keep-last\n' +
        'Kept 2 checkpoints. `rewind gc` frees the space only the dropped ones held.\n',
    );
    expect(await labelsOf(cwd)).toEqual(['c2', 'c3']);
  });

  it('plans a rollback after prune and gc reclaimed what the dropped checkpoints held', async () => {
    const cwd = await makeTempDirectory();
    await rewind(cwd, ['init', '-q']);
    for (const label of ['a', 'b', 'c']) {
      await lay(cwd, { f: `${label}\n` });
      await rewind(cwd, ['checkpoint', label, '-q']);
    }
    await rewind(cwd, ['prune', '--keep-last', '1', '-q']);
    expect((await rewind(cwd, ['gc', '--grace-seconds', '0', '-q'])).code).toBe(0);
    await lay(cwd, { f: 'handedit\n' });

    const planned = await rewind(cwd, ['--json', 'rollback', 'c', '--dry-run']);
    expect(planned).toMatchObject({ code: 0, stderr: '' });
    expect(JSON.parse(planned.stdout).changes).toEqual([
      { path: 'f', action: 'written', isUnrecorded: true },
    ]);
    expect((await rewind(cwd, ['rollback', 'c', '-q'])).code).toBe(0);
    expect(await readFile(join(cwd, 'f'), 'utf8')).toBe('c\n');
  });

  it('refuses a prune without a criterion, or with a duration or size it cannot read, as a usage error', async () => {
    const cwd = await makeTempDirectory();
    await rewind(cwd, ['init']);
    await rewind(cwd, ['checkpoint', 'base']);
    for (const [argv, message] of [
      [['prune'], 'Say which checkpoints to drop: --keep-last, --older-than or --max-size.'],
      [['prune', '--older-than', '3x'], '--older-than must be a duration such as 30m, 12h, 7d'],
      [['prune', '--max-size', 'lots'], '--max-size must be a size such as 500MB, 2GiB or 1.5G'],
      [['prune', '--keep-last', '0'], '--keep-last must be a whole number of 1 or more'],
    ] as const) {
      expect(await rewind(cwd, [...argv]), argv.join(' ')).toMatchObject({
        code: 2,
        stderr: expect.stringContaining(message),
      });
    }
    expect(await labelsOf(cwd)).toEqual(['base']);
  });

  it('asks on a terminal before storing a first checkpoint over its budget, and stores nothing unless told', async () => {
    const cwd = await makeTempDirectory();
    await lay(cwd, {
      'src/app.js': 'x'.repeat(2000),
      'docs/guide.md': 'y'.repeat(500),
      'node_modules/pkg/index.js': 'z',
      '.gitignore': 'node_modules\n',
    });
    await rewind(cwd, ['init']);

    // Nobody to ask: refused, saying how to go on.
    const refused = await rewind(cwd, ['checkpoint', 'base', '--max-size', '1KB']);
    expect(refused.code).toBe(1);
    expect(refused.stderr).toContain('[SNAPSHOT_TOO_LARGE]');
    expect(refused.stderr).toContain('pass --max-size SIZE');
    expect(refused.stderr).toContain('or --yes');
    const json = await rewind(cwd, ['--json', 'checkpoint', 'base', '--max-size', '1KB']);
    expect(json.code).toBe(1);
    expect(JSON.parse(json.stdout)).toMatchObject({
      error: {
        code: 'SNAPSHOT_TOO_LARGE',
        data: { fileCount: 3, leftOut: ['node_modules'], leftOutCount: 1 },
      },
    });

    // A person asked says no: nothing stored.
    let question = '';
    let stdout = '';
    const declined = await runCli(['checkpoint', 'base', '--max-size', '1KB'], {
      cwd,
      stdout: (text) => {
        stdout += text;
      },
      stderr: () => {},
      prompt: async (asked) => {
        question = asked;
        return 'n';
      },
    });
    expect(declined).toBe(1);
    expect(question).toBe('Store it anyway? [y/N] ');
    expect(stdout).toMatch(
      /^The first checkpoint reads and stores every file: 3 files, 2\.5 KiB, over the budget of 1000 B\.\nLargest directories:\n {2}src\/ +2\.0 KiB {2}1 file\n {2}docs\/ +500 B {2}1 file\n/,
    );
    expect(stdout).toContain('Left out by .gitignore/.rewindignore: node_modules/.\n');
    expect(stdout).toContain('Not stored; no checkpoint was made.\n');
    expect(await labelsOf(cwd)).toEqual([]);

    // Says yes: stored.
    const stored = await rewind(cwd, ['checkpoint', 'base', '--max-size', '1KB'], { answer: 'y' });
    expect(stored).toMatchObject({ code: 0 });
    expect(stored.stdout).toContain('Checkpoint base (#2): 3 files');
    // Only a first checkpoint has a budget: a later one reads only what changed.
    await lay(cwd, { 'src/app.js': 'changed' });
    expect((await rewind(cwd, ['checkpoint', 'next', '--max-size', '1KB'])).code).toBe(0);
    expect(await labelsOf(cwd)).toEqual(['base', 'next']);
  });

  it('stores a first checkpoint over its budget with --yes or a larger --max-size, asking nobody', async () => {
    for (const flags of [['--yes'], ['--max-size', '1MiB'], ['--max-size', 'unlimited']]) {
      const cwd = await makeTempDirectory();
      await lay(cwd, { 'a.txt': 'x'.repeat(2000) });
      await rewind(cwd, ['init']);
      const stored = await rewind(cwd, ['checkpoint', 'base', ...flags]);
      expect(stored, flags.join(' ')).toMatchObject({ code: 0, stderr: '' });
    }
    const cwd = await makeTempDirectory();
    await rewind(cwd, ['init']);
    expect(await rewind(cwd, ['checkpoint', 'base', '--yes', '--max-size', '1GiB'])).toMatchObject({
      code: 2,
      stderr: expect.stringContaining('Give --max-size or --yes'),
    });
    expect(await rewind(cwd, ['checkpoint', 'base', '--max-size', 'huge'])).toMatchObject({
      code: 2,
      stderr: expect.stringContaining('--max-size must be a size such as 500MB'),
    });
  });
});
