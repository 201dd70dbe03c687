// `rewind daemon` and the `rewind` command that sends it what it serves: the real bin in real
// processes, in a git repository with what users have in one.
import { spawn } from 'node:child_process';
import { existsSync, readdirSync, readFileSync, realpathSync, statSync } from 'node:fs';
import { appendFile, readFile, rm, symlink, writeFile } from 'node:fs/promises';
import { connect, type Socket } from 'node:net';
import { join } from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { describe, expect, it } from 'vitest';
import { storeEnvironmentOf } from '../../src/cli/daemon-requests.js';
import { REWIND_VERSION } from '../../src/index.js';
import {
  autoStarted,
  BIN,
  isRunning,
  labels,
  pidsIn,
  project,
  rewind,
  startDaemon,
  stopWhileUnlocked,
} from '../helpers/daemons.js';
import { holdLockInChild } from '../helpers/processes.js';
import { makeTempDirectory } from '../helpers/temp.js';
import { lay } from '../helpers/workspace.js';

const realInotifywait = '/usr/bin/inotifywait';
const escaped = (text: string) => text.replace(/[.*+?^${}()|[\]\\]/g, '\\$&');

describe('rewind daemon', () => {
  it('runs the commands it serves with its session open and watching, exactly as they run alone', async () => {
    const workspace = await project();
    const daemon = await startDaemon(workspace);
    // Only its user may talk to it.
    expect(statSync(join(workspace, '.rewind/daemon.sock')).mode & 0o777).toBe(0o600);
    expect(await rewind(workspace, ['checkpoint', 'base'])).toMatchObject({ code: 0 });
    await writeFile(join(workspace, 'src/app.ts'), 'export const answer = 42;\n');
    await appendFile(join(workspace, 'node_modules/left-pad/index.js'), '// ignored\n');
    const fixed = await rewind(join(workspace, 'src'), ['checkpoint', 'fixed']);
    expect(fixed.code).toBe(0);
    expect(fixed.stdout).toMatch(/^Checkpoint fixed \(#\d+\): 3 files/);
    const diff = await rewind(workspace, ['diff', 'base', 'fixed']);
    expect(diff.stdout).toContain('+export const answer = 42;');
    expect(diff.stdout).not.toContain('left-pad');
    // A rollback and its undo, in the daemon too; what git ignores is left alone.
    const rolled = await rewind(workspace, ['rollback', 'base', '--json']);
    expect(rolled.code).toBe(0);
    expect(await readFile(join(workspace, 'src/app.ts'), 'utf8')).toBe(
      'export const answer = 41;\n',
    );
    expect(await readFile(join(workspace, '.env'), 'utf8')).toBe('TOKEN=secret\n');
    const undone = await rewind(workspace, ['undo', String(JSON.parse(rolled.stdout).id)]);
    expect(undone.code).toBe(0);
    expect(await readFile(join(workspace, 'src/app.ts'), 'utf8')).toBe(
      'export const answer = 42;\n',
    );
    // Each served by the daemon, which says so on its stderr.
    await expect
      .poll(() => daemon.log().match(/^rewind daemon: (checkpoint|diff|rollback|undo) exit 0/gm))
      .toHaveLength(5);
    // The same output, for people and in JSON, as the command run alone.
    for (const args of [['checkpoints'], ['--json', 'checkpoints'], ['-q', 'log', '--json']]) {
      const served = await rewind(workspace, args);
      const alone = await rewind(workspace, args, { env: { REWIND_DAEMON: '0' } });
      expect(served).toEqual(alone);
    }
    // Served, global options before the command or not.
    await expect
      .poll(() => daemon.log().match(/^rewind daemon: (checkpoints|log) exit 0/gm))
      .toHaveLength(3);
    // Errors and exit codes come through as they are.
    const again = await rewind(workspace, ['checkpoint', 'fixed']);
    expect(again.code).toBe(1);
    expect(again.stderr).toContain('already has a checkpoint "fixed"');
    const usage = await rewind(workspace, ['rollback']);
    expect(usage.code).toBe(2);
    // What it does not serve (a command that runs another) runs in the command's own process.
    const served = daemon.log();
    expect((await rewind(workspace, ['exec', '--', 'true'])).code).toBe(0);
    // Nor a file to write that may be the caller's own output: sent back, as its log says.
    const planned = ['rollback', 'fixed', '--dry-run', '--messages-out', '/dev/stdout'];
    expect((await rewind(workspace, planned)).code).toBe(0);
    expect(daemon.log()).toBe(
      `${served}rewind daemon: rollback sent back to its caller: it does not serve --messages-out\n`,
    );
    expect(await labels(workspace)).toEqual(['base', 'fixed']);
    // A second daemon for the workspace is refused; SIGTERM stops the first and removes its socket.
    const second = await rewind(workspace, ['daemon']);
    expect(second.code).toBe(2);
    expect(second.stderr).toContain('A daemon already serves');
    daemon.child.kill('SIGTERM');
    await new Promise((resolve) => daemon.child.once('close', resolve));
    expect(daemon.child.exitCode).toBe(0);
    expect(existsSync(join(workspace, '.rewind/daemon.sock'))).toBe(false);
  }, 60_000);

  it('says why it does not watch the workspace where inotifywait is missing, and still serves', async () => {
    const workspace = await project();
    // A PATH with a shell but no inotifywait (nor find: the checkpoints walk).
    const bin = await makeTempDirectory();
    await symlink('/bin/sh', join(bin, 'sh'));
    const daemon = await startDaemon(workspace, { ...process.env, PATH: bin });
    expect(await rewind(workspace, ['checkpoint', 'base'])).toMatchObject({ code: 0 });
    for (let waited = 0; !daemon.log().includes('not watching'); waited += 20) {
      if (waited > 5_000) throw new Error(`not said: ${daemon.log()}`);
      await sleep(20);
    }
    expect(daemon.log()).toContain(
      `not watching ${realpathSync(workspace)} (inotifywait is not installed)`,
    );
    await appendFile(join(workspace, 'src/app.ts'), '// more\n');
    expect(await rewind(workspace, ['checkpoint', 'after'])).toMatchObject({ code: 0 });
    expect(await labels(workspace, { REWIND_DAEMON: '0' })).toEqual(['base', 'after']);
    expect(daemon.log().match(/not watching/g)).toHaveLength(1);
  });

  it('says the watch is retried while inotifywait keeps failing, and when it watches again', async () => {
    const workspace = await project();
    // An inotifywait that fails its first 8 starts, then is the real one.
    const bin = await makeTempDirectory();
    const count = join(bin, 'starts');
    await writeFile(
      join(bin, 'inotifywait'),
      `#!/bin/sh\nn=$(($(cat ${count} 2>/dev/null || echo 0) + 1))\necho $n > ${count}\nif [ $n -le 8 ]; then echo "busy $n" >&2; exit 1; fi\nexec ${realInotifywait} "$@"\n`,
      { mode: 0o755 },
    );
    const daemon = await startDaemon(workspace, {
      ...process.env,
      PATH: `${bin}:${process.env.PATH}`,
    });
    expect(await rewind(workspace, ['checkpoint', 'base'])).toMatchObject({ code: 0 });
    const root = realpathSync(workspace);
    for (let waited = 0; !daemon.log().includes(`watching ${root} again`); waited += 50) {
      if (waited > 40_000) {
        throw new Error(`not said: ${daemon.log()}, starts: ${await readFile(count, 'utf8')}`);
      }
      await sleep(50);
    }
    const said = daemon.log().split('\n');
    const retrying = said.filter((line) => /^rewind daemon: (cannot|not|watching) /.test(line));
    expect(retrying).toEqual([
      expect.stringMatching(
        new RegExp(
          `^rewind daemon: cannot watch ${escaped(root)} yet \\(inotifywait failed 8 times in a row; last: inotifywait could not watch it \\(.*\\)\\): it keeps trying, less and less often \\(at most once a minute\\); meanwhile its checkpoints look at every entry, as without the daemon\\.$`,
        ),
      ),
      `rewind daemon: watching ${root} again: its checkpoints look only at what changed.`,
    ]);
    expect(daemon.log()).not.toContain('not watching');
    expect(await rewind(workspace, ['checkpoint', 'after'])).toMatchObject({ code: 0 });
  }, 90_000);

  it('keeps only the current session open and watching when another becomes current', async () => {
    const workspace = await project();
    const root = realpathSync(workspace);
    /** The processes of watchers of this workspace (inotifywait, and the shell that starts it). */
    const watching = () =>
      readdirSync('/proc')
        .filter((name) => /^\d+$/.test(name))
        .map((pid) => {
          try {
            return readFileSync(`/proc/${pid}/cmdline`, 'utf8');
          } catch {
            return '';
          }
        })
        .filter((line) => line.includes('inotifywait') && line.includes(root)).length;
    const settled = async (count: number) => {
      for (let waited = 0; watching() !== count && waited < 5_000; waited += 20) await sleep(20);
      return watching();
    };
    await startDaemon(workspace);
    expect(await rewind(workspace, ['checkpoint', 'first'])).toMatchObject({ code: 0 });
    const one = watching();
    expect(one).toBeGreaterThan(0);
    expect(await rewind(workspace, ['session', 'new'])).toMatchObject({ code: 0 });
    expect(await rewind(workspace, ['checkpoint', 'second'])).toMatchObject({ code: 0 });
    // The first session's watcher went when the second one's came.
    expect(await settled(one)).toBe(one);
    expect(await labels(workspace, { REWIND_DAEMON: '0' })).toEqual(['second']);
  });

  it('tells the command it serves that it waits for the workspace, as the command alone would', async () => {
    const workspace = await project();
    const daemon = await startDaemon(workspace);
    // Another process takes the workspace (once the daemon's watch has its base).
    const holder = await holdLockInChild(join(workspace, '.rewind/workspace.lock'));
    try {
      await appendFile(join(workspace, 'src/app.ts'), '// more\n');
      const command = spawn(process.execPath, [BIN, 'checkpoint', 'waited'], {
        cwd: workspace,
        stdio: ['ignore', 'pipe', 'pipe'],
      });
      let stderr = '';
      command.stderr.on('data', (chunk: Buffer) => {
        stderr += chunk.toString();
      });
      const exited = new Promise<number | null>((resolve) => command.on('close', resolve));
      await expect.poll(() => stderr, { timeout: 10_000 }).toContain('Waiting for the lock');
      expect(stderr).toContain(`held by process ${holder.pid}`);
      holder.kill('SIGKILL');
      expect(await exited).toBe(0);
      expect(daemon.log()).toMatch(/^rewind daemon: checkpoint exit 0/m);
    } finally {
      holder.kill('SIGKILL');
    }
  }, 30_000);

  it('started while another process holds the workspace, serves what needs no lock at once, and says what waits', async () => {
    const workspace = await project();
    const holder = await holdLockInChild(join(workspace, '.rewind/workspace.lock'));
    try {
      const daemon = await startDaemon(workspace);
      // Its session is not open yet (it waits for the workspace): a status does not wait for it.
      const started = Date.now();
      expect((await rewind(workspace, ['status'])).code).toBe(0);
      expect(Date.now() - started).toBeLessThan(5_000);
      expect(daemon.log()).toMatch(/^rewind daemon: status exit 0/m);
      // A checkpoint waits, and says so, as it would alone.
      const command = spawn(process.execPath, [BIN, 'checkpoint', 'waited'], {
        cwd: workspace,
        stdio: ['ignore', 'pipe', 'pipe'],
      });
      let stderr = '';
      command.stderr.on('data', (chunk: Buffer) => {
        stderr += chunk.toString();
      });
      const exited = new Promise<number | null>((resolve) => command.on('close', resolve));
      await expect.poll(() => stderr, { timeout: 10_000 }).toContain('Waiting for the lock');
      expect(stderr).toContain(`held by process ${holder.pid}`);
      holder.kill('SIGKILL');
      expect(await exited).toBe(0);
      expect(daemon.log()).toMatch(/^rewind daemon: checkpoint exit 0/m);
    } finally {
      holder.kill('SIGKILL');
    }
  }, 60_000);

  it('a rollback the daemon runs on after Ctrl-C is running, not cut short, and then done', async () => {
    const workspace = await project();
    const files = Object.fromEntries(
      Array.from({ length: 2000 }, (_, index) => [`many/f${index}.txt`, `${index}\n`]),
    );
    await lay(workspace, files);
    expect((await rewind(workspace, ['checkpoint', 'start'])).code).toBe(0);
    await rm(join(workspace, 'many'), { recursive: true });
    const daemon = await startDaemon(workspace);
    const sessions = join(workspace, '.rewind/sessions');
    const ledger = (): string =>
      readdirSync(sessions)
        .filter((name) => name.endsWith('.jsonl'))
        .map((name) => readFileSync(join(sessions, name), 'utf8'))
        .join('');
    const command = spawn(process.execPath, [BIN, 'rollback', 'start'], {
      cwd: workspace,
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    let stderr = '';
    command.stderr.on('data', (chunk: Buffer) => {
      stderr += chunk.toString();
    });
    const exited = new Promise<NodeJS.Signals | null>((resolve) =>
      command.on('close', (_code, signal) => resolve(signal)),
    );
    // Frozen once the rollback has begun, so that it is seen midway.
    while (!ledger().includes('"rollback-started"')) await sleep(1);
    daemon.child.kill('SIGSTOP');
    const status = async () =>
      (await rewind(workspace, ['status'], { env: { REWIND_DAEMON: '0' } })).stdout;
    try {
      command.kill('SIGINT');
      expect(await exited).toBe('SIGINT');
      expect(stderr).toMatch(
        /interrupted \(SIGINT\)\. The daemon goes on with the command to its end/,
      );
      const midway = await status();
      expect(midway).not.toMatch(/cut short/);
      expect(midway).toMatch(
        new RegExp(
          `^Running +rollback #\\d+ \\(start\\) in session \\w+: still running in process ${daemon.child.pid}`,
          'm',
        ),
      );
    } finally {
      daemon.child.kill('SIGCONT');
    }
    await expect.poll(status, { timeout: 10_000 }).not.toMatch(/^Running/m);
    expect(await status()).not.toMatch(/cut short/);
    expect(await readFile(join(workspace, 'many/f1999.txt'), 'utf8')).toBe('1999\n');
  }, 60_000);

  it("checkpoints Claude Code's hook events in the daemon, whatever directory the hook runs from", async () => {
    const workspace = await project();
    const daemon = await startDaemon(workspace);
    const elsewhere = await makeTempDirectory();
    const event = JSON.stringify({
      hook_event_name: 'PreToolUse',
      tool_name: 'Bash',
      tool_input: { command: 'npm test' },
      cwd: workspace,
    });
    const hooked = await rewind(elsewhere, ['hook', 'claude-code'], {
      stdin: event,
      env: { CLAUDE_PROJECT_DIR: workspace },
    });
    expect(hooked).toEqual({ code: 0, stdout: '', stderr: '' });
    await expect.poll(() => daemon.log()).toMatch(/^rewind daemon: hook exit 0/m);
    expect(await labels(workspace)).toEqual([expect.stringMatching(/^claude-bash-/)]);
  }, 30_000);

  it('leaves the command to its own process when the daemon is gone, hangs, or is of another version', async () => {
    const workspace = await project();
    // Killed: its socket is left, nobody answers on it.
    const killed = await startDaemon(workspace);
    killed.child.kill('SIGKILL');
    await new Promise((resolve) => killed.child.once('close', resolve));
    expect(existsSync(join(workspace, '.rewind/daemon.sock'))).toBe(true);
    expect((await rewind(workspace, ['checkpoint', 'one'])).code).toBe(0);
    // A new daemon takes the socket over.
    const daemon = await startDaemon(workspace);
    // Once it has opened its session (a command waits for that), it is stopped: stopped while
    // it holds the workspace's lock, it would keep every command waiting, as a stopped command does.
    expect((await rewind(workspace, ['checkpoints'])).code).toBe(0);
    expect(daemon.log()).toMatch(/^rewind daemon: checkpoints exit 0/m);
    // Stopped (SIGSTOP): after 2 s the command runs alone, and the daemon, once it goes on,
    // does not run it a second time.
    await stopWhileUnlocked(daemon.child, workspace);
    await appendFile(join(workspace, 'README.md'), 'more\n');
    const started = Date.now();
    const alone = await rewind(workspace, ['checkpoint', 'two']);
    expect(alone.code).toBe(0);
    expect(Date.now() - started).toBeGreaterThan(1_900);
    daemon.child.kill('SIGCONT');
    await sleep(500);
    expect(daemon.log()).not.toMatch(/checkpoint exit/);
    expect(await labels(workspace)).toEqual(['one', 'two']);
    // Another version of Rewind: sent back, not run.
    const answer = await new Promise<string>((resolve, reject) => {
      const socket = connect(join(workspace, '.rewind/daemon.sock'));
      let text = '';
      socket.setEncoding('utf8');
      socket.on('data', (chunk: string) => {
        text += chunk;
      });
      socket.on('end', () => resolve(text));
      socket.on('error', reject);
      socket.write(
        `${JSON.stringify({ v: 1, version: '0.0.1', argv: ['checkpoint', 'three'], cwd: workspace, env: {} })}\n`,
      );
    });
    expect(JSON.parse(answer)).toEqual({
      fallback: expect.stringContaining('the command 0.0.1'),
    });
    expect(await labels(workspace)).toEqual(['one', 'two']);
  }, 60_000);

  it('sends back a request line that is not a request, and goes on serving', async () => {
    const workspace = await project();
    const daemon = await startDaemon(workspace);
    // What a client of another make, or a damaged one, could send: each is answered, at once.
    const ask = (line: string): Promise<string> =>
      new Promise((resolve, reject) => {
        const socket = connect(join(workspace, '.rewind/daemon.sock'));
        let text = '';
        socket.setEncoding('utf8');
        socket.on('data', (chunk: string) => {
          text += chunk;
          // One that accepted it would wait for the go: say it, to see what it does then.
          if (text === '{"accepted":true}\n') socket.write('{"go":true}\n');
        });
        socket.on('close', () => resolve(text));
        socket.on('error', reject);
        socket.write(`${line}\n`);
        setTimeout(() => resolve(`no end: ${text}`), 5_000).unref();
      });
    const current = { v: 1, version: REWIND_VERSION, cwd: workspace, env: {} };
    for (const line of [
      'null',
      JSON.stringify({ ...current }),
      JSON.stringify({ ...current, argv: ['status', 7] }),
      JSON.stringify({ ...current, argv: ['status'], cwd: 3 }),
      JSON.stringify({ ...current, argv: ['status'], cwd: 'relative/dir' }),
      JSON.stringify({ ...current, argv: ['status'], stdin: 5 }),
    ]) {
      expect({ line, answer: await ask(line) }).toEqual({
        line,
        answer: '{"fallback":"the request is not one this daemon reads"}\n',
      });
    }
    expect(daemon.child.exitCode).toBe(null);
    // Each in its log, as sent back.
    expect(
      daemon.log().match(/^rewind daemon: (a request|status) sent back to its caller: .*$/gm),
    ).toEqual([
      ...Array(2).fill(
        'rewind daemon: a request sent back to its caller: the request is not one this daemon reads',
      ),
      ...Array(4).fill(
        'rewind daemon: status sent back to its caller: the request is not one this daemon reads',
      ),
    ]);
    expect((await rewind(workspace, ['status'])).code).toBe(0);
    expect(daemon.log()).toMatch(/^rewind daemon: status exit 0/m);
  }, 60_000);

  it('with REWIND_DAEMON=auto, a command that finds no daemon starts one for the next commands', async () => {
    const workspace = await project();
    autoStarted.push(workspace);
    const auto = { env: { REWIND_DAEMON: 'auto' } };
    const log = () => readFileSync(join(workspace, '.rewind/daemon.log'), 'utf8');
    // The first command runs in its own process, and leaves a daemon behind it.
    expect((await rewind(workspace, ['checkpoint', 'one'], auto)).code).toBe(0);
    await expect.poll(() => existsSync(join(workspace, '.rewind/daemon.log'))).toBe(true);
    await expect.poll(log, { timeout: 10_000 }).toMatch(/stops after 1800 s without a command/);
    const [pid] = pidsIn(workspace);
    await appendFile(join(workspace, 'src/app.ts'), '// two\n');
    expect((await rewind(join(workspace, 'src'), ['checkpoint', 'two'], auto)).code).toBe(0);
    expect(log()).toMatch(/^rewind daemon: checkpoint exit 0/m);
    expect(await labels(workspace)).toEqual(['one', 'two']);
    // Killed, it leaves its socket: the next command runs here and starts another.
    process.kill(pid as number, 'SIGKILL');
    await expect.poll(() => isRunning(pid as number)).toBe(false);
    expect(existsSync(join(workspace, '.rewind/daemon.sock'))).toBe(true);
    expect((await rewind(workspace, ['checkpoint', 'three'], auto)).code).toBe(0);
    await expect.poll(() => pidsIn(workspace).length, { timeout: 10_000 }).toBe(2);
    expect(await labels(workspace)).toEqual(['one', 'two', 'three']);
    // Without auto, or for a command the daemon does not serve, none is started.
    const bare = await project();
    autoStarted.push(bare);
    expect((await rewind(bare, ['checkpoint', 'one'])).code).toBe(0);
    expect((await rewind(bare, ['exec', '--', 'true'], auto)).code).toBe(0);
    await sleep(500);
    expect(existsSync(join(bare, '.rewind/daemon.log'))).toBe(false);
  }, 60_000);

  it('with REWIND_DAEMON=auto, a hook starts the daemon of its own project, not of a store above it', async () => {
    const parent = await project();
    const sub = join(parent, 'sub');
    await lay(sub, { 'a.txt': 'a' });
    autoStarted.push(parent, sub);
    const env = { REWIND_DAEMON: 'auto', CLAUDE_PROJECT_DIR: sub };
    const stdin = JSON.stringify({ hook_event_name: 'UserPromptSubmit', prompt: 'x', cwd: sub });
    // The first event creates the project's store (here), the next starts its daemon.
    expect((await rewind(parent, ['hook', 'claude-code'], { stdin, env })).code).toBe(0);
    expect(existsSync(join(sub, '.rewind'))).toBe(true);
    expect((await rewind(parent, ['hook', 'claude-code'], { stdin, env })).code).toBe(0);
    await expect.poll(() => pidsIn(sub).length, { timeout: 10_000 }).toBe(1);
    expect(existsSync(join(parent, '.rewind/daemon.log'))).toBe(false);
  }, 30_000);

  it('moves a daemon log past 1 MiB aside before a daemon it starts writes to it', async () => {
    const workspace = await project();
    autoStarted.push(workspace);
    const old = `rewind daemon: an old line\n`.repeat(40_000);
    await writeFile(join(workspace, '.rewind/daemon.log'), old);
    await writeFile(join(workspace, '.rewind/daemon.log.1'), 'older\n');
    expect((await rewind(workspace, ['status'], { env: { REWIND_DAEMON: 'auto' } })).code).toBe(0);
    await expect.poll(() => pidsIn(workspace).length, { timeout: 10_000 }).toBe(1);
    expect(readFileSync(join(workspace, '.rewind/daemon.log.1'), 'utf8')).toBe(old);
    expect(readFileSync(join(workspace, '.rewind/daemon.log'), 'utf8')).toMatch(
      /^rewind daemon: serving /,
    );
  }, 30_000);

  it('two commands that start a daemon at once leave one serving', async () => {
    const workspace = await project();
    autoStarted.push(workspace);
    const auto = { env: { REWIND_DAEMON: 'auto' } };
    const ran = await Promise.all([
      rewind(workspace, ['status'], auto),
      rewind(workspace, ['log'], auto),
      rewind(workspace, ['checkpoints'], auto),
    ]);
    expect(ran.map(({ code }) => code)).toEqual([0, 0, 0]);
    // Those that found the socket taken say so and stop; one that lost its socket to another
    // started at the same moment stops at its next check (every 10 s).
    await expect
      .poll(() => pidsIn(workspace).filter(isRunning).length, { timeout: 15_000, interval: 200 })
      .toBe(1);
    const served = await rewind(workspace, ['checkpoints'], auto);
    expect(served.code).toBe(0);
    await expect
      .poll(() => readFileSync(join(workspace, '.rewind/daemon.log'), 'utf8'))
      .toMatch(/^rewind daemon: checkpoints exit 0/m);
  }, 60_000);

  it('a daemon that stops leaves the socket of one started meanwhile: each listens on its own', async () => {
    const workspace = await project();
    const store = join(workspace, '.rewind');
    const socket = join(store, 'daemon.sock');
    const ownOf = (daemon: { child: { pid?: number } }) =>
      join(store, `daemon-${daemon.child.pid}.sock`);
    const first = await startDaemon(workspace);
    // Published as daemon.sock: a hard link to its own.
    expect(statSync(socket).ino).toBe(statSync(ownOf(first)).ino);
    // The name taken from it (as by a daemon that found it stale), a second daemon publishes its
    // own; the first then stops (SIGTERM, or idle) and leaves the name to the second.
    await rm(socket);
    const second = await startDaemon(workspace);
    first.child.kill('SIGTERM');
    await new Promise((resolve) => first.child.once('close', resolve));
    expect(existsSync(ownOf(first))).toBe(false);
    expect(statSync(socket).ino).toBe(statSync(ownOf(second)).ino);
    expect((await rewind(workspace, ['status'])).code).toBe(0);
    await expect.poll(() => second.log()).toMatch(/^rewind daemon: status exit 0/m);
    // Killed, a daemon leaves its sockets: the next takes the name over and removes them.
    second.child.kill('SIGKILL');
    await new Promise((resolve) => second.child.once('close', resolve));
    const third = await startDaemon(workspace);
    expect(
      readdirSync(store)
        .filter((name) => name.includes('.sock'))
        .sort(),
    ).toEqual([`daemon-${third.child.pid}.sock`, 'daemon.sock']);
    expect(statSync(socket).ino).toBe(statSync(ownOf(third)).ino);
  }, 60_000);

  it('stops on SIGHUP as on SIGTERM: exit 0, its socket removed, and says why', async () => {
    const workspace = await project();
    const daemon = await startDaemon(workspace);
    expect((await rewind(workspace, ['status'])).code).toBe(0);
    daemon.child.kill('SIGHUP');
    await new Promise((resolve) => daemon.child.once('close', resolve));
    expect(daemon.child.exitCode).toBe(0);
    expect(daemon.log()).toMatch(
      /^rewind daemon: SIGHUP: stopping once the command it runs is done$/m,
    );
    expect(daemon.log()).toMatch(/^rewind daemon: stopped \(SIGHUP\)$/m);
    expect(
      readdirSync(join(workspace, '.rewind')).filter((name) => name.includes('.sock')),
    ).toEqual([]);
  }, 30_000);

  it('stops after --idle-exit seconds without a command, or once its socket is gone', async () => {
    const workspace = await project();
    const idle = await startDaemon(workspace, process.env, ['--idle-exit', '1']);
    await new Promise((resolve) => idle.child.once('close', resolve));
    expect(idle.child.exitCode).toBe(0);
    expect(idle.log()).toMatch(/stopped \(no command for 1 s\)/);
    expect(existsSync(join(workspace, '.rewind/daemon.sock'))).toBe(false);
    // A command keeps it up: idle means no command for that long.
    const busy = await startDaemon(workspace, process.env, ['--idle-exit', '2']);
    for (let index = 0; index < 4; index++) {
      expect((await rewind(workspace, ['status'])).code).toBe(0);
      await sleep(700);
    }
    expect(busy.child.exitCode).toBe(null);
    await new Promise((resolve) => busy.child.once('close', resolve));
    // Its socket removed (the store deleted, say): nobody can reach it, so it stops.
    const orphan = await startDaemon(workspace, process.env, ['--idle-exit', '3']);
    await rm(join(workspace, '.rewind/daemon.sock'));
    await new Promise((resolve) => orphan.child.once('close', resolve));
    expect(orphan.log()).toMatch(/stopped \(its socket .* is gone or another's\)/);
    for (const value of ['0', 'soon']) {
      const refused = await rewind(workspace, ['daemon', '--idle-exit', value]);
      expect(refused.code).toBe(2);
      expect(refused.stderr).toContain(
        `--idle-exit takes a number of seconds above 0, not "${value}"`,
      );
    }
  }, 60_000);

  it('stops when idle although callers keep connecting without a command it runs', async () => {
    const workspace = await project();
    const daemon = await startDaemon(workspace, process.env, ['--idle-exit', '1']);
    const started = Date.now();
    const socketPath = join(workspace, '.rewind/daemon.sock');
    const stale = JSON.stringify({
      v: 1,
      version: '0.0.1',
      argv: ['status'],
      cwd: workspace,
      env: {},
      isTerminal: false,
      isErrorTerminal: false,
    });
    // Every 200 ms, until it stops: one connection closed at once, one that sends a request it
    // sends back (another version's), closed once it answered.
    const once = (sent?: string): Promise<void> =>
      new Promise((done) => {
        const socket = connect(socketPath);
        socket.on('error', () => done());
        socket.on('close', () => done());
        socket.on('connect', () => {
          if (sent === undefined) socket.destroy();
          else socket.write(`${sent}\n`);
        });
        socket.on('data', () => socket.destroy());
      });
    let isStopped = false;
    daemon.child.once('close', () => {
      isStopped = true;
    });
    let connections = 0;
    while (!isStopped && Date.now() - started < 10_000) {
      await Promise.all([once(), once(stale)]);
      connections += 2;
      await sleep(200);
    }
    expect(connections).toBeGreaterThanOrEqual(4);
    // Before, each connection put off its idle time: it never stopped.
    expect(isStopped).toBe(true);
    expect(Date.now() - started).toBeLessThan(8_000);
    expect(daemon.child.exitCode).toBe(0);
    expect(daemon.log()).toMatch(/stopped \(no command for 1 s\)/);
    expect(daemon.log()).toMatch(/^rewind daemon: status sent back to its caller: the daemon is/m);
  }, 30_000);

  it('closes a connection that sends no request, or no go, within 5 s, so it still stops when idle, and serves meanwhile', async () => {
    const workspace = await project();
    const daemon = await startDaemon(workspace, process.env, ['--idle-exit', '2']);
    const started = Date.now();
    const sockets: Socket[] = [];
    // Each sends `sent` and keeps its end open, after the daemon ended its own too: resolves with
    // what it heard once the daemon ended, and when.
    const hold = (sent: string): Promise<{ heard: string; endedMs: number }> =>
      new Promise((resolve, reject) => {
        const socket = connect({
          path: join(workspace, '.rewind/daemon.sock'),
          allowHalfOpen: true,
        });
        sockets.push(socket);
        let heard = '';
        socket.setEncoding('utf8');
        socket.on('data', (chunk: string) => {
          heard += chunk;
        });
        socket.on('end', () => resolve({ heard, endedMs: Date.now() - started }));
        socket.on('error', reject);
        socket.write(sent);
      });
    const request = {
      v: 1,
      version: REWIND_VERSION,
      argv: ['checkpoint', 'never'],
      cwd: workspace,
      env: {},
      isTerminal: false,
      isErrorTerminal: false,
      storeEnv: storeEnvironmentOf(process.env),
    };
    const held = Promise.all([
      hold(''),
      hold('{"v":1,'),
      hold(`${JSON.stringify(request)}\n`),
      hold(`${JSON.stringify({ ...request, version: '0.0.1' })}\n`),
    ]);
    try {
      // A caller meanwhile is served at once.
      expect((await rewind(workspace, ['checkpoints'])).code).toBe(0);
      expect(daemon.log()).toMatch(/^rewind daemon: checkpoints exit 0/m);
      // Before, it never stopped: none of them was ever closed.
      const stopped = await Promise.race([
        new Promise((resolve) => daemon.child.once('close', () => resolve('stopped'))),
        sleep(15_000).then(() => 'still serving after 15 s'),
      ]);
      expect(stopped).toBe('stopped');
      expect(Date.now() - started).toBeGreaterThan(5_000);
      expect(daemon.child.exitCode).toBe(0);
      expect(daemon.log()).toMatch(/stopped \(no command for 2 s\)/);
      const [silent, partial, noGo, sentBack] = await held;
      // Closed after 5 s of silence, and said in the log.
      for (const unasked of [silent, partial]) {
        expect(unasked?.heard).toBe('');
        expect(unasked?.endedMs).toBeGreaterThanOrEqual(4_500);
      }
      expect(daemon.log()).toMatch(
        /^rewind daemon: closed a connection that sent no request within 5 s$/m,
      );
      // Accepted, but with no go the command is not run: it goes back to its caller.
      expect(noGo?.heard).toBe(
        '{"accepted":true}\n{"fallback":"the caller said no go within 5 s: it runs there"}\n',
      );
      expect(noGo?.endedMs).toBeGreaterThanOrEqual(4_500);
      expect(daemon.log()).not.toMatch(/checkpoint exit/);
      expect(await labels(workspace)).toEqual([]);
      // Sent back at once (another version): its caller, which kept its end open, held it no longer.
      expect(sentBack?.heard).toMatch(/^\{"fallback":"the daemon is Rewind .*\}\n$/);
      expect(sentBack?.endedMs).toBeLessThan(4_500);
    } finally {
      for (const socket of sockets) socket.destroy();
    }
  }, 60_000);
});
