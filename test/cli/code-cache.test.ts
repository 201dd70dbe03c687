import { readdir, readFile, stat, writeFile } from 'node:fs/promises';
import { createServer } from 'node:http';
import type { AddressInfo } from 'node:net';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { ROOT, runNode } from '../helpers/processes.js';
import { makeTempDirectory } from '../helpers/temp.js';
import { lay } from '../helpers/workspace.js';

/** Runs the built `rewind` in a process of its own, its code cache in `cache` (or none). */
const rewindWith = (cache: string | undefined, cwd: string, args: string[]) =>
  runNode([join(ROOT, 'bin/rewind.cjs'), ...args], {
    cwd,
    env: cache === undefined ? { REWIND_CODE_CACHE: '0' } : { XDG_CACHE_HOME: cache },
  });

const cacheFiles = async (cache: string): Promise<string[]> =>
  (await readdir(join(cache, 'rewind-agent'))).sort();

describe('the `rewind` command and its code cache', () => {
  it('leaves a cache on its first run, uses it after, and answers exactly as it does without one', async () => {
    const project = await makeTempDirectory();
    await lay(project, { '.gitignore': 'dist/\n', 'src/a.js': 'one\n', 'dist/out.js': 'x\n' });
    const cache = await makeTempDirectory();
    // A request loads Node's HTTP modules only when made: inside the bundle too.
    const server = createServer((_request, response) => response.end('served\n'));
    await new Promise<void>((listening) => server.listen(0, '127.0.0.1', listening));
    const url = `http://127.0.0.1:${(server.address() as AddressInfo).port}/`;
    // Changing commands first, then reads: each asked with and without the cache, in turn.
    const steps: string[][] = [
      ['init'],
      ['checkpoint', 'first'],
      ['write', 'src/a.js', 'two\n'],
      ['http', 'GET', url],
      ['checkpoint', 'second'],
      ['status', '--json'],
      ['log'],
      ['checkpoints', '--json'],
      ['diff', 'first', 'second'],
      ['rollback', 'first', '--dry-run'],
      ['nonsense'],
      ['--help'],
    ];
    const answers: { code: number | null; stdout: string; stderr: string }[] = [];
    for (const args of steps) {
      const cached = await rewindWith(cache, project, args);
      const readOnly = !['init', 'checkpoint', 'write', 'http'].includes(args[0] as string);
      if (readOnly) {
        const uncached = await rewindWith(undefined, project, args);
        const strip = (text: string) => text.replace(/\d+(\.\d+)? ?ms\b/g, 'N ms');
        expect({ ...cached, stdout: strip(cached.stdout) }).toEqual({
          ...uncached,
          stdout: strip(uncached.stdout),
        });
      }
      answers.push(cached);
    }
    server.close();
    expect(answers.slice(0, 5).map((answer) => answer.code)).toEqual([0, 0, 0, 0, 0]);
    expect(answers[3]?.stdout).toContain('served');
    expect(answers[10]?.code).toBe(2);
    const files = await cacheFiles(cache);
    expect(files).toEqual([expect.stringMatching(/^cli-[0-9a-f]{32}\.v8$/)]);
    // A cache V8 takes is not written again.
    const file = join(cache, 'rewind-agent', files[0] as string);
    const written = (await stat(file)).mtimeMs;
    expect((await rewindWith(cache, project, ['status'])).code).toBe(0);
    expect((await stat(file)).mtimeMs).toBe(written);
  });

  it('ignores a damaged cache and writes a good one in its place; REWIND_CODE_CACHE=0 writes none', async () => {
    const project = await makeTempDirectory();
    const cache = await makeTempDirectory();
    expect((await rewindWith(cache, project, ['init'])).code).toBe(0);
    const [name] = await cacheFiles(cache);
    const file = join(cache, 'rewind-agent', name as string);
    const good = (await stat(file)).size;
    await writeFile(file, Buffer.alloc(good, 7));
    const status = await rewindWith(cache, project, ['status', '--json']);
    expect(status.code).toBe(0);
    expect(JSON.parse(status.stdout).workspace).toBe(project);
    expect((await stat(file)).size).toBeGreaterThan(1000);
    expect((await readFile(file)).equals(Buffer.alloc(good, 7))).toBe(false);

    const none = await makeTempDirectory();
    const off = await runNode([join(ROOT, 'bin/rewind.cjs'), 'status'], {
      cwd: project,
      env: { REWIND_CODE_CACHE: '0', XDG_CACHE_HOME: none },
    });
    expect(off.code).toBe(0);
    expect(await readdir(none)).toEqual([]);
  });
});
