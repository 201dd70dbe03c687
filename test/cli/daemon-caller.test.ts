// What `rewind daemon` takes from the command that sends it a request, and what it leaves to it:
// real daemons and the real bin (test/helpers/daemons.ts).
import { type ChildProcess, execFileSync, spawn } from 'node:child_process';
import { existsSync, readdirSync, readFileSync, readlinkSync, statSync } from 'node:fs';
import { copyFile, mkdir, readFile, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { describe, expect, it } from 'vitest';
import {
  autoStarted,
  BIN,
  labels,
  pidsIn,
  project,
  rewind,
  startDaemon,
} from '../helpers/daemons.js';
import { ROOT } from '../helpers/processes.js';
import { makeTempDirectory } from '../helpers/temp.js';

const messages = [{ role: 'user', content: 'go' }];

/** Runs `command` in a shell in `cwd`. */
function shell(cwd: string, command: string): Promise<{ code: number | null; stderr: string }> {
  return new Promise((done) => {
    const child = spawn('sh', ['-c', command], { cwd, stdio: ['ignore', 'ignore', 'pipe'] });
    let stderr = '';
    child.stderr.on('data', (chunk: Buffer) => {
      stderr += chunk.toString();
    });
    child.once('close', (code) => done({ code, stderr }));
  });
}

/** The conversation checkpoint `label` recorded (shown with a note at its end). */
const conversationOf = async (workspace: string, label: string): Promise<unknown> =>
  JSON.parse((await rewind(workspace, ['conversation', 'show', label])).stdout).slice(0, 1);

describe('rewind daemon and its callers', () => {
  it("runs a command naming the caller's stdio, a /proc path or a pipe in the caller, not the daemon", async () => {
    const workspace = await project();
    const daemon = await startDaemon(workspace);
    // Its own stdin is /dev/null, whatever it was started with.
    expect(readlinkSync(`/proc/${daemon.child.pid}/fd/0`)).toBe('/dev/null');
    // The caller's stdin (a file, as `< messages.json` gives), however it is named, and through a
    // link to it.
    const stdin = JSON.stringify(messages);
    const outside = await makeTempDirectory();
    await writeFile(join(outside, 'messages.json'), stdin);
    execFileSync('ln', ['-s', '/dev/stdin', join(outside, 'input')]);
    for (const [label, messagesFrom] of [
      ['one', '--messages /dev/stdin'],
      ['two', '--messages=/dev/fd/0'],
      ['three', '--messages /proc/self/fd/0'],
      ['four', `--messages ${join(outside, 'input')}`],
    ] as const) {
      const ran = await shell(
        workspace,
        `node ${BIN} checkpoint ${label} ${messagesFrom} < ${join(outside, 'messages.json')}`,
      );
      expect(ran.code, ran.stderr).toBe(0);
      expect(await conversationOf(workspace, label)).toEqual(messages);
    }
    // A pipe someone writes to as the command reads it.
    const fifo = join(outside, 'fifo');
    execFileSync('mkfifo', [fifo]);
    const writer = spawn('sh', ['-c', `printf '%s' '${stdin}' > ${fifo}`]);
    const written = new Promise((resolve) => writer.once('close', resolve));
    expect((await rewind(workspace, ['checkpoint', 'five', '--messages', fifo])).code).toBe(0);
    await written;
    expect(await conversationOf(workspace, 'five')).toEqual(messages);
    // None of them was the daemon's, which logged each it sent back, and why; a plain command
    // still is.
    expect(daemon.log()).not.toMatch(/checkpoint exit/);
    const why =
      "may name the caller's own stdin, stdout, terminal or process, or a pipe: it runs there";
    expect(daemon.log().match(/^rewind daemon: checkpoint sent back.*$/gm)).toEqual(
      ['/dev/stdin', '--messages=/dev/fd/0', '/proc/self/fd/0', join(outside, 'input'), fifo].map(
        (named) => `rewind daemon: checkpoint sent back to its caller: ${named} ${why}`,
      ),
    );
    await writeFile(join(workspace, 'README.md'), '# app, six\n');
    expect((await rewind(workspace, ['checkpoint', 'six'])).code).toBe(0);
    expect(daemon.log()).toMatch(/^rewind daemon: checkpoint exit 0/m);
    expect(await labels(workspace)).toEqual(['one', 'two', 'three', 'four', 'five', 'six']);
  }, 60_000);

  it("runs a command with its caller's time zone and umask, not the daemon's", async () => {
    const workspace = await project();
    await writeFile(join(workspace, 'messages.json'), JSON.stringify(messages));
    const alone = { REWIND_DAEMON: '0' };
    const base = await rewind(workspace, ['checkpoint', 'base', '--messages', 'messages.json'], {
      env: alone,
    });
    expect(base.code).toBe(0);
    const daemon = await startDaemon(workspace, { ...process.env, TZ: 'UTC' });
    const tokyo = { TZ: 'Asia/Tokyo' };
    const served = await rewind(workspace, ['log'], { env: tokyo });
    expect(served).toEqual(await rewind(workspace, ['log'], { env: { ...tokyo, ...alone } }));
    expect(served.stdout).not.toEqual((await rewind(workspace, ['log'], { env: alone })).stdout);
    const rolled = await shell(
      workspace,
      `umask 077; node ${BIN} rollback base --messages-out out.json`,
    );
    expect(rolled.code, rolled.stderr).toBe(0);
    expect(statSync(join(workspace, 'out.json')).mode & 0o777).toBe(0o600);
    expect(daemon.log()).toMatch(/^rewind daemon: log exit 0/m);
    // --messages-out is the caller's to write: that rollback runs in the caller, with its umask.
    expect(daemon.log()).not.toMatch(/^rewind daemon: rollback exit/m);
    expect(daemon.log()).toMatch(/^rewind daemon: rollback sent back to its caller: /m);
    // The daemon's own are back after each command: its time zone for the next without TZ.
    const utc = await rewind(workspace, ['log'], { env: { ...alone, TZ: 'UTC' } });
    expect((await rewind(workspace, ['log'], { env: { TZ: 'UTC' } })).stdout).toBe(utc.stdout);
  }, 60_000);

  it("creates the files of a command it serves with its caller's umask, then takes its own back", async () => {
    const workspace = await project();
    const daemon = await startDaemon(workspace);
    const umaskOf = (pid: number): number =>
      Number.parseInt(
        /^Umask:\s*([0-7]+)$/m.exec(readFileSync(`/proc/${pid}/status`, 'utf8'))?.[1] as string,
        8,
      );
    const own = umaskOf(daemon.child.pid as number);
    const packs = join(workspace, '.rewind/objects/pack');
    const packFiles = (): string[] => (existsSync(packs) ? readdirSync(packs) : []);
    // A checkpoint stores what is new in a pack, made 0444 less the mask of whoever makes it.
    for (const [label, umask] of [
      ['masked', 0o077],
      ['for-the-group', 0o027],
    ] as const) {
      expect(umask).not.toBe(own);
      await writeFile(join(workspace, `${label}.txt`), `${label}\n`);
      const before = new Set(packFiles());
      const ran = await shell(
        workspace,
        `umask ${umask.toString(8).padStart(3, '0')}; node ${BIN} checkpoint ${label}`,
      );
      expect(ran.code, ran.stderr).toBe(0);
      const made = packFiles().filter((name) => !before.has(name));
      expect(made.length).toBeGreaterThan(0);
      for (const name of made) {
        expect(statSync(join(packs, name)).mode & 0o777, name).toBe(0o444 & ~umask);
      }
      expect(umaskOf(daemon.child.pid as number)).toBe(own);
    }
    // Both were served by the daemon, not run by their callers.
    expect(daemon.log().match(/^rewind daemon: checkpoint exit 0/gm)).toHaveLength(2);
  }, 60_000);

  it("runs a command in its caller when the caller's store settings (AWS_*, PG*, REWIND_*) differ from the daemon's", async () => {
    const workspace = await project();
    const daemon = await startDaemon(workspace, {
      ...process.env,
      AWS_REGION: 'eu-west-1',
      PGHOST: 'db.example',
    });
    const servedCount = () => daemon.log().match(/^rewind daemon: status exit 0/gm)?.length ?? 0;
    // The same settings, or others that do not reach the store: served.
    const same = { AWS_REGION: 'eu-west-1', PGHOST: 'db.example' };
    expect((await rewind(workspace, ['status'], { env: same })).code).toBe(0);
    expect((await rewind(workspace, ['status'], { env: { ...same, EDITOR: 'vi' } })).code).toBe(0);
    expect(servedCount()).toBe(2);
    // Another bucket's region, another database, a variable the daemon lacks, one it has and the
    // caller has not: each runs in the caller, with the caller's settings.
    for (const env of [
      { ...same, AWS_REGION: 'us-east-1' },
      { ...same, PGHOST: 'other.example' },
      { ...same, PGPASSWORD: 'secret', AWS_ACCESS_KEY_ID: 'AKIA' },
      { ...same, REWIND_LEDGER: 'postgres://me@other/db' },
    ]) {
      const ran = await rewind(workspace, ['status'], { env });
      expect(ran.code, JSON.stringify(env)).toBe(0);
      expect(servedCount(), JSON.stringify(env)).toBe(2);
    }
    const without: NodeJS.ProcessEnv = { ...process.env, PGHOST: 'db.example' };
    delete without.AWS_REGION;
    const ran = await new Promise<number | null>((done) =>
      spawn(process.execPath, [BIN, 'status'], {
        cwd: workspace,
        env: without,
        stdio: 'ignore',
      }).once('close', done),
    );
    expect(ran).toBe(0);
    expect(servedCount()).toBe(2);
    // Each logged by the daemon, with the names of the variables (never their values).
    expect(daemon.log().match(/^rewind daemon: status sent back.*$/gm)).toEqual(
      ['AWS_REGION', 'PGHOST', 'AWS_ACCESS_KEY_ID, PGPASSWORD', 'REWIND_LEDGER', 'AWS_REGION'].map(
        (names) =>
          `rewind daemon: status sent back to its caller: the caller's ${names} differ from the daemon's (they choose the store's bucket, database or credentials): it runs there`,
      ),
    );
    expect(daemon.log()).not.toMatch(/secret|AKIA|us-east-1|other\.example|me@other/);
  }, 60_000);

  it("asks a daemon whose socket has the inode of another version's it met before", async () => {
    const workspace = await project();
    const daemon = await startDaemon(workspace);
    // What an earlier daemon of another version left remembered: a socket removed since, whose
    // inode the file system gave to this daemon's socket (as ext4 does with a freed inode).
    const { ino } = statSync(join(workspace, '.rewind/daemon.sock'));
    await writeFile(
      join(workspace, '.rewind/daemon.notice'),
      JSON.stringify({ inode: ino, version: '0.0.9', saidAt: Date.now() - 7_200_000 }),
    );
    const ran = await rewind(workspace, ['status']);
    expect(ran).toMatchObject({ code: 0, stderr: '' });
    expect(daemon.log()).toMatch(/^rewind daemon: status exit 0/m);
  });

  it('leaves a daemon of another version alone, so it idles out, and says so once an hour', async () => {
    const workspace = await project();
    const oldBin = await olderRewind('0.0.9');
    const old = await startDaemon(workspace, process.env, ['--idle-exit', '3'], oldBin);
    const say =
      /^rewind: this workspace's daemon is Rewind 0\.0\.9, this command \S+: commands run in their own process until it stops \(`rewind daemon --replace`/;
    const first = await rewind(workspace, ['checkpoint', 'one']);
    expect(first.code).toBe(0);
    expect(first.stderr).toMatch(say);
    // Not asked again (it idles out), nor said again within the hour.
    for (let index = 0; index < 5; index++) {
      const next = await rewind(workspace, ['status']);
      expect(next).toMatchObject({ code: 0, stderr: '' });
      await sleep(700);
    }
    await ended(old.child);
    expect(old.log()).toMatch(/stopped \(no command for 3 s\)/);
    expect(old.log()).not.toMatch(/exit \d/);
    // With REWIND_DAEMON=auto, one of this version replaces it.
    const again = await startDaemon(workspace, process.env, [], oldBin);
    const auto = { env: { REWIND_DAEMON: 'auto' } };
    const replaced = await rewind(workspace, ['checkpoints'], auto);
    expect(replaced).toMatchObject({ code: 0, stderr: '' }); // said within the hour
    await ended(again.child);
    expect(again.log()).toMatch(/is gone or another's/);
    autoStarted.push(workspace);
    await expect
      .poll(() => readFileSync(join(workspace, '.rewind/daemon.log'), 'utf8'), { timeout: 10_000 })
      .toMatch(/replacing the daemon that served/);
    expect((await rewind(workspace, ['checkpoints'], auto)).code).toBe(0);
    await expect
      .poll(() => readFileSync(join(workspace, '.rewind/daemon.log'), 'utf8'))
      .toMatch(/^rewind daemon: checkpoints exit 0/m);
    // An hour later, said again.
    const notice = join(workspace, '.rewind/daemon.notice');
    const stored = JSON.parse(readFileSync(notice, 'utf8'));
    await writeFile(notice, JSON.stringify({ ...stored, saidAt: Date.now() - 3_601_000 }));
    const replacer = pidsIn(workspace)[0] as number;
    process.kill(replacer, 'SIGKILL');
    await startDaemon(workspace, process.env, [], oldBin);
    expect((await rewind(workspace, ['status'])).stderr).toMatch(say);
  }, 90_000);
});

/** Resolves once `child` has ended (at once if it has). */
const ended = (child: ChildProcess): Promise<unknown> =>
  child.exitCode !== null || child.signalCode !== null
    ? Promise.resolve()
    : new Promise((resolve) => child.once('exit', resolve));

/**
 * A copy of this Rewind that calls itself `version` (its bundle, package.json and bin), as an
 * installation of another version is.
 */
async function olderRewind(version: string): Promise<string> {
  const root = await makeTempDirectory();
  await mkdir(join(root, 'bin'));
  await mkdir(join(root, 'dist/bundle'), { recursive: true });
  await copyFile(BIN, join(root, 'bin/rewind.cjs'));
  const bundle = await readFile(join(ROOT, 'dist/bundle/cli.cjs'), 'latin1');
  const renamed = bundle.replace(/(REWIND_VERSION\s*=\s*)"[^"]+"/, `$1"${version}"`);
  expect(renamed).not.toBe(bundle);
  await writeFile(join(root, 'dist/bundle/cli.cjs'), renamed, 'latin1');
  const manifest = JSON.parse(await readFile(join(ROOT, 'package.json'), 'utf8'));
  await writeFile(join(root, 'package.json'), JSON.stringify({ ...manifest, version }));
  return join(root, 'bin/rewind.cjs');
}
