import { createHash } from 'node:crypto';
import { cp, mkdir, readdir, readFile, stat, writeFile } from 'node:fs/promises';
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
    // Named by the bundle's content (the SHA-256 written beside it) and Node's version.
    const digest = createHash('sha256')
      .update(await readFile(join(ROOT, 'dist/bundle/cli.cjs')))
      .digest('hex');
    expect(files).toEqual([`cli-${digest.slice(0, 32)}-${process.version}.v8`]);
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

  it('names its cache by the bundle without its .sha256 file too, hashing it then', async () => {
    // A copy of the command without the file that scripts/bundle.mjs writes beside the bundle.
    const installed = await makeTempDirectory();
    await mkdir(join(installed, 'dist/bundle'), { recursive: true });
    await cp(join(ROOT, 'bin'), join(installed, 'bin'), { recursive: true });
    await cp(join(ROOT, 'package.json'), join(installed, 'package.json'));
    await cp(join(ROOT, 'dist/bundle/cli.cjs'), join(installed, 'dist/bundle/cli.cjs'));
    const project = await makeTempDirectory();
    const cache = await makeTempDirectory();
    const run = (args: string[]) =>
      runNode([join(installed, 'bin/rewind.cjs'), ...args], {
        cwd: project,
        env: { XDG_CACHE_HOME: cache },
      });
    expect((await run(['init'])).code).toBe(0);
    const expected = `cli-${(await readFile(join(ROOT, 'dist/bundle/cli.cjs.sha256'), 'latin1')).slice(0, 32)}-${process.version}.v8`;
    expect(await cacheFiles(cache)).toEqual([expected]);
    // A file that does not hold a digest is not trusted either.
    await writeFile(join(installed, 'dist/bundle/cli.cjs.sha256'), 'not a digest\n');
    expect((await run(['status'])).code).toBe(0);
    expect(await cacheFiles(cache)).toEqual([expected]);
  });

  it('starts `status` and `log` without loading node:crypto, zlib, worker threads, child_process, net or streams', async () => {
    // Each costs every command ~1-5 ms to load (docs/performance.md); they load on first use
    // (child_process, which commander requires, through scripts/bundle.mjs's lazy-builtins). net
    // brings Node's streams, as process.stdout and process.stderr would (bin/rewind.cjs writes
    // with writeSync).
    const project = await makeTempDirectory();
    expect((await rewindWith(undefined, project, ['init'])).code).toBe(0);
    const probe = join(await makeTempDirectory(), 'probe.cjs');
    const loaded = `process.moduleLoadList.filter((name) => /^NativeModule (crypto|zlib|worker_threads|child_process|net|stream)$/.test(name))`;
    // Written with writeSync: process.stderr would load the streams it looks for.
    await writeFile(
      probe,
      `process.on('exit', () => require('node:fs').writeSync(2, '\\nLOADED ' + ${loaded}.join(',') + '\\n'));\n`,
    );
    for (const command of ['status', 'log']) {
      const { code, stderr } = await runNode(
        ['--require', probe, join(ROOT, 'bin/rewind.cjs'), command],
        { cwd: project, env: { REWIND_DAEMON: '0' } },
      );
      expect(code).toBe(0);
      expect(stderr.split('\n').find((line) => line.startsWith('LOADED'))).toBe('LOADED ');
    }
  });
});
