import { readdir, readFile } from 'node:fs/promises';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { sessionOn } from '../helpers/session.js';

describe('read and list', () => {
  it('cannot reach the store or .git however the path is spelled; can read and list the rest, .rewindignore included', async () => {
    const { workspace, session } = await sessionOn({
      'src/a.txt': 'a',
      '.rewindignore': 'dist/\n',
      '.gitignore': 'tmp/\n',
      '.git/config': '[remote "origin"]\n\turl = https://user:token@example.test/r.git\n',
      'vendor/lib/.git/config': 'nested',
    });
    const drafted = await session.http(
      {
        method: 'POST',
        url: 'https://api.example.test/deploy',
        headers: { authorization: 'Bearer sk-verbatim-secret' },
      },
      { draft: true },
    );
    expect(drafted.state).toBe('draft');
    // The draft keeps the header verbatim on disk: what an agent must not be able to read.
    const [draftFile] = await readdir(join(workspace, '.rewind', 'drafts'));
    const draftPath = `.rewind/drafts/${draftFile}`;
    expect(await readFile(join(workspace, draftPath), 'utf8')).toContain('sk-verbatim-secret');

    for (const path of [
      draftPath,
      `./${draftPath}`,
      `src/../${draftPath}`,
      `src//..//./${draftPath}`,
      '.rewind/rewind.json',
      '.git/config',
      'src/../.git/config',
      'vendor/lib/.git/config',
    ]) {
      await expect(session.read(path), path).rejects.toMatchObject({ code: 'PATH_IGNORED' });
    }
    for (const path of [
      '.rewind',
      './.rewind/',
      'src/../.rewind/drafts',
      '.git',
      'vendor/lib/.git',
    ]) {
      await expect(session.list(path), path).rejects.toMatchObject({ code: 'PATH_IGNORED' });
    }

    expect(await session.read('src/a.txt')).toBe('a');
    expect(await session.read('./src/../.rewindignore')).toBe('dist/\n');
    expect(await session.read('.gitignore')).toBe('tmp/\n');
    expect(await session.list('.')).toEqual([
      '.git/',
      '.gitignore',
      '.rewindignore',
      'src/',
      'vendor/',
    ]);
    expect(await session.list('vendor/lib')).toEqual(['.git/']);
  });
});
