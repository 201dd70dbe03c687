import { execFile } from 'node:child_process';
import { mkdir, mkdtemp, readdir, readFile, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join, posix, relative } from 'node:path';
import { promisify } from 'node:util';
import { Client } from '@modelcontextprotocol/client';
import { StdioClientTransport } from '@modelcontextprotocol/client/stdio';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ROOT, runNode } from '../helpers/processes.js';
import { makeTempDirectory } from '../helpers/temp.js';
import { loadPage, startUiProcess } from '../helpers/ui.js';

/**
 * What a user gets from `npm i rewind-agent`: the package is packed from this checkout (dist/ as
 * the global setup just built it), installed from the tarball into a fresh project, and used
 * from there the ways a user would: the `rewind` bin, `npx rewind-agent`, `import`, `require`
 * and `rewind mcp`.
 */

const run = promisify(execFile);
const manifest = JSON.parse(await readFile(join(ROOT, 'package.json'), 'utf8')) as {
  name: string;
  version: string;
};
/** The name users install; `rewind` on npm is another project's package (and another bin). */
const PACKAGE = 'rewind-agent';

/** The files every tarball must hold; anything else must be under bin/ or dist/. */
const TOP_LEVEL_FILES = ['LICENSE', 'README.md', 'SPEC.md', 'package.json'];

/** A checkpoint, a change and a rollback in a fresh workspace, written for both module systems. */
const SCENARIO = `
async function main(workspace) {
  await writeFile(join(workspace, 'a.txt'), 'before\\n');
  await init({ workspace });
  const session = await openSession({ workspace });
  try {
    await session.checkpoint('start');
    await writeFile(join(workspace, 'a.txt'), 'after\\n');
    await writeFile(join(workspace, 'b.txt'), 'new\\n');
    await session.rollback('start');
  } finally {
    await session.close();
  }
  const files = (await readdir(workspace)).sort();
  return { a: await readFile(join(workspace, 'a.txt'), 'utf8'), files };
}
`;

const ESM_USER = `import { readdir, readFile, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { init, openSession } from 'rewind-agent';
${SCENARIO}
main(process.argv[2]).then((result) => process.stdout.write(JSON.stringify(result)));
`;

const CJS_USER = `const { readdir, readFile, writeFile } = require('node:fs/promises');
const { join } = require('node:path');
const { init, openSession, RewindError } = require('rewind-agent');
${SCENARIO}
Promise.all([main(process.argv[2]), import('rewind-agent')]).then(([result, imported]) => {
  // require and import must load the same module, so there is one RewindError class.
  const isSameRewindError = imported.RewindError === RewindError;
  process.stdout.write(JSON.stringify({ ...result, isSameRewindError }));
});
`;

let scratch = '';
let app = '';
let shipped: string[] = [];

beforeAll(async () => {
  scratch = await mkdtemp(join(tmpdir(), 'rewind-package-'));
  // The global setup built dist/ from a clean slate, so skip `prepare`: rebuilding dist/ here
  // would pull it from under the tests running beside this one.
  const packed = await run(
    'npm',
    ['pack', '--ignore-scripts', '--json', '--pack-destination', scratch],
    { cwd: ROOT, maxBuffer: 16 * 1024 * 1024 },
  );
  const [tarball] = JSON.parse(packed.stdout) as { filename: string; files: { path: string }[] }[];
  if (!tarball) throw new Error(`npm pack printed no tarball: ${packed.stdout}`);
  shipped = tarball.files.map((file) => file.path).sort();

  app = join(scratch, 'app');
  await mkdir(app);
  await writeFile(
    join(app, 'package.json'),
    `${JSON.stringify({ name: 'rewind-user', version: '1.0.0', private: true }, null, 2)}\n`,
  );
  // A registry install never runs `prepare` (it builds from sources that are not shipped);
  // the dependencies come from npm's cache, which `npm ci` has just filled.
  await run(
    'npm',
    [
      'install',
      '--ignore-scripts',
      '--prefer-offline',
      '--no-audit',
      '--no-fund',
      '--loglevel=error',
      join(scratch, tarball.filename),
    ],
    { cwd: app, maxBuffer: 16 * 1024 * 1024 },
  );
}, 180_000);

afterAll(async () => {
  if (scratch) await rm(scratch, { recursive: true, force: true });
});

/** Every file under a directory, as paths relative to it with forward slashes. */
async function listFiles(directory: string): Promise<string[]> {
  const entries = await readdir(directory, { recursive: true, withFileTypes: true });
  return entries
    .filter((entry) => entry.isFile())
    .map((entry) => relative(directory, join(entry.parentPath, entry.name)).split('\\').join('/'))
    .filter((path) => !path.startsWith('node_modules/'));
}

describe('the package as npm packs it', () => {
  it('is named rewind-agent', () => {
    expect(manifest.name).toBe(PACKAGE);
  });

  it('ships the bin, dist, SPEC.md, README.md and LICENSE, and nothing else', () => {
    expect(shipped).toEqual(expect.arrayContaining([...TOP_LEVEL_FILES, 'bin/rewind.cjs']));
    expect(shipped).toEqual(expect.arrayContaining(['dist/index.js', 'dist/index.d.ts']));
    expect(
      shipped.filter(
        (path) =>
          !TOP_LEVEL_FILES.includes(path) && !path.startsWith('bin/') && !path.startsWith('dist/'),
      ),
    ).toEqual([]);
  });

  it('ships no source map that points at a file it does not ship', async () => {
    const installed = join(app, 'node_modules', PACKAGE);
    const files = await listFiles(installed);
    expect(files.sort()).toEqual(shipped);
    const present = new Set(files);
    const dangling: string[] = [];
    for (const file of files) {
      const text = await readFile(join(installed, file), 'utf8');
      const base = posix.dirname(file);
      if (/\.(c|m)?js$|\.d\.(c|m)?ts$/.test(file)) {
        const url = /^\/\/# sourceMappingURL=(\S+)\s*$/m.exec(text)?.[1];
        if (url && !url.startsWith('data:') && !present.has(posix.join(base, url))) {
          dangling.push(`${file} -> ${url}`);
        }
      }
      if (file.endsWith('.map')) {
        const map = JSON.parse(text) as { sources: string[]; sourceRoot?: string };
        for (const source of map.sources) {
          const path = posix.join(base, map.sourceRoot ?? '', source);
          if (!present.has(path)) dangling.push(`${file} -> ${source}`);
        }
      }
    }
    expect(dangling).toEqual([]);
  });
});

describe('the package installed from its tarball', () => {
  it('runs the rewind bin from node_modules/.bin', async () => {
    const { stdout } = await run(join(app, 'node_modules', '.bin', 'rewind'), ['--version'], {
      cwd: app,
    });
    expect(stdout.trim()).toBe(manifest.version);
  });

  it('serves the web UI from the installed package, its page built in, with no network', async () => {
    const workspace = join(app, 'ui-workspace');
    await mkdir(workspace);
    const bin = join(app, 'node_modules', '.bin', 'rewind');
    await run(bin, ['init'], { cwd: workspace });
    const ui = await startUiProcess(bin, ['ui'], workspace);
    try {
      expect(await loadPage(ui.url)).toMatchObject({ page: 200, script: 200 });
    } finally {
      await ui.stop();
    }
  });

  it('runs the rewind bin for `npx rewind-agent`, as an MCP config does', async () => {
    const { stdout } = await run('npx', ['--no-install', PACKAGE, '--version'], {
      cwd: app,
    });
    expect(stdout.trim()).toBe(manifest.version);
  });

  it('imports rewind-agent from an ES module and rolls a workspace back', async () => {
    const workspace = await makeTempDirectory();
    await writeFile(join(app, 'user.mjs'), ESM_USER);
    const result = await runNode([join(app, 'user.mjs'), workspace], { cwd: app });
    expect(result.code, result.stderr).toBe(0);
    expect(JSON.parse(result.stdout)).toEqual({ a: 'before\n', files: ['.rewind', 'a.txt'] });
  });

  it('requires rewind-agent from CommonJS, the same module that import loads', async () => {
    const workspace = await makeTempDirectory();
    await writeFile(join(app, 'user.cjs'), CJS_USER);
    const result = await runNode([join(app, 'user.cjs'), workspace], { cwd: app });
    expect(result.code, result.stderr).toBe(0);
    expect(JSON.parse(result.stdout)).toEqual({
      a: 'before\n',
      files: ['.rewind', 'a.txt'],
      isSameRewindError: true,
    });
  });

  it('imports rewind-agent/ai-sdk and journals a tool, with no `ai` package installed (an optional peer)', async () => {
    const workspace = await makeTempDirectory();
    await writeFile(join(workspace, 'a.txt'), 'before\n');
    await writeFile(
      join(app, 'ai-user.mjs'),
      `import { init, openSession } from 'rewind-agent';
import { rewindTools } from 'rewind-agent/ai-sdk';
const workspace = process.argv[2];
await init({ workspace });
const session = await openSession({ workspace });
const tools = rewindTools(session, {
  write_file: { description: 'Write', inputSchema: {}, execute: ({ text }) => session.write('a.txt', text).then(() => 'ok') },
});
const said = await tools.write_file.execute({ text: 'after\\n' }, { toolCallId: 'c1', messages: [] });
const checkpoints = (await session.checkpoints()).map((checkpoint) => checkpoint.isAutomatic);
await session.close();
process.stdout.write(JSON.stringify({ said, checkpoints }));
`,
    );
    const result = await runNode([join(app, 'ai-user.mjs'), workspace], { cwd: app });
    expect(result.code, result.stderr).toBe(0);
    expect(JSON.parse(result.stdout)).toEqual({ said: 'ok', checkpoints: [true] });
    expect(await readFile(join(workspace, 'a.txt'), 'utf8')).toBe('after\n');
  });

  it('type-checks an ES module and a CommonJS module that use it, under NodeNext', async () => {
    const user = join(app, 'typed');
    await mkdir(user);
    await writeFile(
      join(user, 'user.mts'),
      "import { init, type RewindError } from 'rewind-agent';\n" +
        'export const started: Promise<{ isNewSession: boolean }> = init({ workspace: "." });\n' +
        'export type Failure = RewindError["code"];\n',
    );
    await writeFile(
      join(user, 'user.cts'),
      "import { openSession, isRewindError } from 'rewind-agent';\n" +
        'export const open: typeof openSession = openSession;\n' +
        'export const isError: typeof isRewindError = isRewindError;\n',
    );
    await writeFile(
      join(user, 'tsconfig.json'),
      JSON.stringify({
        compilerOptions: {
          module: 'nodenext',
          target: 'es2022',
          strict: true,
          noEmit: true,
          skipLibCheck: true,
          types: ['node'],
          typeRoots: [join(ROOT, 'node_modules', '@types')],
        },
        include: ['user.mts', 'user.cts'],
      }),
    );
    const tsc = join(ROOT, 'node_modules', 'typescript', 'bin', 'tsc');
    const result = await runNode([tsc, '-p', user], { cwd: user });
    expect(result.stdout).toBe('');
    expect(result.code).toBe(0);
  });

  it('serves MCP over stdio as `rewind mcp`', async () => {
    const workspace = await makeTempDirectory();
    const client = new Client({ name: 'package-test', version: '1.0.0' });
    await client.connect(
      new StdioClientTransport({
        command: join(app, 'node_modules', '.bin', 'rewind'),
        args: ['mcp', '--root', workspace],
        cwd: app,
      }),
    );
    try {
      expect(client.getServerVersion()).toMatchObject({
        name: 'rewind',
        version: manifest.version,
      });
      const result = await client.callTool({
        name: 'write',
        arguments: { path: 'hello.txt', content: 'hi' },
      });
      expect(result.isError).toBeFalsy();
      expect(await readFile(join(workspace, 'hello.txt'), 'utf8')).toBe('hi');
    } finally {
      await client.close();
    }
  });
});
