import { spawn } from 'node:child_process';
import { mkdir, readFile, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { rewind as run } from '../helpers/cli.js';
import { ROOT, runNode } from '../helpers/processes.js';
import { makeTempDirectory } from '../helpers/temp.js';

const rewind = (cwd: string, ...argv: string[]) => run(cwd, argv);

describe('rewind CLI', () => {
  it('initializes a directory, then logs, notes, verifies and collects garbage in it', async () => {
    const cwd = await makeTempDirectory();
    const initialized = await rewind(cwd, 'init', '--hash-chain');
    expect(initialized).toMatchObject({ code: 0, stderr: '' });
    expect(initialized.stdout).toMatch(
      /^Initialized a Rewind store in .*\nStarted session [0-9a-z]+ \(hash-chained\)\.\nThe first checkpoint will take 0 files, 0 B\.\n$/,
    );

    const evidence = join(cwd, 'build.log');
    await writeFile(evidence, 'all green\n');
    expect(await rewind(cwd, 'note', 'build', 'passed', '--attach', 'build.log')).toMatchObject({
      code: 0,
    });

    const logged = await rewind(cwd, 'log');
    expect(logged.code).toBe(0);
    const lines = logged.stdout.trimEnd().split('\n');
    expect(lines[0]).toMatch(/^Session [0-9a-z]+: 2 entries$/);
    expect(lines[1]).toMatch(
      /^1 {2}\d{4}-\d\d-\d\d \d\d:\d\d:\d\d\.\d{3} {2}session-started {2}session started in /,
    );
    expect(lines[2]).toMatch(/^2 {2}.* note-added {7}note: build passed \(1 attachment\)$/);

    expect(await rewind(cwd, 'verify')).toMatchObject({
      code: 0,
      stdout: expect.stringContaining('no problems'),
    });
    expect(await rewind(cwd, 'gc', '--dry-run')).toMatchObject({
      code: 0,
      stdout: expect.stringContaining('Would remove 0 unreferenced objects'),
    });
  });

  it('finds the store in an ancestor directory, or uses --dir', async () => {
    const workspace = await makeTempDirectory();
    await rewind(workspace, 'init');
    const deep = join(workspace, 'a', 'b');
    await mkdir(deep, { recursive: true });
    expect((await rewind(deep, 'status')).stdout).toContain(`Workspace  ${workspace}`);
    const elsewhere = await makeTempDirectory();
    expect((await rewind(elsewhere, '--dir', workspace, 'status')).code).toBe(0);
    expect(await rewind(elsewhere, 'status')).toMatchObject({
      code: 1,
      stderr: expect.stringContaining('rewind init'),
    });
  });

  it('prints exactly one JSON document on stdout with --json, errors included', async () => {
    const cwd = await makeTempDirectory();
    const initialized = await rewind(cwd, '--json', 'init');
    expect(JSON.parse(initialized.stdout)).toMatchObject({
      isNewStore: true,
      session: { entryCount: 1 },
    });
    const status = await rewind(cwd, 'status', '--json');
    expect(JSON.parse(status.stdout)).toMatchObject({
      sessions: [{ entryCount: 1 }],
      objects: { count: 0 },
    });
    const failed = await rewind(cwd, '--json', 'log', '--session', 'nosuch');
    expect(failed.code).toBe(1);
    expect(JSON.parse(failed.stdout)).toMatchObject({ error: { code: 'SESSION_NOT_FOUND' } });
    const misused = await rewind(cwd, '--json', 'rollback');
    expect(misused.code).toBe(2);
    expect(JSON.parse(misused.stdout)).toMatchObject({
      error: {
        code: 'USAGE',
        message: expect.stringContaining("missing required argument 'label'"),
      },
    });
  });

  it('says which session options init could not apply to a store that has a session already', async () => {
    const cwd = await makeTempDirectory();
    expect(await rewind(cwd, '--json', 'init', '--sandbox', 'none', '--network')).toMatchObject({
      code: 0,
      stderr: '',
      stdout: expect.stringContaining('"ignoredOptions": []'),
    });
    // The same init again changes nothing and has nothing to say: a script may run it every time.
    expect(await rewind(cwd, 'init', '--sandbox', 'none', '--network')).toMatchObject({
      code: 0,
      stdout: expect.stringContaining('nothing changed'),
      stderr: '',
    });
    const again = await rewind(cwd, 'init', '--hash-chain', '--sandbox', 'auto');
    expect(again.code).toBe(0);
    expect(again.stdout).toContain('nothing changed');
    expect(again.stderr).toMatch(
      /^rewind: warning: --hash-chain and --sandbox auto shape a session as it starts, and this store has one already: its current session \w+ keeps how it was started \(no hash chain, no sandbox\); nothing changed\.\n/,
    );
    expect(again.stderr).toContain(
      '`rewind init --isolated --sandbox auto` starts a new, isolated session',
    );
    expect(again.stderr).toContain(
      '`rewind session new --hash-chain` starts a new, hash-chained session.',
    );
    expect(again.stderr).not.toContain('first session');
    const json = await rewind(cwd, '--json', 'init', '--hash-chain');
    expect(JSON.parse(json.stdout)).toMatchObject({
      isNewStore: false,
      ignoredOptions: ['hashChain'],
    });

    const isolated = await rewind(cwd, 'init', '--isolated', '--sandbox', 'none', '--hash-chain');
    expect(isolated.stdout).toMatch(/^Rewind store already in .*\.\nStarted isolated session /);
    // --hash-chain chains the isolated session it starts: nothing was left out.
    expect(isolated.stdout).toMatch(/Started isolated session \w+ \(hash-chained\)/);
    expect(isolated.stderr).toBe('');
  });

  it('exits 2 with usage help on a usage error, and 1 with code and advice on a refusal', async () => {
    const cwd = await makeTempDirectory();
    expect(await rewind(cwd, 'frobnicate')).toMatchObject({
      code: 2,
      stderr: expect.stringContaining("unknown command 'frobnicate'"),
    });
    expect(await rewind(cwd, 'gc', '--grace-seconds', 'soon')).toMatchObject({ code: 2 });
    expect(await rewind(cwd, 'note')).toMatchObject({ code: 2 });
    await mkdir(join(cwd, '.rewind'));
    await writeFile(join(cwd, '.rewind', 'x'), '');
    const refused = await rewind(cwd, 'init');
    expect(refused.code).toBe(1);
    expect(refused.stderr).toMatch(
      /^rewind: .* is not a Rewind store .* move it aside.* \[STORE_NOT_OURS\]\n$/,
    );
  });

  it("refuses a value outside an input's choices, and lists them in every help, top-level and nested", async () => {
    // The choices come from the operation's schema, made only for the command that runs.
    const cwd = await makeTempDirectory();
    const refused = await rewind(cwd, 'rollback', 'x', '--scope', 'bogus');
    expect(refused.code).toBe(2);
    expect(refused.stderr).toContain(
      "option '--scope <what>' argument 'bogus' is invalid. Allowed choices are both, files, conversation.",
    );
    const nested = await rewind(cwd, 'session', 'new', '--sandbox', 'docker');
    expect(nested.code).toBe(2);
    expect(nested.stderr).toContain('Allowed choices are');
    for (const asked of [
      ['help', 'rollback'],
      ['rollback', '--help'],
    ]) {
      const help = await rewind(cwd, ...asked);
      expect(help.code, asked.join(' ')).toBe(0);
      expect(help.stdout.replace(/\s+/g, ' '), asked.join(' ')).toContain(
        '(choices: "both", "files", "conversation"',
      );
    }
  });

  it('adds the stack and cause chain with --debug', async () => {
    const cwd = await makeTempDirectory();
    await rewind(cwd, 'init');
    const failed = await rewind(cwd, '--debug', 'note', 'x', '--attach', 'missing.txt');
    expect(failed.code).toBe(1);
    expect(failed.stderr).toContain('[INVALID_ARGUMENT]');
    expect(failed.stderr).toContain('caused by:');
    expect(failed.stderr).toContain('ENOENT');
  });

  it('fails verify with exit 1 and names the first chain break', async () => {
    const cwd = await makeTempDirectory();
    await rewind(cwd, 'init', '--hash-chain');
    await rewind(cwd, 'note', 'one');
    await rewind(cwd, 'note', 'two');
    const status = JSON.parse((await rewind(cwd, 'status', '--json')).stdout);
    const file = status.sessions[0].file as string;
    await writeFile(
      file,
      (await readFile(file, 'utf8')).replace('note: one', 'x').replace('"one"', '"uno"'),
    );
    const verified = await rewind(cwd, 'verify');
    expect(verified.code).toBe(1);
    expect(verified.stdout).toContain('The hash chain first breaks at entry #3');
  });

  it('prints only what was asked for with --quiet', async () => {
    const cwd = await makeTempDirectory();
    expect(await rewind(cwd, '--quiet', 'init')).toMatchObject({ code: 0, stdout: '', stderr: '' });
    expect(await rewind(cwd, '-q', 'verify')).toMatchObject({ code: 0, stdout: '' });
  });

  it('runs as the installed bin, with the exit codes of the contract', async () => {
    const cwd = await makeTempDirectory();
    const bin = join(ROOT, 'bin', 'rewind.cjs');
    expect(await runNode([bin, 'init'], { cwd })).toMatchObject({ code: 0 });
    expect(await runNode([bin, 'log'], { cwd })).toMatchObject({
      code: 0,
      stdout: expect.stringContaining('session-started'),
    });
    expect(await runNode([bin, '--version'], { cwd })).toMatchObject({
      code: 0,
      stdout: '0.1.0\n',
    });
    expect(await runNode([bin, 'nonsense'], { cwd })).toMatchObject({ code: 2 });
    expect(await runNode([bin, 'log', '--session', 'zzzz'], { cwd })).toMatchObject({ code: 1 });
  });

  it('ends quietly, with its own exit code, when the reader of its output goes away early', async () => {
    const cwd = await makeTempDirectory();
    const bin = join(ROOT, 'bin', 'rewind.cjs');
    await rewind(cwd, 'init');
    await writeFile(join(cwd, 'a.txt'), 'one');
    await rewind(cwd, 'checkpoint', 'base');
    await writeFile(join(cwd, 'a.txt'), 'two');
    for (const argv of [['log'], ['rollback', 'base', '--dry-run'], ['exec', 'echo hi; exit 3']]) {
      const child = spawn(process.execPath, [bin, ...argv], {
        cwd,
        stdio: ['ignore', 'pipe', 'pipe'],
      });
      // Closed before the child writes a byte, as `| head -1` does once it has its line.
      child.stdout.destroy();
      let stderr = '';
      child.stderr.on('data', (chunk: Buffer) => {
        stderr += chunk.toString();
      });
      const code = await new Promise((done) => child.on('close', done));
      expect({ code, stderr }, argv.join(' ')).toEqual({
        code: argv[0] === 'exec' ? 3 : 0,
        stderr: '',
      });
    }
  });

  it('lists mcp in its help, and prints the MCP usage on stdout with exit 0 when asked for', async () => {
    const cwd = await makeTempDirectory();
    const bin = join(ROOT, 'bin', 'rewind.cjs');
    const help = await runNode([bin, '--help'], { cwd });
    expect(help).toMatchObject({ code: 0 });
    expect(help.stdout).toMatch(/\n {2}mcp +serve Rewind's tools to an agent over MCP/);
    for (const argv of [
      ['mcp', '--help'],
      ['mcp', '-h'],
      ['help', 'mcp'],
    ]) {
      expect(await runNode([bin, ...argv], { cwd }), argv.join(' ')).toMatchObject({
        code: 0,
        stdout: expect.stringMatching(/^Usage: rewind mcp \[--root DIR\]/),
        stderr: '',
      });
    }
    const mistaken = await runNode([bin, 'mcp', '--bogus'], { cwd });
    expect(mistaken).toMatchObject({ code: 2, stdout: '' });
    expect(mistaken.stderr).toContain('rewind mcp --help');
    expect(await runNode([bin, 'mcp', '--sandbox', 'nope'], { cwd })).toMatchObject({
      code: 2,
      stdout: '',
      stderr: expect.stringContaining('Usage: rewind mcp'),
    });
    // Global options come before a command; the server has its own and would never see them.
    expect(await rewind(cwd, '--dir', cwd, 'mcp', '--root', cwd)).toMatchObject({
      code: 2,
      stderr: expect.stringContaining('The MCP server takes only its own options'),
    });
  });

  it('checkpoints, lists, dry-runs, rolls back, diffs and undoes from the command line', async () => {
    const cwd = await makeTempDirectory();
    await writeFile(join(cwd, 'app.js'), 'console.log(1);\n');
    await rewind(cwd, 'init');
    expect(await rewind(cwd, 'diff')).toMatchObject({
      code: 1,
      stderr: expect.stringContaining('has no checkpoint yet. Create one with `rewind checkpoint'),
    });
    expect(await rewind(cwd, 'checkpoint', 'base')).toMatchObject({
      code: 0,
      stdout: expect.stringMatching(
        /^Checkpoint base \(#2\): 1 file, 16 B; 1 added, 0 modified, 0 deleted/,
      ),
    });
    await writeFile(join(cwd, 'app.js'), 'console.log(2);\n');
    await writeFile(join(cwd, 'notes.txt'), 'unsaved\n');
    const listed = await rewind(cwd, 'checkpoints');
    expect(listed.stdout).toMatch(
      /^LABEL +SEQ +TIME +CHANGED SINCE PREVIOUS\nbase +2 .* \+1 ~0 -0 files\n$/,
    );

    const planned = await rewind(cwd, 'rollback', 'base', '--dry-run');
    expect(planned.stdout).toContain('written  app.js   (never recorded by this session');
    expect(planned.stdout).toContain('deleted  notes.txt');
    expect(await readFile(join(cwd, 'app.js'), 'utf8')).toBe('console.log(2);\n');

    const diffed = await rewind(cwd, 'diff', 'base');
    expect(diffed.stdout).toContain('-console.log(1);\n+console.log(2);');
    // Alone, since the newest checkpoint.
    expect(await rewind(cwd, 'diff')).toEqual(diffed);

    const rolled = await rewind(cwd, 'rollback', 'base');
    expect(rolled.stdout).toContain(
      'Rolled back to base: 1 written, 0 created, 1 deleted. The previous state is saved: `rewind undo 3`',
    );
    expect(await readFile(join(cwd, 'app.js'), 'utf8')).toBe('console.log(1);\n');

    expect((await rewind(cwd, 'undo', '3')).stdout).toContain('Undid #3');
    expect(await readFile(join(cwd, 'notes.txt'), 'utf8')).toBe('unsaved\n');
  });

  it('reports a refused undo with exit 1 and the paths that block it', async () => {
    const cwd = await makeTempDirectory();
    await writeFile(join(cwd, 'a.txt'), 'a');
    await rewind(cwd, 'init');
    await rewind(cwd, 'checkpoint', 'base');
    await writeFile(join(cwd, 'a.txt'), 'b');
    await rewind(cwd, 'rollback', 'base');
    await writeFile(join(cwd, 'a.txt'), 'edited since');
    const refused = await rewind(cwd, 'undo', '3');
    expect(refused.code).toBe(1);
    expect(refused.stdout).toContain('Refused to undo #3: 1 path it changed has been edited since');
    expect(refused.stdout).toContain('  a.txt');
    expect(await readFile(join(cwd, 'a.txt'), 'utf8')).toBe('edited since');
  });

  it('gives clear errors for a bad label, an unknown checkpoint and a malformed action id', async () => {
    const cwd = await makeTempDirectory();
    await rewind(cwd, 'init');
    expect(await rewind(cwd, 'checkpoint', 'a/b')).toMatchObject({
      code: 1,
      stderr: expect.stringContaining('[INVALID_ARGUMENT]'),
    });
    expect(await rewind(cwd, 'rollback', 'nowhere')).toMatchObject({
      code: 1,
      stderr: expect.stringContaining('[CHECKPOINT_NOT_FOUND]'),
    });
    expect(await rewind(cwd, 'undo', 'x1')).toMatchObject({ code: 2 });
    await writeFile(join(cwd, 'file.txt'), 'x');
    expect(await rewind(cwd, '--dir', 'file.txt', 'checkpoints')).toMatchObject({
      code: 1,
      stderr: expect.stringMatching(/file\.txt is a file, not a directory.*\[WORKSPACE_INVALID\]/),
    });
  });
});
