import { readFile, rm, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { log, openSession } from '../../src/session/index.js';
import { applicationOrder, diffTrees, WRITES_AT_ONCE } from '../../src/workspace/index.js';
import { rewind } from '../helpers/cli.js';
import { rollbackKilledAfter, sessionOn } from '../helpers/session.js';
import type { Layout } from '../helpers/workspace.js';

// A restore writes files WRITES_AT_ONCE at a time, so a kill can leave one set while one before it
// is not. Recovery must tell that apart from an edit made since the crash: a path back in the
// state the rollback started from is an edit only when a path WRITES_AT_ONCE or more places after
// it was set (the restore starts a file only once every one that many places before has ended).

const FILES = 400;

describe('recovery of a restore that wrote files side by side', () => {
  it('calls a path not set an edit only when one far enough after it was set', async () => {
    const layout: Layout = {};
    for (let index = 0; index < FILES; index++)
      layout[`d${index % 20}/f${index}.txt`] = `old ${index}\n`;
    const { workspace, session, store, stateOf } = await sessionOn(layout);
    const base = await session.checkpoint('base');
    for (let index = 0; index < FILES; index++) {
      const path = join(workspace, `d${index % 20}/f${index}.txt`);
      if (index % 3 === 0) await rm(path);
      else await writeFile(path, `new ${index}\n`);
    }
    const edited = await stateOf();
    await session.close();
    const run = await rollbackKilledAfter(workspace, 'base', 150);
    expect(run.signal).toBe('SIGKILL');

    // The order the rollback wrote in, and how far it came: the last path it had set.
    const { placements } = applicationOrder(await diffTrees(store, edited, base.tree));
    const isSet = async (path: string) =>
      (await readFile(join(workspace, path), 'utf8').catch(() => undefined)) ===
      `old ${/f(\d+)/.exec(path)?.[1]}\n`;
    const set: boolean[] = [];
    for (const { path } of placements) set.push(await isSet(path));
    const last = set.lastIndexOf(true);
    expect(last).toBeGreaterThanOrEqual(2 * WRITES_AT_ONCE);
    // Everything WRITES_AT_ONCE or more places before the last one set was set.
    expect(set.slice(0, last - WRITES_AT_ONCE + 1).every(Boolean)).toBe(true);

    // A person puts set paths back as they were before the rollback: one less than WRITES_AT_ONCE
    // places before the last one set (a write that may not have ended when it was killed), and
    // one that many places before it (a write that had ended).
    const nearIndex = set.findLastIndex((isIt, index) => isIt && index < last);
    expect(nearIndex).toBeGreaterThan(last - WRITES_AT_ONCE);
    const near = placements[nearIndex]?.path as string;
    const numberOf = (path: string) => Number(/f(\d+)/.exec(path)?.[1]);
    // (One edited since base, not deleted, so that the person's version is a file to look at.)
    const far = placements
      .slice(0, last - WRITES_AT_ONCE + 1)
      .map(({ path }) => path)
      .findLast((path) => numberOf(path) % 3 !== 0) as string;
    for (const path of [near, far]) {
      const index = numberOf(path);
      if (index % 3 === 0) await rm(join(workspace, path));
      else await writeFile(join(workspace, path), `new ${index}\n`);
    }
    const result = await rewind(workspace, ['checkpoint', 'after']);
    expect(result.code).toBe(0);
    // Only the far one is an edit (saved first); the near one is finished as not reached.
    const completed = (await log({ workspace, kind: 'rollback-completed' })).entries[0];
    expect(completed?.entry.body).toMatchObject({ isRecovery: true, drifted: [far] });
    expect(await stateOf()).toBe(base.tree);
    const reopened = await openSession({ workspace });
    await reopened.rollback(String(completed?.entry.body.savedAs), { paths: [far] });
    expect(await readFile(join(workspace, far), 'utf8')).toBe(`new ${numberOf(far)}\n`);
    await reopened.close();
  }, 60_000);
});
