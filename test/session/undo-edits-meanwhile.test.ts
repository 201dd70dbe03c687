// A person edits the workspace while an undo is under way: after the undo checked that it
// tramples nothing, before it reaches a path. What was edited there is in no saved state, so the
// undo leaves it as it is, says so, and records it, as a rollback does.
import { writeFileSync } from 'node:fs';
import { readFile } from 'node:fs/promises';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { readLedgerFile } from '../../src/ledger/index.js';
import { log } from '../../src/session/index.js';
import { sessionOn } from '../helpers/session.js';

const names = Array.from({ length: 20 }, (_, index) => `f${String(index).padStart(2, '0')}.txt`);

describe('an undo while the workspace is edited', () => {
  it('keeps a file edited after the undo checked the workspace, putting back the others', async () => {
    const { workspace, session } = await sessionOn(
      Object.fromEntries(names.map((name) => [name, 'v1'])),
    );
    const ran = await session.exec(`for f in ${names.join(' ')}; do echo v2 > $f; done`);
    expect(ran.exitCode).toBe(0);
    // Files are written eight at a time, in order: the last is looked at only once the twelfth
    // is written, so after the first report.
    let isEdited = false;
    const result = await session.undo(ran.id, {
      onProgress: () => {
        if (isEdited) return;
        isEdited = true;
        writeFileSync(join(workspace, 'f19.txt'), 'typed by the person meanwhile');
      },
    });
    expect(isEdited).toBe(true);
    expect(await readFile(join(workspace, 'f19.txt'), 'utf8')).toBe(
      'typed by the person meanwhile',
    );
    for (const name of names.slice(0, 19)) {
      expect(await readFile(join(workspace, name), 'utf8')).toBe('v1');
    }
    expect(result).toMatchObject({
      status: 'undone',
      applied: { written: 19, keptEdited: ['f19.txt'] },
    });
    if (result.status !== 'undone') return;
    expect(result.warnings.join('\n')).toContain(
      'f19.txt changed while the undo was under way, so it was left as it is, not overwritten.',
    );
    const file = (await log({ workspace })).session.file;
    expect((await readLedgerFile(file)).entries.at(-1)).toMatchObject({
      kind: 'undo-completed',
      body: { undoes: ran.id, keptEdited: ['f19.txt'] },
    });
  });

  it('keeps a file edited where the undo removes one, and one made where it puts one back', async () => {
    const { workspace, session } = await sessionOn({ 'gone.txt': 'before the command' });
    const ran = await session.exec(
      'rm gone.txt && echo agent > new-1.txt && echo agent > new-2.txt',
    );
    expect(ran.exitCode).toBe(0);
    // Removals come first, one at a time, in path order; then what is put back.
    const result = await session.undo(ran.id, {
      onProgress: ({ path }) => {
        if (path !== 'new-1.txt') return;
        writeFileSync(join(workspace, 'new-2.txt'), 'edited by the person');
        writeFileSync(join(workspace, 'gone.txt'), 'written anew by the person');
      },
    });
    expect(await readFile(join(workspace, 'new-2.txt'), 'utf8')).toBe('edited by the person');
    expect(await readFile(join(workspace, 'gone.txt'), 'utf8')).toBe('written anew by the person');
    await expect(readFile(join(workspace, 'new-1.txt'))).rejects.toMatchObject({ code: 'ENOENT' });
    expect(result).toMatchObject({ status: 'undone', applied: { deleted: 1, created: 0 } });
    if (result.status !== 'undone') return;
    expect(result.applied.keptEdited?.sort()).toEqual(['gone.txt', 'new-2.txt']);
    // What the undo saved is whole: undoing the undo refuses to trample what was kept.
    const redone = await session.undo(result.id);
    expect(redone.status).toBe('refused');
  });
});
