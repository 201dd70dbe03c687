import { execFileSync } from 'node:child_process';
import { existsSync } from 'node:fs';
import {
  chmod,
  lstat,
  mkdir,
  readdir,
  readFile,
  readlink,
  rm,
  stat,
  symlink,
  writeFile,
} from 'node:fs/promises';
import { join } from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { describe, expect, it } from 'vitest';
import { Ledger, listSessions, readLedgerFile } from '../../src/ledger/index.js';
import { probeBwrap } from '../../src/sandbox/index.js';
import { init, log, openSession } from '../../src/session/index.js';
import { snapshot } from '../../src/workspace/index.js';
import { sandboxWorkspace } from '../helpers/nobody.js';
import { runNode } from '../helpers/processes.js';
import { sessionOn } from '../helpers/session.js';
import { makeTempDirectory } from '../helpers/temp.js';
import { lay } from '../helpers/workspace.js';

const read = (workspace: string, path: string) => readFile(join(workspace, path), 'utf8');

/** True while a process runs (a zombie waiting for a reaper no longer does). */
async function isRunning(pid: number): Promise<boolean> {
  try {
    const stat = await readFile(`/proc/${pid}/stat`, 'utf8');
    return stat.slice(stat.lastIndexOf(')') + 2, stat.lastIndexOf(')') + 3) !== 'Z';
  } catch {
    return false;
  }
}

async function statesOf(workspace: string): Promise<Record<number, string>> {
  const states: Record<number, string> = {};
  for (const line of (await log({ workspace })).entries) {
    if (line.action) states[line.seq] = line.action.state;
  }
  return states;
}

describe('file actions', () => {
  it('writes a file with its missing parents, journaled before and after, and undoes and redoes it', async () => {
    const { workspace, session, stateOf } = await sessionOn({ 'keep.txt': 'k' });
    const before = await stateOf();
    const written = await session.write('src/deep/new.ts', 'export {};\n');
    expect(written).toMatchObject({ kind: 'write', class: 'reversible', state: 'done' });
    expect(written.changes).toEqual([expect.objectContaining({ path: 'src', before: undefined })]);
    expect(await read(workspace, 'src/deep/new.ts')).toBe('export {};\n');
    const entries = (await log({ workspace })).entries;
    expect(entries.map((line) => line.kind).slice(-2)).toEqual([
      'action-started',
      'action-completed',
    ]);
    const after = await stateOf();

    const undone = await session.undo(written.id);
    expect(undone).toMatchObject({ status: 'undone', undoes: written.id });
    expect(existsSync(join(workspace, 'src'))).toBe(false);
    expect(await stateOf()).toBe(before);
    if (undone.status !== 'undone') throw new Error('not undone');
    expect(await statesOf(workspace)).toMatchObject({ [written.id]: 'undone' });

    await session.undo(undone.id); // redo
    expect(await stateOf()).toBe(after);
    expect(await statesOf(workspace)).toMatchObject({
      [written.id]: 'done',
      [undone.id]: 'undone',
    });
  });

  it('overwrites a file keeping its mode, and undo brings the old content back', async () => {
    const { workspace, session } = await sessionOn({ 'run.sh': 'echo old\n' });
    await chmod(join(workspace, 'run.sh'), 0o755);
    const written = await session.write('run.sh', Buffer.from('echo new\n'));
    expect(await read(workspace, 'run.sh')).toBe('echo new\n');
    expect((await stat(join(workspace, 'run.sh'))).mode & 0o777).toBe(0o755);
    await session.undo(written.id);
    expect(await read(workspace, 'run.sh')).toBe('echo old\n');
  });

  it('deletes a whole tree and undo restores every file, mode and link', async () => {
    const { workspace, session, stateOf } = await sessionOn({
      'lib/a.txt': 'a',
      'lib/sub/b.txt': 'b',
      'lib/sub/run.sh': { text: '#!/bin/sh\n', mode: 0o755 },
      'lib/link': { link: 'a.txt' },
      'other.txt': 'o',
    });
    const before = await stateOf();
    const deleted = await session.delete('lib');
    expect(existsSync(join(workspace, 'lib'))).toBe(false);
    await session.undo(deleted.id);
    expect(await stateOf()).toBe(before);
    expect((await lstat(join(workspace, 'lib/link'))).isSymbolicLink()).toBe(true);
  });

  it('moves files and directories, creating parents, and undoes the move', async () => {
    const { workspace, session, stateOf } = await sessionOn({ 'a/one.txt': '1', 'b.txt': 'b' });
    const before = await stateOf();
    const tree = await session.move('a', 'x/y/a2');
    const file = await session.move('b.txt', 'x/b.txt');
    expect(await read(workspace, 'x/y/a2/one.txt')).toBe('1');
    expect(await read(workspace, 'x/b.txt')).toBe('b');
    expect(existsSync(join(workspace, 'a'))).toBe(false);
    await session.undo(file.id);
    await session.undo(tree.id);
    expect(await stateOf()).toBe(before);
    await expect(session.move('b.txt', 'b.txt')).rejects.toMatchObject({ code: 'PATH_CONFLICT' });
    await expect(session.move('missing', 'm2')).rejects.toMatchObject({ code: 'PATH_NOT_FOUND' });
  });

  it('creates directories and undoes them', async () => {
    const { workspace, session } = await sessionOn({});
    const made = await session.mkdir('p/q/r');
    expect((await stat(join(workspace, 'p/q/r'))).isDirectory()).toBe(true);
    await expect(session.mkdir('p/q')).rejects.toMatchObject({ code: 'PATH_CONFLICT' });
    await session.undo(made.id);
    expect(existsSync(join(workspace, 'p'))).toBe(false);
  });

  it('undoes a file action whose new folder holds other things since: they stay, and so does the folder', async () => {
    const { workspace, session } = await sessionOn({ 'keep.txt': 'k' });
    const made = await session.mkdir('fold');
    const written = await session.write('nd/f.txt', 'f\n');
    await writeFile(join(workspace, 'fold/x'), 'x\n');
    await writeFile(join(workspace, 'nd/other'), 'o\n');
    const undoneWrite = await session.undo(written.id);
    expect(undoneWrite).toMatchObject({ status: 'undone' });
    expect((await readdir(join(workspace, 'nd'))).sort()).toEqual(['other']);
    expect(await session.undo(made.id)).toMatchObject({ status: 'undone' });
    expect(await readdir(join(workspace, 'fold'))).toEqual(['x']);
    // The redo puts back only what the action wrote, beside what was put there since.
    expect(await session.undo((undoneWrite as { id: number }).id)).toMatchObject({
      status: 'undone',
    });
    expect((await readdir(join(workspace, 'nd'))).sort()).toEqual(['f.txt', 'other']);
  });

  it('refuses to undo over a later edit, says what it expected and found, and journals the refusal', async () => {
    const { workspace, session } = await sessionOn({ 'a.txt': 'one' });
    const written = await session.write('a.txt', 'two');
    await writeFile(join(workspace, 'a.txt'), 'edited by hand');
    const result = await session.undo(written.id);
    expect(result.status).toBe('refused');
    if (result.status !== 'refused') throw new Error('not refused');
    expect(result.conflicts).toEqual([
      {
        path: 'a.txt',
        expected: expect.stringMatching(/^file [0-9a-f]{12} \(3 bytes, mode 644\)$/),
        found: expect.stringMatching(/^file [0-9a-f]{12} \(14 bytes, mode 644\)$/),
      },
    ]);
    expect(await read(workspace, 'a.txt')).toBe('edited by hand');
    expect((await log({ workspace })).entries.at(-1)).toMatchObject({
      kind: 'undo-refused',
      entry: { body: { undoes: written.id, pathCount: 1 } },
    });
    expect(await statesOf(workspace)).toMatchObject({ [written.id]: 'undo-refused' });
  });

  it.each([
    ['removed', async (path: string) => rm(path, { recursive: true })],
    [
      'replaced by a file',
      async (path: string) => {
        await rm(path, { recursive: true });
        await writeFile(path, 'a file now');
      },
    ],
  ])(
    'refuses, naming it, to undo into a folder that was %s since (a file action and a command)',
    async (_how, change) => {
      const { workspace, session } = await sessionOn({ 'd/e/f.txt': 'f', 'd/e/g.txt': 'g' });
      const deleted = await session.delete('d/e/f.txt');
      const ran = await session.exec('rm d/e/g.txt');
      await change(join(workspace, 'd'));
      const before = await readdir(workspace);
      for (const id of [ran.id, deleted.id]) {
        const result = await session.undo(id);
        expect(result).toMatchObject({
          status: 'refused',
          conflicts: [{ path: 'd', expected: 'a directory' }],
        });
      }
      expect(await readdir(workspace)).toEqual(before);
      expect((await log({ workspace })).entries.at(-1)?.kind).toBe('undo-refused');
    },
  );

  it('refuses, naming it, to undo into a folder that is a link to itself now, never looking through it', async () => {
    const { workspace, session } = await sessionOn({ 'd/e/f.txt': 'f', 'd/e/g.txt': 'g' });
    const ran = await session.exec('rm d/e/f.txt d/e/g.txt');
    await rm(join(workspace, 'd'), { recursive: true });
    await symlink('d', join(workspace, 'd'));
    const result = await session.undo(ran.id);
    expect(result).toMatchObject({
      status: 'refused',
      conflicts: [{ path: 'd', expected: 'a directory', found: 'a symbolic link' }],
    });
    expect(await readlink(join(workspace, 'd'))).toBe('d');
    // A folder the undo would put back (its mode changed) that is a link now to a folder outside:
    // what is under it is not looked for there.
    const outside = await makeTempDirectory();
    await mkdir(join(outside, 'e'));
    const { workspace: other, session: second } = await sessionOn({ 'd/e/f.txt': 'f' });
    const moded = await second.exec('chmod 700 d && rm d/e/f.txt');
    await rm(join(other, 'd'), { recursive: true });
    await symlink(outside, join(other, 'd'));
    const refused = await second.undo(moded.id);
    expect(refused.status).toBe('refused');
    if (refused.status !== 'refused') throw new Error('not refused');
    expect(refused.conflicts).toContainEqual({
      path: 'd/e',
      expected: 'a directory',
      found: 'absent',
    });
  });

  it('refuses to undo a command that turned a file into a folder once files were put in it since', async () => {
    const { workspace, session } = await sessionOn({ a: 'file a\n' });
    const ran = await session.exec('rm a && mkdir -p a/b && echo x > a/x');
    await writeFile(join(workspace, 'a/b/y.txt'), 'precious\n');
    const result = await session.undo(ran.id);
    expect(result).toMatchObject({
      status: 'refused',
      conflicts: [
        { path: 'a/b/y.txt', expected: 'absent', found: expect.stringMatching(/^file /) },
      ],
    });
    expect(await read(workspace, 'a/b/y.txt')).toBe('precious\n');
    await rm(join(workspace, 'a/b/y.txt'));
    expect((await session.undo(ran.id)).status).toBe('undone');
    expect(await read(workspace, 'a')).toBe('file a\n');
  });

  it('refuses, naming it, to undo into a folder replaced since by a link that loops', async () => {
    const { workspace, session } = await sessionOn({ 'a/.gitignore': '*.log\n', 'a/x.txt': 'x' });
    await session.checkpoint('c1');
    await rm(join(workspace, 'a'), { recursive: true });
    const rolledBack = await session.rollback('c1');
    await rm(join(workspace, 'a'), { recursive: true });
    await symlink('a', join(workspace, 'a'));
    const result = await session.undo(rolledBack.id as number);
    expect(result).toMatchObject({
      status: 'refused',
      conflicts: expect.arrayContaining([
        { path: 'a', expected: expect.stringMatching(/^directory/), found: 'symbolic link to a' },
      ]),
    });
  });

  it('refuses paths outside the workspace, through links, or left out of snapshots, changing nothing', async () => {
    const { workspace, session } = await sessionOn({
      'real/f.txt': 'f',
      '.rewindignore': 'build/\n',
    });
    await symlink('real', join(workspace, 'link'));
    const entriesBefore = (await log({ workspace })).entries.length;
    await expect(session.write('../escape.txt', 'x')).rejects.toMatchObject({
      code: 'PATH_INVALID',
    });
    await expect(session.write('/etc/passwd', 'x')).rejects.toMatchObject({ code: 'PATH_INVALID' });
    await expect(session.write('link/f.txt', 'x')).rejects.toMatchObject({
      code: 'SYMLINK_REFUSED',
    });
    await expect(session.delete('link')).rejects.toMatchObject({ code: 'SYMLINK_REFUSED' });
    await expect(session.write('.rewind/x', 'x')).rejects.toMatchObject({ code: 'PATH_IGNORED' });
    await expect(session.write('build/out.js', 'x')).rejects.toMatchObject({
      code: 'PATH_IGNORED',
    });
    await lay(workspace, { 'real/build/keep.bin': 'k' });
    await expect(session.delete('real')).rejects.toMatchObject({
      code: 'PATH_IGNORED',
      data: { ignored: ['real/build'] },
    });
    expect(await read(workspace, 'real/f.txt')).toBe('f');
    // A FIFO has no content to keep: deleting its folder could not be undone, so it is refused.
    await lay(workspace, { 'pipes/a.txt': 'a' });
    execFileSync('mkfifo', [join(workspace, 'pipes/queue')]);
    await expect(session.delete('pipes')).rejects.toMatchObject({
      code: 'PATH_CONFLICT',
      data: { special: ['pipes/queue'] },
    });
    expect(await read(workspace, 'pipes/a.txt')).toBe('a');
    expect((await lstat(join(workspace, 'pipes/queue'))).isFIFO()).toBe(true);
    expect((await log({ workspace })).entries).toHaveLength(entriesBefore);
    await expect(session.undo(999)).rejects.toMatchObject({ code: 'ACTION_NOT_FOUND' });
  });

  it('undo --last steps back through the actions, newest first', async () => {
    const { workspace, session } = await sessionOn({});
    await session.write('a.txt', 'a');
    await session.write('b.txt', 'b');
    await session.undo('last');
    expect(existsSync(join(workspace, 'b.txt'))).toBe(false);
    await session.undo('last');
    expect(existsSync(join(workspace, 'a.txt'))).toBe(false);
    await expect(session.undo('last')).rejects.toMatchObject({ code: 'ACTION_NOT_FOUND' });
  });

  it('finishes a file action that a killed process left between its intent and completion', async () => {
    const { workspace, session, store } = await sessionOn({ 'a.txt': 'old' });
    const action = await session.write('a.txt', 'new'); // gives real pre- and post-images
    await session.undo(action.id);
    await session.close();
    const started = (await log({ workspace })).entries.find((line) => line.seq === action.id);
    // Replay only the intent, as if the process died right after journaling it.
    const [file] = await listSessions(join(workspace, '.rewind'));
    if (!file) throw new Error('no session');
    const ledger = await Ledger.open(file);
    await ledger.append('action-started', started?.entry.body ?? {}, started?.entry.refs);
    await ledger.close();
    // Killed before it changed anything: closed as not performed, nothing overwritten.
    await lay(workspace, { 'a.txt': 'edited since' });
    const first = await openSession({ workspace });
    expect(await read(workspace, 'a.txt')).toBe('edited since');
    expect((await log({ workspace })).entries.at(-1)).toMatchObject({
      kind: 'action-failed',
      entry: { body: { error: { code: 'NOT_APPLIED' }, isReverted: true, isRecovery: true } },
    });
    await first.close();
    // Killed after it changed a path: finished.
    const again = await Ledger.open(file);
    await again.append('action-started', started?.entry.body ?? {}, started?.entry.refs);
    await again.close();
    await lay(workspace, { 'a.txt': 'new' });
    const reopened = await openSession({ workspace });
    expect(await read(workspace, 'a.txt')).toBe('new');
    const last = (await log({ workspace })).entries.at(-1);
    expect(last).toMatchObject({ kind: 'action-completed', entry: { body: { isRecovery: true } } });
    await reopened.close();
    expect(
      await store.has(
        (await snapshot(workspace, { store, storeDirectory: join(workspace, '.rewind') })).tree,
      ),
    ).toBe(true);
  });

  it('serializes two processes acting on one session at once', async () => {
    const workspace = await makeTempDirectory();
    await init({ workspace });
    const script = `
      const { openSession } = await import(${JSON.stringify(new URL('../../dist/index.js', import.meta.url).href)});
      const session = await openSession({ workspace: process.argv[1] });
      for (let i = 0; i < 15; i++) await session.write(\`\${process.argv[2]}/f\${i}.txt\`, \`\${process.argv[2]} \${i}\`);
      await session.close();
    `;
    const runs = await Promise.all(
      ['p', 'q'].map((name) => runNode(['--input-type=module', '-e', script, workspace, name])),
    );
    for (const run of runs) expect(run.stderr).toBe('');
    const [file] = await listSessions(join(workspace, '.rewind'));
    if (!file) throw new Error('no session');
    const reading = await readLedgerFile(file.file);
    const kinds = reading.entries.map((entry) => entry.kind);
    expect(kinds.filter((kind) => kind === 'action-started')).toHaveLength(30);
    expect(kinds.filter((kind) => kind === 'action-completed')).toHaveLength(30);
    expect(reading.entries.map((entry) => entry.seq)).toEqual(
      reading.entries.map((_, index) => index + 1),
    );
    for (const name of ['p', 'q'])
      expect(await read(workspace, `${name}/f14.txt`)).toBe(`${name} 14`);
  });
});

describe('exec', () => {
  it('records the files a command created, modified and deleted, with its output, and undo reverts them', async () => {
    const { workspace, session, stateOf } = await sessionOn({
      'keep.txt': 'k',
      'edit.txt': 'before',
      'gone/old.txt': 'old',
    });
    const before = await stateOf();
    const result = await session.exec(
      'echo made > new.txt && echo after > edit.txt && rm -r gone && echo out && echo err >&2',
    );
    expect(result).toMatchObject({
      kind: 'exec',
      state: 'done',
      exitCode: 0,
      stdout: 'out\n',
      stderr: 'err\n',
      created: ['new.txt'],
      modified: ['edit.txt'],
      deleted: ['gone/old.txt'],
    });
    const diff = await session.diff(String(result.id));
    expect(diff.changes).toEqual([
      { path: 'edit.txt', kind: 'modified' },
      { path: 'gone/old.txt', kind: 'deleted' },
      { path: 'new.txt', kind: 'added' },
    ]);
    expect(diff.text).toContain('+after');
    const completed = (await log({ workspace })).entries.at(-1)?.entry;
    expect(completed?.body).toMatchObject({
      evidence: { exitCode: 0, stdout: { sizeBytes: 4, truncated: false } },
    });
    await session.undo(result.id);
    expect(await stateOf()).toBe(before);
  });

  it('journals a failing command as failed, still undoable', async () => {
    const { workspace, session } = await sessionOn({});
    const result = await session.exec(['sh', '-c', 'echo x > f.txt; exit 3']);
    expect(result).toMatchObject({ state: 'failed', exitCode: 3, created: ['f.txt'] });
    expect(await statesOf(workspace)).toMatchObject({ [result.id]: 'failed' });
    await session.undo(result.id);
    expect(existsSync(join(workspace, 'f.txt'))).toBe(false);
    await expect(session.exec(['/no/such/program'])).rejects.toMatchObject({ code: 'EXEC_FAILED' });
  });

  it('refuses a NUL byte in a command or its environment before journaling anything', async () => {
    const { workspace, session } = await sessionOn({});
    const before = (await log({ workspace })).entries.length;
    await expect(session.exec(['true\0x'])).rejects.toMatchObject({
      code: 'INVALID_ARGUMENT',
      message: expect.stringContaining('NUL byte'),
    });
    await expect(session.exec('echo a\0b')).rejects.toMatchObject({ code: 'INVALID_ARGUMENT' });
    await expect(session.exec(['true'], { env: { A: 'x\0y' } })).rejects.toMatchObject({
      code: 'INVALID_ARGUMENT',
      message: expect.stringContaining('"A"'),
    });
    await expect(session.exec(['true'], { env: { 'A=B': 'x' } })).rejects.toMatchObject({
      code: 'INVALID_ARGUMENT',
    });
    expect((await log({ workspace })).entries).toHaveLength(before);
  });

  it('ends the whole process tree at the timeout, even children that ignore SIGTERM', async () => {
    const { workspace, session } = await sessionOn({});
    const started = Date.now();
    const result = await session.exec(
      `trap '' TERM; (trap '' TERM; echo $$ > /dev/null; sleep 30 & echo $! > child.pid; wait) & sleep 30`,
      { timeoutMs: 300 },
    );
    expect(result.timedOut).toBe(true);
    expect(result.state).toBe('failed');
    expect(Date.now() - started).toBeLessThan(10_000);
    const pid = Number(await read(workspace, 'child.pid'));
    await sleep(100);
    expect(await isRunning(pid)).toBe(false);
  });

  it('runs with a clean environment and caps the output it keeps', async () => {
    const { session } = await sessionOn({});
    process.env.REWIND_TEST_SECRET = 'hunter2';
    try {
      const result = await session.exec('env; head -c 5000 /dev/zero', {
        maxOutputBytes: 1000,
        env: { GIVEN: 'yes' },
      });
      expect(result.stdout).not.toContain('hunter2');
      expect(result.stdout).toContain('GIVEN=yes');
      expect(result.stdoutTruncated).toBe(true);
      expect(result.stdout.length).toBe(1000);
    } finally {
      delete process.env.REWIND_TEST_SECRET;
    }
  });

  it('an interrupted command is closed by the next open with the workspace it left, and can be undone', async () => {
    const workspace = await makeTempDirectory();
    await init({ workspace });
    const script = `
      const { openSession } = await import(${JSON.stringify(new URL('../../dist/index.js', import.meta.url).href)});
      const session = await openSession({ workspace: process.argv[1] });
      await session.exec('echo partial > half.txt; kill -9 ${'$'}PPID; sleep 5');
    `;
    const run = await runNode(['--input-type=module', '-e', script, workspace]);
    expect(run.signal).toBe('SIGKILL');
    const session = await openSession({ workspace });
    const actions = await session.actions();
    expect(actions.at(-1)).toMatchObject({ kind: 'exec', state: 'interrupted' });
    await session.undo(actions.at(-1)?.id as number);
    expect(existsSync(join(workspace, 'half.txt'))).toBe(false);
    await session.close();
  });

  it.runIf(probeBwrap().works)(
    'runs in the session sandbox: file effects journaled, nothing outside the workspace, .rewind unseen',
    async () => {
      const workspace = await sandboxWorkspace();
      await init({ workspace, sandbox: 'bwrap' });
      const session = await openSession({ workspace });
      expect(await session.sandbox()).toMatchObject({ backend: 'bwrap', network: false });
      const outside = join(await makeTempDirectory(), 'host.txt');
      const result = await session.exec(
        `echo in > in.txt; echo out > ${outside}; ls -A .rewind | wc -l`,
      );
      expect(result.created).toEqual(['in.txt']);
      expect(result.stdout.trim()).toBe('0');
      expect(existsSync(outside)).toBe(false);
      const completed = (await log({ workspace })).entries.at(-1)?.entry.body as {
        evidence: { sandbox: string };
      };
      expect(completed.evidence.sandbox).toBe('bwrap');
      await session.undo(result.id);
      expect(existsSync(join(workspace, 'in.txt'))).toBe(false);
      // What Rewind writes and puts back (a file in a new folder, then an undone delete) belongs
      // to whoever owns the workspace, so the sandboxed commands can still change it.
      await session.write('made/by-rewind.txt', 'one');
      const deleted = await session.exec('rm -r made');
      await session.undo(deleted.id);
      const owner = (await stat(workspace)).uid;
      expect((await stat(join(workspace, 'made'))).uid).toBe(owner);
      expect((await stat(join(workspace, 'made/by-rewind.txt'))).uid).toBe(owner);
      const changed = await session.exec('echo two > made/by-rewind.txt && touch made/new.txt');
      expect(changed.exitCode).toBe(0);
      expect(changed.created).toEqual(['made/new.txt']);
      await session.close();
    },
  );
});
