// A restore the system's permissions refuse, run as an unprivileged user: what it says and what
// it leaves.
import { chown, mkdir, readFile, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { runAsNobody, workspaceOfNobody } from '../helpers/nobody.js';

/** A workspace of the unprivileged user with a checkpoint `start` taken by it. */
async function checkpointed(layout: Record<string, string>): Promise<string> {
  const workspace = await workspaceOfNobody(layout);
  const out = await runAsNobody(
    workspace,
    `await api.init({ workspace });
    const session = await api.openSession({ workspace });
    await session.checkpoint('start');
    await session.close();`,
  );
  expect(out.error).toBeUndefined();
  return workspace;
}

/** Edits notes.txt and rolls back to `start` as the unprivileged user. */
function rollBack(workspace: string): Promise<Record<string, unknown>> {
  return runAsNobody(
    workspace,
    `const session = await api.openSession({ workspace });
    fs.writeFileSync(workspace + '/notes.txt', 'b\\n');
    try { await session.rollback('start'); } catch (error) { out.rollback = { code: error.code, message: error.message, data: error.data }; }
    await session.close();`,
  );
}

describe('a restore refused by permissions', () => {
  it('a rollback that cannot remove a folder of another user changes nothing, and says so', async () => {
    const workspace = await checkpointed({ 'notes.txt': 'a\n' });
    // Made by root since the checkpoint: the rollback must remove it, and cannot.
    await mkdir(join(workspace, 'locked'));
    await writeFile(join(workspace, 'locked/f.txt'), 'root\n');
    const out = await rollBack(workspace);
    expect(out.error).toBeUndefined();
    const rollback = out.rollback as { message: string };
    expect(rollback.message).toMatch(/put back as it was before; nothing was lost/);
    expect(rollback.message).not.toMatch(/partly restored/);
    expect(await readFile(join(workspace, 'notes.txt'), 'utf8')).toBe('b\n');
    expect(await readFile(join(workspace, 'locked/f.txt'), 'utf8')).toBe('root\n');
  }, 30_000);

  it('a refused write names the path and what to do, never a temporary file', async () => {
    const workspace = await checkpointed({ 'notes.txt': 'a\n', 'locked/f.txt': 'v1\n' });
    // A folder of root's, and a file in it edited by root since the checkpoint.
    await chown(join(workspace, 'locked'), 0, 0);
    await chown(join(workspace, 'locked/f.txt'), 0, 0);
    await writeFile(join(workspace, 'locked/f.txt'), 'v2\n');
    const out = await rollBack(workspace);
    expect(out.error).toBeUndefined();
    const rollback = out.rollback as { code: string; message: string; data: unknown };
    expect(rollback.code).toBe('IO_FAILED');
    expect(rollback.message).not.toMatch(/rewind-tmp|\/proc\//);
    expect(rollback.message).toMatch(
      /Permission denied: could not write locked\/f\.txt: this user may not write in locked \(it belongs to user 0, and this runs as user 65534\)\. Have its owner give this user write permission on it/,
    );
    expect(rollback.message).toMatch(/put back as it was before; nothing was lost/);
    expect(await readFile(join(workspace, 'locked/f.txt'), 'utf8')).toBe('v2\n');
  }, 30_000);
});
