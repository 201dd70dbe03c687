import { mkdir, symlink, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { normalizeWorkspacePath, resolveWorkspacePath } from '../../src/lib/index.js';
import { makeTempDirectory } from '../helpers/temp.js';

describe('normalizeWorkspacePath', () => {
  it('normalizes a relative path', () => {
    expect(normalizeWorkspacePath('./src//a/../b.ts')).toBe('src/b.ts');
    expect(normalizeWorkspacePath('dir/')).toBe('dir');
  });

  it.each([
    ['/etc/passwd', 'is absolute'],
    ['../outside', 'leads out of the workspace'],
    ['a/../../outside', 'leads out of the workspace'],
    ['a\0b', 'contains a NUL byte'],
    ['', 'is empty'],
    ['.', 'names the workspace root itself'],
    ['a\ud800', 'is not valid Unicode'],
    ['a\udc7f', 'is not valid Unicode'],
    ['a\udd00/b', 'is not valid Unicode'],
    ['x'.repeat(256), 'holds a name of 256 bytes'],
  ])('refuses %j because it %s', (path, why) => {
    expect(() => normalizeWorkspacePath(path)).toThrow(
      expect.objectContaining({ code: 'PATH_INVALID' }),
    );
    expect(() => normalizeWorkspacePath(path)).toThrow(why);
  });

  it('accepts the escapes that stand for bytes of a name that is not UTF-8, and counts them as one byte', () => {
    expect(normalizeWorkspacePath('caf\udce9/b\udcff\udcfe.t')).toBe('caf\udce9/b\udcff\udcfe.t');
    expect(normalizeWorkspacePath('ok-😀')).toBe('ok-😀');
    // 255 bytes on the disk, though 765 as UTF-8 text.
    expect(normalizeWorkspacePath('\udcff'.repeat(255))).toHaveLength(255);
    expect(() => normalizeWorkspacePath('\udcff'.repeat(256))).toThrow('holds a name of 256 bytes');
  });
});

describe('resolveWorkspacePath', () => {
  it('resolves existing and not-yet-existing paths inside the root', async () => {
    const root = await makeTempDirectory();
    await mkdir(join(root, 'src'));
    await writeFile(join(root, 'src', 'a.ts'), '');
    expect(await resolveWorkspacePath(root, 'src/a.ts')).toBe(join(root, 'src', 'a.ts'));
    expect(await resolveWorkspacePath(root, 'new/dir/file.ts')).toBe(
      join(root, 'new', 'dir', 'file.ts'),
    );
  });

  it('refuses a symbolic link in the middle of the path before following it', async () => {
    const root = await makeTempDirectory();
    const outside = await makeTempDirectory();
    await symlink(outside, join(root, 'escape'));
    await expect(resolveWorkspacePath(root, 'escape/secret.txt')).rejects.toMatchObject({
      code: 'SYMLINK_REFUSED',
      data: { path: 'escape/secret.txt', link: 'escape' },
    });
  });

  it('refuses a symbolic link as the last component, even one pointing inside', async () => {
    const root = await makeTempDirectory();
    await writeFile(join(root, 'real.txt'), 'x');
    await symlink('real.txt', join(root, 'alias.txt'));
    await expect(resolveWorkspacePath(root, 'alias.txt')).rejects.toMatchObject({
      code: 'SYMLINK_REFUSED',
    });
    // A dangling link is refused too: it could be created to point anywhere.
    await symlink('/etc/shadow', join(root, 'dangling'));
    await expect(resolveWorkspacePath(root, 'dangling')).rejects.toMatchObject({
      code: 'SYMLINK_REFUSED',
    });
  });
});
