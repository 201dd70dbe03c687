import { existsSync } from 'node:fs';
import { chmod, chown, mkdir, mkdtemp, readFile, rm, stat, writeFile } from 'node:fs/promises';
import { createServer, type Server } from 'node:net';
import { join } from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { afterEach, describe, expect, it } from 'vitest';
import {
  bwrapArgs,
  createSandbox,
  probeBwrap,
  type RunResult,
  type Sandbox,
} from '../../src/sandbox/index.js';
import { sandboxWorkspace } from '../helpers/nobody.js';
import { makeTempDirectory } from '../helpers/temp.js';

const servers: Server[] = [];
afterEach(async () => {
  await Promise.all(servers.splice(0).map((server) => new Promise((done) => server.close(done))));
});

/** A workspace with a store, run as root owned by an unprivileged user (as Rewind requires). */
function workspaceWithStore(): Promise<string> {
  return sandboxWorkspace({
    '.rewind/secret.txt': 'store content',
    'visible.txt': 'workspace content',
  });
}

const isRoot = process.getuid?.() === 0;

const text = (buffer: Buffer): string => buffer.toString('utf8');

describe('bwrapArgs', () => {
  it('builds the sandbox argv: read-only system, writable workspace, hidden store, no network, no capabilities', () => {
    const args = bwrapArgs({
      workspace: '/w',
      cwd: '/w/src',
      command: ['npm', 'test'],
      env: { PATH: '/usr/bin', HOME: '/tmp' },
      hidden: ['.rewind'],
      network: false,
    });
    const joined = args.join(' ');
    expect(args.slice(0, 3)).toEqual(['--ro-bind', '/', '/']);
    expect(joined).toContain('--bind /w /w');
    expect(joined).toContain('--tmpfs /w/.rewind --remount-ro /w/.rewind');
    expect(joined).toContain('--tmpfs /tmp');
    for (const flag of [
      '--unshare-user',
      '--unshare-pid',
      '--unshare-ipc',
      '--unshare-uts',
      '--unshare-net',
      '--die-with-parent',
      '--new-session',
      '--clearenv',
    ]) {
      expect(args).toContain(flag);
    }
    expect(joined).toContain('--uid 1000 --gid 1000');
    expect(joined).toContain('--cap-drop ALL');
    expect(joined).toContain('--setenv PATH /usr/bin --setenv HOME /tmp');
    expect(args.slice(-5)).toEqual(['--chdir', '/w/src', '--', 'npm', 'test']);
    // The workspace bind comes after the read-only root, and the store is hidden after both.
    expect(args.indexOf('--bind')).toBeGreaterThan(args.indexOf('--ro-bind'));
    expect(args.lastIndexOf('--tmpfs')).toBeGreaterThan(args.indexOf('--bind'));
    expect(
      bwrapArgs({
        workspace: '/w',
        cwd: '/w',
        command: ['true'],
        env: {},
        hidden: [],
        network: true,
      }),
    ).not.toContain('--unshare-net');
  });

  it('mounts the workspace where asked, with no mask for what that mount covers', () => {
    const args = bwrapArgs({
      workspace: '/w/.rewind/views/s/tree',
      cwd: '/w/sub',
      command: ['true'],
      env: {},
      hidden: ['.rewind'],
      network: false,
      masked: ['/w/.rewind', '/elsewhere'],
      mountAt: '/w',
    }).join(' ');
    expect(args).toContain('--bind /w/.rewind/views/s/tree /w ');
    expect(args).not.toContain('--tmpfs /w/.rewind --tmpfs');
    expect(args).not.toContain('--tmpfs /w/.rewind --bind');
    expect(args).toContain('--tmpfs /elsewhere --bind');
    expect(args).toContain('--remount-ro /elsewhere');
    expect(args).toContain('--tmpfs /w/.rewind --remount-ro /w/.rewind');
    expect(args).toContain('--chdir /w/sub');
  });
});

describe.runIf(probeBwrap().works)('the bwrap sandbox', () => {
  let sandbox: Sandbox;
  const make = async (network = false) => {
    const workspace = await workspaceWithStore();
    sandbox = createSandbox({ backend: 'bwrap', workspace, network });
    return workspace;
  };

  it('can write in the workspace; a write outside it leaves the host file unchanged', async () => {
    const workspace = await make();
    const outside = join(await makeTempDirectory(), 'host.txt');
    await writeFile(outside, 'host');
    const result = await sandbox.run(
      `echo inside > made.txt; echo pwned > ${outside}; echo root > /etc/rewind-test`,
    );
    expect(await readFile(join(workspace, 'made.txt'), 'utf8')).toBe('inside\n');
    expect(await readFile(outside, 'utf8')).toBe('host');
    expect(existsSync('/etc/rewind-test')).toBe(false);
    expect(text(result.stderr)).toContain('Read-only file system');
  });

  it('can read the workspace; .rewind cannot be read or written', async () => {
    const workspace = await make();
    const result = await sandbox.run(
      'cat visible.txt; cat .rewind/secret.txt; echo x > .rewind/new.txt; ls -A .rewind | wc -l',
    );
    expect(text(result.stdout)).toContain('workspace content');
    expect(text(result.stdout)).not.toContain('store content');
    expect(text(result.stdout).trim().endsWith('0')).toBe(true);
    expect(existsSync(join(workspace, '.rewind', 'new.txt'))).toBe(false);
    expect(await readFile(join(workspace, '.rewind', 'secret.txt'), 'utf8')).toBe('store content');
  });

  it('cannot reach a server on the host loopback; can when the network is allowed', async () => {
    const server = createServer((socket) => socket.end('hello'));
    servers.push(server);
    await new Promise<void>((done) => server.listen(0, '127.0.0.1', done));
    const port = (server.address() as { port: number }).port;
    const probe = `node -e "require('net').connect(${port},'127.0.0.1').on('data',d=>{console.log('got '+d);process.exit(0)}).on('error',e=>{console.log(e.code);process.exit(3)})"`;
    await make(false);
    const blocked = await sandbox.run(probe, { timeoutMs: 10_000 });
    expect(text(blocked.stdout)).toMatch(/ECONNREFUSED|ENETUNREACH/);
    await make(true);
    const allowed = await sandbox.run(probe, { timeoutMs: 10_000 });
    expect(text(allowed.stdout)).toContain('got hello');
  });

  it('ends every process at the timeout, even children that ignore SIGTERM; they run until then', async () => {
    const workspace = await make();
    const started = Date.now();
    const result = await sandbox.run(
      `trap '' TERM; (trap '' TERM; while true; do date +%s%N > beat.txt; sleep 0.05; done) & sleep 60`,
      { timeoutMs: 500 },
    );
    expect(result.timedOut).toBe(true);
    expect(Date.now() - started).toBeLessThan(10_000);
    const last = (await stat(join(workspace, 'beat.txt'))).mtimeMs;
    await sleep(400);
    expect((await stat(join(workspace, 'beat.txt'))).mtimeMs).toBe(last);
  });

  it('holds no host secrets in its environment; sees what the caller passes; runs unprivileged', async () => {
    await make();
    process.env.REWIND_TEST_TOKEN = 'hunter2';
    try {
      const result = await sandbox.run('env; id -u; grep CapEff /proc/self/status', {
        env: { GIVEN: 'yes' },
      });
      const out = text(result.stdout);
      expect(out).not.toContain('hunter2');
      expect(out).toContain('GIVEN=yes');
      expect(out).toMatch(/^1000$/m);
      expect(out).toMatch(/CapEff:\s+0+$/m);
    } finally {
      delete process.env.REWIND_TEST_TOKEN;
    }
  });

  it('gives the command a usable TMPDIR and HOME, and USER and LOGNAME of the uid it runs as', async () => {
    await make();
    const saved = {
      TMPDIR: process.env.TMPDIR,
      USER: process.env.USER,
      LOGNAME: process.env.LOGNAME,
    };
    process.env.TMPDIR = '/var/tmp';
    process.env.USER = 'host-person';
    process.env.LOGNAME = 'host-person';
    try {
      const result = await sandbox.run(
        // biome-ignore lint/suspicious/noTemplateCurlyInString: shell parameter expansion
        'mktemp >/dev/null && echo made; touch "$HOME/h" && echo home; echo "T=$TMPDIR U=${USER-unset} L=${LOGNAME-unset} I=$(id -un 2>/dev/null || echo unset)"',
      );
      const out = text(result.stdout);
      expect(out).toContain('made\n');
      expect(out).toContain('home\n');
      expect(out).toContain('T=/tmp ');
      expect(out).not.toContain('host-person');
      const [, user, logname, name] = /U=(\S+) L=(\S+) I=(\S+)/.exec(out) ?? [];
      expect(user).toBe(name);
      expect(logname).toBe(name);
      // What the caller passes still wins.
      const given = await sandbox.run('echo "$TMPDIR"', { env: { TMPDIR: '/tmp/given' } });
      expect(text(given.stdout)).toBe('/tmp/given\n');
    } finally {
      for (const [name, value] of Object.entries(saved)) {
        if (value === undefined) delete process.env[name];
        else process.env[name] = value;
      }
    }
  });

  it('caps output and reports the same shape on failure', async () => {
    await make();
    const result = await sandbox.run('head -c 100000 /dev/zero; exit 7', { maxOutputBytes: 1000 });
    expect(result).toMatchObject({ exitCode: 7, timedOut: false, stdoutTruncated: true });
    expect(result.stdout.length).toBe(1000);
  });
});

describe.runIf(isRoot && probeBwrap().works)('the bwrap sandbox run as root', () => {
  it('runs commands as the workspace owner in a user namespace: no root file can be read, nothing made is root', async () => {
    const workspace = await workspaceWithStore();
    const owner = (await stat(workspace)).uid;
    // Outside /tmp, which the sandbox replaces: a directory anyone may enter, a file only root reads.
    const directory = await mkdtemp('/var/tmp/rewind-test-');
    const secret = join(directory, 'root-only.txt');
    let result: RunResult;
    try {
      await chmod(directory, 0o755);
      await writeFile(secret, 'root secret');
      await chmod(secret, 0o600);
      const sandbox = createSandbox({ backend: 'bwrap', workspace });
      result = await sandbox.run(
        `cat ${secret}; head -c 20 /etc/shadow; id -u; touch made.txt; grep CapEff /proc/self/status`,
      );
    } finally {
      await rm(directory, { recursive: true, force: true });
    }
    const out = text(result.stdout);
    expect(out).not.toContain('root secret');
    expect(out).not.toMatch(/^root:/m);
    expect(text(result.stderr)).toMatch(/cat: .*root-only.txt: Permission denied/);
    expect(text(result.stderr)).toMatch(/\/etc\/shadow.*Permission denied/);
    expect(out).toMatch(/^1000$/m);
    expect(out).toMatch(/CapEff:\s+0+$/m);
    // The sandbox's uid 1000 is the workspace's owner on the host, not root.
    expect((await stat(join(workspace, 'made.txt'))).uid).toBe(owner);
    expect(owner).not.toBe(0);
  });

  it('refuses a workspace owned by root, saying why and how to fix it; auto falls back to none with that reason', async () => {
    const workspace = await makeTempDirectory();
    expect(() => createSandbox({ backend: 'bwrap', workspace })).toThrow(
      expect.objectContaining({
        code: 'SANDBOX_UNAVAILABLE',
        message: expect.stringMatching(
          /Rewind runs as root and the workspace .* belongs to root, so a sandboxed command would be root on the host.*chown -R USER: DIRECTORY/,
        ),
      }),
    );
    const fallback = createSandbox({ backend: 'auto', workspace });
    expect(fallback.backend).toBe('none');
    expect(fallback.warnings[0]).toMatch(
      /^Commands run without a sandbox \(Rewind runs as root and the workspace .* belongs to root/,
    );
  });

  it('refuses a workspace its owner cannot reach, saying so', async () => {
    const closed = await makeTempDirectory();
    await chmod(closed, 0o700);
    const workspace = join(closed, 'ws');
    await mkdir(workspace);
    await chown(workspace, 65534, 65534);
    expect(() => createSandbox({ backend: 'bwrap', workspace })).toThrow(
      expect.objectContaining({
        code: 'SANDBOX_UNAVAILABLE',
        message: expect.stringContaining(
          "sandboxed commands run as the workspace's owner (uid 65534), who cannot reach the workspace",
        ),
      }),
    );
  });
});

describe('choosing a backend', () => {
  it('refuses bwrap when it cannot start, saying why; auto falls back to none with a warning', async () => {
    const workspace = await workspaceWithStore();
    expect(() =>
      createSandbox({ backend: 'bwrap', workspace, bwrap: '/nonexistent/bwrap' }),
    ).toThrow(
      expect.objectContaining({
        code: 'SANDBOX_UNAVAILABLE',
        message: expect.stringContaining('apt-get install bubblewrap'),
      }),
    );
    const fallback = createSandbox({ backend: 'auto', workspace, bwrap: '/nonexistent/bwrap' });
    expect(fallback.backend).toBe('none');
    expect(fallback.warnings[0]).toContain('without a sandbox');
    const result = await fallback.run('cat .rewind/secret.txt');
    // The none backend isolates nothing: what the warning says.
    expect(text(result.stdout)).toBe('store content');
  });
});
