import { mkdir, readdir, readFile, readlink, rm, stat, symlink, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { findStore, initStore, openStore } from '../../src/store/index.js';
import { makeTempDirectory } from '../helpers/temp.js';

describe('store layout', () => {
  it('creates .rewind/ with its marker, objects/, sessions/ and a .gitignore that keeps it out of git', async () => {
    const workspace = await makeTempDirectory();
    const result = await initStore(workspace);
    expect(result).toMatchObject({ workspace, directory: join(workspace, '.rewind'), isNew: true });
    expect((await readdir(result.directory)).sort()).toEqual([
      '.gitignore',
      'objects',
      'rewind.json',
      'sessions',
    ]);
    expect(await readFile(join(result.directory, '.gitignore'), 'utf8')).toMatch(/^\*$/m);
    expect(JSON.parse(await readFile(join(result.directory, 'rewind.json'), 'utf8'))).toMatchObject(
      {
        format: 'rewind-store',
        version: 1,
      },
    );
    expect((await initStore(workspace)).isNew).toBe(false);
  });

  it('refuses a .rewind/ that Rewind did not make, and leaves it as it was', async () => {
    const workspace = await makeTempDirectory();
    await mkdir(join(workspace, '.rewind'));
    await writeFile(join(workspace, '.rewind', 'notes.txt'), 'mine');
    await expect(initStore(workspace)).rejects.toMatchObject({ code: 'STORE_NOT_OURS' });
    await expect(openStore(workspace)).rejects.toMatchObject({ code: 'STORE_NOT_OURS' });
    expect(await readdir(join(workspace, '.rewind'))).toEqual(['notes.txt']);

    await writeFile(join(workspace, '.rewind', 'rewind.json'), '{"format":"something-else"}');
    await expect(initStore(workspace)).rejects.toMatchObject({ code: 'STORE_NOT_OURS' });
  });

  it('finishes a store whose init stopped after its settings, or whose settings were written by hand', async () => {
    // An init cut short between config.json (written first) and the marker, a temporary file left.
    const workspace = await makeTempDirectory();
    await mkdir(join(workspace, '.rewind'));
    const settings = { objects: 's3://team/agents', ledger: 'postgres://db/rewind', store: 'ci' };
    await writeFile(join(workspace, '.rewind', 'config.json'), JSON.stringify(settings));
    await writeFile(join(workspace, '.rewind', '.config.json.4242.0123456789ab.tmp'), '{');
    const made = await initStore(workspace);
    expect(made).toMatchObject({
      isNew: true,
      objects: 's3://team/agents',
      ledger: { url: 'postgres://db/rewind', store: 'ci', workspaceId: expect.any(String) },
    });
    // Its copy of the workspace was named once, before the marker, and keeps that name.
    const again = await openStore(workspace);
    expect(again.ledger?.workspaceId).toBe(made.ledger?.workspaceId);
    expect(JSON.parse(await readFile(join(workspace, '.rewind', 'config.json'), 'utf8'))).toEqual({
      ...settings,
      workspaceId: made.ledger?.workspaceId,
    });
    // Rewritten for its user alone: a ledger URL may carry a password.
    expect((await stat(join(workspace, '.rewind', 'config.json'))).mode & 0o777).toBe(0o600);
    const withPassword = await makeTempDirectory();
    await initStore(withPassword, { ledger: 'postgres://agent:secret@db/rewind' });
    expect((await stat(join(withPassword, '.rewind', 'config.json'))).mode & 0o777).toBe(0o600);
    // Anything else beside them is still not ours.
    const other = await makeTempDirectory();
    await mkdir(join(other, '.rewind'));
    await writeFile(join(other, '.rewind', 'config.json'), '{}');
    await writeFile(join(other, '.rewind', 'notes.txt'), 'mine');
    await expect(initStore(other)).rejects.toMatchObject({ code: 'STORE_NOT_OURS' });
  });

  it('refuses a .rewind that is a file or a link to nothing, saying what it is and what to do, and leaves it as it was', async () => {
    const workspace = await makeTempDirectory();
    const path = join(workspace, '.rewind');
    await writeFile(path, 'my notes');
    await mkdir(join(workspace, 'sub'));
    const refusal = {
      code: 'STORE_NOT_OURS',
      message: expect.stringMatching(/\.rewind is a file, not a directory: .*Move it aside/),
    };
    await expect(initStore(workspace)).rejects.toMatchObject(refusal);
    await expect(openStore(workspace)).rejects.toMatchObject(refusal);
    // The search upward stops at it: never "no store", never a store further up.
    await expect(findStore(join(workspace, 'sub'))).rejects.toMatchObject(refusal);
    expect(await readFile(path, 'utf8')).toBe('my notes');

    await rm(path);
    await symlink('nowhere', path);
    await expect(initStore(workspace)).rejects.toMatchObject({
      code: 'STORE_NOT_OURS',
      message: expect.stringContaining('is a symbolic link to nothing'),
    });
    expect(await readlink(path)).toBe('nowhere');
  });

  it('refuses a store written in a newer format', async () => {
    const workspace = await makeTempDirectory();
    const { directory } = await initStore(workspace);
    await writeFile(join(directory, 'rewind.json'), '{"format":"rewind-store","version":2}');
    await expect(openStore(workspace)).rejects.toMatchObject({ code: 'STORE_VERSION_UNSUPPORTED' });
  });

  it('finds the nearest store above a directory, and nothing where there is none', async () => {
    const workspace = await makeTempDirectory();
    await initStore(workspace);
    await mkdir(join(workspace, 'a', 'b'), { recursive: true });
    expect(await findStore(join(workspace, 'a', 'b'))).toEqual({
      workspace,
      directory: join(workspace, '.rewind'),
    });
    expect(await findStore(await makeTempDirectory())).toBeUndefined();
    await expect(openStore(join(workspace, 'a'))).rejects.toMatchObject({
      code: 'STORE_NOT_FOUND',
    });
  });
});

describe('initStore racing itself', () => {
  it('lets several callers create the same store at once: all succeed, one store', async () => {
    const workspace = await makeTempDirectory();
    // Interleaved at every await, as concurrent requests of one server are.
    const results = await Promise.allSettled(Array.from({ length: 8 }, () => initStore(workspace)));
    expect(results.filter((result) => result.status === 'rejected')).toEqual([]);
    expect((await readdir(join(workspace, '.rewind'))).sort()).toEqual([
      '.gitignore',
      'objects',
      'rewind.json',
      'sessions',
    ]);
  });
});
