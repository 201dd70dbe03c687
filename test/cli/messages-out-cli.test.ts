import { execFileSync, spawn } from 'node:child_process';
import { closeSync, existsSync, openSync } from 'node:fs';
import { lstat, mkdir, readFile, readlink, symlink } from 'node:fs/promises';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { rewind } from '../helpers/cli.js';
import { ROOT } from '../helpers/processes.js';
import { makeTempDirectory } from '../helpers/temp.js';
import { lay } from '../helpers/workspace.js';

const BIN = join(ROOT, 'bin', 'rewind.cjs');
const NOBODY = 65534;

/** A workspace whose checkpoint "base" holds a conversation, a.txt changed since. */
async function withConversation(): Promise<string> {
  const cwd = await makeTempDirectory();
  await lay(cwd, { 'a.txt': 'base\n', 'in.json': '[{"role":"user","content":"fix it"}]' });
  await rewind(cwd, ['init', '-q']);
  expect(await rewind(cwd, ['checkpoint', 'base', '--messages', 'in.json', '-q'])).toMatchObject({
    code: 0,
  });
  await lay(cwd, { 'a.txt': 'broken\n' });
  return cwd;
}

/** The conversation written first in `text`: a JSON array whose first message is the request. */
function conversationIn(text: string): unknown {
  expect(text.startsWith('[\n')).toBe(true);
  return conversationOf(text.slice(0, text.indexOf('\n]\n') + 3));
}

/** The conversation written: a JSON array whose first message is the request. */
function conversationOf(text: string): unknown {
  const messages = JSON.parse(text) as { role: string; content: unknown }[];
  expect(messages[0]).toEqual({ role: 'user', content: 'fix it' });
  return messages;
}

/**
 * Runs `rewind ARGS` in a process of its own, its standard output `stdout` (a pipe when not
 * given). As the unprivileged user when root: a mistake must not replace /dev/stdout for good.
 */
function rewindChild(cwd: string, args: string[], stdout?: number) {
  if (process.getuid?.() === 0) execFileSync('chown', ['-R', `${NOBODY}:${NOBODY}`, cwd]);
  return new Promise<{ code: number | null; stdout: string; stderr: string }>((resolve) => {
    const child = spawn(process.execPath, [BIN, ...args], {
      cwd,
      env: { ...process.env, REWIND_DAEMON: '0', REWIND_CODE_CACHE: '0' },
      stdio: ['ignore', stdout ?? 'pipe', 'pipe'],
      ...(process.getuid?.() === 0 && { uid: NOBODY, gid: NOBODY }),
    });
    let out = '';
    let err = '';
    child.stdout?.on('data', (chunk: Buffer) => {
      out += chunk.toString();
    });
    child.stderr?.on('data', (chunk: Buffer) => {
      err += chunk.toString();
    });
    child.once('close', (code) => resolve({ code, stdout: out, stderr: err }));
  });
}

describe('rollback --messages-out FILE', () => {
  it('writes the file a symbolic link leads to, and leaves the link', async () => {
    const cwd = await withConversation();
    // Outside the workspace, which the rollback restores.
    const outside = await makeTempDirectory();
    await mkdir(join(outside, 'out'));
    await symlink('out/conversation.json', join(outside, 'latest.json'));
    const given = join(outside, 'latest.json');
    const rolled = await rewind(cwd, ['rollback', 'base', '--messages-out', given]);
    expect(rolled).toMatchObject({ code: 0, stderr: '' });
    expect(rolled.stdout).toContain(`is in ${given}.`);
    expect(await readlink(given)).toBe('out/conversation.json');
    conversationOf(await readFile(join(outside, 'out', 'conversation.json'), 'utf8'));
  });

  it('writes into a named pipe, to the program reading it', async () => {
    const cwd = await withConversation();
    const fifo = join(await makeTempDirectory(), 'messages.pipe');
    execFileSync('mkfifo', [fifo]);
    const reader = spawn('cat', [fifo], { stdio: ['ignore', 'pipe', 'inherit'] });
    let read = '';
    reader.stdout.on('data', (chunk: Buffer) => {
      read += chunk.toString();
    });
    const closed = new Promise((resolve) => reader.once('close', resolve));
    try {
      const rolled = await rewind(cwd, ['rollback', 'base', '--messages-out', fifo]);
      expect(rolled).toMatchObject({ code: 0, stderr: '' });
      expect((await lstat(fifo)).isFIFO()).toBe(true);
    } finally {
      // Were the pipe replaced by a file, the reader would wait for a writer forever.
      if (!(await lstat(fifo)).isFIFO()) reader.kill();
    }
    await closed;
    conversationOf(read);
  });

  it("writes /dev/stdout into the command's standard output, a pipe or a file, before what it says", async () => {
    const cwd = await withConversation();
    const piped = await rewindChild(cwd, ['rollback', 'base', '--messages-out', '/dev/stdout']);
    expect(piped).toMatchObject({ code: 0, stderr: '' });
    // The conversation, then what the command says.
    expect(piped.stdout).toMatch(
      /^\[\n[\s\S]*\n\]\nRolled back to base: .*\nThe restored conversation \(2 messages, openai-chat\) is in \/dev\/stdout\.\n$/,
    );
    conversationIn(piped.stdout);
    expect((await lstat('/dev/stdout')).isSymbolicLink()).toBe(true);

    // Standard output sent to a file (`> out.txt`): the conversation, then what the command says.
    await lay(cwd, { 'a.txt': 'broken again\n' });
    const file = join(await makeTempDirectory(), 'out.txt');
    const descriptor = openSync(file, 'w');
    try {
      const redirected = await rewindChild(
        cwd,
        ['rollback', 'base', '--messages-out', '/proc/self/fd/1'],
        descriptor,
      );
      expect(redirected).toMatchObject({ code: 0, stderr: '' });
    } finally {
      closeSync(descriptor);
    }
    const written = await readFile(file, 'utf8');
    expect(written).toMatch(
      /^\[\n[\s\S]*\n\]\nRolled back to base: .*\nThe restored conversation \(2 messages, openai-chat\) is in \/proc\/self\/fd\/1\.\n$/,
    );
    conversationIn(written);
  });

  it.skipIf(!existsSync('/dev/full'))(
    'says the rollback was done, and how to get its conversation, when FILE then cannot be written (exit 4)',
    async () => {
      const cwd = await withConversation();
      // /dev/full takes the open and fails every write, as a full disk does.
      const failed = await rewind(cwd, ['rollback', 'base', '--messages-out', '/dev/full']);
      expect(failed.code).toBe(4);
      const id = /`rewind undo (\d+)` brings it back/.exec(failed.stdout)?.[1];
      expect(failed.stdout).toMatch(/^Rolled back to base: 1 written, /);
      expect(id, failed.stdout).toBeDefined();
      expect(failed.stderr).toBe(
        `rewind: The rollback to base was done (#${id}: \`rewind undo ${id}\` takes it back), but its conversation could not be written to /dev/full: ENOSPC: no space left on device, write. Nothing is lost: \`rewind conversation show > FILE\` writes it (the restored conversation is the session's current one).\n`,
      );
      expect(await readFile(join(cwd, 'a.txt'), 'utf8')).toBe('base\n');
      const shown = await rewind(cwd, ['conversation', 'show']);
      expect(shown.code).toBe(0);
      expect(conversationOf(shown.stdout)).toHaveLength(2);

      await lay(cwd, { 'a.txt': 'broken\n' });
      const json = await rewind(cwd, ['--json', 'rollback', 'base', '--messages-out', '/dev/full']);
      expect(json.code).toBe(4);
      expect(JSON.parse(json.stdout)).toMatchObject({
        label: 'base',
        messagesOutError: {
          path: '/dev/full',
          message: expect.stringContaining('ENOSPC'),
        },
      });
      expect(await readFile(join(cwd, 'a.txt'), 'utf8')).toBe('base\n');
    },
  );

  it('refuses standard input before rolling anything back, saying to name a file or /dev/stdout', async () => {
    const cwd = await withConversation();
    // It passed the checks, then failed with EBADF once the rollback was done (exit 4).
    const refused = await rewindChild(cwd, ['rollback', 'base', '--messages-out', '/dev/stdin']);
    expect(refused).toEqual({
      code: 1,
      stdout: '',
      stderr:
        'rewind: Cannot write /dev/stdin: it names standard input (descriptor 0), which is read from, not written to. Name a file, or /dev/stdout for standard output. [INVALID_ARGUMENT]\n',
    });
    expect(await readFile(join(cwd, 'a.txt'), 'utf8')).toBe('broken\n');
    const log = await rewind(cwd, ['log']);
    expect(log.stdout).not.toMatch(/rollback/i);
  });

  it('refuses a directory before rolling anything back, saying what to name', async () => {
    const cwd = await withConversation();
    const exports = await makeTempDirectory();
    const refused = await rewind(cwd, ['rollback', 'base', '--messages-out', exports]);
    expect(refused.code).toBe(1);
    expect(refused.stderr).toBe(
      `rewind: Cannot write ${exports}: it is a directory. Name a file, such as ${join(exports, 'messages.json')}. [INVALID_ARGUMENT]\n`,
    );
    expect(await readFile(join(cwd, 'a.txt'), 'utf8')).toBe('broken\n');
    expect((await lstat(exports)).isDirectory()).toBe(true);
    // Named as a file in it, it goes there.
    const inside = join(exports, 'm.json');
    expect((await rewind(cwd, ['rollback', 'base', '--messages-out', inside])).code).toBe(0);
    expect(await readFile(join(cwd, 'a.txt'), 'utf8')).toBe('base\n');
    conversationOf(await readFile(inside, 'utf8'));
  });
});
