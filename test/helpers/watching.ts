// What the tests of the inotify watcher share: whether it can run here, and waiting for it.
import { execFileSync } from 'node:child_process';
import { setTimeout as sleep } from 'node:timers/promises';
import type { WorkspaceWatcher } from '../../src/workspace/index.js';

/** Whether Debian's inotifywait (inotify-tools) is on the PATH. */
export const hasInotifywait = ((): boolean => {
  try {
    execFileSync('sh', ['-c', 'command -v inotifywait'], { stdio: 'ignore' });
    return true;
  } catch {
    return false;
  }
})();

/** Waits until `watcher` is live (20 s at most, then throws saying why it stopped). */
export async function untilLive(watcher: WorkspaceWatcher): Promise<void> {
  for (let waited = 0; !watcher.isLive; waited += 10) {
    if (waited > 20_000) throw new Error(`the watcher did not start: ${watcher.stoppedBecause}`);
    await sleep(10);
  }
}
