import { existsSync } from 'node:fs';
import { readFile, rm, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { sessionOn } from '../helpers/session.js';
import { lay } from '../helpers/workspace.js';

const read = (root: string, path: string) => readFile(join(root, path), 'utf8');

describe('a rollback of some paths', () => {
  it('is undone when a folder it removed stays for the ignored files in it', async () => {
    const { workspace, session, stateOf } = await sessionOn({
      '.gitignore': 'node_modules/\n',
      'a.txt': 'a\n',
    });
    await session.checkpoint('base');
    await lay(workspace, { 'pkg/node_modules/x.js': 'd\n', 'pkg/new.js': 'new\n' });
    const edited = await stateOf();
    const result = await session.rollback('base', { paths: ['pkg'] });
    expect(existsSync(join(workspace, 'pkg/new.js'))).toBe(false);
    expect(await read(workspace, 'pkg/node_modules/x.js')).toBe('d\n');
    expect(await session.undo(result.id as number)).toMatchObject({ status: 'undone' });
    expect(await read(workspace, 'pkg/new.js')).toBe('new\n');
    expect(await read(workspace, 'pkg/node_modules/x.js')).toBe('d\n');
    expect(await stateOf()).toBe(edited);
    // A file put back in the folder since, where the undo would put the one it removed: refused.
    const again = await session.rollback('base', { paths: ['pkg'] });
    await lay(workspace, { 'pkg/new.js': 'written since\n' });
    expect(await session.undo(again.id as number)).toMatchObject({
      status: 'refused',
      conflicts: [{ path: 'pkg/new.js', expected: 'absent' }],
    });
    expect(await read(workspace, 'pkg/new.js')).toBe('written since\n');
  });

  it('restores only those paths, leaves the rest and the conversation, and is undone like any action', async () => {
    const { workspace, session, stateOf } = await sessionOn({
      'a.txt': 'a1',
      'src/x.js': 'x1',
      'src/y.js': 'y1',
    });
    await session.syncConversation([{ role: 'user', content: 'hi' }], { format: 'openai-chat' });
    await session.checkpoint('c1');
    await lay(workspace, { 'a.txt': 'a2', 'src/x.js': 'x2', 'new.txt': 'n' });
    await rm(join(workspace, 'src/y.js'));
    await session.syncConversation(
      [
        { role: 'user', content: 'hi' },
        { role: 'assistant', content: 'later' },
      ],
      { format: 'openai-chat' },
    );
    const edited = await stateOf();
    const plan = await session.rollback('c1', { paths: ['src/y.js', './a.txt'], dryRun: true });
    expect(plan.changes.map((change) => [change.action, change.path])).toEqual([
      ['written', 'a.txt'],
      ['created', 'src/y.js'],
    ]);
    expect(await stateOf()).toBe(edited);
    const result = await session.rollback('c1', { paths: ['src/y.js', 'a.txt'] });
    expect(result.conversation).toBeUndefined();
    expect(await read(workspace, 'a.txt')).toBe('a1');
    expect(await read(workspace, 'src/y.js')).toBe('y1');
    expect(await read(workspace, 'src/x.js')).toBe('x2');
    expect(existsSync(join(workspace, 'new.txt'))).toBe(true);
    expect((await session.conversation())?.messages).toHaveLength(2);
    expect(await session.undo(result.id as number)).toMatchObject({ status: 'undone' });
    expect(await stateOf()).toBe(edited);
  });

  it('creates missing parent directories holding only what was asked for', async () => {
    const { workspace, session } = await sessionOn({
      'docs/guide/intro.md': 'intro',
      'docs/guide/more.md': 'more',
      'docs/other.md': 'other',
    });
    await session.checkpoint('c1');
    await rm(join(workspace, 'docs'), { recursive: true });
    const result = await session.rollback('c1', { paths: ['docs/guide/intro.md'] });
    expect(await read(workspace, 'docs/guide/intro.md')).toBe('intro');
    expect(existsSync(join(workspace, 'docs/guide/more.md'))).toBe(false);
    expect(existsSync(join(workspace, 'docs/other.md'))).toBe(false);
    await session.undo(result.id as number);
    expect(existsSync(join(workspace, 'docs'))).toBe(false);
  });

  it('says that a path the rules leave out is ignored, not that nothing is there', async () => {
    const { workspace, session } = await sessionOn({
      '.gitignore': '.env\nbuild/\n',
      '.env': 'SECRET=1\n',
      'build/out.js': 'x',
      'a.txt': 'a',
    });
    await session.checkpoint('c1');
    for (const path of ['.env', 'build', 'build/out.js']) {
      await expect(session.rollback('c1', { paths: [path] })).rejects.toMatchObject({
        code: 'PATH_IGNORED',
        message: expect.stringContaining(`${path} is left out of snapshots`),
      });
    }
    expect(await read(workspace, '.env')).toBe('SECRET=1\n');
  });

  it('refuses a path neither side has, an empty list, and a path below a file', async () => {
    const { workspace, session } = await sessionOn({ 'a.txt': 'a', 'd/f.txt': 'f' });
    await session.checkpoint('c1');
    await expect(session.rollback('c1', { paths: ['nope.txt'] })).rejects.toMatchObject({
      code: 'PATH_NOT_FOUND',
    });
    await expect(session.rollback('c1', { paths: [] })).rejects.toMatchObject({
      code: 'INVALID_ARGUMENT',
    });
    await rm(join(workspace, 'd'), { recursive: true });
    await writeFile(join(workspace, 'd'), 'now a file');
    await expect(session.rollback('c1', { paths: ['d/f.txt'] })).rejects.toMatchObject({
      code: 'PATH_CONFLICT',
    });
    expect(await read(workspace, 'd')).toBe('now a file');
  });
});
