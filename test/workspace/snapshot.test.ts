import { execFileSync, spawn } from 'node:child_process';
import { appendFile, chmod, chown, stat, writeFile } from 'node:fs/promises';
import { homedir } from 'node:os';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { readTree } from '../../src/store/index.js';
import { snapshot } from '../../src/workspace/index.js';
import { ROOT } from '../helpers/processes.js';
import { makeTempDirectory } from '../helpers/temp.js';
import { laterClock, makeWorkspace } from '../helpers/workspace.js';

describe('snapshot', () => {
  it('records files, directories, modes and symbolic links as a Merkle tree, never following links', async () => {
    const { workspace, storeDirectory, store } = await makeWorkspace({
      'README.md': '# hi\n',
      'bin/run.sh': { text: '#!/bin/sh\n', mode: 0o755 },
      'src/lib/a.ts': 'export const a = 1;\n',
      'link-to-etc': { link: '/etc' },
    });
    const result = await snapshot(workspace, { store, storeDirectory });
    expect(result).toMatchObject({ fileCount: 4, directoryCount: 3, readCount: 3, warnings: [] });
    const root = await readTree(store, result.tree);
    expect(root.entries.map((entry) => `${entry.type} ${entry.name}`)).toEqual([
      'file README.md',
      'directory bin',
      'symlink link-to-etc',
      'directory src',
    ]);
    expect(root.entries.find((entry) => entry.name === 'link-to-etc')).toMatchObject({
      target: '/etc',
    });
    const bin = root.entries.find((entry) => entry.name === 'bin');
    if (bin?.type !== 'directory') throw new Error('bin is not a directory');
    expect((await readTree(store, bin.digest)).entries[0]).toMatchObject({
      name: 'run.sh',
      mode: 0o755,
    });
  });

  it('gives the same digest for the same state, and another when a byte, a mode or a name changes', async () => {
    const { workspace, storeDirectory, store } = await makeWorkspace({
      'a.txt': 'one',
      'd/b.txt': 'two',
    });
    const options = { store, storeDirectory };
    const first = (await snapshot(workspace, options)).tree;
    expect((await snapshot(workspace, options)).tree).toBe(first);
    await writeFile(join(workspace, 'd/b.txt'), 'twO');
    const content = (await snapshot(workspace, options)).tree;
    await chmod(join(workspace, 'd/b.txt'), 0o600);
    const mode = (await snapshot(workspace, options)).tree;
    expect(new Set([first, content, mode]).size).toBe(3);
  });

  it('reads only what changed: unchanged files come from the stat cache, unchanged directories reuse their tree', async () => {
    const layout = Object.fromEntries(
      Array.from({ length: 50 }, (_, index) => [`dir${index % 5}/f${index}.txt`, `${index}`]),
    );
    const { workspace, storeDirectory, store } = await makeWorkspace(layout);
    const options = { store, storeDirectory, now: laterClock };
    const first = await snapshot(workspace, options);
    expect(first.readCount).toBe(50);
    const second = await snapshot(workspace, options);
    expect(second).toMatchObject({ tree: first.tree, readCount: 0 });
    await appendFile(join(workspace, 'dir3/f3.txt'), '!');
    const third = await snapshot(workspace, options);
    expect(third.readCount).toBe(1);
    expect(third.tree).not.toBe(first.tree);
  });

  it('re-reads a file changed within the filesystem timestamp granularity of the last snapshot', async () => {
    const { workspace, storeDirectory, store } = await makeWorkspace({ 'a.txt': 'aaaa' });
    const first = await snapshot(workspace, { store, storeDirectory });
    // Same size, and mtime forced back to what the cache saw: only the racy rule catches this.
    await writeFile(join(workspace, 'a.txt'), 'bbbb');
    const second = await snapshot(workspace, { store, storeDirectory });
    expect(second.tree).not.toBe(first.tree);
  });

  it('leaves out .rewind/, .git/ and what .rewindignore files list, with git semantics', async () => {
    const { workspace, storeDirectory, store } = await makeWorkspace({
      '.git/HEAD': 'ref: refs/heads/main\n',
      'sub/.git/config': 'nested repository',
      '.rewindignore': 'node_modules/\n*.log\n!keep.log\n/build\n',
      'node_modules/x/index.js': 'x',
      'debug.log': 'noise',
      'keep.log': 'kept',
      'build/out.js': 'built',
      'src/build/kept.js': 'not the root build',
      'src/.rewindignore': 'generated.ts\n',
      'src/generated.ts': 'generated',
      'src/main.ts': 'main',
    });
    const result = await snapshot(workspace, { store, storeDirectory });
    const paths: string[] = [];
    const walk = async (digest: string, prefix: string): Promise<void> => {
      for (const entry of (await readTree(store, digest as never)).entries) {
        if (entry.type === 'directory') await walk(entry.digest, `${prefix}${entry.name}/`);
        else paths.push(`${prefix}${entry.name}`);
      }
    };
    await walk(result.tree, '');
    expect(paths.sort()).toEqual([
      '.rewindignore',
      'keep.log',
      'src/.rewindignore',
      'src/build/kept.js',
      'src/main.ts',
    ]);
  });

  it('refuses the filesystem root, a home directory, and a workspace that is a file', async () => {
    const { store, storeDirectory } = await makeWorkspace();
    await expect(snapshot('/', { store, storeDirectory })).rejects.toMatchObject({
      code: 'WORKSPACE_REFUSED',
    });
    await expect(snapshot(homedir(), { store, storeDirectory })).rejects.toThrow(/home directory/);
    const file = join(await makeTempDirectory(), 'file.txt');
    await writeFile(file, 'x');
    await expect(snapshot(file, { store, storeDirectory })).rejects.toMatchObject({
      code: 'WORKSPACE_INVALID',
      data: { path: file },
    });
  });

  it('warns when a first snapshot is over budget, naming the largest directories', async () => {
    const { workspace, storeDirectory, store } = await makeWorkspace({
      'big/a.bin': 'x'.repeat(5000),
      'small/b.txt': 'y',
    });
    const result = await snapshot(workspace, { store, storeDirectory, budget: { maxBytes: 1000 } });
    expect(result.warnings).toEqual([
      expect.stringMatching(/over the budget.*Largest directories: big\/ .*small\//),
    ]);
    expect(
      (await snapshot(workspace, { store, storeDirectory, budget: { maxBytes: 1000 } })).warnings,
    ).toEqual([]);
  });

  it('leaves out a file it may not read, listing it with why, and warns', async () => {
    const { workspace, storeDirectory } = await makeWorkspace({
      'ok.txt': 'fine',
      'secret.txt': 'hidden',
    });
    await chmod(join(workspace, 'secret.txt'), 0o000);
    // Root reads anything: the snapshot runs as an unprivileged user.
    const nobody = 65534;
    await chmod(workspace, 0o755);
    // The user gets through the directory above (the system's temporary directory, 1777): o+rx
    // added, nothing taken away (0o755 here took /tmp's sticky bit and its write for all).
    const parent = join(workspace, '..');
    await chmod(parent, ((await stat(parent)).mode & 0o7777) | 0o005).catch(() => {});
    for (const path of ['.', '.rewind', '.rewind/objects', '.rewind/sessions', 'ok.txt']) {
      await chown(join(workspace, path), nobody, nobody);
    }
    const script = `import('${ROOT}dist/index.js').then(async ({ snapshot, createObjectStore, readTree }) => {
      const store = createObjectStore(${JSON.stringify(storeDirectory)});
      const result = await snapshot(${JSON.stringify(workspace)}, { store, storeDirectory: ${JSON.stringify(storeDirectory)} });
      const names = (await readTree(store, result.tree)).entries.map((entry) => entry.name);
      console.log(JSON.stringify({ ...result, names }));
    });`;
    const result = await new Promise<string>((resolve) => {
      const child = spawn(process.execPath, ['--input-type=module', '-e', script], {
        ...(process.getuid?.() === 0 && { uid: nobody, gid: nobody }),
        cwd: '/',
      });
      let out = '';
      child.stdout.on('data', (chunk: Buffer) => {
        out += chunk;
      });
      child.stderr.on('data', (chunk: Buffer) => {
        out += chunk;
      });
      child.on('close', () => resolve(out));
    });
    const parsed = JSON.parse(result);
    expect(parsed.names).toEqual(['ok.txt']);
    expect(parsed.fileCount).toBe(1);
    expect(parsed.unreadable).toEqual([{ path: 'secret.txt', reason: 'permission denied' }]);
    expect(parsed.warnings).toEqual([
      expect.stringMatching(
        /Could not read secret\.txt \(permission denied\).*no rollback or undo will touch/,
      ),
    ]);
  });

  it('leaves out a path too long for the system (as root too), and lists it at every snapshot until it is gone', async () => {
    const { workspace, storeDirectory, store } = await makeWorkspace({ 'ok.txt': 'fine' });
    // Built one level at a time (relative names), as a tool that works with openat() does.
    execFileSync('bash', [
      '-c',
      `cd ${JSON.stringify(workspace)} && for i in $(seq 1 40); do mkdir ${'d'.repeat(120)} && cd ${'d'.repeat(120)}; done && echo deep > file.txt`,
    ]);
    const result = await snapshot(workspace, { store, storeDirectory });
    expect(result.unreadable).toHaveLength(1);
    expect(result.unreadable[0]?.reason).toBe('its path is too long for the system');
    expect(result.fileCount).toBe(1);
    expect(result.warnings.join('\n')).toMatch(/too long/);
    // A second snapshot (the shortcut has no record to start from) lists it again.
    const again = await snapshot(workspace, { store, storeDirectory });
    expect(again.unreadable).toEqual(result.unreadable);
    expect(again.tree).toBe(result.tree);
    execFileSync('rm', ['-rf', join(workspace, 'd'.repeat(120))]);
    const clean = await snapshot(workspace, { store, storeDirectory });
    expect(clean.unreadable).toEqual([]);
    expect(clean.warnings).toEqual([]);
  });

  it('never stores a torn copy of a file that is rewritten while it is read (stat before and after agree)', async () => {
    const { workspace, storeDirectory, store } = await makeWorkspace({
      'hot.txt': 'A'.repeat(100),
    });
    const writer = spawn(process.execPath, [
      '-e',
      `const fs = require('fs'); let i = 0; const letters = 'ABCDEFGH';
       setInterval(() => {}, 1000);
       (function loop() { if (i === 0) console.log('ready'); for (let k = 0; k < 50; k++) { i++; const fd = fs.openSync(${JSON.stringify(join(workspace, 'hot.txt'))}, 'r+');
         fs.ftruncateSync(fd, 0); fs.writeSync(fd, letters[i % 8].repeat(100 + (i % 8) * 40000)); fs.closeSync(fd); } setImmediate(loop); })();`,
    ]);
    await new Promise<void>((resolve) => writer.stdout?.once('data', () => resolve()));
    try {
      let stored = 0;
      for (let round = 0; round < 100; round++) {
        try {
          const result = await snapshot(workspace, { store, storeDirectory });
          const entry = (await readTree(store, result.tree)).entries.find(
            (candidate) => candidate.name === 'hot.txt',
          );
          if (entry === undefined) {
            // Changing every time it was read: left out, and said so.
            expect(result.unreadable).toEqual([
              { path: 'hot.txt', reason: expect.stringMatching(/changed every time/) },
            ]);
            continue;
          }
          if (entry.type !== 'file') throw new Error('hot.txt is not a file');
          const text = (await store.get(entry.digest)).toString();
          // The writer truncates, then writes: empty, or part of a version, are real states of
          // the file (any reader could see them). A torn copy is one that no instant had: two
          // versions mixed, or bytes that disagree with the size recorded beside them.
          expect(text).toMatch(/^(|A+|B+|C+|D+|E+|F+|G+|H+)$/);
          expect(text.length).toBe(entry.sizeBytes);
          expect(text.length).toBeLessThanOrEqual(100 + 'ABCDEFGH'.indexOf(text[0] ?? 'A') * 40000);
          stored += 1;
        } catch (error) {
          expect(error).toMatchObject({ code: 'PATH_UNREADABLE' });
        }
      }
      expect(stored).toBeGreaterThan(0);
    } finally {
      writer.kill('SIGKILL');
    }
  }, 60_000);
});
