import { mkdirSync, realpathSync, renameSync, rmSync, writeFileSync } from 'node:fs';
import { appendFile, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { afterEach, describe, expect, it } from 'vitest';
import { NO_OUTSIDE_RULES, snapshot, WorkspaceWatcher } from '../../src/workspace/index.js';
import { watchedInodes } from '../../src/workspace/watch-coverage.js';
import { makeTempDirectory } from '../helpers/temp.js';
import { referenceTree } from '../helpers/trees.js';
import { hasInotifywait as isAvailable, untilLive } from '../helpers/watching.js';
import { makeWorkspace } from '../helpers/workspace.js';

const watchers: WorkspaceWatcher[] = [];
afterEach(() => {
  for (const watcher of watchers.splice(0)) watcher.close();
});

async function watched(layout: Record<string, string>) {
  const made = await makeWorkspace(layout);
  const workspace = realpathSync(made.workspace);
  await sleep(150);
  const watcher = new WorkspaceWatcher(workspace, made.storeDirectory, NO_OUTSIDE_RULES);
  watchers.push(watcher);
  const options = { store: made.store, storeDirectory: made.storeDirectory, watcher };
  const take = () => snapshot(workspace, options);
  return { workspace, watcher, take };
}

/** Snapshots until one took the watcher's word: the next one can too. */
async function settle(
  take: () => Promise<{ strategy: string }>,
  watcher: WorkspaceWatcher,
): Promise<void> {
  for (let attempt = 0; attempt < 10; attempt++) {
    await sleep(150);
    await untilLive(watcher);
    if ((await take()).strategy === 'watched') return;
  }
  throw new Error('no snapshot took the watcher’s word');
}

/**
 * Waits until another inotifywait than `pid` watches, live, then half a second more, in which
 * any further start would be seen.
 */
async function untilStartedAgain(watcher: WorkspaceWatcher, pid: number | undefined) {
  for (let waited = 0; watcher.pid === pid || !watcher.isLive; waited += 10) {
    if (waited > 20_000) throw new Error('the watch did not start again');
    await sleep(10);
  }
  await sleep(500);
  await untilLive(watcher);
}

/** The process ids of inotifywait seen while `during` runs, sampled every few milliseconds. */
async function pidsDuring(
  watcher: WorkspaceWatcher,
  during: (pid: number | undefined) => Promise<void>,
) {
  const seen = new Set<number>();
  const pid = watcher.pid;
  let isDone = false;
  const sampling = (async () => {
    while (!isDone) {
      if (watcher.pid !== undefined) seen.add(watcher.pid);
      await sleep(2);
    }
  })();
  try {
    await during(pid);
  } finally {
    isDone = true;
    await sampling;
  }
  return seen;
}

/** An `npm install`: node_modules, then packages in it, each with directories of its own. */
function install(workspace: string, packages: number): void {
  for (let index = 0; index < packages; index++) {
    mkdirSync(join(workspace, 'node_modules', `pkg${index}`, 'lib'), { recursive: true });
    writeFileSync(join(workspace, 'node_modules', `pkg${index}`, 'lib', 'index.js'), `${index}`);
  }
}

describe.runIf(process.platform === 'linux' && isAvailable)(
  'directories the ignore rules leave out, made while watched',
  () => {
    it('drops the events under a node_modules made after the watch started, and watches again without it', async () => {
      const { workspace, watcher, take } = await watched({
        '.gitignore': 'node_modules/\n',
        'src/a.js': 'a',
        'src/deep/b.js': 'b',
      });
      await take();
      await settle(take, watcher);
      const before = watchedInodes(watcher.pid as number)?.size;
      const pids = await pidsDuring(watcher, async (pid) => {
        install(workspace, 300);
        await appendFile(join(workspace, 'src/a.js'), ' during');
        // What the watcher collected meanwhile holds nothing under node_modules.
        const { paths } = await watcher.drain();
        expect(paths?.filter((path) => path.startsWith('node_modules/'))).toEqual([]);
        expect(paths).toContain('src/a.js');
        await untilStartedAgain(watcher, pid);
      });
      // One start again, not one per directory.
      expect(pids.size).toBe(2);
      expect(watchedInodes(watcher.pid as number)?.size).toBe(before);
      await writeFile(join(workspace, 'src/deep/b.js'), 'after');
      install(workspace, 310);
      const after = await take();
      expect(after.tree).toBe(await referenceTree(workspace));
      await settle(take, watcher);
      await appendFile(join(workspace, 'src/a.js'), ' and after');
      writeFileSync(join(workspace, 'node_modules/pkg3/lib/index.js'), 'ignored');
      const watchedAfter = await take();
      expect(watchedAfter).toMatchObject({ strategy: 'watched', readCount: 1 });
      expect(watchedAfter.tree).toBe(await referenceTree(workspace));
    }, 60_000);

    it('hears a file that takes the name of an ignored directory removed before the watch started again', async () => {
      const { workspace, watcher, take } = await watched({
        '.gitignore': 'build/\n',
        'src/a.c': 'a',
      });
      await take();
      await settle(take, watcher);
      const pid = watcher.pid;
      mkdirSync(join(workspace, 'build/objects/deep'), { recursive: true });
      writeFileSync(join(workspace, 'build/objects/a.o'), 'object');
      expect((await take()).strategy).toBe('watched');
      rmSync(join(workspace, 'build'), { recursive: true });
      // `build/` leaves out directories only: a file of that name is kept.
      writeFileSync(join(workspace, 'build'), 'a file now');
      const result = await take();
      expect(watcher.pid).toBe(pid);
      expect(result).toMatchObject({ strategy: 'watched', readCount: 1 });
      expect(result.tree).toBe(await referenceTree(workspace));
    }, 60_000);

    it('watches again a directory dropped since the start once the rules keep it', async () => {
      const { workspace, watcher, take } = await watched({
        '.gitignore': 'build/\ndist/\n',
        'src/a.c': 'a',
      });
      await take();
      await settle(take, watcher);
      // A first one: the watch starts again without it, and the next such start waits 10 s.
      const pid = watcher.pid;
      mkdirSync(join(workspace, 'dist'));
      for (let waited = 0; watcher.pid === pid && waited < 5_000; waited += 10) await sleep(10);
      await settle(take, watcher);
      mkdirSync(join(workspace, 'build/objects'), { recursive: true });
      await sleep(100); // heard while the rules still leave it out
      writeFileSync(join(workspace, '.gitignore'), 'dist/\n');
      // Before the watch started again without it: the rules changed, so this one walks.
      const walked = await take();
      expect(walked.strategy).toBe('walk');
      await settle(take, watcher);
      writeFileSync(join(workspace, 'build/objects/a.o'), 'object');
      const result = await take();
      expect(result).toMatchObject({ strategy: 'watched', readCount: 1 });
      expect(result.tree).toBe(await referenceTree(workspace));
    }, 60_000);

    it('reads the rules again once an ignore file changed', async () => {
      const { workspace, watcher, take } = await watched({ '.gitignore': '', 'src/a.c': 'a' });
      await take();
      await settle(take, watcher);
      const before = watchedInodes(watcher.pid as number)?.size;
      // Made while the rules keep it: watched, and the rules of the root read.
      mkdirSync(join(workspace, 'kept'));
      await sleep(100);
      const pids = await pidsDuring(watcher, async (pid) => {
        writeFileSync(join(workspace, '.gitignore'), 'out/\n');
        mkdirSync(join(workspace, 'out/objects'), { recursive: true });
        await untilStartedAgain(watcher, pid);
      });
      expect(pids.size).toBe(2);
      expect(watchedInodes(watcher.pid as number)?.size).toBe((before as number) + 1);
    }, 60_000);

    it('starts again once for a burst of __pycache__ directories', async () => {
      const layout: Record<string, string> = { '.gitignore': '__pycache__/\n' };
      for (let index = 0; index < 30; index++) layout[`pkg/m${index}/mod.py`] = 'x = 1';
      const { workspace, watcher, take } = await watched(layout);
      await take();
      await settle(take, watcher);
      const before = watchedInodes(watcher.pid as number)?.size;
      const pids = await pidsDuring(watcher, async (pid) => {
        for (let index = 0; index < 30; index++) {
          mkdirSync(join(workspace, `pkg/m${index}/__pycache__/deeper`), { recursive: true });
          await appendFile(join(workspace, `pkg/m${index}/mod.py`), `\ny = ${index}`);
          await sleep(5);
        }
        await untilStartedAgain(watcher, pid);
      });
      expect(pids.size).toBe(2);
      expect(watchedInodes(watcher.pid as number)?.size).toBe(before);
      expect((await take()).tree).toBe(await referenceTree(workspace));
    }, 60_000);

    it('starts again without an ignored directory moved in, or one inside a project moved in', async () => {
      for (const isInProject of [false, true]) {
        const { workspace, watcher, take } = await watched({
          '.gitignore': '__pycache__/\n',
          'pkg/mod.py': 'x = 1',
        });
        await take();
        await settle(take, watcher);
        const before = watchedInodes(watcher.pid as number)?.size as number;
        const project = join(await makeTempDirectory(), 'project');
        mkdirSync(join(project, 'src', '__pycache__', 'c'), { recursive: true });
        writeFileSync(join(project, 'src', 'main.py'), 'main');
        const pids = await pidsDuring(watcher, async (pid) => {
          if (isInProject) {
            renameSync(project, join(workspace, 'project'));
            // Found when the next snapshot checks the watches of what was moved in.
            expect((await take()).strategy).toBe('watched');
          } else
            renameSync(join(project, 'src', '__pycache__'), join(workspace, 'pkg/__pycache__'));
          await untilStartedAgain(watcher, pid);
        });
        expect(pids.size, `in a project: ${isInProject}`).toBe(2);
        expect(watchedInodes(watcher.pid as number)?.size).toBe(before + (isInProject ? 2 : 0));
        await appendFile(join(workspace, 'pkg/mod.py'), '\nz = 1');
        expect((await take()).tree).toBe(await referenceTree(workspace));
      }
    }, 60_000);

    it('starts again at most every 10 s for a build that makes its ignored output again and again', async () => {
      const { workspace, watcher, take } = await watched({
        '.gitignore': 'dist/\n',
        'src/a.ts': 'a',
        'dist/a.js': 'a',
      });
      await take();
      await settle(take, watcher);
      const pids = await pidsDuring(watcher, async () => {
        for (let round = 0; round < 8; round++) {
          rmSync(join(workspace, 'dist'), { recursive: true, force: true });
          mkdirSync(join(workspace, 'dist/assets'), { recursive: true });
          writeFileSync(join(workspace, 'dist/assets/a.js'), `${round}`);
          await appendFile(join(workspace, 'src/a.ts'), `${round}`);
          await sleep(500);
        }
      });
      expect(pids.size).toBe(2);
      await untilLive(watcher);
      expect((await take()).tree).toBe(await referenceTree(workspace));
    }, 60_000);
  },
);
