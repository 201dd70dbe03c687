import { spawn } from 'node:child_process';
import { existsSync } from 'node:fs';
import { readdir, readFile } from 'node:fs/promises';
import { join } from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { describe, expect, it } from 'vitest';
import { runProcess } from '../../src/sandbox/index.js';
import { makeTempDirectory } from '../helpers/temp.js';

/** True while a process runs (a zombie waiting for a reaper no longer does). */
async function isRunning(pid: number): Promise<boolean> {
  try {
    const stat = await readFile(`/proc/${pid}/stat`, 'utf8');
    return stat.slice(stat.lastIndexOf(')') + 2, stat.lastIndexOf(')') + 3) !== 'Z';
  } catch {
    return false;
  }
}

async function waitFor(check: () => Promise<boolean>, what: string): Promise<void> {
  for (let attempt = 0; attempt < 100; attempt++) {
    if (await check()) return;
    await sleep(50);
  }
  throw new Error(`timed out waiting for ${what}`);
}

// The command and a child it left in the background; each writes its pid, then lives on.
const LINGERING = 'sleep 300 & echo $! > child.pid; echo $$ > command.pid; sleep 300';

describe.skipIf(process.platform !== 'linux')('runProcess', () => {
  it('cannot outlive a Rewind killed with SIGKILL: the command and its children die with it', async () => {
    const directory = await makeTempDirectory();
    const script = `
      const { runProcess } = await import(${JSON.stringify(new URL('../../dist/sandbox/index.js', import.meta.url).href)});
      await runProcess(${JSON.stringify(LINGERING)}, { cwd: process.argv[1] });
    `;
    const rewind = spawn(process.execPath, ['--input-type=module', '-e', script, directory], {
      stdio: 'ignore',
    });
    const pidOf = async (name: string) => Number(await readFile(join(directory, name), 'utf8'));
    await waitFor(
      async () =>
        existsSync(join(directory, 'command.pid')) && existsSync(join(directory, 'child.pid')),
      'the command to start',
    );
    const pids = [await pidOf('command.pid'), await pidOf('child.pid')];
    // While Rewind lives, so does the command.
    await sleep(200);
    for (const pid of pids) expect(await isRunning(pid)).toBe(true);
    rewind.kill('SIGKILL');
    await new Promise((done) => rewind.on('exit', done));
    for (const pid of pids) {
      await waitFor(async () => !(await isRunning(pid)), `process ${pid} to end`);
    }
  });

  it('can end on its own without the watcher killing anything else, however often it runs', async () => {
    const directory = await makeTempDirectory();
    const results = await Promise.all(
      Array.from({ length: 20 }, (_, index) =>
        runProcess(['sh', '-c', `echo ${index}; exit ${index % 3}`], { cwd: directory }),
      ),
    );
    expect(results.map((result) => result.stdout.toString().trim())).toEqual(
      Array.from({ length: 20 }, (_, index) => String(index)),
    );
    expect(results.map((result) => result.exitCode)).toEqual(
      Array.from({ length: 20 }, (_, index) => index % 3),
    );
    // No watcher is left behind once the commands ended.
    await sleep(200);
    expect(await childWatchers()).toBe(0);
  });
});

/** How many `rewind-watch` shells are running on this machine whose parent is this process. */
async function childWatchers(): Promise<number> {
  let count = 0;
  for (const name of await readdir('/proc')) {
    if (!/^\d+$/.test(name)) continue;
    try {
      const cmdline = await readFile(`/proc/${name}/cmdline`, 'utf8');
      const stat = await readFile(`/proc/${name}/stat`, 'utf8');
      const parent = Number(stat.slice(stat.lastIndexOf(')') + 2).split(' ')[1]);
      if (
        cmdline.includes('rewind-watch') &&
        parent === process.pid &&
        (await isRunning(Number(name)))
      )
        count += 1;
    } catch {}
  }
  return count;
}
