// A person (or another process) edits the workspace while a rollback is under way: between the
// snapshot that saves the workspace first and the moment the rollback reaches a path. What was
// edited there is not in the saved state, so overwriting or removing it would lose it for good:
// the rollback leaves it as it is, says so, and records it.
import { writeFileSync } from 'node:fs';
import { readFile, readlink, rm, symlink, utimes, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { readLedgerFile } from '../../src/ledger/index.js';
import { log } from '../../src/session/index.js';
import { applyChanges, diffTrees, editsFrom, snapshot } from '../../src/workspace/index.js';
import { sessionOn } from '../helpers/session.js';
import { makeWorkspace } from '../helpers/workspace.js';

const names = Array.from({ length: 20 }, (_, index) => `f${String(index).padStart(2, '0')}.txt`);

describe('a rollback while the workspace is edited', () => {
  it('keeps a file edited after the rollback saved the workspace, writing the others', async () => {
    const { workspace, session } = await sessionOn(
      Object.fromEntries(names.map((name) => [name, 'v1'])),
    );
    await session.checkpoint('base');
    for (const name of names) await writeFile(join(workspace, name), 'v2 by the agent');
    // Files are written eight at a time, in order: the last is looked at only once the twelfth
    // is written, so after the first report.
    let isEdited = false;
    const result = await session.rollback('base', {
      onProgress: () => {
        if (isEdited) return;
        isEdited = true;
        writeFileSync(join(workspace, 'f19.txt'), 'typed by the person meanwhile');
      },
    });
    expect(await readFile(join(workspace, 'f19.txt'), 'utf8')).toBe(
      'typed by the person meanwhile',
    );
    for (const name of names.slice(0, 19)) {
      expect(await readFile(join(workspace, name), 'utf8')).toBe('v1');
    }
    expect(result.applied).toMatchObject({ written: 19, keptEdited: ['f19.txt'] });
    expect(result.warnings.join('\n')).toContain(
      'f19.txt changed while the rollback was under way, so it was left as it is, not overwritten.',
    );
    const file = (await log({ workspace })).session.file;
    expect((await readLedgerFile(file)).entries.at(-1)).toMatchObject({
      kind: 'rollback-completed',
      body: { keptEdited: ['f19.txt'] },
    });
  });

  it('keeps a file made where the rollback puts one back, and one edited where it removes one', async () => {
    const { workspace, session } = await sessionOn({ 'gone.txt': 'from the checkpoint' });
    await session.checkpoint('base');
    await rm(join(workspace, 'gone.txt'));
    await writeFile(join(workspace, 'new-1.txt'), 'agent');
    await writeFile(join(workspace, 'new-2.txt'), 'agent');
    // Removals come first, one at a time, in path order; then what is put back.
    const result = await session.rollback('base', {
      onProgress: ({ path }) => {
        if (path !== 'new-1.txt') return;
        writeFileSync(join(workspace, 'new-2.txt'), 'edited by the person');
        writeFileSync(join(workspace, 'gone.txt'), 'written anew by the person');
      },
    });
    expect(await readFile(join(workspace, 'new-2.txt'), 'utf8')).toBe('edited by the person');
    expect(await readFile(join(workspace, 'gone.txt'), 'utf8')).toBe('written anew by the person');
    await expect(readFile(join(workspace, 'new-1.txt'))).rejects.toMatchObject({ code: 'ENOENT' });
    expect(result.applied).toMatchObject({ deleted: 1, created: 0 });
    expect(result.applied?.keptEdited?.sort()).toEqual(['gone.txt', 'new-2.txt']);
    // The saved state is whole: the undo of the rollback refuses to trample what was kept.
    const undone = await session.undo(result.id as number);
    expect(undone.status).toBe('refused');
  });
});

describe('applyChanges with keepEditedSinceNs', () => {
  it('keeps only what changed since and differs from the state the changes start from', async () => {
    const layout = { 'edited.txt': 'old', 'touched.txt': 'same', 'quiet.txt': 'old' };
    const { workspace, storeDirectory, store } = await makeWorkspace(layout);
    const options = { store, storeDirectory };
    const target = (await snapshot(workspace, options)).tree;
    for (const name of Object.keys(layout)) await writeFile(join(workspace, name), 'current');
    // Old timestamps do not hide an edit: ctime, which nobody sets, tells.
    const old = new Date('2001-01-01');
    for (const name of Object.keys(layout)) await utimes(join(workspace, name), old, old);
    const current = await snapshot(workspace, options);
    const changes = await diffTrees(store, current.tree, target);
    await new Promise((resolve) => setTimeout(resolve, 250));
    const since = editsFrom(workspace);
    await writeFile(join(workspace, 'edited.txt'), 'edited since');
    await writeFile(join(workspace, 'touched.txt'), 'current'); // written again, the same bytes
    await utimes(join(workspace, 'edited.txt'), old, old);
    const applied = await applyChanges(workspace, store, changes, { keepEditedSinceNs: since });
    expect(applied.keptEdited).toEqual(['edited.txt']);
    expect(await readFile(join(workspace, 'edited.txt'), 'utf8')).toBe('edited since');
    expect(await readFile(join(workspace, 'touched.txt'), 'utf8')).toBe('same');
    expect(await readFile(join(workspace, 'quiet.txt'), 'utf8')).toBe('old');
    // Without it (recovery), every path is set.
    await writeFile(join(workspace, 'edited.txt'), 'edited again');
    const again = await applyChanges(workspace, store, changes);
    expect(again.keptEdited).toBeUndefined();
    expect(await readFile(join(workspace, 'edited.txt'), 'utf8')).toBe('old');
  });

  it('keeps a link given another target and a file made where a folder goes back, and says nothing of what was under it', async () => {
    const { workspace, storeDirectory, store } = await makeWorkspace({
      'folder/a.txt': 'a',
      'folder/b.txt': 'b',
    });
    await symlink('folder/a.txt', join(workspace, 'edited-link'));
    await symlink('folder/a.txt', join(workspace, 'touched-link'));
    const options = { store, storeDirectory };
    const target = (await snapshot(workspace, options)).tree;
    await rm(join(workspace, 'folder'), { recursive: true });
    for (const name of ['edited-link', 'touched-link']) {
      await rm(join(workspace, name));
      await symlink('elsewhere', join(workspace, name));
    }
    const changes = await diffTrees(store, (await snapshot(workspace, options)).tree, target);
    await new Promise((resolve) => setTimeout(resolve, 250));
    const since = editsFrom(workspace);
    await writeFile(join(workspace, 'folder'), 'a file the person made meanwhile');
    await rm(join(workspace, 'edited-link'));
    await symlink('the-person-s-target', join(workspace, 'edited-link'));
    await rm(join(workspace, 'touched-link'));
    await symlink('elsewhere', join(workspace, 'touched-link')); // made again, the same
    const applied = await applyChanges(workspace, store, changes, { keepEditedSinceNs: since });
    expect(applied.keptEdited?.sort()).toEqual(['edited-link', 'folder']);
    // What the kept folder would have held is not "left out of snapshots".
    expect(applied).toMatchObject({ skipped: [], skippedCount: 0, written: 1 });
    expect(await readFile(join(workspace, 'folder'), 'utf8')).toBe(
      'a file the person made meanwhile',
    );
    expect(await readlink(join(workspace, 'edited-link'))).toBe('the-person-s-target');
    expect(await readlink(join(workspace, 'touched-link'))).toBe('folder/a.txt');
  });
});
