import { mkdir, readdir, readFile, rm, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { describe, expect, it, onTestFinished } from 'vitest';
import { readLedgerFile } from '../../src/ledger/index.js';
import { gc, log, openSession, previewWorkspace, verify } from '../../src/session/index.js';
import { readTree } from '../../src/store/index.js';
import { copyTree, runCli } from '../fault/harness.js';
import { rewind } from '../helpers/cli.js';
import { dropClosingEntry, rollbackKilledAfter, sessionOn } from '../helpers/session.js';
import { makeTempDirectory } from '../helpers/temp.js';
import { type Layout, lay } from '../helpers/workspace.js';

describe('checkpoints', () => {
  it('counts every file and link of a first checkpoint as added, nested ones included', async () => {
    const { session } = await sessionOn({
      'a.txt': 'a',
      'src/lib/b.ts': 'b',
      'src/lib/deep/c.ts': 'c',
      'docs/link': { link: '../a.txt' },
    });
    expect(await session.checkpoint('first')).toMatchObject({
      fileCount: 4,
      added: 4,
      modified: 0,
      deleted: 0,
    });
  });

  it('records checkpoints with the files changed since the previous one', async () => {
    const { workspace, session } = await sessionOn({ 'a.txt': 'a', 'b.txt': 'b' });
    const first = await session.checkpoint('base');
    expect(first).toMatchObject({
      label: 'base',
      seq: 2,
      fileCount: 2,
      added: 2,
      modified: 0,
      deleted: 0,
    });
    await writeFile(join(workspace, 'a.txt'), 'A');
    await rm(join(workspace, 'b.txt'));
    await lay(workspace, { 'c/d.txt': 'd' });
    const second = await session.checkpoint('edited');
    expect(second).toMatchObject({ fileCount: 2, added: 1, modified: 1, deleted: 1 });
    expect((await session.checkpoints()).map((checkpoint) => checkpoint.label)).toEqual([
      'base',
      'edited',
    ]);
  });

  it.each([['has/slash'], ['..'], ['latest'], ['123'], [''], ['-leading-dash'], ['a b']])(
    'refuses the malformed label %j and records nothing',
    async (label) => {
      const { workspace, session } = await sessionOn({ 'a.txt': 'a' });
      await expect(session.checkpoint(label)).rejects.toMatchObject({
        code: 'INVALID_ARGUMENT',
        data: { label },
      });
      await session.close();
      expect((await log({ workspace })).entries).toHaveLength(1);
    },
  );

  it('lists, when asked, the lines of text added and removed since the previous checkpoint', async () => {
    const { workspace, session } = await sessionOn({ 'a.txt': 'one\ntwo\nthree\n', bin: 'x' });
    await session.checkpoint('base');
    await writeFile(join(workspace, 'a.txt'), 'one\nTWO\nthree\nfour\n');
    await writeFile(join(workspace, 'b.txt'), 'new\n');
    await writeFile(join(workspace, 'bin'), Buffer.from([0, 1, 2]));
    await session.checkpoint('edited');
    const [base, edited] = await session.checkpoints({ withLines: true });
    expect(base?.linesAdded).toBeUndefined();
    expect(edited).toMatchObject({ linesAdded: 3, linesRemoved: 1 });
    expect((await session.checkpoints())[1]?.linesAdded).toBeUndefined();
  });

  it('tells what the first checkpoint would take, and refuses one over a budget before storing anything', async () => {
    const { workspace, session } = await sessionOn({
      '.gitignore': 'node_modules/\n',
      'src/a.js': 'a'.repeat(2000),
      'src/b.js': 'b',
      'node_modules/dep/index.js': 'dep',
    });
    const preview = await previewWorkspace({ workspace });
    expect(preview).toMatchObject({
      fileCount: 3,
      isFirst: true,
      leftOut: ['node_modules'],
      leftOutCount: 1,
      largest: [{ path: 'src', fileCount: 2, sizeBytes: 2001 }],
    });
    await expect(session.checkpoint('big', { budget: { maxFiles: 2 } })).rejects.toMatchObject({
      code: 'SNAPSHOT_TOO_LARGE',
      data: { fileCount: 3 },
    });
    expect((await log({ workspace })).entries).toHaveLength(1);
    await session.checkpoint('base');
    expect((await session.preview()).isFirst).toBe(false);
    await writeFile(join(workspace, 'src/c.js'), 'c');
    // Not a first checkpoint any more: only what changed is read, whatever the budget.
    await session.checkpoint('later', { budget: { maxFiles: 2 } });
  });

  it('reports progress while a first checkpoint reads its files', async () => {
    const { session } = await sessionOn(
      Object.fromEntries(Array.from({ length: 20 }, (_, index) => [`f${index}.txt`, `${index}`])),
    );
    const reported: { filesRead: number; filesToRead: number }[] = [];
    await session.checkpoint('first', { onProgress: (progress) => reported.push(progress) });
    expect(reported).toHaveLength(20);
    expect(reported.at(-1)).toMatchObject({ filesRead: 20, filesToRead: 20 });
  });

  it('labels a checkpoint made without a label checkpoint-N, the next number free, and says which', async () => {
    const { session } = await sessionOn({ 'a.txt': 'a' });
    expect(await session.checkpoint()).toMatchObject({ label: 'checkpoint-1', seq: 2 });
    await session.checkpoint('checkpoint-3');
    const messages = [{ role: 'user', content: 'go on' }];
    // Options alone, or after an undefined label.
    expect(await session.checkpoint({ messages, format: 'anthropic' })).toMatchObject({
      label: 'checkpoint-4',
      conversation: { format: 'anthropic', messageCount: 1 },
    });
    expect(await session.checkpoint(undefined, { messages })).toMatchObject({
      label: 'checkpoint-5',
      conversation: { messageCount: 1 },
    });
    // From JavaScript: null is no label; a label that is not a string is refused, saying so.
    expect(await session.checkpoint(null as unknown as string)).toMatchObject({
      label: 'checkpoint-6',
    });
    await expect(session.checkpoint(7 as unknown as string)).rejects.toMatchObject({
      code: 'INVALID_ARGUMENT',
      message: expect.stringMatching(/^number 7 is not a valid checkpoint label/),
    });
    expect((await session.checkpoints()).map((checkpoint) => checkpoint.label)).toEqual([
      'checkpoint-1',
      'checkpoint-3',
      'checkpoint-4',
      'checkpoint-5',
      'checkpoint-6',
    ]);
  });

  it('gives sessions checkpointing at once without a label each its own label', async () => {
    const { workspace, session } = await sessionOn({ 'a.txt': 'a' });
    const other = await openSession({ workspace });
    onTestFinished(() => other.close());
    expect(other.id).toBe(session.id);
    const made = await Promise.all(
      [session, other, session, other].map((each) => each.checkpoint()),
    );
    expect(made.map((checkpoint) => checkpoint.label).sort()).toEqual([
      'checkpoint-1',
      'checkpoint-2',
      'checkpoint-3',
      'checkpoint-4',
    ]);
  });

  it('refuses a label that exists', async () => {
    const { session } = await sessionOn({ 'a.txt': 'a' });
    await session.checkpoint('base');
    await expect(session.checkpoint('base')).rejects.toMatchObject({
      code: 'CHECKPOINT_EXISTS',
      data: { label: 'base', seq: 2 },
    });
  });
});

describe('rollback', () => {
  it('restores the workspace exactly, saving what it replaces, and undo brings that back (redo)', async () => {
    const { workspace, session, stateOf } = await sessionOn({ 'a.txt': 'a', 'dir/b.txt': 'b' });
    const base = await session.checkpoint('base');
    await writeFile(join(workspace, 'a.txt'), 'never checkpointed');
    await rm(join(workspace, 'dir'), { recursive: true });
    await lay(workspace, { 'new.txt': 'new' });
    const edited = await stateOf();

    const rollback = await session.rollback('base');
    expect(rollback).toMatchObject({
      isDryRun: false,
      id: 3,
      beforeTree: edited,
      afterTree: base.tree,
    });
    expect(await stateOf()).toBe(base.tree);

    const redo = await session.undo(3);
    expect(redo).toMatchObject({ status: 'undone', undoes: 3 });
    expect(await stateOf()).toBe(edited);
    expect(await readFile(join(workspace, 'a.txt'), 'utf8')).toBe('never checkpointed');

    // The undo is an action too: undoing it rolls back again.
    if (redo.status !== 'undone') throw new Error('unreachable');
    expect(await session.undo(redo.id)).toMatchObject({ status: 'undone' });
    expect(await stateOf()).toBe(base.tree);
  });

  it('rolls back to latest, the newest checkpoint', async () => {
    const { workspace, session, stateOf } = await sessionOn({ 'a.txt': '1' });
    await session.checkpoint('one');
    await writeFile(join(workspace, 'a.txt'), '2');
    const two = await session.checkpoint('two');
    await writeFile(join(workspace, 'a.txt'), '3');
    expect((await session.rollback('latest')).label).toBe('two');
    expect(await stateOf()).toBe(two.tree);
  });

  it('lists in a dry run what would change, marks what the session never recorded, and changes nothing', async () => {
    const { workspace, session, stateOf } = await sessionOn({ 'a.txt': 'a', 'b.txt': 'b' });
    await session.checkpoint('base');
    await writeFile(join(workspace, 'a.txt'), 'unsaved edit');
    await rm(join(workspace, 'b.txt'));
    await lay(workspace, { 'c.txt': 'c' });
    await session.checkpoint('later');
    await writeFile(join(workspace, 'c.txt'), 'edited after the last checkpoint');
    const before = await stateOf();
    const plan = await session.rollback('base', { dryRun: true });
    expect(plan.changes).toEqual([
      { path: 'a.txt', action: 'written', isUnrecorded: false },
      { path: 'b.txt', action: 'created', isUnrecorded: false },
      { path: 'c.txt', action: 'deleted', isUnrecorded: true },
    ]);
    expect(await stateOf()).toBe(before);
  });

  it('fails with CHECKPOINT_NOT_FOUND naming the known labels, and changes nothing', async () => {
    const { workspace, session } = await sessionOn({ 'a.txt': 'a' });
    await session.checkpoint('base');
    await expect(session.rollback('nope')).rejects.toThrow(
      /no checkpoint "nope"\. Its checkpoints: base\./,
    );
    await session.close();
    expect((await log({ workspace })).entries).toHaveLength(2);
  });

  it('names the newest ten labels when there are more, and clips a long bad label', async () => {
    const { session } = await sessionOn({ 'a.txt': 'a' });
    for (let index = 1; index <= 12; index += 1) await session.checkpoint(`c${index}`);
    await expect(session.rollback('nope')).rejects.toThrow(
      'has no checkpoint "nope". Its newest checkpoints: c3, c4, c5, c6, c7, c8, c9, c10, c11, c12 (`rewind checkpoints` lists all 12).',
    );
    const long = 'x'.repeat(5000);
    await expect(session.rollback(long)).rejects.toThrow(`"${'x'.repeat(80)}… (5000 characters)"`);
    await expect(session.checkpoint(`${long}/`)).rejects.toThrow(
      `"${'x'.repeat(80)}… (5001 characters)" is not a valid checkpoint label.`,
    );
    await session.close();
  });

  it('keeps checkpoint and rollback states alive through gc', async () => {
    const { workspace, session, stateOf } = await sessionOn({ 'a.txt': 'a' });
    const base = await session.checkpoint('base');
    await writeFile(join(workspace, 'a.txt'), 'edited');
    const edited = await stateOf();
    await session.rollback('base');
    await session.close();
    await gc({ workspace, graceMs: 0 });
    const again = await openSession({ workspace });
    await again.undo(3);
    expect(await stateOf()).toBe(edited);
    await again.rollback('base');
    expect(await stateOf()).toBe(base.tree);
    await again.close();
  });
});

describe('gc and the stat cache', () => {
  it('never lets a later checkpoint refer to a collected object: the cache forgets what gc takes', async () => {
    const { workspace, session, stateOf } = await sessionOn({ 'a.txt': 'a' });
    await session.checkpoint('base');
    // A working-tree diff stores the edited file without any ledger entry referring to it.
    await writeFile(join(workspace, 'a.txt'), 'edited, only ever seen by a diff');
    // Older than the racy window, so the next snapshot trusts the cache instead of re-reading.
    await new Promise((resolve) => setTimeout(resolve, 250));
    await session.diff('base');
    await gc({ workspace, graceMs: 0 });
    const edited = await session.checkpoint('edited');
    expect((await verify({ workspace })).problems).toEqual([]);
    await session.rollback('base');
    await session.rollback('edited');
    expect(await readFile(join(workspace, 'a.txt'), 'utf8')).toBe(
      'edited, only ever seen by a diff',
    );
    expect(await stateOf()).toBe(edited.tree);
  });

  it('frees what only pruned checkpoints held, though the cache of the first snapshot named it', async () => {
    const { workspace, session } = await sessionOn({ 'big.bin': 'x'.repeat(100_000) });
    await session.checkpoint('first');
    await writeFile(join(workspace, 'big.bin'), 'small now');
    await new Promise((resolve) => setTimeout(resolve, 250));
    await session.checkpoint('second');
    await session.prune({ keepLast: 1 });
    const collected = await gc({ workspace, graceMs: 0 });
    expect(collected.freedBytes).toBeGreaterThanOrEqual(100_000);
    await writeFile(join(workspace, 'big.bin'), 'x'.repeat(100_000));
    await session.checkpoint('third');
    expect((await verify({ workspace })).problems).toEqual([]);
  });
});

describe('a rollback that fails', () => {
  it('puts the workspace back as it was, journals the failure, and leaves the session usable', async () => {
    const { workspace, session, store, stateOf } = await sessionOn({ 'a.txt': 'a', 'b.txt': 'b' });
    const base = await session.checkpoint('base');
    await writeFile(join(workspace, 'a.txt'), 'A');
    await writeFile(join(workspace, 'b.txt'), 'B');
    const edited = await stateOf();
    // The content of b.txt at the checkpoint is gone from the store (deleted by hand).
    const root = await readTree(store, base.tree);
    const lost = root.entries.find((entry) => entry.name === 'b.txt');
    if (lost?.type !== 'file') throw new Error('unreachable');
    await store.remove([lost.digest]);

    const error = await session.rollback('base').catch((caught: unknown) => caught);
    expect(error).toMatchObject({ code: 'OBJECT_NOT_FOUND', data: { id: 3, isReverted: true } });
    expect(String(error)).toContain('put back as it was before');
    expect(await stateOf()).toBe(edited);
    await session.close();
    const kinds = (await log({ workspace })).entries.map((entry) => entry.kind);
    expect(kinds.slice(-2)).toEqual(['rollback-started', 'rollback-failed']);

    const again = await openSession({ workspace });
    expect((await again.checkpoint('after-failure')).label).toBe('after-failure');
    await expect(again.undo(3)).rejects.toMatchObject({ code: 'ACTION_NOT_ALLOWED' });
    await again.close();
  });
});

describe('undo', () => {
  it('redoes an undone rollback without removing a directory a person made again meanwhile', async () => {
    const { workspace, session } = await sessionOn({ 'a.txt': 'a' });
    await session.checkpoint('c1');
    await mkdir(join(workspace, 'dir'));
    await writeFile(join(workspace, 'dir/b'), 'b');
    await session.checkpoint('c2');
    const rolled = await session.rollback('c1');
    // Made again by hand, empty, after the rollback removed it.
    await mkdir(join(workspace, 'dir'));
    const undone = await session.undo(rolled.id as number);
    expect(undone.status).toBe('undone');
    expect(await readFile(join(workspace, 'dir/b'), 'utf8')).toBe('b');
    // Undoing the undo takes back what it put (dir/b), and leaves the directory as it was then.
    const redone = await session.undo((undone as { id: number }).id);
    expect(redone.status).toBe('undone');
    expect(await readdir(join(workspace, 'dir'))).toEqual([]);
  });

  it('refuses, journals the refusal and changes nothing when a path it would restore was edited since', async () => {
    const { workspace, session, stateOf } = await sessionOn({ 'a.txt': 'a', 'b.txt': 'b' });
    await session.checkpoint('base');
    await writeFile(join(workspace, 'a.txt'), 'A');
    await session.rollback('base');
    await writeFile(join(workspace, 'a.txt'), 'edited after the rollback');
    const before = await stateOf();
    expect(await session.undo(3)).toEqual({
      status: 'refused',
      undoes: 3,
      conflicts: [{ path: 'a.txt', expected: expect.any(String), found: expect.any(String) }],
    });
    expect(await stateOf()).toBe(before);
    await session.close();
    expect((await log({ workspace })).entries.at(-1)).toMatchObject({ kind: 'undo-refused' });
  });

  it('keeps unrelated edits made after the rollback', async () => {
    const { workspace, session } = await sessionOn({ 'a.txt': 'a', 'b.txt': 'b' });
    await session.checkpoint('base');
    await writeFile(join(workspace, 'a.txt'), 'A');
    await session.rollback('base');
    await writeFile(join(workspace, 'b.txt'), 'unrelated edit');
    expect(await session.undo(3)).toMatchObject({ status: 'undone' });
    expect(await readFile(join(workspace, 'a.txt'), 'utf8')).toBe('A');
    expect(await readFile(join(workspace, 'b.txt'), 'utf8')).toBe('unrelated edit');
  });

  it('undoes an undo that left a directory in place for what it did not touch', async () => {
    const { workspace, session, stateOf } = await sessionOn({ 'keep.txt': 'k' });
    await session.checkpoint('base');
    await lay(workspace, { 'd/f.txt': 'f' });
    const rollback = await session.rollback('base');
    const undo = await session.undo(rollback.id as number);
    expect(undo).toMatchObject({ status: 'undone' });
    // Made since, and none of the rollback's business: d now holds an empty directory.
    await mkdir(join(workspace, 'd/sub'));
    const withSub = await stateOf();
    // Undoing the undo removes d/f.txt again, and leaves d for d/sub.
    const redo = await session.undo((undo as { id: number }).id);
    expect(redo).toMatchObject({ status: 'undone' });
    expect(await readdir(join(workspace, 'd'))).toEqual(['sub']);
    // Nothing changed since: undoing that is not refused, and brings d/f.txt back beside d/sub.
    expect(await session.undo((redo as { id: number }).id)).toMatchObject({ status: 'undone' });
    expect(await stateOf()).toBe(withSub);
    await session.close();
  });

  it('records a directory an undo leaves for what it did not touch, so that a redo after it was removed refuses', async () => {
    const { workspace, session, stateOf } = await sessionOn({ 'keep.txt': 'k', 'd/f.txt': 'f' });
    await session.checkpoint('with-d');
    await rm(join(workspace, 'd'), { recursive: true });
    const rollback = await session.rollback('with-d');
    // Moved in since: d stays when the undo takes d/f.txt away.
    await lay(workspace, { 'd/sub/x.txt': 'x' });
    const undo = await session.undo(rollback.id as number);
    expect(undo).toMatchObject({ status: 'undone' });
    expect(await readdir(join(workspace, 'd'))).toEqual(['sub']);
    // The person removes d: redoing the rollback would make it again, with only d/f.txt.
    await rm(join(workspace, 'd'), { recursive: true });
    const removed = await stateOf();
    const redo = await session.undo((undo as { id: number }).id);
    expect(redo).toMatchObject({
      status: 'refused',
      conflicts: [{ path: 'd', expected: 'a directory', found: 'absent' }],
    });
    expect(await stateOf()).toBe(removed);
  });

  it('fails with ACTION_NOT_FOUND for an entry that is not an undoable action', async () => {
    const { session } = await sessionOn({ 'a.txt': 'a' });
    await expect(session.undo(1)).rejects.toMatchObject({ code: 'ACTION_NOT_FOUND' });
    await expect(session.undo(99)).rejects.toMatchObject({ code: 'ACTION_NOT_FOUND' });
  });
});

describe('diff', () => {
  it('compares checkpoints, an action, and the working tree', async () => {
    const { workspace, session } = await sessionOn({ 'a.txt': 'one\n' });
    await session.checkpoint('base');
    await writeFile(join(workspace, 'a.txt'), 'two\n');
    await session.checkpoint('next');
    expect((await session.diff('base', 'next')).changes).toEqual([
      { path: 'a.txt', kind: 'modified' },
    ]);
    expect((await session.diff('next')).changes).toEqual([]);
    await lay(workspace, { 'b.txt': 'b' });
    expect((await session.diff('latest')).changes).toEqual([{ path: 'b.txt', kind: 'added' }]);
    const rollback = await session.rollback('base');
    const own = await session.diff(String(rollback.id));
    expect(own.changes).toEqual([
      { path: 'a.txt', kind: 'modified' },
      { path: 'b.txt', kind: 'deleted' },
    ]);
    expect(own.text).toContain('-two\n+one\n');
  });

  it('shows a file that became a directory as deleted, and a directory that became a file as added', async () => {
    const { workspace, session } = await sessionOn({ a: 'hello\n', 'e/x': 'x\n' });
    await session.checkpoint('one');
    await rm(join(workspace, 'a'));
    await rm(join(workspace, 'e'), { recursive: true });
    await lay(workspace, { 'a/f': 'inside\n', e: 'now a file\n' });
    const diff = await session.diff('one');
    expect(diff.changes).toEqual([
      { path: 'a', kind: 'deleted' },
      { path: 'a/f', kind: 'added' },
      { path: 'e', kind: 'added' },
      { path: 'e/x', kind: 'deleted' },
    ]);
    for (const hunk of ['--- a/a\n+++ /dev/null', '-hello', '+++ b/a/f', '+inside']) {
      expect(diff.text).toContain(hunk);
    }
    for (const hunk of ['--- /dev/null\n+++ b/e', '+now a file', '--- a/e/x', '-x']) {
      expect(diff.text).toContain(hunk);
    }
    // A listing counts their lines too: `a` and `e/x` removed, `a/f` and `e` added.
    await session.checkpoint('two');
    const two = (await session.checkpoints({ withLines: true })).at(-1);
    expect(two).toMatchObject({ label: 'two', linesAdded: 2, linesRemoved: 2 });
  });
});

describe('a rollback killed midway', () => {
  const FILES = 400;

  // A restore removes what is at a path before it puts another type there: killed in between,
  // the path is absent. That is the restore midway, not an edit: nothing is saved for it.
  it.each([
    ['a directory that becomes a file', { 'x/inner.txt': 'inner\n' }, { x: 'a file\n' }],
    ['a file that becomes a directory', { x: 'a file\n' }, { 'x/inner.txt': 'inner\n' }],
  ])('finds %s absent, and finishes without saving anything', async (_, now, target) => {
    const { workspace, session, stateOf } = await sessionOn({ 'a.txt': 'a\n', ...target });
    const base = await session.checkpoint('base');
    await rm(join(workspace, 'x'), { recursive: true });
    await lay(workspace, now);
    await session.rollback('base');
    await session.close();
    // Killed after removing what was at x, before putting the checkpoint's x there.
    await dropClosingEntry(workspace, 'rollback-completed');
    await rm(join(workspace, 'x'), { recursive: true });
    const reopened = await openSession({ workspace });
    expect(await stateOf()).toBe(base.tree);
    expect((await reopened.checkpoints()).map((checkpoint) => checkpoint.label)).toEqual(['base']);
    await reopened.close();
  });

  // But a restore goes in order: with paths after x already set (a file as far as it writes at
  // once), it had put x in place, and x absent is the person's removal, saved first.
  it.each([
    ['a directory that becomes a file', { 'x/inner.txt': 'inner\n' }, { x: 'a file\n' }],
    ['a file that becomes a directory', { x: 'a file\n' }, { 'x/inner.txt': 'inner\n' }],
  ])(
    'finds %s absent when it had gone past it, and saves the removal first',
    async (_, now, target) => {
      const later = (text: string): Layout =>
        Object.fromEntries(
          Array.from({ length: 9 }, (_, index) => [`y${index}`, `${text} ${index}\n`]),
        );
      const { workspace, session, stateOf } = await sessionOn({ ...target, ...later('target') });
      const base = await session.checkpoint('base');
      await rm(join(workspace, 'x'), { recursive: true });
      await lay(workspace, { ...now, ...later('edited') });
      await session.rollback('base');
      await session.close();
      // Killed once the files after x were written; then the person removed x.
      await dropClosingEntry(workspace, 'rollback-completed');
      await rm(join(workspace, 'x'), { recursive: true });
      const removed = await stateOf();
      const reopened = await openSession({ workspace });
      expect(await stateOf()).toBe(base.tree);
      const checkpoints = await reopened.checkpoints();
      expect(checkpoints.map((checkpoint) => checkpoint.label)).toEqual([
        'base',
        expect.stringMatching(/^saved-before-recovery-/),
      ]);
      expect(checkpoints[1]?.tree).toBe(removed);
      await reopened.close();
    },
  );

  async function interruptedWorkspace(killAfter: number) {
    const layout: Layout = {};
    for (let index = 0; index < FILES; index++)
      layout[`d${index % 20}/f${index}.txt`] = `original ${index}\n`;
    const { workspace, session, stateOf } = await sessionOn(layout);
    const base = await session.checkpoint('base');
    for (let index = 0; index < FILES; index++) {
      const path = join(workspace, `d${index % 20}/f${index}.txt`);
      if (index % 3 === 0) await rm(path);
      else await writeFile(path, `edited ${index}\n`);
    }
    await lay(
      workspace,
      Object.fromEntries(
        Array.from({ length: 50 }, (_, index) => [`added/n${index}.txt`, `${index}`]),
      ),
    );
    const edited = await stateOf();
    await session.close();
    const run = await rollbackKilledAfter(workspace, 'base', killAfter);
    return { workspace, base, edited, run, stateOf };
  }

  // 451 paths in all; at 440, more are left than the restore writes at once (WRITES_AT_ONCE).
  it.each([1, 60, 250, 400, 440])(
    'is finished by the next open, however far it got (killed after %i paths)',
    async (killAfter) => {
      const { workspace, base, edited, run, stateOf } = await interruptedWorkspace(killAfter);
      expect(run.signal).toBe('SIGKILL');
      const ledgerFile = (await log({ workspace })).session.file;
      expect(
        (await readLedgerFile(ledgerFile)).entries.map((entry) => entry.kind).slice(-1),
      ).toEqual(['rollback-started']);
      expect(await stateOf()).not.toBe(base.tree);
      // What a kill in the middle of writing one file leaves: its temporary file.
      await writeFile(join(workspace, 'd1/.f1.txt.rewind-0123456789ab.rewind-tmp'), 'half a file');

      // It is told before recovery begins (a big rollback takes a while), then what it came to.
      const told: string[] = [];
      const reopened = await openSession({
        workspace,
        onRecoveryStart: (message) => told.push(message),
      });
      expect(told).toEqual([
        'A killed process left the rollback #3 (base) unfinished: finishing or closing it before anything else...',
      ]);
      expect(reopened.recoveries()).toHaveLength(1);
      expect(await stateOf()).toBe(base.tree);
      const last = (await readLedgerFile(ledgerFile)).entries.at(-1);
      expect(last).toMatchObject({
        kind: 'rollback-completed',
        body: { startedSeq: 3, isRecovery: true },
      });
      // And nothing was lost: the state the rollback replaced comes back whole.
      expect(await reopened.undo(3)).toMatchObject({ status: 'undone' });
      expect(await stateOf()).toBe(edited);
      await reopened.close();
    },
    60_000,
  );

  it('saves what was edited between the crash and the next command before finishing the rollback', async () => {
    const { workspace, base, run, stateOf } = await interruptedWorkspace(100);
    expect(run.signal).toBe('SIGKILL');
    // A person fixes two files by hand before anything else runs, one the rollback already put
    // back and one it had not reached, and checkpoints to keep them.
    await writeFile(join(workspace, 'd1/f1.txt'), 'fixed by hand, early\n');
    await writeFile(join(workspace, 'd19/f399.txt'), 'fixed by hand, late\n');
    // Until a command opens the session, status and log say what is pending.
    expect((await log({ workspace })).session.interrupted).toEqual({
      id: 3,
      kind: 'rollback',
      target: 'base',
    });
    expect((await rewind(workspace, ['status'])).stdout).toContain(
      'Interrupted rollback #3 (base) in session',
    );
    expect((await rewind(workspace, ['log'])).stdout).toContain('Interrupted: rollback #3 (base)');
    // So do the commands that change no workspace and so finish nothing: verify, gc, session list.
    const verified = await rewind(workspace, ['verify']);
    expect(verified.code).toBe(0);
    expect(verified.stderr).toContain(
      'rollback #3 (base) was cut short and is still pending: the next command in that session finishes it',
    );
    expect((await rewind(workspace, ['gc', '--dry-run'])).stderr).toContain(
      'rollback #3 (base) was cut short and is still pending',
    );
    expect((await rewind(workspace, ['session', 'list'])).stdout).toContain(
      'Interrupted rollback #3 (base) in session',
    );
    expect((await rewind(workspace, ['init'])).stdout).toContain(
      'Interrupted rollback #3 (base) in session',
    );
    const result = await rewind(workspace, ['checkpoint', 'my-fix']);
    expect(result.code).toBe(0);
    // And it says so: the checkpoint asked for does not hold the hand fixes, another one does.
    expect(result.stderr).toBe(
      'rewind: A killed process left the rollback #3 (base) unfinished: finishing or closing it before anything else...\n' +
        'rewind: The rollback #3 (base) a killed process had left half-done was finished first; what was edited since (d1/f1.txt, d19/f399.txt) is saved in checkpoint saved-before-recovery-3: `rewind rollback saved-before-recovery-3 -- PATH` brings a path back.\n',
    );
    const reopened = await openSession({ workspace });
    const labels = (await reopened.checkpoints()).map((checkpoint) => checkpoint.label);
    expect(labels).toEqual(['base', 'saved-before-recovery-3', 'my-fix']);
    expect((await log({ workspace })).session.interrupted).toBeUndefined();
    // The rollback finished: the workspace is as at base.
    expect((await reopened.checkpoints())[2]?.tree).toBe(base.tree);
    const completed = (await log({ workspace, kind: 'rollback-completed' })).entries[0];
    expect(completed?.entry.body).toMatchObject({
      isRecovery: true,
      savedAs: 'saved-before-recovery-3',
      drifted: ['d1/f1.txt', 'd19/f399.txt'],
    });
    // Nothing was lost: both hand fixes come back from the checkpoint recovery saved.
    await reopened.rollback('saved-before-recovery-3', { paths: ['d1/f1.txt', 'd19/f399.txt'] });
    expect(await readFile(join(workspace, 'd1/f1.txt'), 'utf8')).toBe('fixed by hand, early\n');
    expect(await readFile(join(workspace, 'd19/f399.txt'), 'utf8')).toBe('fixed by hand, late\n');
    expect(await stateOf()).not.toBe(base.tree);
    await reopened.close();
  }, 60_000);

  it('names what a recovery saved first when that recovery was killed too, and the next one finishes', async () => {
    const interrupted = await interruptedWorkspace(100);
    expect(interrupted.run.signal).toBe('SIGKILL');
    await writeFile(join(interrupted.workspace, 'd1/f1.txt'), 'fixed by hand, early\n');
    await writeFile(join(interrupted.workspace, 'd19/f399.txt'), 'fixed by hand, late\n');
    // Two copies alike (a copy's files all look changed to a snapshot: their ctimes are new):
    // one to count the recovery's calls, one to kill it at the one chosen.
    const parent = await makeTempDirectory();
    const [probe, workspace] = [join(parent, 'probe'), join(parent, 'works')];
    copyTree(interrupted.workspace, probe);
    copyTree(interrupted.workspace, workspace);
    const calls = join(parent, 'calls.log');
    await runCli(probe, ['checkpoints'], { fault: 'count', faultLog: calls });
    const lines = (await readFile(calls, 'utf8'))
      .split('\n')
      .filter((line) => line.startsWith('change'));
    // The ledger's lock is taken for the saved checkpoint, then for the completion: killed at
    // the second, every path is written (the hand fixes overwritten), nothing closes it.
    const ledgerLocks = lines.flatMap((line, index) =>
      /^change writeFileSync .*\/sessions\/\..*\.lock\./.test(line) ? [index] : [],
    );
    expect(ledgerLocks).toHaveLength(2);
    const killed = await runCli(workspace, ['checkpoints'], {
      fault: `kill:${(ledgerLocks[1] as number) + 1}`,
    });
    expect(killed.signal).toBe('SIGKILL');
    expect((await log({ workspace })).entries.map(({ entry }) => entry.kind).slice(2)).toEqual([
      'rollback-started',
      'checkpoint-created',
    ]);
    expect(await readFile(join(workspace, 'd19/f399.txt'), 'utf8')).toBe('original 399\n');

    const result = await rewind(workspace, ['checkpoint', 'after']);
    expect(result.code).toBe(0);
    expect(result.stderr).toContain(
      'rewind: The rollback #3 (base) a killed process had left half-done was finished first; what was edited since (d1/f1.txt, d19/f399.txt) was saved, by a recovery cut short before, in checkpoint saved-before-recovery-3:',
    );
    const completed = (await log({ workspace, kind: 'rollback-completed' })).entries[0];
    expect(completed?.entry.body).toMatchObject({
      isRecovery: true,
      savedAs: 'saved-before-recovery-3',
      drifted: ['d1/f1.txt', 'd19/f399.txt'],
      driftedCount: 2,
    });
    const session = await openSession({ workspace });
    expect((await session.checkpoints()).at(-1)?.tree).toBe(interrupted.base.tree);
    await session.rollback('saved-before-recovery-3', { paths: ['d1/f1.txt', 'd19/f399.txt'] });
    expect(await readFile(join(workspace, 'd19/f399.txt'), 'utf8')).toBe('fixed by hand, late\n');
    expect(await readFile(join(workspace, 'd1/f1.txt'), 'utf8')).toBe('fixed by hand, early\n');
    await session.close();
  }, 60_000);

  it('saves a path put back as it was before the rollback, when the rollback had set it and went on', async () => {
    const { workspace, run } = await interruptedWorkspace(100);
    expect(run.signal).toBe('SIGKILL');
    // The rollback removes first (the files added since base), then puts files back: killed
    // after 100 paths, it had removed added/n0.txt and gone on. A person brings that file back as
    // it was: to recovery it holds the state the rollback started from, as if not reached yet;
    // but paths the rollback sets after it are set, so it was reached, and this is an edit.
    await mkdir(join(workspace, 'added'));
    await writeFile(join(workspace, 'added/n0.txt'), '0');
    const result = await rewind(workspace, ['checkpoint', 'after']);
    expect(result.code).toBe(0);
    expect(result.stderr).toContain(
      'what was edited since (added/n0.txt) is saved in checkpoint saved-before-recovery-3',
    );
    const reopened = await openSession({ workspace });
    await reopened.rollback('saved-before-recovery-3', { paths: ['added/n0.txt'] });
    expect(await readFile(join(workspace, 'added/n0.txt'), 'utf8')).toBe('0');
    await reopened.close();
  }, 60_000);

  it('saves what was put since the crash in a directory the rollback removes, and finishes it', async () => {
    const { workspace, base, run, stateOf } = await interruptedWorkspace(1);
    expect(run.signal).toBe('SIGKILL');
    // The rollback removes added/ (made after base); killed before it got there, a person puts a
    // file of their own in it. Before, the directory could not be removed and was left, the
    // rollback said done, and the workspace was not base.
    await writeFile(join(workspace, 'added/mine.txt'), 'mine');
    const result = await rewind(workspace, ['checkpoint', 'after']);
    expect(result.code).toBe(0);
    expect(result.stderr).toContain(
      'what was edited since (added/mine.txt) is saved in checkpoint saved-before-recovery-3',
    );
    expect(await stateOf()).toBe(base.tree);
    const reopened = await openSession({ workspace });
    await reopened.rollback('saved-before-recovery-3', { paths: ['added/mine.txt'] });
    expect(await readFile(join(workspace, 'added/mine.txt'), 'utf8')).toBe('mine');
    await reopened.close();
  }, 60_000);

  it('closes, and never performs, a rollback that failed and was put back but could not say so (a full disk)', async () => {
    const { workspace, session } = await sessionOn({ 'a.txt': 'one', 'b.txt': 'b1' });
    await session.checkpoint('base');
    await lay(workspace, { 'a.txt': 'two', 'b.txt': 'b2' });
    await session.rollback('base');
    await session.close();
    // The rollback failed, put every path back, and the disk was too full for its closing line.
    await dropClosingEntry(workspace, 'rollback-completed');
    await lay(workspace, { 'a.txt': 'two', 'b.txt': 'b2' });
    // Space is freed; the person edits on, then runs a command.
    await writeFile(join(workspace, 'a.txt'), 'three');
    expect((await log({ workspace })).session.interrupted).toMatchObject({ kind: 'rollback' });
    const reopened = await openSession({ workspace });
    expect(reopened.recoveries()).toEqual([
      expect.stringContaining('cut short before it changed anything was closed, not performed'),
    ]);
    expect(await readFile(join(workspace, 'a.txt'), 'utf8')).toBe('three');
    expect(await readFile(join(workspace, 'b.txt'), 'utf8')).toBe('b2');
    expect((await log({ workspace })).entries.at(-1)).toMatchObject({
      kind: 'rollback-failed',
      entry: { body: { error: { code: 'NOT_APPLIED' }, isReverted: true, isRecovery: true } },
    });
    expect((await log({ workspace })).session.interrupted).toBeUndefined();
    expect((await reopened.checkpoints()).map((checkpoint) => checkpoint.label)).toEqual(['base']);
    await reopened.close();
  });

  // A kill between writing a file's temporary copy and renaming it into place leaves the copy.
  it.each([
    ['closed as not performed (killed before the first rename)', ['two', 'b2'], 'rollback-failed'],
    ['finished (killed after a.txt moved)', ['one', 'b2'], 'rollback-completed'],
  ])(
    'leaves no temporary file of its own behind when %s, nor in what it saves first',
    async (_how, [a, b], closing) => {
      const { workspace, session, store } = await sessionOn({
        'a.txt': 'one',
        'b.txt': 'b1',
        'c.txt': 'c1',
      });
      await session.checkpoint('base');
      await lay(workspace, { 'a.txt': 'two', 'b.txt': 'b2', 'c.txt': 'c2' });
      await session.rollback('base');
      await session.close();
      await dropClosingEntry(workspace, 'rollback-completed');
      await lay(workspace, { 'a.txt': a as string, 'b.txt': b as string, 'c.txt': 'c2' });
      const leftover = '.b.txt.rewind-0123456789ab.rewind-tmp';
      await writeFile(join(workspace, leftover), 'b1');
      // Edited by hand before the next command: recovery saves it before overwriting it.
      await writeFile(join(workspace, 'c.txt'), 'by hand');
      const reopened = await openSession({ workspace });
      expect((await log({ workspace })).entries.at(-1)?.kind).toBe(closing);
      const next = await reopened.checkpoint('next');
      for (const checkpoint of await reopened.checkpoints()) {
        const names = (await readTree(store, checkpoint.tree)).entries.map((entry) => entry.name);
        expect(names, checkpoint.label).not.toContain(leftover);
      }
      expect(next.added).toBe(0);
      expect(await readdir(workspace)).not.toContain(leftover);
      await reopened.close();
    },
  );

  it('a checkpoint never stores the temporary copies a killed restore left (a command in another session does not remove them)', async () => {
    const { workspace, session, store } = await sessionOn({ 'a.txt': 'one', 'd/b.txt': 'b' });
    await lay(workspace, {
      '.a.txt.rewind-0123456789ab.rewind-tmp': 'half',
      'd/.b.txt.rewind-ba9876543210.rewind-tmp': 'half',
      // A file name may hold a line break; its copy's name does too.
      'd/.new\nline.rewind-ba9876543210.rewind-tmp': 'half',
    });
    const checkpoint = await session.checkpoint('now');
    const names = async (tree: typeof checkpoint.tree): Promise<string[]> =>
      (await readTree(store, tree)).entries.map((entry) => entry.name);
    expect(await names(checkpoint.tree)).toEqual(['a.txt', 'd']);
    const d = (await readTree(store, checkpoint.tree)).entries.find((entry) => entry.name === 'd');
    if (d?.type !== 'directory') throw new Error('no d');
    expect(await names(d.digest)).toEqual(['b.txt']);
  });

  it('finishes a rollback that turned a directory into a file, interrupted once the file was there', async () => {
    const { workspace, session, stateOf } = await sessionOn({ x: 'a file' });
    const base = await session.checkpoint('base');
    await rm(join(workspace, 'x'));
    await lay(workspace, { 'x/inner/y.txt': 'y', 'x/z.txt': 'z' });
    const rolled = await session.rollback('base');
    await session.close();
    // Killed after the last path moved, before its closing line.
    await dropClosingEntry(workspace, 'rollback-completed');
    const reopened = await openSession({ workspace });
    expect(await stateOf()).toBe(base.tree);
    expect((await log({ workspace })).entries.at(-1)).toMatchObject({
      kind: 'rollback-completed',
      entry: { body: { startedSeq: rolled.id, isRecovery: true } },
    });
    await reopened.close();
  });

  it('never replays an older rollback whose closing line was damaged', async () => {
    const { workspace, session } = await sessionOn({ 'a.txt': 'one' });
    await session.checkpoint('c1');
    await writeFile(join(workspace, 'a.txt'), 'two');
    await session.rollback('c1');
    await session.write('b.txt', 'later work');
    await writeFile(join(workspace, 'a.txt'), 'three');
    await session.close();
    const file = (await log({ workspace })).session.file;
    const lines = (await readFile(file, 'utf8')).split('\n');
    const completed = lines.findIndex((line) => line.includes('"rollback-completed"'));
    // One byte gone: the line is no longer JSON, so the rollback looks as if it never ended.
    lines[completed] = (lines[completed] as string).replace(
      '"rollback-completed"',
      '"rollback-completed',
    );
    await writeFile(file, lines.join('\n'));
    const reopened = await openSession({ workspace });
    expect(await readFile(join(workspace, 'a.txt'), 'utf8')).toBe('three');
    await reopened.close();
  });
});
