import { writeFile } from 'node:fs/promises';
import { createServer } from 'node:http';
import type { AddressInfo } from 'node:net';
import { join } from 'node:path';
import { stripVTControlCharacters } from 'node:util';
import { describe, expect, it } from 'vitest';
import { type CliIo, runCli } from '../../src/cli/main.js';
import { rewind } from '../helpers/cli.js';
import { ROOT, runNode } from '../helpers/processes.js';
import { makeTempDirectory } from '../helpers/temp.js';
import { lay } from '../helpers/workspace.js';

/** Runs the CLI with stdout on a terminal or not, in an environment; resolves with its stdout. */
async function stdoutOf(
  cwd: string,
  argv: string[],
  screen: Pick<CliIo, 'isTerminal' | 'env'>,
): Promise<string> {
  let stdout = '';
  await runCli(argv, {
    cwd,
    stdout: (text) => {
      stdout += text;
    },
    stderr: () => {},
    ...screen,
  });
  return stdout;
}

const RED = '\u001b[31m';
const GREEN = '\u001b[32m';
const CYAN = '\u001b[36m';
const RESET = '\u001b[39m';

const PASS = `echo '{"status":"pass","summary":"all good"}'`;
const FAIL = `echo '{"status":"fail","errors":["a.test broke"]}'`;

describe('what rewind prints', () => {
  it("passes a command's stdout and stderr through to its own streams, then the summary", async () => {
    const cwd = await makeTempDirectory();
    await rewind(cwd, ['init']);
    const ran = await rewind(cwd, ['exec', 'echo out; echo err >&2; printf tail']);
    expect(ran.code).toBe(0);
    expect(ran.stdout).toMatch(
      /^out\ntail\nexit 0: 0 created, 0 modified, 0 deleted in the workspace\naction \d+ \(reversible\): rewind undo \d+\n$/,
    );
    expect(ran.stderr).toBe('err\n');
  });

  it('prints with --quiet only errors and the output asked for, never a summary', async () => {
    const cwd = await makeTempDirectory();
    await writeFile(join(cwd, 'a.txt'), 'one\n');
    const quiet = (argv: string[], extra: { answer?: string } = {}) =>
      rewind(cwd, ['-q', ...argv], extra);
    expect(await quiet(['init'])).toMatchObject({ code: 0, stdout: '', stderr: '' });

    // Summaries of what was done: nothing.
    for (const argv of [
      ['checkpoint', 'base'],
      ['write', 'b.txt', 'two'],
      ['move', 'b.txt', 'c.txt'],
      ['mkdir', 'd'],
      ['delete', 'd'],
      ['note', 'hello'],
      ['record', 'deploy', '--compensate-command', 'true'],
      ['conversation', 'sync', '-'],
      ['test', '--verifier', PASS],
      ['exec', '--draft', 'echo drafted'],
      ['prune', '--keep-last', '1'],
      ['session', 'new', '--no-switch'],
    ]) {
      const result =
        argv[0] === 'conversation'
          ? await rewind(cwd, ['-q', ...argv], { stdin: '[{"role":"user","content":"hi"}]' })
          : await quiet(argv);
      expect(result, argv.join(' ')).toEqual({ code: 0, stdout: '', stderr: '' });
    }

    const { entries } = JSON.parse((await rewind(cwd, ['--json', 'log'])).stdout) as {
      entries: { id: number; summary: string }[];
    };
    const idOf = (text: string) =>
      String(entries.find((entry) => entry.summary.includes(text))?.id);
    expect(await quiet(['report', idOf('x.deploy')])).toEqual({ code: 0, stdout: '', stderr: '' });
    const { currentSession } = JSON.parse((await rewind(cwd, ['--json', 'status'])).stdout) as {
      currentSession: string;
    };
    expect(await quiet(['session', 'use', currentSession])).toEqual({
      code: 0,
      stdout: '',
      stderr: '',
    });

    // A command's own output, as it printed it, and its exit code.
    const ran = await rewind(cwd, [
      '--json',
      'exec',
      'echo out; echo err >&2; printf tail; exit 4',
    ]);
    expect(await quiet(['exec', 'echo out; echo err >&2; printf tail; exit 4'])).toEqual({
      code: 4,
      stdout: 'out\ntail',
      stderr: 'err\n',
    });
    // And as it was stored, when shown later.
    expect(await quiet(['show', String(JSON.parse(ran.stdout).id)])).toEqual({
      code: 0,
      stdout: 'out\ntail',
      stderr: 'err\n',
    });
    expect(await quiet(['approve', idOf('echo drafted'), '--yes'])).toEqual({
      code: 0,
      stdout: 'drafted\n',
      stderr: '',
    });
    expect(await quiet(['compensate', idOf('x.deploy'), '--yes'])).toEqual({
      code: 0,
      stdout: '',
      stderr: '',
    });

    // Listings, plans and reads: the output asked for.
    await writeFile(join(cwd, 'a.txt'), 'changed\n');
    const plan = await quiet(['rollback', 'base', '--dry-run']);
    expect(plan.stdout).toContain('Rolling back to base would change 2 paths:');
    expect((await quiet(['log'])).stdout).toContain('note-added');
    expect((await quiet(['checkpoints'])).stdout).toContain('base');
    expect((await quiet(['session', 'list'])).stdout).toContain(`* ${currentSession}`);
    expect((await quiet(['prune', '--keep-last', '1', '--dry-run'])).stdout).toContain(
      'Would drop no checkpoint.',
    );
    expect((await quiet(['diff', 'base'])).stdout).toContain('+changed');
    expect((await quiet(['read', 'a.txt'])).stdout).toBe('changed\n');
    expect(await quiet(['rollback', 'base'])).toEqual({ code: 0, stdout: '', stderr: '' });
    expect(await quiet(['undo', '--last'])).toEqual({ code: 0, stdout: '', stderr: '' });

    // What did not succeed is said.
    const failed = await quiet(['test', '--verifier', FAIL]);
    expect(failed).toMatchObject({ code: 1, stdout: expect.stringContaining('a.test broke') });
    expect((await quiet(['checkpoint', 'base'])).stderr).toContain('[CHECKPOINT_EXISTS]');
  });

  it('prints with --quiet the body of a response alone', async () => {
    const cwd = await makeTempDirectory();
    await rewind(cwd, ['init']);
    const server = createServer((_request, response) => response.end('{"ok":true}'));
    await new Promise<void>((done) => server.listen(0, '127.0.0.1', done));
    try {
      const url = `http://127.0.0.1:${(server.address() as AddressInfo).port}/`;
      expect(await rewind(cwd, ['-q', 'http', 'GET', url])).toEqual({
        code: 0,
        stdout: '{"ok":true}',
        stderr: '',
      });
    } finally {
      await new Promise((done) => server.close(done));
    }
  });

  it('colours a diff on a terminal, and never elsewhere unless FORCE_COLOR says so', async () => {
    const cwd = await makeTempDirectory();
    await writeFile(join(cwd, 'a.txt'), 'keep\n-- old\n');
    await rewind(cwd, ['init']);
    await rewind(cwd, ['checkpoint', 'base']);
    await writeFile(join(cwd, 'a.txt'), 'keep\n++ new\n');
    const plain = await stdoutOf(cwd, ['diff', 'base'], {});
    expect(plain).toContain('@@ -1,2 +1,2 @@\n keep\n--- old\n+++ new\n');
    expect(plain).not.toContain('\u001b[');

    const coloured = await stdoutOf(cwd, ['diff', 'base'], { isTerminal: true });
    expect(coloured).toContain(
      `${CYAN}@@ -1,2 +1,2 @@${RESET}\n keep\n${RED}--- old${RESET}\n${GREEN}+++ new${RESET}\n`,
    );
    expect(coloured).toContain('\u001b[1m--- a/a.txt');
    expect(stripVTControlCharacters(coloured)).toBe(plain);

    for (const [screen, isColoured] of [
      [{ isTerminal: true, env: { NO_COLOR: '1' } }, false],
      [{ isTerminal: true, env: { NO_COLOR: '' } }, true],
      [{ isTerminal: true, env: { FORCE_COLOR: '0' } }, false],
      [{ isTerminal: false, env: { FORCE_COLOR: '1' } }, true],
      [{ isTerminal: false, env: { FORCE_COLOR: '1', NO_COLOR: '1' } }, true],
      [{ isTerminal: false, env: { FORCE_COLOR: '' } }, false],
    ] as const) {
      const stdout = await stdoutOf(cwd, ['diff', 'base'], screen);
      expect(stdout.includes(GREEN), JSON.stringify(screen)).toBe(isColoured);
    }
    expect(await stdoutOf(cwd, ['--json', 'diff', 'base'], { isTerminal: true })).not.toContain(
      '\u001b[',
    );

    // The bin reads the real environment; its stdout here is a pipe.
    const bin = join(ROOT, 'bin', 'rewind.cjs');
    const piped = await runNode([bin, 'diff', 'base'], {
      cwd,
      env: { FORCE_COLOR: '', NO_COLOR: '' },
    });
    expect(piped.stdout).toBe(plain);
    const forced = await runNode([bin, 'diff', 'base'], {
      cwd,
      env: { FORCE_COLOR: '1', NO_COLOR: '' },
    });
    expect(forced.stdout).toBe(coloured);
  });

  it('shows a progress line on a terminal for a first checkpoint, a large rollback and its undo, and erases it; never elsewhere', async () => {
    const cwd = await makeTempDirectory();
    await lay(
      cwd,
      Object.fromEntries(Array.from({ length: 150 }, (_, index) => [`f${index}.txt`, `${index}`])),
    );
    await rewind(cwd, ['init', '-q']);
    const first = await rewind(cwd, ['checkpoint', 'base'], { isErrorTerminal: true });
    expect(first.code).toBe(0);
    expect(first.stderr).toMatch(/\rReading files \d+\/150 \(\d+%\)/);
    expect(first.stderr).toContain('Reading files 150/150 (100%)');
    expect(first.stderr.endsWith('\r\u001b[K')).toBe(true);
    for (let index = 0; index < 150; index++) await writeFile(join(cwd, `f${index}.txt`), 'edited');
    const rolled = await rewind(cwd, ['rollback', 'base'], { isErrorTerminal: true });
    expect(rolled.stderr).toContain('Restoring 150/150 (100%)');
    const undone = await rewind(cwd, ['undo', '--last'], { isErrorTerminal: true });
    expect(undone.stderr).toContain('Restoring 150/150 (100%)');
    const piped = await rewind(cwd, ['rollback', 'base']);
    expect(piped.stderr).not.toContain('Restoring');
    const quiet = await rewind(cwd, ['-q', 'checkpoint', 'again'], { isErrorTerminal: true });
    expect(quiet.stderr).toBe('');
  });

  it('lists the first 10 paths of a long list and counts the rest, all of them with --verbose', async () => {
    const cwd = await makeTempDirectory();
    await rewind(cwd, ['init']);
    await rewind(cwd, ['checkpoint', 'empty']);
    const created = await rewind(cwd, [
      'exec',
      'for n in $(seq 10 24); do echo $n > f$n.txt; done',
    ]);
    const lines = created.stdout.split('\n');
    expect(lines[0]).toBe('exit 0: 15 created, 0 modified, 0 deleted in the workspace');
    expect(lines.slice(1, 12)).toEqual([
      ...Array.from({ length: 10 }, (_, index) => `  created  f${index + 10}.txt`),
      '  ... and 5 more (--verbose lists them all)',
    ]);
    const all = await rewind(cwd, ['exec', '--verbose', 'rm f*.txt']);
    expect(all.stdout).toContain('  deleted  f24.txt\n');
    expect(all.stdout).not.toContain('more (--verbose');
    await rewind(cwd, ['undo', '--last']);

    const plan = await rewind(cwd, ['rollback', 'empty', '--dry-run']);
    expect(plan.stdout.split('\n')).toHaveLength(1 + 10 + 1 + 1);
    expect(plan.stdout).toContain('  ... and 5 more (--verbose lists them all)\n');
    const fullPlan = await rewind(cwd, ['rollback', 'empty', '--dry-run', '--verbose']);
    expect(fullPlan.stdout.split('\n')).toHaveLength(1 + 15 + 1);

    const rolled = await rewind(cwd, ['rollback', 'empty']);
    const rollback = /rewind undo (\d+)/.exec(rolled.stdout)?.[1] as string;
    for (let index = 10; index < 25; index++) await writeFile(join(cwd, `f${index}.txt`), 'since');
    const refused = await rewind(cwd, ['undo', rollback]);
    expect(refused.code).toBe(1);
    expect(refused.stdout.split('\n').filter((line) => line.startsWith('  '))).toHaveLength(11);
    expect(refused.stdout).toContain('  ... and 5 more (--verbose lists them all)\n');
    const listed = await rewind(cwd, ['--verbose', 'undo', rollback]);
    expect(listed.stdout.split('\n').filter((line) => line.startsWith('  '))).toHaveLength(15);
  });

  it("lists the first 10 paths of an isolated session's commit plan, all of them with --verbose", async () => {
    const cwd = await makeTempDirectory();
    await rewind(cwd, ['init', '--isolated']);
    await rewind(cwd, ['exec', 'for n in $(seq 10 24); do echo $n > f$n.txt; done']);
    const plan = await rewind(cwd, ['commit', '--dry-run']);
    expect(plan.stdout).toMatch(
      /^Committing would change the workspace: 0 written, 15 created, 0 deleted\.\n( {2}created {2}f\d\d\.txt\n){10} {2}\.\.\. and 5 more \(--verbose lists them all\)\n$/,
    );
    const full = await rewind(cwd, ['commit', '--dry-run', '--verbose']);
    expect(full.stdout.split('\n')).toHaveLength(1 + 15 + 1);
  });

  it('names the first 10 paths a rollback left alone, and counts the rest', async () => {
    const cwd = await makeTempDirectory();
    for (let index = 10; index < 25; index++) await writeFile(join(cwd, `${index}.log`), 'old');
    await rewind(cwd, ['init']);
    await rewind(cwd, ['checkpoint', 'logs']);
    // Ignored now, and changed since: the rollback must not touch them.
    await writeFile(join(cwd, '.rewindignore'), '*.log\n');
    for (let index = 10; index < 25; index++) await writeFile(join(cwd, `${index}.log`), 'new');
    const rolled = await rewind(cwd, ['rollback', 'logs']);
    expect(rolled.stdout).toMatch(
      /; left alone \(left out of snapshots\): (\d\d\.log, ){9}\d\d\.log and 5 more \(--verbose lists them all\)\./,
    );
    await rewind(cwd, ['undo', '--last']);
    await writeFile(join(cwd, '.rewindignore'), '*.log\n');
    const verbose = await rewind(cwd, ['rollback', 'logs', '--verbose']);
    expect(verbose.stdout).toMatch(
      /; left alone \(left out of snapshots\): (\d\d\.log, ){14}\d\d\.log\./,
    );
  });
});
