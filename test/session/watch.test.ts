import { execFileSync } from 'node:child_process';
import { createHash } from 'node:crypto';
import { appendFile, mkdir, readFile, rename, rm, utimes, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { describe, expect, it } from 'vitest';
import { gc, init, openSession, type Session, verify } from '../../src/index.js';
import { runAsNobody, workspaceOfNobody } from '../helpers/nobody.js';
import { ROOT, runNode } from '../helpers/processes.js';
import { makeTempDirectory } from '../helpers/temp.js';
import { referenceTree } from '../helpers/trees.js';
import { hasInotifywait } from '../helpers/watching.js';
import { lay } from '../helpers/workspace.js';

/** The inotifywait processes watching `workspace`. */
function watchersOf(workspace: string): string[] {
  try {
    return execFileSync('pgrep', ['-af', `inotifywait.*${workspace}`])
      .toString()
      .split('\n')
      .filter(Boolean);
  } catch {
    return []; // pgrep exits 1 when nothing matches
  }
}

/** Checkpoints until the watch is live and a snapshot has given it a base: until then, they ask find. */
async function settle(session: Session): Promise<void> {
  for (let round = 0; round < 40; round++) {
    await sleep(150);
    if ((await session.checkpoint(`settle-${round}`)).readCount === 0 && round > 1) return;
  }
}

/**
 * Runs `run` with find as the snapshots run it (by PATH) logged: `snapshotFinds` lists the runs
 * that asked what changed since a snapshot (-newerct); the watcher's own, which lists the
 * directories to check its watches against, are left out. `untilFound` waits (up to 10 s) until
 * there are `count` of them.
 */
async function withLoggedFind(
  run: (
    snapshotFinds: () => Promise<string[]>,
    untilFound: (count: number) => Promise<void>,
  ) => Promise<void>,
): Promise<void> {
  const bin = await makeTempDirectory();
  const log = join(bin, 'find.log');
  const find = execFileSync('sh', ['-c', 'command -v find']).toString().trim();
  await writeFile(join(bin, 'find'), `#!/bin/sh\necho "$*" >> '${log}'\nexec ${find} "$@"\n`, {
    mode: 0o755,
  });
  const snapshotFinds = async () =>
    (await readFile(log, 'utf8').catch(() => ''))
      .split('\n')
      .filter((line) => line.includes('-newerct'));
  const untilFound = async (count: number) => {
    for (let waited = 0; (await snapshotFinds()).length < count && waited < 10_000; waited += 20) {
      await sleep(20);
    }
  };
  const saved = { path: process.env.PATH, shells: process.env.REWIND_PROGRAM_SHELLS };
  process.env.PATH = `${bin}:${process.env.PATH}`;
  process.env.REWIND_PROGRAM_SHELLS = '0';
  try {
    await run(snapshotFinds, untilFound);
  } finally {
    process.env.PATH = saved.path;
    if (saved.shells === undefined) delete process.env.REWIND_PROGRAM_SHELLS;
    else process.env.REWIND_PROGRAM_SHELLS = saved.shells;
  }
}

describe.runIf(process.platform === 'linux' && hasInotifywait)('a session that watches', () => {
  it('checkpoints and rolls back as one that does not, and leaves no watcher behind', async () => {
    const workspace = await makeTempDirectory();
    await lay(workspace, {
      '.gitignore': 'node_modules/\n',
      'src/app.ts': 'export const app = 1;\n',
      'src/lib/util.ts': 'export const util = 1;\n',
      'node_modules/dep/index.js': 'module.exports = 1;\n',
    });
    await init({ workspace });
    const session = await openSession({ workspace, watch: true });
    try {
      expect(watchersOf(workspace)).toHaveLength(1);
      await session.checkpoint('start');
      const trees: Record<string, string> = { start: await referenceTree(workspace) };
      // Tool calls and edits from outside, with the pauses of an agent between them.
      for (let round = 0; round < 6; round++) {
        await sleep(300);
        await session.write(`src/gen${round}.ts`, `export const n = ${round};\n`);
        await appendFile(join(workspace, 'src/app.ts'), `// edited outside, round ${round}\n`);
        await mkdir(join(workspace, `src/deep${round}/a/b`), { recursive: true });
        await writeFile(join(workspace, `src/deep${round}/a/b/c.ts`), `${round}`);
        if (round === 3) await rename(join(workspace, 'src/lib'), join(workspace, 'src/lib2'));
        if (round === 4) await rm(join(workspace, 'src/deep1'), { recursive: true });
        await session.checkpoint(`round-${round}`);
        trees[`round-${round}`] = await referenceTree(workspace);
      }
      // Each checkpoint holds what a full read of the workspace held then.
      for (const [label, tree] of Object.entries(trees)) {
        await session.rollback(label);
        expect(await referenceTree(workspace), label).toBe(tree);
      }
      await session.rollback('round-2');
      expect(await readFile(join(workspace, 'src/app.ts'), 'utf8')).toContain('round 2');
      await writeFile(join(workspace, 'src/app.ts'), 'after the rollback\n');
      await sleep(300);
      await session.checkpoint('after');
      await session.rollback('round-5');
      await session.rollback('after');
      expect(await readFile(join(workspace, 'src/app.ts'), 'utf8')).toBe('after the rollback\n');
    } finally {
      await session.close();
    }
    for (let waited = 0; watchersOf(workspace).length > 0 && waited < 2_000; waited += 50) {
      await sleep(50);
    }
    expect(watchersOf(workspace)).toEqual([]);
  });

  it('does not read again what its rollback or undo wrote, but does what was edited right after', async () => {
    const workspace = await makeTempDirectory();
    await lay(
      workspace,
      Object.fromEntries(
        Array.from({ length: 30 }, (_, index) => [`src/f${index}.ts`, `${index}\n`]),
      ),
    );
    await init({ workspace });
    const session = await openSession({ workspace, watch: true });
    try {
      await session.checkpoint('start');
      await settle(session);
      for (let index = 0; index < 20; index++) {
        await appendFile(join(workspace, `src/f${index}.ts`), 'broken\n');
      }
      await sleep(150);
      const rollback = await session.rollback('start');
      expect(rollback.applied?.written).toBe(20);
      // The 20 files the rollback wrote are taken from it: none is read.
      const next = await session.checkpoint('after-rollback');
      expect(next.readCount).toBe(0);
      expect(next.tree).toBe(await referenceTree(workspace));
      // Undone: the broken files come back, and are not read either.
      await session.undo(rollback.id as number);
      const undone = await session.checkpoint('after-undo');
      expect(undone.readCount).toBe(0);
      expect(undone.tree).toBe(await referenceTree(workspace));
      // An edit made right after a rollback, with the file's size kept, is read and kept.
      await session.rollback('start');
      await writeFile(join(workspace, 'src/f3.ts'), 'X\n');
      const edited = await session.checkpoint('edited');
      expect(edited.readCount).toBe(1);
      expect(edited.tree).toBe(await referenceTree(workspace));
    } finally {
      await session.close();
    }
  });

  it('reads again what gc took from under the snapshot its watch updates', async () => {
    const workspace = await makeTempDirectory();
    await lay(workspace, { 'lib/a.ts': 'a\n', 'src/b.ts': 'b\n' });
    await init({ workspace });
    const session = await openSession({ workspace, watch: true });
    try {
      await session.checkpoint('start');
      await settle(session);
      // A diff against the working tree snapshots it: lib/a.ts's new content is stored, and the
      // watch's next answer updates that snapshot; no checkpoint refers to it.
      await writeFile(join(workspace, 'lib/a.ts'), 'a, edited\n');
      await sleep(150);
      expect((await session.diff('start')).changes).toEqual([
        { path: 'lib/a.ts', kind: 'modified' },
      ]);
      // gc (in any process) removes what nothing refers to, and forgets the snapshot on disk.
      const collected = await gc({ workspace, graceMs: 0 });
      expect(collected.removed.length).toBeGreaterThan(0);
      // The next checkpoint reads lib/ again rather than refer to what gc removed (its tree and
      // a.ts's content), though only src/ changed since the diff.
      await appendFile(join(workspace, 'src/b.ts'), 'more\n');
      await sleep(150);
      const next = await session.checkpoint('after-gc');
      expect(next.tree).toBe(await referenceTree(workspace));
      expect((await verify({ workspace })).problems).toEqual([]);
      await writeFile(join(workspace, 'lib/a.ts'), 'lost?\n');
      await session.rollback('after-gc');
      expect(await readFile(join(workspace, 'lib/a.ts'), 'utf8')).toBe('a, edited\n');
    } finally {
      await session.close();
    }
  });

  it('reads again a large file whose old object gc took while the tree naming it was spared as recent', async () => {
    const workspace = await makeTempDirectory();
    const big = (seed: number) => Buffer.alloc(2 * 1024 * 1024, seed); // over 1 MiB: a file of its own
    await lay(workspace, { 'src/b.ts': 'b\n' });
    await writeFile(join(workspace, 'lib.bin'), big(1));
    await init({ workspace });
    const session = await openSession({ workspace, watch: true });
    try {
      await session.checkpoint('start');
      await settle(session);
      // A diff stores lib.bin's new content, which no checkpoint holds, as a file of its own.
      await writeFile(join(workspace, 'lib.bin'), big(2));
      await sleep(150);
      await session.diff('start');
      const digest = createHash('sha256').update(big(2)).digest('hex');
      const object = join(workspace, '.rewind/objects', digest.slice(0, 2), digest.slice(2));
      // Two hours pass; a second diff names it again in a new tree, without storing it again.
      const before = new Date(Date.now() - 2 * 60 * 60 * 1000);
      await utimes(object, before, before);
      await appendFile(join(workspace, 'src/b.ts'), 'more\n');
      await sleep(150);
      await session.diff('start');
      // gc spares what was written in the last hour (the new tree) and takes the rest nothing
      // refers to: the old object.
      const collected = await gc({ workspace });
      expect(collected.removed.map((removed) => removed.digest)).toContain(`sha256:${digest}`);
      // The next checkpoint stores lib.bin again rather than refer to what gc removed.
      const next = await session.checkpoint('after-gc');
      expect(next.tree).toBe(await referenceTree(workspace));
      expect((await verify({ workspace })).problems).toEqual([]);
      await writeFile(join(workspace, 'lib.bin'), 'lost?');
      await session.rollback('after-gc');
      expect((await readFile(join(workspace, 'lib.bin'))).equals(big(2))).toBe(true);
    } finally {
      await session.close();
    }
  });

  it('leaves no watcher behind a process killed with its session open', async () => {
    const workspace = await makeTempDirectory();
    await lay(workspace, { 'a.txt': 'a' });
    await init({ workspace });
    const run = await runNode([join(ROOT, 'test/helpers/watch-child.mjs'), workspace]);
    expect(run.signal).toBe('SIGKILL');
    for (let waited = 0; watchersOf(workspace).length > 0 && waited < 2_000; waited += 50) {
      await sleep(50);
    }
    expect(watchersOf(workspace)).toEqual([]);
  });

  it('gives its watch a base by itself once live, at the start and after a directory moved, so that checkpoints ask find nothing', async () => {
    const workspace = await makeTempDirectory();
    await lay(workspace, { 'src/a.ts': 'export const a = 1;\n', 'src/b.ts': 'b\n' });
    await init({ workspace });
    const before = await openSession({ workspace });
    await before.checkpoint('start');
    await before.close();
    await withLoggedFind(async (snapshotFinds, untilFound) => {
      const session = await openSession({ workspace, watch: true });
      try {
        await untilFound(1);
        // The snapshot that gave the watch its base asked find, by itself, before any checkpoint.
        expect(await snapshotFinds()).toHaveLength(1);
        await appendFile(join(workspace, 'src/a.ts'), 'export const b = 2;\n');
        const after = await session.checkpoint('after');
        expect(after.readCount).toBe(1);
        expect(await snapshotFinds()).toHaveLength(1);
        // A directory moved: the watch starts again, and gets its base again by itself.
        await rename(join(workspace, 'src'), join(workspace, 'lib'));
        await untilFound(2);
        expect(await snapshotFinds()).toHaveLength(2);
        await appendFile(join(workspace, 'lib/b.ts'), 'c\n');
        expect((await session.checkpoint('moved')).readCount).toBe(1);
        expect(await snapshotFinds()).toHaveLength(2);
        await session.rollback('start');
        expect(await readFile(join(workspace, 'src/a.ts'), 'utf8')).toBe('export const a = 1;\n');
      } finally {
        await session.close();
      }
      // A workspace never snapshotted is left to its first checkpoint: it reads every file.
      const fresh = await makeTempDirectory();
      await lay(fresh, { 'a.txt': 'a\n' });
      await init({ workspace: fresh });
      const untouched = await openSession({ workspace: fresh, watch: true });
      try {
        await sleep(1_000);
        expect((await untouched.preview()).isFirst).toBe(true);
      } finally {
        await untouched.close();
      }
    });
  });

  it('in an isolated session, watches its view: a command run there reports its changes without asking find, and the host waits for the commit', async () => {
    const workspace = await makeTempDirectory();
    await lay(workspace, { 'src/a.ts': 'export const a = 1;\n', 'src/b.ts': 'b\n' });
    await init({ workspace });
    await withLoggedFind(async (snapshotFinds, untilFound) => {
      const session = await openSession({ workspace, isolation: 'isolated', watch: true });
      try {
        const view = session.workspace;
        expect(view).not.toBe(workspace);
        expect(watchersOf(view)).toHaveLength(1);
        // The view was recorded as it was copied: the watch gets its base from it by itself.
        await untilFound(1);
        const before = (await snapshotFinds()).length;
        expect(before).toBe(1);
        const result = await session.exec([
          'sh',
          '-c',
          'echo "export const b = 2;" >> src/a.ts && mkdir -p src/new && echo n > src/new/n.ts',
        ]);
        expect(result.changes.map((change) => change.path).sort()).toEqual([
          'src/a.ts',
          'src/new/n.ts',
        ]);
        // Both snapshots of the command (before and after) took the watcher's word, and so does
        // a checkpoint after it, which holds what a full read of the view holds.
        const checkpoint = await session.checkpoint('after');
        expect(checkpoint.readCount).toBe(0);
        expect(checkpoint.tree).toBe(await referenceTree(view));
        expect(await snapshotFinds()).toHaveLength(before);
        expect(await readFile(join(workspace, 'src/a.ts'), 'utf8')).toBe('export const a = 1;\n');
        await session.commit();
        expect(await readFile(join(workspace, 'src/a.ts'), 'utf8')).toContain('b = 2');
        expect(await readFile(join(workspace, 'src/new/n.ts'), 'utf8')).toBe('n\n');
      } finally {
        await session.close();
      }
      expect(watchersOf(workspace)).toHaveLength(0);
    });
  });

  it('stops taking its base itself once that found a path it cannot read: every snapshot then walks, and the watch goes on', async () => {
    const workspace = await workspaceOfNobody({ 'secret.txt': 'v1\n', 'notes.txt': 'a\n' });
    // The watchers of the workspace seen while the session is open: each start of the watch is
    // an inotifywait of its own.
    const seen = new Set<string>();
    let isOpen = true;
    const sampling = (async () => {
      while (isOpen) {
        for (const line of watchersOf(workspace)) seen.add(line.split(' ')[0] as string);
        await sleep(20);
      }
    })();
    const out = await runAsNobody(
      workspace,
      `
      await api.init({ workspace });
      const before = await api.openSession({ workspace });
      await before.checkpoint('start');
      await before.close();
      fs.chmodSync(workspace + '/secret.txt', 0);
      const session = await api.openSession({ workspace, watch: true });
      await new Promise((done) => setTimeout(done, 3000));
      out.warnings = (await session.checkpoint('after')).warnings;
      await session.close();`,
    );
    isOpen = false;
    await sampling;
    expect(out.error).toBeUndefined();
    expect(out.warnings).toEqual([expect.stringMatching(/Could not read secret\.txt/)]);
    // An unreadable file changes nothing the watch leaves out: it is not started again (until
    // 2026-12-04 each snapshot that walked started it again).
    expect(seen.size).toBe(1);
  }, 30_000);
});
