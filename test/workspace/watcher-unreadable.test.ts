import { describe, expect, it } from 'vitest';
import { runAsNobody, workspaceOfNobody } from '../helpers/nobody.js';
import { ROOT } from '../helpers/processes.js';
import { hasInotifywait as isAvailable } from '../helpers/watching.js';

/** Script lines, run as the user, that make `watcher`, `take` and helpers (uses the build). */
const SETUP = `
  const ws = await import('${ROOT}dist/workspace/index.js');
  const { watchedInodes, watchKey } = await import('${ROOT}dist/workspace/watch-coverage.js');
  const { initStore, createObjectStore } = await import('${ROOT}dist/store/index.js');
  const sleep = (ms) => new Promise((done) => setTimeout(done, ms));
  const { directory } = await initStore(workspace);
  const watcher = new ws.WorkspaceWatcher(workspace, directory, ws.NO_OUTSIDE_RULES);
  const options = { store: createObjectStore(directory), storeDirectory: directory, watcher };
  const take = () => ws.snapshot(workspace, options);
  const reference = async () => {
    const other = await initStore(fs.mkdtempSync('/tmp/rewind-reference-'));
    const store = createObjectStore(other.directory);
    return (await ws.snapshot(workspace, { store, storeDirectory: other.directory, now: () => new Date() })).tree;
  };
  const pids = new Set();
  const sampling = setInterval(() => watcher.pid && pids.add(watcher.pid), 2);
  sampling.unref();
  const key = (path) => watchKey(fs.lstatSync(workspace + '/' + path, { bigint: true }));
  const isWatched = (path) => watchedInodes(watcher.pid).has(key(path));
  const untilStartedAgain = async (pid) => {
    for (let waited = 0; (watcher.pid === pid || !watcher.isLive) && waited < 5000; waited += 10) await sleep(10);
    return watcher.isLive && watcher.pid !== pid;
  };`;

describe.runIf(process.platform === 'linux' && isAvailable && process.getuid?.() === 0)(
  'a watched workspace with a directory it cannot read',
  () => {
    it('leaves it out of the watch and goes live at the first start, watches it once readable, and leaves it out again', async () => {
      const workspace = await workspaceOfNobody({
        'src/a.txt': 'a',
        'locked/inner/b.txt': 'b',
        'half/inner/c.txt': 'c',
      });
      const out = await runAsNobody(
        workspace,
        `fs.chmodSync(workspace + '/locked', 0);
        fs.chmodSync(workspace + '/half', 0o444);
        ${SETUP}
        for (let waited = 0; !watcher.isLive && waited < 3000; waited += 10) await sleep(10);
        out.isLive = watcher.isLive;
        out.startsUntilLive = pids.size;
        await take();
        fs.appendFileSync(workspace + '/src/a.txt', '!');
        out.isSameTree = (await take()).tree === (await reference());
        let pid = watcher.pid;
        fs.chmodSync(workspace + '/locked', 0o755);
        out.isStartedOnceReadable = await untilStartedAgain(pid);
        out.watchesItOnceReadable = isWatched('locked/inner');
        pid = watcher.pid;
        fs.chmodSync(workspace + '/locked', 0o700);
        await sleep(300);
        out.isSameWatchWhenStillReadable = watcher.pid === pid;
        fs.chmodSync(workspace + '/locked', 0o300);
        out.isStartedOnceUnreadable = await untilStartedAgain(pid);
        out.watchesItOnceUnreadable = isWatched('locked');
        clearInterval(sampling);
        out.starts = pids.size;
        watcher.close();`,
      );
      expect(out).toEqual({
        isLive: true,
        startsUntilLive: 1,
        isSameTree: true,
        isStartedOnceReadable: true,
        watchesItOnceReadable: true,
        isSameWatchWhenStillReadable: true,
        isStartedOnceUnreadable: true,
        watchesItOnceUnreadable: false,
        starts: 3,
      });
    }, 60_000);
  },
);
