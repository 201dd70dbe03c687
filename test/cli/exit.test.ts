import { execFileSync, spawn } from 'node:child_process';
import { closeSync, constants, createReadStream, existsSync, openSync } from 'node:fs';
import { writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { ROOT, runNode } from '../helpers/processes.js';
import { makeTempDirectory } from '../helpers/temp.js';

const rewind = (cwd: string, args: string[]) =>
  runNode([join(ROOT, 'bin/rewind.cjs'), ...args], { cwd, env: { REWIND_DAEMON: '0' } });

describe('the `rewind` command as a process', () => {
  it('exits once a rollback or an undo of many files is done', async () => {
    const workspace = await makeTempDirectory();
    const write = (version: string) =>
      Promise.all(
        Array.from({ length: 40 }, (_, index) =>
          writeFile(join(workspace, `f${index}.txt`), `${version} ${index}\n`),
        ),
      );
    await write('one');
    expect((await rewind(workspace, ['-q', 'init'])).code).toBe(0);
    expect((await rewind(workspace, ['-q', 'checkpoint', 'one'])).code).toBe(0);
    await write('two');
    // Before the fix, each of these printed its result and then never exited (vitest's 30 s
    // timeout ends the test then).
    const rollback = await rewind(workspace, ['rollback', 'one']);
    expect(rollback.stdout).toContain('40 written');
    expect(rollback.code).toBe(0);
    const undo = await rewind(workspace, ['undo', '--last']);
    expect(undo.code).toBe(0);
    expect(undo.stdout).toContain('40 written');
  });

  it('says what an interrupted command leaves before it ends by the signal (Ctrl-C)', async () => {
    const workspace = await makeTempDirectory();
    expect((await rewind(workspace, ['-q', 'init', '--sandbox', 'none'])).code).toBe(0);
    const child = spawn(
      process.execPath,
      [join(ROOT, 'bin/rewind.cjs'), 'exec', '--', 'sh', '-c', 'echo > started; sleep 20'],
      { cwd: workspace, env: { ...process.env, REWIND_DAEMON: '0' } },
    );
    let stderr = '';
    child.stderr.on('data', (chunk: Buffer) => {
      stderr += chunk;
    });
    const ended = new Promise<NodeJS.Signals | null>((resolve) =>
      child.on('close', (_code, signal) => resolve(signal)),
    );
    await expect.poll(() => existsSync(join(workspace, 'started')), { timeout: 10_000 }).toBe(true);
    child.kill('SIGINT');
    expect(await ended).toBe('SIGINT');
    expect(stderr).toContain('rewind: interrupted (SIGINT). If it was changing the workspace');
    // The command it ran is recorded as interrupted by the next one.
    const log = await rewind(workspace, ['log']);
    expect(log.code).toBe(0);
    expect(log.stdout).toMatch(/sh -c/);
  });

  it('says in one line, with exit 1, that its output could not be written (> /dev/full)', async () => {
    const workspace = await makeTempDirectory();
    await writeFile(join(workspace, 'a.txt'), 'one\n');
    expect((await rewind(workspace, ['-q', 'init'])).code).toBe(0);
    expect((await rewind(workspace, ['-q', 'checkpoint', 'one'])).code).toBe(0);
    await writeFile(join(workspace, 'a.txt'), 'two\n');
    const full = openSync('/dev/full', 'w');
    try {
      // `--version` alone is answered before the CLI loads (bin/rewind.cjs): it exited 0 silently.
      for (const args of [['diff', 'one'], ['log'], ['--version'], ['-V'], ['--help']]) {
        const child = spawn(process.execPath, [join(ROOT, 'bin/rewind.cjs'), ...args], {
          cwd: workspace,
          env: { ...process.env, REWIND_DAEMON: '0' },
          stdio: ['ignore', full, 'pipe'],
        });
        let stderr = '';
        child.stderr?.on('data', (chunk: Buffer) => {
          stderr += chunk;
        });
        const code = await new Promise((done) => child.on('close', done));
        // It was an uncaught ENOSPC's stack trace, thrown from the handler that let EPIPE pass.
        expect({ code, stderr }, args.join(' ')).toEqual({
          code: 1,
          stderr:
            'rewind: could not write the output to stdout: no space left on device (ENOSPC); the output is incomplete.\n',
        });
      }
    } finally {
      closeSync(full);
    }
  });

  it('writes all of a large output into a pipe that its reader empties slowly', async () => {
    const workspace = await makeTempDirectory();
    const lines = (word: string) =>
      Array.from({ length: 3000 }, (_, index) => `${word} line ${index} of a long file\n`).join('');
    await writeFile(join(workspace, 'big.txt'), lines('first'));
    expect((await rewind(workspace, ['-q', 'init'])).code).toBe(0);
    expect((await rewind(workspace, ['-q', 'checkpoint', 'one'])).code).toBe(0);
    await writeFile(join(workspace, 'big.txt'), lines('second'));
    const expected = (await rewind(workspace, ['diff'])).stdout;
    expect(expected.length).toBeGreaterThan(150_000);
    // Its stdout a FIFO (opened O_NONBLOCK here, but Node makes a child's stdio blocking), read
    // a few kilobytes at a time: each write waits for room, and none is cut short.
    const fifo = join(workspace, 'out.fifo');
    execFileSync('mkfifo', [fifo]);
    // The reader's open waits for a writer; a non-blocking writer's fails (ENXIO) until the
    // reader is waiting.
    const reader = createReadStream(fifo, { highWaterMark: 4096 });
    let output: number | undefined;
    while (output === undefined) {
      try {
        output = openSync(fifo, constants.O_WRONLY | constants.O_NONBLOCK);
      } catch {
        await new Promise((resolve) => setTimeout(resolve, 10));
      }
    }
    const chunks: Buffer[] = [];
    let code: number | null;
    try {
      const child = spawn(process.execPath, [join(ROOT, 'bin/rewind.cjs'), 'diff'], {
        cwd: workspace,
        env: { ...process.env, REWIND_DAEMON: '0' },
        stdio: ['ignore', output, 'inherit'],
      });
      const ended = new Promise<number | null>((resolve) => child.on('close', resolve));
      // Read slowly: a chunk every few milliseconds.
      reader.on('data', (chunk) => {
        chunks.push(chunk as Buffer);
        reader.pause();
        setTimeout(() => reader.resume(), 2);
      });
      code = await ended;
    } finally {
      closeSync(output);
    }
    await new Promise<void>((resolve) => reader.once('close', () => resolve()));
    expect(code).toBe(0);
    expect(Buffer.concat(chunks).toString('utf8')).toBe(expected);
  });
});
