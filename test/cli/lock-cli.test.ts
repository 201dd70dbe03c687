import { writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { describe, expect, it } from 'vitest';
import { runCli } from '../../src/cli/main.js';
import { rewind } from '../helpers/cli.js';
import { holdLockInChild } from '../helpers/processes.js';
import { makeTempDirectory } from '../helpers/temp.js';

describe('a command waiting for the workspace', () => {
  it('says after a second which process holds it, instead of waiting in silence (not with -q)', async () => {
    const workspace = await makeTempDirectory();
    await writeFile(join(workspace, 'a.txt'), 'a\n');
    expect((await rewind(workspace, ['init'])).code).toBe(0);
    const lock = join(workspace, '.rewind', 'workspace.lock');
    for (const quiet of [false, true]) {
      // Another process holds the workspace (as an agent's long command would).
      const holder = await holdLockInChild(lock);
      try {
        let stderr = '';
        const run = runCli([...(quiet ? ['-q'] : []), 'checkpoint', quiet ? 'quiet' : 'told'], {
          cwd: workspace,
          stdout: () => {},
          stderr: (text) => {
            stderr += text;
          },
        });
        if (quiet) await sleep(1500);
        else {
          await expect.poll(() => stderr, { timeout: 5000 }).toContain('Waiting for the lock');
          expect(stderr).toContain(`held by process ${holder.pid}`);
          expect(stderr).toContain('holding for a test');
        }
        // Once the holder is gone, the command goes on.
        holder.kill('SIGKILL');
        expect(await run).toBe(0);
        if (quiet) expect(stderr).toBe('');
      } finally {
        holder.kill('SIGKILL');
      }
    }
    expect((await rewind(workspace, ['checkpoints'])).stdout).toMatch(/told[\s\S]*quiet/);
  });

  it('says so too for gc and a note with attachments, which take the lock themselves', async () => {
    const workspace = await makeTempDirectory();
    await writeFile(join(workspace, 'a.txt'), 'a\n');
    expect((await rewind(workspace, ['init'])).code).toBe(0);
    expect((await rewind(workspace, ['checkpoint', 'first'])).code).toBe(0);
    const lock = join(workspace, '.rewind', 'workspace.lock');
    for (const args of [
      ['gc', '--dry-run'],
      ['note', 'see the log', '--attach', 'a.txt'],
    ]) {
      const holder = await holdLockInChild(lock);
      try {
        let stderr = '';
        const run = runCli(args, {
          cwd: workspace,
          stdout: () => {},
          stderr: (text) => {
            stderr += text;
          },
        });
        await expect.poll(() => stderr, { timeout: 5000 }).toContain('Waiting for the lock');
        expect(stderr).toContain(`held by process ${holder.pid}`);
        holder.kill('SIGKILL');
        expect(await run).toBe(0);
      } finally {
        holder.kill('SIGKILL');
      }
    }
  });
});
