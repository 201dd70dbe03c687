// Out of inotify watches: run in a user namespace of its own, whose limit the test may lower
// (/proc/sys/user/max_inotify_watches) without touching the machine's.
import { execFile, execFileSync } from 'node:child_process';
import { mkdirSync } from 'node:fs';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { describe, expect, it } from 'vitest';
import { init } from '../../src/index.js';
import { ROOT } from '../helpers/processes.js';
import { makeTempDirectory } from '../helpers/temp.js';

const run = promisify(execFile);

/** Whether this machine lets a process lower the inotify limits of a user namespace of its own. */
const canLowerLimit = (() => {
  try {
    execFileSync(
      'unshare',
      ['-Ur', 'sh', '-c', 'echo 5 > /proc/sys/user/max_inotify_watches && command -v inotifywait'],
      { stdio: 'ignore' },
    );
    return true;
  } catch {
    return false;
  }
})();

describe.runIf(process.platform === 'linux' && canLowerLimit)('out of inotify watches', () => {
  it('says which setting to raise, by which command, and that checkpoints walk meanwhile', async () => {
    const workspace = await makeTempDirectory();
    for (let index = 0; index < 40; index++)
      mkdirSync(join(workspace, `d${index}`, 'e'), { recursive: true });
    await init({ workspace });
    const child = join(ROOT, 'test/helpers/watch-limit-child.mjs');
    const script = `echo 20 > /proc/sys/user/max_inotify_watches && exec "${process.execPath}" "${child}" "$1"`;
    const { stdout } = await run('unshare', ['-Ur', 'sh', '-c', script, 'sh', workspace]);
    const told = stdout.split('\n').filter(Boolean);
    expect(told).toHaveLength(1);
    const [why] = told as [string];
    expect(why).toContain('inotify watch limit');
    expect(why).toContain('fs.inotify.max_user_watches');
    expect(why).toMatch(/sudo sysctl fs\.inotify\.max_user_watches=\d+/);
    expect(why).toMatch(/falls back to walking/);
  });
});
