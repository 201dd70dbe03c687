import { lstat, readFile, readlink, rm, symlink } from 'node:fs/promises';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { log, openSession } from '../../src/session/index.js';
import { dropClosingEntry, sessionOn } from '../helpers/session.js';
import { lay } from '../helpers/workspace.js';

// A restore killed midway, then a folder above its paths replaced by a symbolic link before the
// next command: recovery never follows the link, saves it first, and finishes.
describe('recovery after a folder became a symbolic link', () => {
  it('finishes an undo whose file goes back into a folder now replaced by a link', async () => {
    const { workspace, session } = await sessionOn({
      'd/a.txt': 'one',
      'd/b.txt': 'b',
      'e/k': 'k',
    });
    const moved = await session.move('d/a.txt', 'e/a.txt');
    await session.undo(moved.id);
    await session.close();
    await dropClosingEntry(workspace, 'undo-completed');
    // Killed after the undo removed e/a.txt, before it put d/a.txt back: then a person swaps
    // the folder for a link.
    await rm(join(workspace, 'd'), { recursive: true });
    await symlink('elsewhere', join(workspace, 'd'));
    const reopened = await openSession({ workspace });
    expect(reopened.recoveries()).toEqual([
      expect.stringContaining('what was edited since (d) is saved in checkpoint'),
    ]);
    // Finished: the folder is a folder again, holding what the undo puts back.
    expect((await lstat(join(workspace, 'd'))).isDirectory()).toBe(true);
    expect(await readFile(join(workspace, 'd/a.txt'), 'utf8')).toBe('one');
    expect((await log({ workspace })).entries.at(-1)).toMatchObject({
      kind: 'undo-completed',
      entry: { body: { isRecovery: true, drifted: ['d'] } },
    });
    // And the link is not lost.
    const saved = (await reopened.checkpoints()).at(-1)?.label as string;
    await reopened.rollback(saved, { paths: ['d'] });
    expect(await readlink(join(workspace, 'd'))).toBe('elsewhere');
    await reopened.close();
  });

  it('finishes a rollback whose removals sit under a folder now replaced by a link', async () => {
    const { workspace, session } = await sessionOn({ 'keep.txt': 'k' });
    await session.checkpoint('base');
    await lay(workspace, { 'x/n.txt': 'n', 'x/m.txt': 'm' });
    await session.rollback('base');
    await session.close();
    await dropClosingEntry(workspace, 'rollback-completed');
    // Killed before anything moved; the folder to remove is swapped for a link to a folder
    // outside the workspace holding a file of the same name, which must not be removed.
    const outside = join(workspace, '..', `outside-${Date.now()}`);
    await lay(workspace, { 'x/n.txt': 'n', 'x/m.txt': 'm' });
    await lay(outside, { 'n.txt': 'not yours' });
    await rm(join(workspace, 'x'), { recursive: true });
    await symlink(outside, join(workspace, 'x'));
    const reopened = await openSession({ workspace });
    expect(reopened.recoveries()).toEqual([
      expect.stringContaining('what was edited since (x) is saved in checkpoint'),
    ]);
    await expect(lstat(join(workspace, 'x'))).rejects.toMatchObject({ code: 'ENOENT' });
    expect(await readFile(join(outside, 'n.txt'), 'utf8')).toBe('not yours');
    expect(await readFile(join(workspace, 'keep.txt'), 'utf8')).toBe('k');
    await reopened.close();
  });
});
