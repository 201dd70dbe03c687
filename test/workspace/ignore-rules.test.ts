import { execFileSync } from 'node:child_process';
import { mkdir, symlink, writeFile } from 'node:fs/promises';
import { dirname, join } from 'node:path';
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import type { Digest } from '../../src/lib/index.js';
import { createObjectStore, initStore, type ObjectStore, readTree } from '../../src/store/index.js';
import { isIgnoredPath, snapshot, snapshotPath } from '../../src/workspace/index.js';
import { git } from '../helpers/git.js';
import { makeTempDirectory } from '../helpers/temp.js';
import { lay } from '../helpers/workspace.js';

/** Every file (and link) a stored tree holds, by path. */
async function filesOf(store: ObjectStore, tree: Digest, prefix = ''): Promise<string[]> {
  const files: string[] = [];
  for (const entry of (await readTree(store, tree)).entries) {
    const path = `${prefix}${entry.name}`;
    if (entry.type === 'directory') files.push(...(await filesOf(store, entry.digest, `${path}/`)));
    else files.push(path);
  }
  return files.sort();
}

/** A git repository holding `layout`, with a store, and what Rewind's snapshot of it holds. */
async function snapshotFiles(workspace: string): Promise<string[]> {
  const { directory } = await initStore(workspace);
  const store = createObjectStore(directory);
  const { tree } = await snapshot(workspace, { store, storeDirectory: directory });
  return filesOf(store, tree);
}

describe('what snapshots leave out', () => {
  it('is what git leaves out: .gitignore at every level, above the workspace too, and info/exclude; .rewindignore re-includes', async () => {
    const repository = await makeTempDirectory();
    git(repository, ['init', '-q']);
    await lay(repository, {
      '.gitignore': 'node_modules/\n*.log\n',
      'app/.gitignore': 'dist/\n.env\n',
      'app/src/index.js': 'code',
      'app/src/.gitignore': 'generated.js\n',
      'app/src/generated.js': 'gen',
      'app/dist/out.js': 'built',
      'app/node_modules/p/index.js': 'dep',
      'app/debug.log': 'log',
      'app/.env': 'SECRET=1',
      'app/notes.txt': 'private',
    });
    await writeFile(join(repository, '.git/info/exclude'), 'notes.txt\n');
    const workspace = join(repository, 'app');
    expect(await snapshotFiles(workspace)).toEqual([
      '.gitignore',
      'src/.gitignore',
      'src/index.js',
    ]);
    // What Rewind keeps that git does not: a `!` line in .rewindignore.
    await writeFile(join(workspace, '.rewindignore'), '!.env\n');
    expect(await snapshotFiles(workspace)).toEqual([
      '.env',
      '.gitignore',
      '.rewindignore',
      'src/.gitignore',
      'src/index.js',
    ]);
    expect(isIgnoredPath(workspace, 'dist/new.js', false)).toBe(true);
    expect(isIgnoredPath(workspace, '.env', false)).toBe(false);
    // The store keeps itself out of git.
    expect(git(repository, ['status', '--porcelain', '--untracked-files=all'])).not.toMatch(
      /\.rewind\//,
    );
  });

  it('reads no rules through a link or from a named pipe, as git does not: nothing hangs, nothing outside counts', async () => {
    const outside = await makeTempDirectory();
    await writeFile(join(outside, 'rules'), '*\n');
    const workspace = await makeTempDirectory();
    await lay(workspace, {
      'linked/.gitignore': { link: join(outside, 'rules') },
      'linked/kept.txt': 'k',
      'piped/kept.txt': 'k',
      'through/kept.txt': 'k',
    });
    execFileSync('mkfifo', [join(workspace, 'piped/.gitignore')]);
    await symlink(outside, join(workspace, 'elsewhere'));
    await writeFile(join(outside, '.gitignore'), '*\n');
    await symlink('loop', join(workspace, 'loop'));
    expect(await snapshotFiles(workspace)).toEqual([
      'elsewhere',
      'linked/.gitignore',
      'linked/kept.txt',
      'loop',
      'piped/kept.txt',
      'through/kept.txt',
    ]);
    expect(isIgnoredPath(workspace, 'linked/kept.txt', false)).toBe(false);
    expect(isIgnoredPath(workspace, 'piped/kept.txt', false)).toBe(false);
    expect(isIgnoredPath(workspace, 'elsewhere/x.txt', false)).toBe(false);
    expect(isIgnoredPath(workspace, 'loop/x.txt', false)).toBe(false);
  });

  it('tells a single path as the full walk does', async () => {
    const workspace = await makeTempDirectory();
    git(workspace, ['init', '-q']);
    await lay(workspace, { '.gitignore': 'build/\n', 'pkg/build/x': 'x', 'pkg/a.txt': 'a' });
    const { directory } = await initStore(workspace);
    const batch = createObjectStore(directory).batch();
    const pathSnapshot = await snapshotPath(workspace, 'pkg', batch);
    await batch.commit();
    expect(pathSnapshot.ignored).toEqual(['pkg/build']);
  });

  const PATTERNS = [
    '*.log',
    '!keep.log',
    'dist/',
    '/build',
    'build',
    '**/cache/',
    'sub/*.tmp',
    '*.tmp',
    '!sub/x.tmp',
    '.env',
    'node_modules/',
    'a/**/b.txt',
    '/sub/deep',
    'deep/',
    '*.md',
    '!e.md',
    'x*',
    '!/x1',
    'sub/',
    '!sub/keep/',
  ];
  const FILES = [
    'a.txt',
    'keep.log',
    'x.log',
    'dist/out.js',
    'build/o',
    'sub/build/o',
    'sub/x.tmp',
    'sub/y.tmp',
    'y.tmp',
    '.env',
    'sub/.env',
    'node_modules/p/i.js',
    'sub/cache/c',
    'cache/c',
    'a/b.txt',
    'a/q/b.txt',
    'sub/deep/d.txt',
    'deep/e.md',
    'f.md',
    'x1',
    'x2.md',
    'sub/x3',
    'sub/keep/k.txt',
  ];
  const rules = fc.subarray(PATTERNS, { maxLength: 6 }).map((lines) => `${lines.join('\n')}\n`);

  it('agrees with git ls-files on random rule sets and files', async () => {
    await fc.assert(
      fc.asyncProperty(
        fc.subarray(FILES, { minLength: 1 }),
        rules,
        rules,
        rules,
        async (files, root, sub, exclude) => {
          const workspace = await makeTempDirectory();
          git(workspace, ['init', '-q']);
          for (const file of files) {
            await mkdir(dirname(join(workspace, file)), { recursive: true });
            await writeFile(join(workspace, file), file);
          }
          await mkdir(join(workspace, 'sub'), { recursive: true });
          await writeFile(join(workspace, '.gitignore'), root);
          await writeFile(join(workspace, 'sub/.gitignore'), sub);
          await writeFile(join(workspace, '.git/info/exclude'), exclude);
          const byGit = git(workspace, ['ls-files', '--others', '--exclude-standard', '-z'])
            .split('\0')
            .filter(Boolean)
            .sort();
          expect(await snapshotFiles(workspace)).toEqual(byGit);
        },
      ),
      { numRuns: 40 },
    );
  });
});
