import { existsSync } from 'node:fs';
import { readFile } from 'node:fs/promises';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { rewind } from '../helpers/cli.js';
import { makeTempDirectory } from '../helpers/temp.js';

describe('rewind commands settled by the operation table', () => {
  it('runs one word as a shell command and several as a program with its arguments', async () => {
    const cwd = await makeTempDirectory();
    await rewind(cwd, ['init']);
    const shell = await rewind(cwd, ['exec', 'echo hi && echo there > t.txt']);
    expect(shell).toMatchObject({ code: 0, stdout: expect.stringMatching(/^hi\n/) });
    expect(await readFile(join(cwd, 't.txt'), 'utf8')).toBe('there\n');
    const argv = await rewind(cwd, ['exec', '--', 'touch', 'a b']);
    expect(argv.code).toBe(0);
    expect(existsSync(join(cwd, 'a b'))).toBe(true);
  });

  it("reads and lists an isolated session's view, and shows a named session's pending commit", async () => {
    const cwd = await makeTempDirectory();
    await rewind(cwd, ['init']);
    const shared = JSON.parse((await rewind(cwd, ['status', '--json'])).stdout).currentSession;
    const isolated = (await rewind(cwd, ['init', '--isolated', '--json'])).stdout;
    const id = JSON.parse(isolated).isolatedSession as string;
    await rewind(cwd, ['write', 'dir/view.txt', 'only in the view']);
    expect(existsSync(join(cwd, 'dir'))).toBe(false);
    expect(await rewind(cwd, ['read', 'dir/view.txt'])).toMatchObject({
      code: 0,
      stdout: 'only in the view',
    });
    expect((await rewind(cwd, ['list'])).stdout).toBe('dir/\n');
    expect((await rewind(cwd, ['list', 'nope'])).stderr).toContain('[PATH_NOT_FOUND]');

    const named = await rewind(cwd, ['status', '--session', id, '--json']);
    expect(JSON.parse(named.stdout).pending.pendingChanges).toHaveLength(1);
    const other = JSON.parse((await rewind(cwd, ['status', '--session', shared, '--json'])).stdout);
    expect(other.pending).toBeUndefined();
    expect(await rewind(cwd, ['status', '--session', 'nosuch'])).toMatchObject({
      code: 1,
      stderr: expect.stringContaining('[SESSION_NOT_FOUND]'),
    });
  });

  it('says what is wrong with an action id, a short session prefix and a kind no entry has', async () => {
    const cwd = await makeTempDirectory();
    await rewind(cwd, ['init']);
    await rewind(cwd, ['note', 'one']);
    const id = JSON.parse((await rewind(cwd, ['status', '--json'])).stdout).currentSession;
    const none = await rewind(cwd, ['undo', '99999']);
    expect(none.stderr).toMatch(/has no entry #99999 \(its last is #2\)\. .*\[ACTION_NOT_FOUND\]/);
    const note = await rewind(cwd, ['undo', '2']);
    expect(note.stderr).toContain('has entry #2, which is not an action');
    const short = await rewind(cwd, ['log', '--session', id.slice(0, 2)]);
    expect(short.stderr).toContain('A prefix of an id needs 4 characters or more.');
    const kind = await rewind(cwd, ['log', '--kind', 'bogus']);
    expect(kind).toMatchObject({
      code: 1,
      stderr: expect.stringContaining('No entry is of kind "bogus"'),
    });
    expect((await rewind(cwd, ['log', '--kind', 'note'])).stdout).toContain('one');
    expect((await rewind(cwd, ['log', '--kind', 'x.deploy'])).code).toBe(0);
    // A label the session never had is a typo too, not an empty timeline.
    expect(await rewind(cwd, ['log', '--checkpoint', 'nolabel'])).toMatchObject({
      code: 1,
      stderr: expect.stringMatching(/never had a checkpoint "nolabel".*\[CHECKPOINT_NOT_FOUND\]/),
    });
    await rewind(cwd, ['checkpoint', 'base']);
    expect((await rewind(cwd, ['log', '--checkpoint', 'base'])).stdout).toContain('base');
  });

  it('keeps the last entries of the log with --last', async () => {
    const cwd = await makeTempDirectory();
    await rewind(cwd, ['init']);
    for (const text of ['one', 'two', 'three']) await rewind(cwd, ['note', text]);
    const lines = (await rewind(cwd, ['log', '--last', '2'])).stdout.trimEnd().split('\n');
    expect(lines).toHaveLength(3);
    expect(lines[1]).toContain('note: two');
    expect(lines[2]).toContain('note: three');
  });

  it('names the flag of a malformed input in a usage error, and leaves domain checks to exit 1', async () => {
    const cwd = await makeTempDirectory();
    await rewind(cwd, ['init']);
    expect(await rewind(cwd, ['exec', '--timeout', 'soon', '--', 'true'])).toMatchObject({
      code: 2,
      stderr: expect.stringContaining('--timeout must be a positive number of seconds, not "soon"'),
    });
    expect(await rewind(cwd, ['undo'])).toMatchObject({
      code: 2,
      stderr: expect.stringContaining('Give either an action ID or --last.'),
    });
    const both = await rewind(cwd, [
      'record',
      'deploy',
      '--compensate-command',
      'x',
      '--compensate-request',
      'DELETE http://example.test/',
    ]);
    expect(both).toMatchObject({
      code: 2,
      stderr: expect.stringContaining('--compensate-command or --compensate-request'),
    });
    expect(await rewind(cwd, ['checkpoint', 'a b'])).toMatchObject({
      code: 1,
      stderr: expect.stringContaining('[INVALID_ARGUMENT]'),
    });
  });

  it('shows a draft with approve --dry-run and runs nothing', async () => {
    const cwd = await makeTempDirectory();
    await rewind(cwd, ['init']);
    await rewind(cwd, ['exec', '--draft', '--', 'touch', 'ran.txt']);
    const shown = await rewind(cwd, ['approve', '2', '--dry-run']);
    expect(shown).toMatchObject({ code: 0, stdout: expect.stringContaining('"touch"') });
    expect(existsSync(join(cwd, 'ran.txt'))).toBe(false);
    const digest = /content digest (\S+)/.exec(shown.stdout)?.[1] as string;
    expect(await rewind(cwd, ['approve', '2', '--yes', '--digest', digest])).toMatchObject({
      code: 0,
    });
    expect(existsSync(join(cwd, 'ran.txt'))).toBe(true);
  });

  it('writes standard input byte for byte', async () => {
    const cwd = await makeTempDirectory();
    await rewind(cwd, ['init']);
    const text = 'caf\u00e9 \u{1F600}\n';
    await rewind(cwd, ['write', 'a.txt', '-'], { stdin: text });
    expect(await readFile(join(cwd, 'a.txt'), 'utf8')).toBe(text);
    await rewind(cwd, ['write', 'b.txt', 'aGk=', '--encoding', 'base64']);
    expect(await readFile(join(cwd, 'b.txt'), 'utf8')).toBe('hi');
  });
});
