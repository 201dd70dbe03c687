import { truncate, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { note } from '../../src/index.js';
import { rewind } from '../helpers/cli.js';
import { makeTempDirectory } from '../helpers/temp.js';
import { lay } from '../helpers/workspace.js';

const sessionsOf = async (cwd: string) =>
  JSON.parse((await rewind(cwd, ['--json', 'session', 'list'])).stdout) as {
    currentSession: string;
    sessions: { id: string; isCurrent: boolean; isHashChained: boolean }[];
  };

describe('rewind store commands', () => {
  it('says at init what the first checkpoint will take and what the rules leave out', async () => {
    const cwd = await makeTempDirectory();
    await lay(cwd, {
      'src/app.js': 'x'.repeat(3000),
      'src/util.js': 'y'.repeat(1000),
      'docs/guide.md': 'z'.repeat(100),
      'node_modules/pkg/index.js': 'module',
      'dist/app.js': 'built',
      '.env': 'SECRET=1',
      'debug.log': 'log',
      '.gitignore': 'node_modules\ndist\n.env\n*.log\n',
    });
    const initialized = await rewind(cwd, ['init']);
    expect(initialized).toMatchObject({ code: 0, stderr: '' });
    const [, , said] = initialized.stdout.split('\n');
    expect(said).toMatch(
      /^The first checkpoint will take 4 files, 4\.0 KiB \(largest: src\/ 3\.9 KiB, docs\/ 100 B\)\. Left out by \.gitignore\/\.rewindignore: (\S+, ){2}\S+ and 1 more\.$/,
    );
    // Still to come on a store without a checkpoint; --verbose names all the preview lists.
    const again = await rewind(cwd, ['--verbose', 'init']);
    expect(again.stdout).toContain(
      'Left out by .gitignore/.rewindignore: .env, debug.log, dist/ and node_modules/.',
    );
    expect(await rewind(cwd, ['-q', 'init'])).toEqual({ code: 0, stdout: '', stderr: '' });
    const { preview } = JSON.parse((await rewind(cwd, ['--json', 'init'])).stdout);
    expect(preview).toEqual({
      fileCount: 4,
      directoryCount: 2,
      sizeBytes: 4000 + 100 + 29,
      largest: [
        { path: 'src', fileCount: 2, sizeBytes: 4000 },
        { path: 'docs', fileCount: 1, sizeBytes: 100 },
      ],
      leftOut: ['.env', 'debug.log', 'dist', 'node_modules'],
      leftOutCount: 4,
      isFirst: true,
    });

    // Once a checkpoint is taken there is no first one to tell of.
    await rewind(cwd, ['checkpoint', 'base']);
    const after = await rewind(cwd, ['init']);
    expect(after.stdout).not.toContain('first checkpoint');
    expect(JSON.parse((await rewind(cwd, ['--json', 'init'])).stdout).preview.isFirst).toBe(false);
  });

  it('says at init that a first checkpoint over the budget will ask first, and refuses it where nobody can answer', async () => {
    const cwd = await makeTempDirectory();
    // A sparse file: 2 GiB by its size, nothing on disk, and never read by a preview.
    await writeFile(join(cwd, 'disk.img'), '');
    await truncate(join(cwd, 'disk.img'), 2 * 1024 ** 3);
    const initialized = await rewind(cwd, ['init']);
    expect(initialized.stdout).toContain('The first checkpoint will take 1 file, 2.0 GiB.\n');
    expect(initialized.stdout).toContain(
      'That is over the budget of 1.0 GiB or 100000 files: `rewind checkpoint` will show what it would store and ask first',
    );
    const refused = await rewind(cwd, ['checkpoint', 'base']);
    expect(refused).toMatchObject({
      code: 1,
      stderr: expect.stringContaining('[SNAPSHOT_TOO_LARGE]'),
    });
    expect((await rewind(cwd, ['checkpoints'])).stdout).toContain('No checkpoints yet');
  });

  it('starts sessions on a store, lists them and switches the current one', async () => {
    const cwd = await makeTempDirectory();
    await lay(cwd, { 'a.txt': 'a' });
    await rewind(cwd, ['init']);
    await rewind(cwd, ['checkpoint', 'base']);
    const first = (await sessionsOf(cwd)).currentSession;

    const started = await rewind(cwd, ['session', 'new', '--hash-chain']);
    expect(started.stdout).toMatch(
      /^Started session (\w+) \(hash-chained, no sandbox\); it is now the current session\.\n$/,
    );
    const second = (await sessionsOf(cwd)).currentSession;
    expect(second).not.toBe(first);
    expect((await rewind(cwd, ['checkpoints'])).stdout).toContain('No checkpoints yet');

    const aside = await rewind(cwd, ['session', 'new', '--no-switch']);
    expect(aside.stdout).toContain('the current session is unchanged (`rewind session use ');
    const listed = await sessionsOf(cwd);
    expect(listed.currentSession).toBe(second);
    expect(listed.sessions).toHaveLength(3);
    expect(listed.sessions.find((session) => session.id === second)?.isHashChained).toBe(true);
    const lines = (await rewind(cwd, ['session', 'list'])).stdout.trimEnd().split('\n');
    expect(lines).toHaveLength(3);
    expect(lines.filter((line) => line.startsWith('  * '))).toEqual([
      expect.stringContaining(second),
    ]);

    const used = await rewind(cwd, ['session', 'use', first.slice(0, 4)]);
    expect(used.stdout).toBe(
      `The current session is now ${first} (no hash chain, no sandbox): 2 entries.\n`,
    );
    expect((await rewind(cwd, ['checkpoints'])).stdout).toContain('base');
    expect(await rewind(cwd, ['session', 'use', 'nosuch'])).toMatchObject({
      code: 1,
      stderr: expect.stringContaining('[SESSION_NOT_FOUND]'),
    });
    expect((await sessionsOf(cwd)).currentSession).toBe(first);
  });

  it('lines up the columns of the session list whatever the width of its entry counts', async () => {
    const cwd = await makeTempDirectory();
    await rewind(cwd, ['init', '--sandbox', 'none']);
    await rewind(cwd, ['session', 'new', '--hash-chain', '--sandbox', 'none', '--no-switch']);
    const [, chained] = (await sessionsOf(cwd)).sessions;
    // 1,000 entries: the count's column was 12 characters wide, so this one ran into the next
    // column ('1000 entrieshash-chained'), and 100 left one space where the others left three.
    for (let index = 0; index < 999; index++) {
      await note({ workspace: cwd, session: chained?.id, text: `note ${index}` });
    }
    await rewind(cwd, ['session', 'new', '--sandbox', 'none', '--no-switch']);
    for (const args of [['session', 'list'], ['status']]) {
      const lines = (await rewind(cwd, args)).stdout
        .split('\n')
        .filter((line) => /^ {2}[ *] \w{10} /.test(line));
      expect(lines, args.join(' ')).toEqual([
        expect.stringMatching(/^ {2}\* \w{10} {2}[\d-]{10} [\d:.]{12} {5}1 entry$/),
        expect.stringMatching(
          /^ {4}\w{10} {2}[\d-]{10} [\d:.]{12} {2}1000 entries {2}hash-chained$/,
        ),
        expect.stringMatching(/^ {4}\w{10} {2}[\d-]{10} [\d:.]{12} {5}1 entry$/),
      ]);
    }
  });

  it('refuses to switch to an isolated session whose view was destroyed', async () => {
    const cwd = await makeTempDirectory();
    await rewind(cwd, ['init']);
    const first = (await sessionsOf(cwd)).currentSession;
    const { isolatedSession } = JSON.parse(
      (await rewind(cwd, ['--json', 'init', '--isolated'])).stdout,
    );
    expect((await rewind(cwd, ['destroy'])).code).toBe(0);
    await rewind(cwd, ['session', 'use', first]);
    expect(await rewind(cwd, ['session', 'use', isolatedSession])).toMatchObject({
      code: 1,
      stderr: expect.stringContaining('its view is gone'),
    });
    expect((await sessionsOf(cwd)).currentSession).toBe(first);
  });
});
