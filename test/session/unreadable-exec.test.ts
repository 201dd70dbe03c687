import { chmod, readFile } from 'node:fs/promises';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { runAsNobody, workspaceOfNobody } from '../helpers/nobody.js';

describe('a command that leaves a path unreadable', () => {
  it('records it as unreadable, not deleted, and its undo puts back the rest', async () => {
    const workspace = await workspaceOfNobody({ 'secret.txt': 'v1\n', 'notes.txt': 'a\n' });
    const out = await runAsNobody(
      workspace,
      `
      await api.init({ workspace });
      const session = await api.openSession({ workspace });
      const ran = await session.exec('echo b > notes.txt && echo v2 > secret.txt && chmod 000 secret.txt');
      out.ran = { created: ran.created, modified: ran.modified, deleted: ran.deleted, unreadable: ran.unreadable, warnings: ran.warnings };
      out.undo = await session.undo(ran.id);
      out.notes = fs.readFileSync(workspace + '/notes.txt', 'utf8');
      await session.close();`,
    );
    expect(out.error).toBeUndefined();
    expect(out.ran).toEqual({
      created: [],
      modified: ['notes.txt'],
      deleted: [],
      unreadable: ['secret.txt'],
      warnings: [expect.stringMatching(/Could not read secret\.txt/)],
    });
    expect(out.undo).toMatchObject({
      status: 'undone',
      warnings: [expect.stringMatching(/secret\.txt was left unreadable by/)],
    });
    expect(out.notes).toBe('a\n');
    await chmod(join(workspace, 'secret.txt'), 0o644);
    // Left as the command left it: nothing knows what the command wrote there.
    expect(await readFile(join(workspace, 'secret.txt'), 'utf8')).toBe('v2\n');
  }, 30_000);
});
