import { writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { gc, init, log, openSession } from '../../src/session/index.js';
import { sessionOn } from '../helpers/session.js';
import { makeTempDirectory } from '../helpers/temp.js';

describe('pruning checkpoints', () => {
  it('prunes only the checkpoints whose label has a prefix, when asked (an adapter pruning its own)', async () => {
    const { session } = await sessionOn({ 'a.txt': 'v0' });
    for (const label of ['mine', 'lg-1', 'lg-2', 'theirs', 'lg-3']) await session.checkpoint(label);
    const result = await session.prune({ keepLast: 1, labelPrefix: 'lg-' });
    expect(result.pruned.map((checkpoint) => checkpoint.label)).toEqual(['lg-1', 'lg-2']);
    expect(result.keptCount).toBe(3);
    expect((await session.checkpoints()).map((checkpoint) => checkpoint.label)).toEqual([
      'mine',
      'theirs',
      'lg-3',
    ]);
    await session.checkpoint('newest');
    // The newest of the prefix is kept by keepLast; the newest of all is never dropped.
    expect((await session.prune({ keepLast: 1, labelPrefix: 'ne' })).pruned).toEqual([]);
  });

  it('keeps the last N, journals each one dropped, and lets gc free what only they held', async () => {
    const { workspace, session } = await sessionOn({ 'a.txt': 'v0' });
    for (let index = 1; index <= 4; index++) {
      await writeFile(join(workspace, 'a.txt'), `version ${index} ${'x'.repeat(1000)}`);
      await session.checkpoint(`c${index}`);
    }
    const plan = await session.prune({ keepLast: 2, dryRun: true });
    expect(plan.pruned.map((checkpoint) => checkpoint.label)).toEqual(['c1', 'c2']);
    // Each version of a.txt is about 1 kB: the newest two fit in 2,100 bytes.
    const bySize = await session.prune({ maxSizeBytes: 2100, dryRun: true });
    expect(bySize.pruned.map((checkpoint) => [checkpoint.label, checkpoint.reason])).toEqual([
      ['c1', 'max-size'],
      ['c2', 'max-size'],
    ]);
    expect((await session.checkpoints()).length).toBe(4);
    const result = await session.prune({ keepLast: 2 });
    expect(result).toMatchObject({ isDryRun: false, keptCount: 2 });
    expect((await session.checkpoints()).map((checkpoint) => checkpoint.label)).toEqual([
      'c3',
      'c4',
    ]);
    const pruned = (await log({ workspace, kind: 'checkpoint-pruned' })).entries;
    expect(pruned.map((line) => line.entry.body)).toMatchObject([
      { label: 'c1', reason: 'keep-last' },
      { label: 'c2', reason: 'keep-last' },
    ]);
    const collected = await gc({ workspace, graceMs: 0 });
    expect(collected.removed.length).toBeGreaterThanOrEqual(2);
    await expect(session.rollback('c1')).rejects.toMatchObject({ code: 'CHECKPOINT_NOT_FOUND' });
    await session.rollback('c3');
  });

  it('drops by age and by size, never the newest nor the one an automatic rollback aims at', async () => {
    const workspace = await makeTempDirectory();
    await init({ workspace });
    let clock = Date.UTC(2026, 10, 1);
    const session = await openSession({ workspace, now: () => new Date(clock) });
    for (let index = 1; index <= 4; index++) {
      await writeFile(join(workspace, `f${index}.bin`), String(index).repeat(1000));
      await session.checkpoint(`c${index}`);
      clock += 24 * 3_600_000;
    }
    // c1..c4 were recorded 4, 3, 2 and 1 days ago and hold 1, 2, 3 and 4 distinct kB files.
    expect(
      (await session.prune({ olderThanMs: 2.5 * 24 * 3_600_000, dryRun: true })).pruned.map(
        (checkpoint) => checkpoint.label,
      ),
    ).toEqual(['c1', 'c2']);
    expect(
      (await session.prune({ maxSizeBytes: 3500, dryRun: true })).pruned.map(
        (checkpoint) => checkpoint.label,
      ),
    ).toEqual(['c1', 'c2', 'c3']);
    session.autoRollback({ to: 'c2' });
    const everything = await session.prune({ olderThanMs: 0 });
    expect(everything.pruned.map((checkpoint) => checkpoint.label)).toEqual(['c1', 'c3']);
    expect(everything.spared.map((checkpoint) => checkpoint.why)).toEqual([
      'the newest checkpoint is always kept',
      'an automatic rollback aims at it',
    ]);
    await expect(session.prune({})).rejects.toMatchObject({ code: 'INVALID_ARGUMENT' });
    await expect(session.prune({ keepLast: 0 })).rejects.toMatchObject({
      code: 'INVALID_ARGUMENT',
    });
    await session.close();
  });
});
