// Real servers for the tests and benchmarks of the remote backends, started in temporary
// directories on random loopback ports: PostgreSQL from Debian's package (initdb, pg_ctl) and
// s3rver, an S3-compatible server that runs in Node.
import { execFileSync, spawn } from 'node:child_process';
import { existsSync, readdirSync } from 'node:fs';
import { chown, mkdtemp, rm, writeFile } from 'node:fs/promises';
import { connect, createServer } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import S3rver from 's3rver';

/** Where Debian puts PostgreSQL's programs (not on PATH), else PATH. */
function postgresBinary(name) {
  const root = '/usr/lib/postgresql';
  if (existsSync(root)) {
    for (const version of readdirSync(root).sort().reverse()) {
      const path = join(root, version, 'bin', name);
      if (existsSync(path)) return path;
    }
  }
  return name;
}

function freePort() {
  return new Promise((resolve, reject) => {
    const server = createServer();
    server.listen(0, '127.0.0.1', () => {
      const { port } = server.address();
      server.close(() => resolve(port));
    });
    server.on('error', reject);
  });
}

/**
 * Starts a fresh PostgreSQL: initdb with password authentication (scram-sha-256) for the
 * superuser `rewind`, then pg_ctl start. As root it runs as the `postgres` user, which PostgreSQL
 * requires. `fsync` is on unless `durable` is false.
 */
export async function startPostgres({ durable = true } = {}) {
  const directory = await mkdtemp(join(tmpdir(), 'rewind-postgres-'));
  const data = join(directory, 'data');
  const password = 'rewind-test-password';
  await writeFile(join(directory, 'password'), `${password}\n`);
  const asRoot = process.getuid?.() === 0;
  if (asRoot) {
    const id = (flag) =>
      Number(execFileSync('id', [flag, 'postgres'], { encoding: 'utf8' }).trim());
    await chown(directory, id('-u'), id('-g'));
    await chown(join(directory, 'password'), id('-u'), id('-g'));
  }
  const run = (name, args) =>
    execFileSync(
      asRoot ? 'runuser' : postgresBinary(name),
      asRoot ? ['-u', 'postgres', '--', postgresBinary(name), ...args] : args,
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
  const options = `-p ${port} -k ${directory} -c listen_addresses=127.0.0.1${durable ? '' : ' -c fsync=off'}`;
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

/** Resolves once something accepts connections on `port`. */
async function untilListening(port) {
  for (let attempt = 0; attempt < 200; attempt++) {
    const isUp = await new Promise((resolve) => {
      const socket = connect(port, '127.0.0.1', () => {
        socket.end();
        resolve(true);
      });
      socket.on('error', () => resolve(false));
    });
    if (isUp) return;
    await new Promise((resolve) => setTimeout(resolve, 50));
  }
  throw new Error(`nothing listens on port ${port}`);
}

/**
 * Starts s3rver with one bucket; `client` is the AWS SDK configuration that reaches it. In this
 * process by default; with `process: true` in a process of its own (as a real server runs: a
 * benchmark must not share its event loop with the client). Only a server in a process of its
 * own lists more than 1,000 keys (the second page needs OpenSSL's legacy provider, which a
 * process enables only when it starts: `--openssl-legacy-provider`).
 */
export async function startS3Server(bucket = 'rewind-test', options = {}) {
  const directory = await mkdtemp(join(tmpdir(), 'rewind-s3rver-'));
  let port;
  let stop;
  let restart = async () => {
    throw new Error('only a server in a process of its own restarts');
  };
  if (options.process) {
    port = await freePort();
    const launch = async () => {
      const started = spawn(
        process.execPath,
        [
          // s3rver encrypts a listing's continuation token with DES, which OpenSSL 3 (Node 17
          // and later) keeps in its legacy provider: without it a listing of more than 1,000
          // keys is answered 500 (ERR_OSSL_EVP_UNSUPPORTED).
          '--openssl-legacy-provider',
          fileURLToPath(import.meta.resolve('s3rver/bin/s3rver.js')),
          '--directory',
          directory,
          '--address',
          '127.0.0.1',
          '--port',
          String(port),
          '--configure-bucket',
          bucket,
          '--silent',
        ],
        { stdio: 'ignore' },
      );
      await untilListening(port);
      return started;
    };
    let child = await launch();
    stop = () =>
      new Promise((resolve) => {
        child.once('exit', resolve);
        child.kill();
      });
    restart = async () => {
      await stop();
      child = await launch();
    };
  } else {
    const server = new S3rver({
      port: 0,
      address: '127.0.0.1',
      directory,
      silent: true,
      configureBuckets: [{ name: bucket }],
    });
    ({ port } = await server.run());
    stop = () => server.close();
  }
  const endpoint = `http://127.0.0.1:${port}`;
  return {
    endpoint,
    bucket,
    directory,
    client: {
      endpoint,
      region: 'us-east-1',
      credentials: { accessKeyId: 'S3RVER', secretAccessKey: 'S3RVER' },
    },
    // The SDK's standard way, for code that makes its own client (a store from its config).
    environment: {
      AWS_ENDPOINT_URL_S3: endpoint,
      AWS_REGION: 'us-east-1',
      AWS_ACCESS_KEY_ID: 'S3RVER',
      AWS_SECRET_ACCESS_KEY: 'S3RVER',
      AWS_SDK_JS_NODE_VERSION_SUPPORT_WARNING_DISABLED: 'true',
    },
    restart,
    close: async () => {
      await stop();
      await rm(directory, { recursive: true, force: true });
    },
  };
}
