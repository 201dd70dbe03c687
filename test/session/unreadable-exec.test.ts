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
      warnings: [
        expect.stringMatching(
          /secret\.txt could not be read after #\d+, so Rewind does not know what it holds/,
        ),
      ],
    });
    expect(out.notes).toBe('a\n');
    await chmod(join(workspace, 'secret.txt'), 0o644);
    // Left as the command left it: nothing knows what the command wrote there.
    expect(await readFile(join(workspace, 'secret.txt'), 'utf8')).toBe('v2\n');
  }, 30_000);

  it('a diff says an unreadable file is unreadable, not deleted', async () => {
    const workspace = await workspaceOfNobody({ 'secret.txt': 'v1\n', 'notes.txt': 'a\n' });
    const out = await runAsNobody(
      workspace,
      `
      await api.init({ workspace });
      const session = await api.openSession({ workspace });
      await session.checkpoint('start');
      const ran = await session.exec('echo b > notes.txt && chmod 000 secret.txt');
      out.action = await session.diff(String(ran.id));
      out.working = await session.diff('start');
      out.between = await session.diff('start', String(ran.id));
      await session.close();`,
    );
    expect(out.error).toBeUndefined();
    for (const diff of [out.action, out.working, out.between]) {
      expect(diff).toMatchObject({
        changes: [{ path: 'notes.txt', kind: 'modified' }],
        unreadable: ['secret.txt'],
      });
      expect((diff as { text: string }).text).not.toMatch(/deleted|\/dev\/null/);
    }
    expect((out.working as { text: string }).text).toMatch(
      /Not compared: secret\.txt, unreadable in the working tree \(permission denied\)/,
    );
    expect((out.action as { text: string }).text).toMatch(
      /Not compared: secret\.txt, unreadable in the state after #\d+\n/,
    );
    await chmod(join(workspace, 'secret.txt'), 0o644);
  }, 30_000);
});
