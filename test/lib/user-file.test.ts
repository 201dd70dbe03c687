import { execFileSync, spawn } from 'node:child_process';
import { closeSync, openSync, readdirSync, readFileSync, readlinkSync, writeSync } from 'node:fs';
import {
  chmod,
  lstat,
  mkdir,
  readFile,
  readlink,
  stat,
  symlink,
  writeFile,
} from 'node:fs/promises';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { checkUserFile, writeUserFile } from '../../src/lib/index.js';
import { runAsNobody, workspaceOfNobody } from '../helpers/nobody.js';
import { makeTempDirectory } from '../helpers/temp.js';

const isRoot = process.getuid?.() === 0;

describe('writeUserFile: a file a person named for output', () => {
  it('writes the file a chain of symbolic links leads to, and leaves the links', async () => {
    const directory = await makeTempDirectory();
    await mkdir(join(directory, 'real'));
    await writeFile(join(directory, 'real', 'out.json'), 'old\n');
    await chmod(join(directory, 'real', 'out.json'), 0o600);
    // out -> hop -> real/out.json, each relative to where the link is.
    await symlink('real/out.json', join(directory, 'hop'));
    await symlink('hop', join(directory, 'out'));

    expect(await writeUserFile(join(directory, 'out'), 'new\n')).toBe(
      join(directory, 'real', 'out.json'),
    );
    expect(await readlink(join(directory, 'out'))).toBe('hop');
    expect(await readlink(join(directory, 'hop'))).toBe('real/out.json');
    expect(await readFile(join(directory, 'out'), 'utf8')).toBe('new\n');
    // Replaced whole, with the permissions it had.
    expect((await stat(join(directory, 'real', 'out.json'))).mode & 0o777).toBe(0o600);

    // A link to nothing yet: the file it names is made.
    await symlink('real/later.json', join(directory, 'dangling'));
    await writeUserFile(join(directory, 'dangling'), 'made\n');
    expect((await lstat(join(directory, 'dangling'))).isSymbolicLink()).toBe(true);
    expect(await readFile(join(directory, 'real', 'later.json'), 'utf8')).toBe('made\n');
  });

  it('writes into a named pipe, to its reader, and leaves the pipe', async () => {
    const directory = await makeTempDirectory();
    const fifo = join(directory, 'pipe');
    execFileSync('mkfifo', [fifo]);
    const reader = spawn('cat', [fifo], { stdio: ['ignore', 'pipe', 'inherit'] });
    let read = '';
    reader.stdout.on('data', (chunk: Buffer) => {
      read += chunk.toString();
    });
    const closed = new Promise((resolve) => reader.once('close', resolve));
    try {
      await writeUserFile(fifo, 'through the pipe\n');
      expect((await lstat(fifo)).isFIFO()).toBe(true);
    } finally {
      // Were the pipe replaced by a file, the reader would wait for a writer forever.
      if (!(await lstat(fifo)).isFIFO()) reader.kill();
    }
    await closed;
    expect(read).toBe('through the pipe\n');
  });

  it('writes into a character device as it is', async () => {
    // Root makes a /dev/null of its own: a mistake here must not replace the system's.
    const directory = await makeTempDirectory();
    const device = isRoot ? join(directory, 'null') : '/dev/null';
    if (isRoot) execFileSync('mknod', [device, 'c', '1', '3']);
    await writeUserFile(device, 'into nothing\n');
    expect((await lstat(device)).isCharacterDevice()).toBe(true);
  });

  it('writes a descriptor of this process through the descriptor: after what it holds, before what comes next', async () => {
    const directory = await makeTempDirectory();
    const file = join(directory, 'redirected');
    // As a shell's `> file` leaves standard output: open, written from its start.
    const descriptor = openSync(file, 'w');
    try {
      writeSync(descriptor, 'before\n');
      await writeUserFile(`/proc/self/fd/${descriptor}`, 'written\n');
      await writeUserFile(`/dev/fd/${descriptor}`, 'again\n');
      writeSync(descriptor, 'after\n');
    } finally {
      closeSync(descriptor);
    }
    expect(await readFile(file, 'utf8')).toBe('before\nwritten\nagain\nafter\n');
    expect((await lstat(file)).isFile()).toBe(true);
    await expect(writeUserFile('/proc/self/fd/987', 'x')).rejects.toThrow(
      'Cannot write /proc/self/fd/987: this process has no descriptor 987 open. Open it for writing in the shell that runs the command (`987>FILE`), or name a file.',
    );
  });

  it('refuses standard input, and a descriptor open only for reading, before writing anything', async () => {
    // Standard input is read, whatever it is open for (a terminal is open for both).
    for (const path of ['/dev/stdin', '/dev/fd/0', '/proc/self/fd/0']) {
      await expect(checkUserFile(path)).rejects.toMatchObject({
        code: 'INVALID_ARGUMENT',
        message: `Cannot write ${path}: it names standard input (descriptor 0), which is read from, not written to. Name a file, or /dev/stdout for standard output.`,
      });
    }
    const file = join(await makeTempDirectory(), 'read.txt');
    await writeFile(file, 'kept\n');
    // As a shell's `3< FILE` leaves it: open for reading only.
    const descriptor = openSync(file, 'r');
    try {
      await expect(writeUserFile(`/dev/fd/${descriptor}`, 'x')).rejects.toMatchObject({
        code: 'INVALID_ARGUMENT',
        message: `Cannot write /dev/fd/${descriptor}: descriptor ${descriptor} is open for reading only. Open it for writing in the shell that runs the command (\`${descriptor}>FILE\`), or name a file.`,
      });
    } finally {
      closeSync(descriptor);
    }
    expect(await readFile(file, 'utf8')).toBe('kept\n');
  });

  it("refuses a descriptor Node opened for itself (its event loop's, its own pipes), before writing anything", async () => {
    // What this process holds that no shell gave it: epoll and eventfd descriptors, and pipes
    // whose reading end it holds too (libuv's wake-ups). Writing there failed with EINVAL, or
    // fed the event loop bytes it took for its own (a segmentation fault), once the rollback
    // that --messages-out /dev/fd/N follows was done.
    const links = new Map<number, string>();
    for (const name of readdirSync('/proc/self/fd')) {
      try {
        links.set(Number(name), readlinkSync(`/proc/self/fd/${name}`));
      } catch {}
    }
    const accessOf = (descriptor: number): number =>
      Number.parseInt(
        /^flags:\s*([0-7]+)$/m.exec(readFileSync(`/proc/self/fdinfo/${descriptor}`, 'utf8'))?.[1] ??
          '0',
        8,
      ) & 3;
    const eventLoop = [...links].find(([, link]) => link.startsWith('anon_inode:'))?.[0];
    const ownPipe = [...links].find(
      ([descriptor, link]) =>
        link.startsWith('pipe:') &&
        accessOf(descriptor) !== 0 &&
        [...links].some(
          ([other, same]) => other !== descriptor && same === link && accessOf(other) === 0,
        ),
    )?.[0];
    expect([eventLoop, ownPipe]).not.toContain(undefined);
    for (const descriptor of [eventLoop, ownPipe]) {
      await expect(checkUserFile(`/dev/fd/${descriptor}`)).rejects.toMatchObject({
        code: 'INVALID_ARGUMENT',
        message: `Cannot write /dev/fd/${descriptor}: descriptor ${descriptor} is not one the command was given, but one Node opened for itself. Open it for writing in the shell that runs the command (\`${descriptor}>FILE\`), or name a file.`,
      });
    }
  });

  it('refuses a directory, a block device, a missing directory and a loop of links, saying what to do', async () => {
    const directory = await makeTempDirectory();
    await writeFile(join(directory, 'keep.txt'), 'kept\n');
    const refusals: [string, string][] = [
      [
        directory,
        `Cannot write ${directory}: it is a directory. Name a file, such as ${join(directory, 'messages.json')}.`,
      ],
      [
        join(directory, 'missing', 'out.json'),
        `there is no directory ${join(directory, 'missing')} to write it in. Create it first.`,
      ],
      [join(directory, 'keep.txt', 'out.json'), 'is not a directory. Name a file in a directory.'],
    ];
    await symlink('loop-b', join(directory, 'loop-a'));
    await symlink('loop-a', join(directory, 'loop-b'));
    refusals.push([
      join(directory, 'loop-a'),
      'symbolic links lead on from it (a loop?). Name the file itself.',
    ]);
    if (isRoot) {
      execFileSync('mknod', [join(directory, 'disk'), 'b', '7', '0']);
      refusals.push([
        join(directory, 'disk'),
        'it is a block device (a disk): writing there would overwrite what the disk holds. Name a file.',
      ]);
    }
    for (const [path, message] of refusals) {
      await expect(checkUserFile(path)).rejects.toMatchObject({ code: 'INVALID_ARGUMENT' });
      await expect(writeUserFile(path, 'x')).rejects.toThrow(message);
    }
    expect((await stat(directory)).isDirectory()).toBe(true);
    if (isRoot) expect((await lstat(join(directory, 'disk'))).isBlockDevice()).toBe(true);
    expect(await readFile(join(directory, 'keep.txt'), 'utf8')).toBe('kept\n');
  });

  it.runIf(isRoot)(
    'refuses, before writing, a file in a directory or a file this user cannot write, and writes one it can',
    async () => {
      // As another user: root writes anywhere. A directory of root's that others may only enter.
      const rootOwned = await makeTempDirectory();
      await chmod(rootOwned, 0o755);
      const own = await workspaceOfNobody({ 'readonly.json': '[]\n', 'writable.json': '[]\n' });
      await chmod(join(own, 'readonly.json'), 0o444);
      const out = await runAsNobody(
        own,
        `const { checkUserFile, writeUserFile } = api;
        const attempt = async (path) => {
          try { await checkUserFile(path); return 'ok'; } catch (error) { return error.code + ': ' + error.message; }
        };
        out.inRoots = await attempt(${JSON.stringify(join(rootOwned, 'out.json'))});
        out.readOnly = await attempt(workspace + '/readonly.json');
        out.writable = await attempt(workspace + '/writable.json');
        out.created = await attempt(workspace + '/new.json');
        await writeUserFile(workspace + '/writable.json', '[1]');`,
      );
      expect(out).toEqual({
        inRoots: `INVALID_ARGUMENT: Cannot write ${join(rootOwned, 'out.json')}: the directory ${rootOwned} is not writable by this user (permission denied). Name a file in a directory you can write, or change its permissions.`,
        readOnly: `INVALID_ARGUMENT: Cannot write ${own}/readonly.json: the file ${own}/readonly.json is not writable by this user (permission denied). Name another file, or change its permissions.`,
        writable: 'ok',
        created: 'ok',
      });
      expect(readdirSync(rootOwned)).toEqual([]);
      expect(await readFile(join(own, 'writable.json'), 'utf8')).toBe('[1]');
      expect(await readFile(join(own, 'readonly.json'), 'utf8')).toBe('[]\n');
    },
  );
});
