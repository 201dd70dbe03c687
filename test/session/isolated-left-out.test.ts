import { existsSync } from 'node:fs';
import { readFile, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { init, openSession, withIsolatedSession } from '../../src/session/index.js';
import { makeTempDirectory } from '../helpers/temp.js';
import { lay } from '../helpers/workspace.js';

const read = (root: string, path: string) => readFile(join(root, path), 'utf8');

async function workspaceWithIgnored(): Promise<string> {
  const workspace = await makeTempDirectory();
  await lay(workspace, {
    'a.txt': 'one',
    '.gitignore': '.env\ndist/\nnode_modules/\n',
    '.env': 'K=1\n',
    'node_modules/m.js': 'm',
  });
  await init({ workspace });
  return workspace;
}

describe('isolated sessions and what the ignore rules leave out', () => {
  it('tell what changed there (no commit carries it), and destroy refuses to lose it unless forced', async () => {
    const workspace = await workspaceWithIgnored();
    const session = await openSession({ workspace, isolation: 'isolated' });
    await session.exec(
      'echo K=2 > .env; mkdir -p dist; echo built > dist/o.js; echo two > a.txt; echo m | tr -d "\\n" > node_modules/m.js',
    );
    const status = await session.status();
    expect(status.leftOut).toEqual(['.env', 'dist']);
    const committed = await session.commit();
    expect(committed).toMatchObject({ status: 'committed', leftOut: ['.env', 'dist'] });
    expect(await read(workspace, 'a.txt')).toBe('two\n');
    expect(await read(workspace, '.env')).toBe('K=1\n');
    expect((await session.commit()).status).toBe('nothing-to-commit');
    // Rewritten with what the host holds (node_modules/m.js): nothing to tell.
    await expect(session.destroy()).rejects.toMatchObject({
      code: 'UNCOMMITTED_CHANGES',
      data: { paths: [], leftOut: ['.env', 'dist'] },
      message: expect.stringContaining(`Copy what you want to keep from ${session.workspace}`),
    });
    expect(await read(session.workspace, '.env')).toBe('K=2\n');
    // Copied over by hand: no longer a difference.
    await writeFile(join(workspace, '.env'), 'K=2\n');
    expect((await session.status()).leftOut).toEqual(['dist']);
    await session.destroy({ force: true });
    expect(existsSync(session.workspace)).toBe(false);
  });

  it('keep the view on destroyOnExit while such a change is there', async () => {
    const workspace = await workspaceWithIgnored();
    const { value: id, end } = await withIsolatedSession(
      { workspace, autoCommit: true, destroyOnExit: true },
      async (session) => {
        await session.exec('echo K=3 > .env');
        return session.id;
      },
    );
    expect(end).toMatchObject({
      isDestroyed: false,
      isPreserved: true,
      commit: { status: 'nothing-to-commit', leftOut: ['.env'] },
    });
    expect(await read(join(workspace, '.rewind', 'views', id, 'tree'), '.env')).toBe('K=3\n');
  });
});
