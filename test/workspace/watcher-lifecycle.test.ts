// The watcher's life beside what it watches: the workspace or the store removed from under it.
import { spawn } from 'node:child_process';
import { existsSync, lstatSync, mkdirSync, realpathSync, writeFileSync } from 'node:fs';
import { rm } from 'node:fs/promises';
import { join } from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { afterEach, describe, expect, it } from 'vitest';
import { NO_OUTSIDE_RULES, WorkspaceWatcher } from '../../src/workspace/index.js';
import { watchedInodes, watchKey } from '../../src/workspace/watch-coverage.js';
import { makeTempDirectory } from '../helpers/temp.js';
import { hasInotifywait as isAvailable, untilLive } from '../helpers/watching.js';
import { makeWorkspace } from '../helpers/workspace.js';

const watchers: WorkspaceWatcher[] = [];
afterEach(() => {
  for (const watcher of watchers.splice(0)) watcher.close();
});

/** A watcher of `workspace` keeping its sentinels in `storeDirectory`, and what it said. */
function watch(workspace: string, storeDirectory: string) {
  const told: string[] = [];
  const watcher = new WorkspaceWatcher(workspace, storeDirectory, NO_OUTSIDE_RULES, (why) =>
    told.push(why),
  );
  watchers.push(watcher);
  return { watcher, told };
}

/** A tree of directories and files, as a project's. */
function layTree(root: string): void {
  for (let one = 0; one < 20; one++) {
    for (let two = 0; two < 10; two++) {
      mkdirSync(join(root, `d${one}`, `e${two}`), { recursive: true });
      writeFileSync(join(root, `d${one}`, `e${two}`, 'f.txt'), `${one}.${two}`);
    }
  }
}

describe.runIf(process.platform === 'linux' && isAvailable)(
  'a watcher outliving what it watches',
  () => {
    it('stops once, saying so once, when the workspace (its store inside) is deleted, and makes nothing again', async () => {
      for (let round = 0; round < 3; round++) {
        const made = await makeWorkspace();
        const workspace = realpathSync(made.workspace);
        layTree(workspace);
        const { watcher, told } = watch(workspace, made.storeDirectory);
        await untilLive(watcher);
        await rm(workspace, { recursive: true });
        await sleep(1_500);
        expect(existsSync(workspace), `round ${round}`).toBe(false);
        expect(told, `round ${round}`).toHaveLength(1);
        expect(told[0]).toMatch(/was (deleted|removed)/);
        expect(watcher.pid).toBeUndefined();
        expect((await watcher.drain()).paths).toBeUndefined();
      }
    });

    it('stops once when its store (outside the workspace) is deleted, and makes no directory of it again', async () => {
      for (let round = 0; round < 3; round++) {
        const workspace = realpathSync(await makeTempDirectory());
        layTree(workspace);
        const store = join(await makeTempDirectory(), 'store');
        mkdirSync(store);
        const { watcher, told } = watch(workspace, store);
        await untilLive(watcher);
        await rm(store, { recursive: true });
        await sleep(1_500);
        expect(existsSync(store), `round ${round}`).toBe(false);
        expect(told, `round ${round}`).toHaveLength(1);
        expect(told[0]).toMatch(/store/);
        expect(watcher.pid).toBeUndefined();
      }
    });

    it('makes no store directory when it starts on a store that is not there', async () => {
      const workspace = realpathSync(await makeTempDirectory());
      const store = join(await makeTempDirectory(), 'gone');
      const { watcher, told } = watch(workspace, store);
      await sleep(300);
      expect(existsSync(store)).toBe(false);
      expect(told).toHaveLength(1);
      expect(watcher.isLive).toBe(false);
    });

    it('starts while a build removes and makes its output: what vanished while listed is skipped, and it goes live', async () => {
      const made = await makeWorkspace();
      const workspace = realpathSync(made.workspace);
      layTree(workspace);
      // A build deleting its output and writing it again, over and over, while watchers start.
      const build = spawn(
        'sh',
        ['-c', "while :; do rm -rf out; mkdir -p $(seq -f 'out/%g/x/y' 200); done"],
        { cwd: workspace, stdio: 'ignore' },
      );
      const started: ReturnType<typeof watch>[] = [];
      try {
        for (let round = 0; round < 8; round++) {
          started.push(watch(workspace, made.storeDirectory));
          await sleep(400);
        }
      } finally {
        build.kill('SIGKILL');
      }
      for (const { watcher, told } of started) {
        await untilLive(watcher);
        expect(told).toEqual([]);
      }
    }, 60_000);

    it('starts again at a slower and slower pace while inotifywait is killed over and over, walks meanwhile, and watches again after', async () => {
      const made = await makeWorkspace({ 'a.txt': 'a' });
      const workspace = realpathSync(made.workspace);
      layTree(workspace);
      const { watcher, told } = watch(workspace, made.storeDirectory);
      await untilLive(watcher);
      // Something that kills every inotifywait of the watcher as soon as it watches, for 4 s.
      const started = new Set<number>();
      const answers: (string[] | undefined)[] = [];
      for (const start = Date.now(); Date.now() - start < 4_000; ) {
        const pid = watcher.pid;
        if (pid !== undefined && watcher.isLive && !started.has(pid)) {
          started.add(pid);
          process.kill(pid, 'SIGKILL');
          answers.push((await watcher.drain()).paths);
        }
        await sleep(2);
      }
      // At once at first, then after 0.1 s, 0.2 s, 0.4 s...: not a start after every kill.
      expect(started.size).toBeGreaterThan(3);
      expect(started.size).toBeLessThan(12);
      expect(answers.every((paths) => paths === undefined)).toBe(true);
      expect(watcher.stoppedBecause).toBeUndefined();
      await untilLive(watcher);
      expect(told).toEqual([]);
    }, 60_000);

    it('leaves unwatched .git and .rewind, wherever they are, and still hears its sentinels in the store', async () => {
      const made = await makeWorkspace({
        'src/a.txt': 'a',
        '.git/objects/ab/cdef': 'object',
        '.rewind/views/s1/src/a.txt': 'a view of the workspace',
        'vendor/lib/.git/refs/heads/main': 'ref',
      });
      const workspace = realpathSync(made.workspace);
      const { watcher, told } = watch(workspace, made.storeDirectory);
      await untilLive(watcher);
      const key = (path: string) => watchKey(lstatSync(join(workspace, path), { bigint: true }));
      const watched = watchedInodes(watcher.pid as number);
      for (const path of ['', 'src', 'vendor', 'vendor/lib']) {
        expect(watched?.has(key(path)), path).toBe(true);
      }
      for (const path of [
        '.git',
        '.git/objects/ab',
        '.rewind',
        '.rewind/objects',
        '.rewind/views/s1/src',
        'vendor/lib/.git/refs/heads',
      ]) {
        expect(watched?.has(key(path)), path).toBe(false);
      }
      // The sentinel directory inside the left-out store is watched: a drain hears what changed.
      await watcher.drain();
      writeFileSync(join(workspace, 'src/a.txt'), 'changed');
      expect((await watcher.drain()).paths).toContain('src/a.txt');
      expect(told).toEqual([]);
    });

    it('leaves unwatched the directories the ignore rules leave out deep down, and watches again one no longer left out', async () => {
      const made = await makeWorkspace({
        '.gitignore': 'node_modules/\n',
        'packages/a/node_modules/dep/lib/index.js': 'dep',
        'packages/a/src/index.js': 'a',
        'apps/web/.gitignore': 'dist/\n',
        'apps/web/dist/assets/app.js': 'built',
        'apps/web/src/app.js': 'app',
      });
      const workspace = realpathSync(made.workspace);
      const { watcher } = watch(workspace, made.storeDirectory);
      await untilLive(watcher);
      const key = (path: string) => watchKey(lstatSync(join(workspace, path), { bigint: true }));
      let watched = watchedInodes(watcher.pid as number);
      for (const path of ['packages/a/src', 'apps/web/src', 'packages/a', 'apps/web']) {
        expect(watched?.has(key(path)), path).toBe(true);
      }
      for (const path of [
        'packages/a/node_modules',
        'packages/a/node_modules/dep',
        'apps/web/dist',
        'apps/web/dist/assets',
      ]) {
        expect(watched?.has(key(path)), path).toBe(false);
      }
      // The rule taken away: the next walk's rules leave other directories out, it starts again.
      writeFileSync(join(workspace, 'apps/web/.gitignore'), '');
      watcher.startAgain(NO_OUTSIDE_RULES);
      await untilLive(watcher);
      watched = watchedInodes(watcher.pid as number);
      expect(watched?.has(key('apps/web/dist/assets'))).toBe(true);
      expect(watched?.has(key('packages/a/node_modules'))).toBe(false);
    });
  },
);
