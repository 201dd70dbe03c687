import { readdir, readFile, stat, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { writeFileAtomic } from '../../src/lib/index.js';
import { makeTempDirectory } from '../helpers/temp.js';

describe('writeFileAtomic', () => {
  it('creates a file with the content and leaves no temporary file behind', async () => {
    const directory = await makeTempDirectory();
    const target = join(directory, 'a.json');
    await writeFileAtomic(target, '{"a":1}\n');
    expect(await readFile(target, 'utf8')).toBe('{"a":1}\n');
    expect(await readdir(directory)).toEqual(['a.json']);
  });

  it('replaces an existing file whole, and applies the requested mode', async () => {
    const directory = await makeTempDirectory();
    const target = join(directory, 'a.bin');
    await writeFile(target, 'old content that is longer');
    await writeFileAtomic(target, new Uint8Array([1, 2, 3]), { mode: 0o600 });
    expect([...(await readFile(target))]).toEqual([1, 2, 3]);
    expect((await stat(target)).mode & 0o777).toBe(0o600);
  });

  it('leaves the old file untouched and cleans up when the write fails', async () => {
    const directory = await makeTempDirectory();
    const target = join(directory, 'missing-dir', 'a.txt');
    await expect(writeFileAtomic(target, 'x')).rejects.toMatchObject({ code: 'ENOENT' });
    expect(await readdir(directory)).toEqual([]);
  });
});
