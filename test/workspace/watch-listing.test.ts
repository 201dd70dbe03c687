// The listing a watcher checks its watches against: by find, by find again, by a walk of its own.
import { execFileSync } from 'node:child_process';
import { link, readFile, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { listForWatch, type WatchListing } from '../../src/workspace/watch-coverage.js';
import { runAsNobody, workspaceOfNobody } from '../helpers/nobody.js';
import { ROOT } from '../helpers/processes.js';
import { makeTempDirectory } from '../helpers/temp.js';
import { lay } from '../helpers/workspace.js';

const sorted = (listing: WatchListing | undefined) =>
  listing && {
    directories: [...listing.directories].sort((a, b) => a.path.localeCompare(b.path)),
    linked: [...listing.linked].sort(),
  };

/**
 * Runs `run` with a find (by PATH) that fails its first `failures` runs (as a find that met a
 * directory vanishing does: exit 1) and then runs the real one; `runs` counts them all.
 */
async function withFailingFind(
  failures: number,
  run: (runs: () => Promise<number>) => Promise<void>,
): Promise<void> {
  const bin = await makeTempDirectory();
  const log = join(bin, 'runs');
  const find = execFileSync('sh', ['-c', 'command -v find']).toString().trim();
  const script = `#!/bin/sh\necho run >> '${log}'\n[ "$(wc -l < '${log}')" -gt ${failures} ] || exit 1\nexec ${find} "$@"\n`;
  await writeFile(join(bin, 'find'), script, { mode: 0o755 });
  const runs = async () =>
    (await readFile(log, 'utf8').catch(() => '')).split('\n').filter(Boolean).length;
  const saved = { path: process.env.PATH, shells: process.env.REWIND_PROGRAM_SHELLS };
  process.env.PATH = `${bin}:${process.env.PATH}`;
  process.env.REWIND_PROGRAM_SHELLS = '0';
  try {
    await run(runs);
  } finally {
    process.env.PATH = saved.path;
    if (saved.shells === undefined) delete process.env.REWIND_PROGRAM_SHELLS;
    else process.env.REWIND_PROGRAM_SHELLS = saved.shells;
  }
}

async function project(): Promise<string> {
  const workspace = await makeTempDirectory();
  await lay(workspace, {
    'src/a/b.ts': 'b',
    'src/c.ts': 'c',
    'dist/out.js': 'out',
    'packages/p/node_modules/m/index.js': 'm',
    '.git/HEAD': 'ref',
    '.rewind/x': 'x',
  });
  await link(join(workspace, 'src/c.ts'), join(workspace, 'src/c-again.ts'));
  return workspace;
}

describe.runIf(process.platform === 'linux')('the listing of a watch', () => {
  it('asks find again when it failed once', async () => {
    const workspace = await project();
    const expected = sorted(await listForWatch(workspace, ['dist']));
    expect(expected?.directories.map(({ path }) => path)).toEqual([
      '',
      'packages',
      'packages/p',
      'packages/p/node_modules',
      'packages/p/node_modules/m',
      'src',
      'src/a',
    ]);
    expect(expected?.linked).toEqual(['src/c-again.ts', 'src/c.ts']);
    await withFailingFind(1, async (runs) => {
      expect(sorted(await listForWatch(workspace, ['dist']))).toEqual(expected);
      expect(await runs()).toBe(2);
    });
  });

  it('walks by itself when find failed twice, and lists the same', async () => {
    const workspace = await project();
    const expected = sorted(await listForWatch(workspace, ['dist', 'packages/p/node_modules']));
    await withFailingFind(Number.POSITIVE_INFINITY, async (runs) => {
      const walked = await listForWatch(workspace, ['dist', 'packages/p/node_modules']);
      expect(sorted(walked)).toEqual(expected);
      expect(await runs()).toBe(2);
    });
  });

  it.runIf(process.getuid?.() === 0)(
    'fails, rather than leave a subtree out, when a directory cannot be read',
    async () => {
      const workspace = await workspaceOfNobody({ 'src/a.ts': 'a', 'locked/inner/b.ts': 'b' });
      const out = await runAsNobody(
        workspace,
        `const { listForWatch } = await import('${ROOT}dist/workspace/watch-coverage.js');
       fs.chmodSync(workspace + '/locked', 0o000);
       out.listed = (await listForWatch(workspace, [])) !== undefined;
       fs.chmodSync(workspace + '/locked', 0o755);
       out.listedOnceReadable = (await listForWatch(workspace, [])) !== undefined;`,
      );
      expect(out).toEqual({ listed: false, listedOnceReadable: true });
    },
  );
});
