import {
  lstat,
  mkdir,
  readdir,
  readFile,
  readlink,
  rm,
  symlink,
  writeFile,
} from 'node:fs/promises';
import { join } from 'node:path';
import { describe, expect, it, onTestFinished } from 'vitest';
import { init, openSession } from '../../src/session/index.js';
import { rewind } from '../helpers/cli.js';
import { sessionOn } from '../helpers/session.js';
import { makeTempDirectory } from '../helpers/temp.js';

// File names on Linux are bytes. Latin-1 names (from old archives, Windows shares, test data)
// are not valid UTF-8; they were left out of every snapshot without a word.
const LATIN1 = Buffer.from('caf\xe9.txt', 'latin1');
const DIRECTORY = Buffer.from('r\xe9sum\xe9s', 'latin1');
const INNER = Buffer.concat([DIRECTORY, Buffer.from('/lettre.txt')]);
const LINK = Buffer.from('link-\xff', 'latin1');

function at(workspace: string, name: Buffer): Buffer {
  return Buffer.concat([Buffer.from(`${workspace}/`), name]);
}

async function namesIn(directory: Buffer | string): Promise<string[]> {
  return (await readdir(directory, { encoding: 'buffer' }))
    .map((name) => name.toString('hex'))
    .sort();
}

describe('file names that are not UTF-8', () => {
  it('are snapshotted and come back byte for byte: files, directories, links and their targets', async () => {
    const { workspace, session } = await sessionOn({ 'plain.txt': 'plain\n' });
    await writeFile(at(workspace, LATIN1), 'caf\xe9\n', 'latin1');
    await mkdir(at(workspace, DIRECTORY));
    await writeFile(at(workspace, INNER), 'Madame,\n');
    await symlink(LATIN1, at(workspace, LINK));
    const before = await namesIn(workspace);

    const start = await session.checkpoint('start');
    expect(start.warnings).toEqual([]);
    await rm(at(workspace, LATIN1));
    await rm(at(workspace, DIRECTORY), { recursive: true });
    await rm(at(workspace, LINK));
    await writeFile(join(workspace, 'plain.txt'), 'changed\n');

    const plan = await session.rollback('start', { dryRun: true });
    expect(plan.changes.map((change) => change.path).sort()).toEqual([
      'caf\udce9.txt',
      'link-\udcff',
      'plain.txt',
      'r\udce9sum\udce9s/lettre.txt',
    ]);
    await session.rollback('start');
    expect(await namesIn(workspace)).toEqual(before);
    expect(await readFile(at(workspace, LATIN1), 'latin1')).toBe('caf\xe9\n');
    expect(await readFile(at(workspace, INNER), 'utf8')).toBe('Madame,\n');
    expect((await readlink(at(workspace, LINK), { encoding: 'buffer' })).equals(LATIN1)).toBe(true);
  });

  it('a command that writes one records it (through the incremental snapshot) and its undo removes it', async () => {
    const { workspace, session } = await sessionOn({ 'plain.txt': 'plain\n' });
    await session.checkpoint('start');
    const ran = await session.exec(['sh', '-c', "printf 'x' > \"$(printf 'na\\351ve.txt')\""]);
    expect(ran.changes).toEqual([
      expect.objectContaining({ path: 'na\udce9ve.txt', before: undefined }),
    ]);
    const naive = at(workspace, Buffer.from('na\xe9ve.txt', 'latin1'));
    expect((await lstat(naive)).isFile()).toBe(true);
    const undone = await session.undo(ran.id);
    expect(undone.status).toBe('undone');
    await expect(lstat(naive)).rejects.toMatchObject({ code: 'ENOENT' });
    expect(await namesIn(workspace)).toEqual(
      [Buffer.from('.rewind'), Buffer.from('plain.txt')].map((name) => name.toString('hex')).sort(),
    );
  });

  it('a command that moves a file out of one can be undone: the folder is checked by its bytes', async () => {
    const { workspace, session } = await sessionOn({});
    const inner = Buffer.concat([DIRECTORY, Buffer.from('/sub')]);
    await mkdir(at(workspace, inner), { recursive: true });
    await writeFile(at(workspace, Buffer.concat([inner, Buffer.from('/f.txt')])), 'f\n');
    await mkdir(join(workspace, 'to'));
    const before = await namesIn(at(workspace, inner));
    const moved = await session.exec([
      'sh',
      '-c',
      `mv "$(printf 'r\\351sum\\351s')/sub/f.txt" to/`,
    ]);
    expect(moved.deleted).toEqual(['r\udce9sum\udce9s/sub/f.txt']);
    const undone = await session.undo(moved.id);
    expect(undone).toMatchObject({ status: 'undone' });
    expect(await namesIn(at(workspace, inner))).toEqual(before);
  });

  it('list names them as read, write and delete take them back', async () => {
    const { workspace, session } = await sessionOn({ 'plain.txt': 'plain\n' });
    await writeFile(at(workspace, LATIN1), 'caf\xe9\n', 'latin1');
    await mkdir(at(workspace, DIRECTORY));
    await writeFile(at(workspace, INNER), 'Madame,\n');
    const root = await session.list('.');
    expect(root).toEqual(['caf\udce9.txt', 'plain.txt', 'r\udce9sum\udce9s/']);
    expect(await session.list('r\udce9sum\udce9s')).toEqual(['lettre.txt']);
    expect(await session.read('r\udce9sum\udce9s/lettre.txt')).toBe('Madame,\n');
    await session.write('caf\udce9.txt', 'changed\n');
    expect(await readFile(at(workspace, LATIN1), 'utf8')).toBe('changed\n');
    await session.delete('caf\udce9.txt');
    await expect(lstat(at(workspace, LATIN1))).rejects.toMatchObject({ code: 'ENOENT' });
  });

  it('an isolated session copies them into its view and commits them back exactly', async () => {
    const workspace = await makeTempDirectory();
    await writeFile(at(workspace, LATIN1), 'caf\xe9\n', 'latin1');
    await mkdir(at(workspace, DIRECTORY));
    await writeFile(at(workspace, INNER), 'Madame,\n');
    await init({ workspace });
    const session = await openSession({ workspace, isolation: 'isolated' });
    onTestFinished(() => session.close());
    expect(await namesIn(session.workspace)).toEqual(
      [LATIN1, DIRECTORY].map((name) => name.toString('hex')).sort(),
    );
    await session.write('r\udce9sum\udce9s/lettre.txt', 'Monsieur,\n');
    await session.delete('caf\udce9.txt');
    expect(await readFile(at(workspace, INNER), 'utf8')).toBe('Madame,\n');
    expect((await session.commit()).status).toBe('committed');
    expect(await readFile(at(workspace, INNER), 'utf8')).toBe('Monsieur,\n');
    await expect(lstat(at(workspace, LATIN1))).rejects.toMatchObject({ code: 'ENOENT' });
  });

  it('a diff names them in its headers by their bytes, quoted as git quotes them', async () => {
    const workspace = await makeTempDirectory();
    await writeFile(at(workspace, LATIN1), 'x\n');
    await writeFile(join(workspace, 'my notes é.md'), 'one\n');
    expect((await rewind(workspace, ['init'])).code).toBe(0);
    expect((await rewind(workspace, ['checkpoint', 'one'])).code).toBe(0);
    await writeFile(at(workspace, LATIN1), 'y\n');
    await writeFile(join(workspace, 'my notes é.md'), 'two\n');
    const diff = await rewind(workspace, ['diff', 'one']);
    expect(diff.stdout).toContain(
      '--- "a/caf\\351.txt"\n+++ "b/caf\\351.txt"\n@@ -1,1 +1,1 @@\n-x\n+y\n',
    );
    expect(diff.stdout).toContain(
      '--- "a/my notes \\303\\251.md"\n+++ "b/my notes \\303\\251.md"\n',
    );
  });

  it('the CLI shows their odd bytes as \\xHH, and --json keeps them exactly', async () => {
    const workspace = await makeTempDirectory();
    expect((await rewind(workspace, ['init', '--sandbox', 'none'])).code).toBe(0);
    const script = 'printf x > "$(printf \'na\\351ve\')"';
    const ran = await rewind(workspace, ['exec', '--', 'sh', '-c', script]);
    expect(ran.stdout).toContain('created  na\\xe9ve');
    const json = await rewind(workspace, ['--json', 'exec', '--', 'sh', '-c', `${script}y`]);
    expect(json.stdout).toContain('na\\udce9ve');
  });
});
