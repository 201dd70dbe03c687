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
import { describe, expect, it } from 'vitest';
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
