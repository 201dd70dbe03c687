import { chmod, readFile, stat } from 'node:fs/promises';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { runAsNobody, workspaceOfNobody } from '../helpers/nobody.js';
import { sessionOn } from '../helpers/session.js';

describe('paths a snapshot cannot read', () => {
  it('a rollback leaves an unreadable file as it is (and says so) while restoring the rest', async () => {
    const workspace = await workspaceOfNobody({ 'secret.txt': 'v1\n', 'notes.txt': 'a\n' });
    const out = await runAsNobody(
      workspace,
      `
      await api.init({ workspace });
      const session = await api.openSession({ workspace });
      await session.checkpoint('start');
      fs.writeFileSync(workspace + '/secret.txt', 'v2 written since\\n');
      fs.chmodSync(workspace + '/secret.txt', 0);
      fs.writeFileSync(workspace + '/notes.txt', 'b\\n');
      const plan = await session.rollback('start', { dryRun: true });
      out.planned = plan.changes.map((change) => change.path);
      const rollback = await session.rollback('start');
      out.warnings = rollback.warnings;
      out.checkpoint = (await session.checkpoint('while-unreadable')).warnings;
      await session.close();`,
    );
    expect(out.error).toBeUndefined();
    expect(out.planned).toEqual(['notes.txt']);
    expect(out.warnings).toEqual([expect.stringMatching(/Could not read secret\.txt/)]);
    expect(out.checkpoint).toEqual([expect.stringMatching(/Could not read secret\.txt/)]);
    await chmod(join(workspace, 'secret.txt'), 0o644);
    expect(await readFile(join(workspace, 'secret.txt'), 'utf8')).toBe('v2 written since\n');
    expect(await readFile(join(workspace, 'notes.txt'), 'utf8')).toBe('a\n');
  }, 30_000);

  it('a rollback to a checkpoint that could not read a path leaves that path as it is now', async () => {
    const workspace = await workspaceOfNobody({
      'secret.txt': 's\n',
      'priv/p.txt': 'p\n',
      'sub/hidden.txt': 'h\n',
      'sub/open.txt': 'o1\n',
      'notes.txt': 'a\n',
    });
    const out = await runAsNobody(
      workspace,
      `
      for (const path of ['secret.txt', 'priv', 'sub/hidden.txt']) fs.chmodSync(workspace + '/' + path, 0);
      await api.init({ workspace });
      out.init = await api.previewWorkspace({ workspace });
      // A first checkpoint with a size budget looks at the workspace first: unreadable paths too.
      const session = await api.openSession({ workspace, budget: { maxBytes: 2 ** 30, maxFiles: 100000 } });
      for (const path of ['secret.txt', 'priv', 'sub/hidden.txt']) fs.chmodSync(workspace + '/' + path, 0);
      const start = await session.checkpoint('start');
      out.unreadable = (await session.checkpoints())[0].unreadable;
      fs.chmodSync(workspace + '/secret.txt', 0o644);
      fs.chmodSync(workspace + '/priv', 0o755);
      fs.chmodSync(workspace + '/sub/hidden.txt', 0o644);
      fs.writeFileSync(workspace + '/notes.txt', 'b\\n');
      fs.writeFileSync(workspace + '/sub/open.txt', 'o2\\n');
      out.planned = (await session.rollback('start', { dryRun: true })).changes.map((change) => change.path);
      out.some = (await session.rollback('start', { paths: ['sub'] })).applied;
      out.sub = [fs.readFileSync(workspace + '/sub/open.txt', 'utf8'), fs.readFileSync(workspace + '/sub/hidden.txt', 'utf8')];
      fs.writeFileSync(workspace + '/sub/open.txt', 'o2\\n');
      const rollback = await session.rollback('start');
      out.files = ['secret.txt', 'priv/p.txt', 'sub/hidden.txt', 'sub/open.txt', 'notes.txt'].map(
        (path) => fs.readFileSync(workspace + '/' + path, 'utf8'),
      );
      out.undo = (await session.undo(rollback.id)).status;
      out.undone = fs.readFileSync(workspace + '/notes.txt', 'utf8');
      await session.close();`,
    );
    expect(out.error).toBeUndefined();
    // The preview reads no file: only the folder it cannot list is left out.
    expect(out.init).toMatchObject({ fileCount: 4 });
    expect(out.unreadable).toEqual(['priv', 'secret.txt', 'sub/hidden.txt']);
    expect(out.planned).toEqual(['notes.txt', 'sub/open.txt']);
    expect(out.sub).toEqual(['o1\n', 'h\n']);
    expect(out.files).toEqual(['s\n', 'p\n', 'h\n', 'o1\n', 'a\n']);
    expect(out.undo).toBe('undone');
    expect(out.undone).toBe('b\n');
  }, 30_000);

  it('an undo refuses to touch a path it cannot read: a file action and a command', async () => {
    const workspace = await workspaceOfNobody({ 'secret.txt': 'v1\n', 'notes.txt': 'a\n' });
    const out = await runAsNobody(
      workspace,
      `
      await api.init({ workspace });
      const session = await api.openSession({ workspace });
      const written = await session.write('secret.txt', 'v2\\n');
      const ran = await session.exec('echo c > notes.txt && echo v3 > secret.txt');
      fs.chmodSync(workspace + '/secret.txt', 0);
      out.undoExec = await session.undo(ran.id);
      out.undoWrite = await session.undo(written.id);
      fs.chmodSync(workspace + '/secret.txt', 0o644);
      out.secret = fs.readFileSync(workspace + '/secret.txt', 'utf8');
      out.undoExecAgain = (await session.undo(ran.id)).status;
      await session.close();`,
    );
    expect(out.error).toBeUndefined();
    expect(out.undoExec).toMatchObject({
      status: 'refused',
      conflicts: [{ path: 'secret.txt', found: 'unreadable (permission denied)' }],
    });
    expect(out.undoWrite).toMatchObject({
      status: 'refused',
      conflicts: [{ path: 'secret.txt', found: 'unreadable (permission denied)' }],
    });
    expect(out.secret).toBe('v3\n');
    // Readable again, the undo goes through.
    expect(out.undoExecAgain).toBe('undone');
    expect(await readFile(join(workspace, 'secret.txt'), 'utf8')).toBe('v2\n');
    expect(await readFile(join(workspace, 'notes.txt'), 'utf8')).toBe('a\n');
  }, 30_000);

  it('a commit from an isolated session refuses a path the host cannot read', async () => {
    const workspace = await workspaceOfNobody({ 'secret.txt': 'v1\n', 'notes.txt': 'a\n' });
    const out = await runAsNobody(
      workspace,
      `
      await api.init({ workspace });
      const session = await api.openSession({ workspace, isolation: 'isolated' });
      await session.write('secret.txt', 'from the session\\n');
      await session.write('notes.txt', 'b\\n');
      fs.writeFileSync(workspace + '/secret.txt', 'edited on the host\\n');
      fs.chmodSync(workspace + '/secret.txt', 0);
      out.commit = await session.commit();
      fs.chmodSync(workspace + '/secret.txt', 0o644);
      await session.destroy({ force: true });`,
    );
    expect(out.error).toBeUndefined();
    expect(out.commit).toMatchObject({
      status: 'refused',
      conflicts: [{ path: 'secret.txt', host: 'could not read secret.txt (permission denied)' }],
    });
    expect(await readFile(join(workspace, 'secret.txt'), 'utf8')).toBe('edited on the host\n');
    expect(await readFile(join(workspace, 'notes.txt'), 'utf8')).toBe('a\n');
  }, 30_000);

  it('an isolated session starts without what it cannot read, and says so', async () => {
    const workspace = await workspaceOfNobody({
      'secret.txt': 's\n',
      'priv/p.txt': 'p\n',
      'notes.txt': 'a\n',
    });
    const out = await runAsNobody(
      workspace,
      `
      fs.chmodSync(workspace + '/secret.txt', 0);
      fs.chmodSync(workspace + '/priv', 0);
      await api.init({ workspace });
      const warnings = [];
      const session = await api.startIsolatedSession({ workspace, onWarning: (warning) => warnings.push(warning) });
      out.warnings = warnings;
      out.view = fs.readdirSync(session.workspace).sort();
      await session.write('notes.txt', 'b\\n');
      out.commit = (await session.commit()).status;
      out.notes = fs.readFileSync(workspace + '/notes.txt', 'utf8');
      await session.close();
      fs.chmodSync(workspace + '/secret.txt', 0o644);
      fs.chmodSync(workspace + '/priv', 0o755);`,
    );
    expect(out.error).toBeUndefined();
    expect(out.warnings).toEqual([
      expect.stringMatching(
        /^Could not read priv \(permission denied\), secret\.txt \(permission denied\): left out/,
      ),
    ]);
    expect(out.view).toEqual(['notes.txt']);
    expect(out.commit).toBe('committed');
    expect(out.notes).toBe('b\n');
    expect(await readFile(join(workspace, 'secret.txt'), 'utf8')).toBe('s\n');
    expect(await readFile(join(workspace, 'priv/p.txt'), 'utf8')).toBe('p\n');
  }, 30_000);

  it('an isolated session tells ignored changes even with an ignored directory it cannot read', async () => {
    const workspace = await workspaceOfNobody({
      '.gitignore': 'cache/\n.env\n',
      'cache/c.txt': 'c\n',
      '.env': 'K=1\n',
    });
    const out = await runAsNobody(
      workspace,
      `
      await api.init({ workspace });
      const session = await api.openSession({ workspace, isolation: 'isolated' });
      fs.writeFileSync(session.workspace + '/.env', 'K=2\\n');
      fs.chmodSync(session.workspace + '/cache', 0);
      out.status = (await session.status()).leftOut;
      out.commit = (await session.commit()).leftOut;
      fs.chmodSync(session.workspace + '/cache', 0o755);
      await session.destroy({ force: true });`,
    );
    expect(out.error).toBeUndefined();
    // What the closed directory holds now is not known: told as changed, never assumed alike.
    expect(out.status).toEqual(['.env', 'cache']);
    expect(out.commit).toEqual(['.env', 'cache']);
  }, 30_000);

  it('a command that leaves a path longer than the system allows wedges nothing', async () => {
    const { workspace, session } = await sessionOn({ 'notes.txt': 'a\n' });
    await session.checkpoint('start');
    const deep = 'd'.repeat(120);
    const ran = await session.exec(
      `bash -c 'for i in $(seq 1 40); do mkdir ${deep} && cd ${deep}; done && echo deep > file.txt' && echo b > notes.txt`,
    );
    expect(ran.exitCode).toBe(0);
    expect(ran.warnings).toEqual([expect.stringMatching(/too long for the system/)]);
    const checkpoint = await session.checkpoint('after');
    expect(checkpoint.warnings).toEqual([expect.stringMatching(/too long for the system/)]);
    const undo = await session.undo(ran.id);
    expect(undo.status).toBe('undone');
    expect(await readFile(join(workspace, 'notes.txt'), 'utf8')).toBe('a\n');
    // The deep tree is left where it is: nothing holds what is at its end.
    await session.rollback('after');
    expect(await readFile(join(workspace, 'notes.txt'), 'utf8')).toBe('b\n');
    expect((await stat(join(workspace, deep))).isDirectory()).toBe(true);
    await session.rollback('start');
    expect(await readFile(join(workspace, 'notes.txt'), 'utf8')).toBe('a\n');
    expect((await stat(join(workspace, deep))).isDirectory()).toBe(true);
  }, 30_000);

  it('a read-only folder does not block a rollback, and stays read-only', async () => {
    const workspace = await workspaceOfNobody({ 'ro/f.txt': 'v1\n', 'ro/sub/g.txt': 'g\n' });
    const out = await runAsNobody(
      workspace,
      `
      await api.init({ workspace });
      const session = await api.openSession({ workspace });
      fs.chmodSync(workspace + '/ro/sub', 0o555);
      fs.chmodSync(workspace + '/ro', 0o555);
      await session.checkpoint('start');
      fs.writeFileSync(workspace + '/ro/f.txt', 'v2\\n');
      fs.chmodSync(workspace + '/ro/sub', 0o755);
      fs.writeFileSync(workspace + '/ro/sub/new.txt', 'new\\n');
      fs.chmodSync(workspace + '/ro/sub', 0o555);
      await session.rollback('start');
      out.f = fs.readFileSync(workspace + '/ro/f.txt', 'utf8');
      out.sub = fs.readdirSync(workspace + '/ro/sub');
      out.modes = [fs.statSync(workspace + '/ro').mode & 0o777, fs.statSync(workspace + '/ro/sub').mode & 0o777];
      await session.close();`,
    );
    expect(out.error).toBeUndefined();
    expect(out.f).toBe('v1\n');
    expect(out.sub).toEqual(['g.txt']);
    expect(out.modes).toEqual([0o555, 0o555]);
  }, 30_000);
});
