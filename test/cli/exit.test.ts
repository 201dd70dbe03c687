import { spawn } from 'node:child_process';
import { closeSync, existsSync, openSync } from 'node:fs';
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
});
