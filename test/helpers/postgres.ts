import { execFileSync } from 'node:child_process';
import { existsSync, readdirSync } from 'node:fs';
import { chown, mkdtemp, rm, writeFile } from 'node:fs/promises';
import { createServer } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';

/** A PostgreSQL server of Debian's package, in a temporary directory, on a random loopback port. */
export interface PostgresServer {
  /** A URL with the superuser's name and password. */
  url: string;
  /** The same server with a wrong password. */
  wrongPasswordUrl: string;
  /** Stops the server and starts it again on the same port (a restart mid-session). */
  restart(): void;
  stop(): Promise<void>;
}

/** Where Debian puts the server's programs (not on PATH), else PATH. */
function binary(name: string): string {
  const root = '/usr/lib/postgresql';
  if (existsSync(root)) {
    for (const version of readdirSync(root).sort().reverse()) {
      const path = join(root, version, 'bin', name);
      if (existsSync(path)) return path;
    }
  }
  return name;
}

async function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const server = createServer();
    server.listen(0, '127.0.0.1', () => {
      const { port } = server.address() as { port: number };
      server.close(() => resolve(port));
    });
    server.on('error', reject);
  });
}

/**
 * Starts a fresh server: initdb with password authentication (scram-sha-256) for the superuser
 * `rewind`, then pg_ctl start. As root, it runs as the `postgres` user, which PostgreSQL requires.
 */
export async function startPostgres(): Promise<PostgresServer> {
  const directory = await mkdtemp(join(tmpdir(), 'rewind-postgres-'));
  const data = join(directory, 'data');
  const password = 'rewind-test-password';
  await writeFile(join(directory, 'password'), `${password}\n`);
  const asRoot = process.getuid?.() === 0;
  if (asRoot) {
    const uid = Number(execFileSync('id', ['-u', 'postgres'], { encoding: 'utf8' }).trim());
    const gid = Number(execFileSync('id', ['-g', 'postgres'], { encoding: 'utf8' }).trim());
    await chown(directory, uid, gid);
    await chown(join(directory, 'password'), uid, gid);
  }
  const run = (name: string, args: string[]) =>
    execFileSync(
      asRoot ? 'runuser' : binary(name),
      asRoot ? ['-u', 'postgres', '--', binary(name), ...args] : args,
      { stdio: 'pipe', cwd: directory },
    );
  run('initdb', [
    '-D',
    data,
    '-U',
    'rewind',
    '--auth=scram-sha-256',
    `--pwfile=${join(directory, 'password')}`,
    '--no-sync',
  ]);
  const port = await freePort();
  const options = `-p ${port} -k ${directory} -c listen_addresses=127.0.0.1 -c fsync=off`;
  const start = () =>
    run('pg_ctl', ['-D', data, '-o', options, '-l', join(directory, 'log'), '-w', 'start']);
  start();
  return {
    url: `postgres://rewind:${password}@127.0.0.1:${port}/postgres`,
    wrongPasswordUrl: `postgres://rewind:wrong@127.0.0.1:${port}/postgres`,
    restart: () => {
      run('pg_ctl', ['-D', data, '-m', 'fast', '-w', 'stop']);
      start();
    },
    stop: async () => {
      try {
        run('pg_ctl', ['-D', data, '-m', 'fast', '-w', 'stop']);
      } finally {
        await rm(directory, { recursive: true, force: true });
      }
    },
  };
}
