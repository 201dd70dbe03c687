#!/usr/bin/env node
// CommonJS, not a module: Node starts a CommonJS entry point without its ES module loader, about
// 4 ms sooner on every command (docs/performance.md). The modules only the bundle's loading needs
// are required there, after the daemon was asked.
const { createRequire } = require('node:module');
const { existsSync, mkdirSync, readFileSync, renameSync, writeFileSync } = require('node:fs');
const { dirname, join, resolve } = require('node:path');

const argv = process.argv.slice(2);

// Output is written with writeSync, not through process.stdout and process.stderr: making those
// streams loads Node's stream machinery (and for a terminal its net stack), a few milliseconds of
// every command's start (docs/performance.md). On Linux the streams write synchronously anyway.
// A reader that stops early (`rewind log | head -1`) closes the pipe. Node ignores SIGPIPE, so
// the write fails with EPIPE instead: the rest of the output is dropped, quietly, as git does,
// and the command finishes and exits with its own code (what it did happened either way).
// Any other failure to write (`rewind diff > /dev/full`: ENOSPC; EIO, EBADF...) drops the rest
// of the output too, and the command finishes, then says so in one line and exits 1.
/** The first error writing to stdout other than EPIPE, said at exit. */
let outputError;
/** The descriptors whose writes failed: the rest of their output is dropped. */
const failedOutputs = new Set();
/** Waits a moment, for a pipe opened non-blocking that its reader has not emptied yet. */
const pause = () => Atomics.wait(new Int32Array(new SharedArrayBuffer(4)), 0, 0, 2);

/** Writes `text` (a string or bytes) to descriptor `fd` (1 or 2), whole, as said above. */
function writeOut(fd, text) {
  if (failedOutputs.has(fd)) return;
  const bytes = typeof text === 'string' ? Buffer.from(text) : text;
  for (let at = 0; at < bytes.length; ) {
    try {
      at += require('node:fs').writeSync(fd, bytes, at, bytes.length - at);
    } catch (error) {
      if (error.code === 'EAGAIN') {
        pause();
        continue;
      }
      failedOutputs.add(fd);
      if (error.code !== 'EPIPE' && fd === 1) outputError ??= error;
      return;
    }
  }
}

/**
 * For `mcp` and `ui`, which write through process.stdout and process.stderr: the same rule for
 * their failed writes (an error event, after the write returned).
 */
function watchStreamErrors() {
  for (const stream of [process.stdout, process.stderr]) {
    stream.on('error', (error) => {
      if (error.code !== 'EPIPE' && stream === process.stdout) outputError ??= error;
    });
  }
}

/**
 * Whether descriptor `fd` is a terminal. On Linux, from the file /proc says it is: Node's tty
 * module, which process.stdout.isTTY loads, brings its net stack with it. Where that does not
 * tell (no /proc, a device of another name), by the tty module.
 */
function isTerminal(fd) {
  let target;
  try {
    target = require('node:fs').readlinkSync(`/proc/self/fd/${fd}`);
  } catch {}
  if (target !== undefined) {
    if (/^\/dev\/(pts\/|tty|console$)/.test(target)) return true;
    if (/^(pipe|socket|anon_inode):/.test(target) || target === '/dev/null') return false;
    if (!target.startsWith('/dev/')) return false; // a file
  }
  return require('node:tty').isatty(fd);
}

// Said at exit, once the command has finished (for mcp and ui, the error event of a failed write
// comes after the write returned).
process.on('exit', () => {
  if (outputError === undefined) return;
  const reason = (outputError.message ?? '').replace(/^[A-Z]+: /, '').replace(/, write$/, '');
  const named = outputError.code ? `${reason} (${outputError.code})` : reason;
  try {
    require('node:fs').writeSync(
      2,
      `rewind: could not write the output to stdout: ${named}; the output is incomplete.\n`,
    );
  } catch {}
  if (!process.exitCode) process.exitCode = 1;
});

/**
 * Starts `rewind daemon` for the workspace at `directory` in the background (REWIND_DAEMON=auto,
 * when none answers there): on its own, its output in .rewind/daemon.log, stopping after 30
 * minutes without a command. The command that started it runs here; the next ones go to it.
 */
function startDaemon(directory, ...options) {
  const store = join(directory, '.rewind');
  // A path too long for a Unix socket cannot have a daemon (src/cli/daemon.ts says so): it
  // listens on daemon-PID.sock, a pid of at most 7 digits.
  if (Buffer.byteLength(join(store, 'daemon-4194304.sock')) > 107) return;
  try {
    const { closeSync, openSync, statSync } = require('node:fs');
    const logPath = join(store, 'daemon.log');
    // Kept short: past 1 MiB, the log so far becomes daemon.log.1 (replacing the one before).
    if ((statSync(logPath, { throwIfNoEntry: false })?.size ?? 0) > 1024 * 1024) {
      renameSync(logPath, `${logPath}.1`);
    }
    const log = openSync(logPath, 'a', 0o600);
    try {
      const child = require('node:child_process').spawn(
        process.execPath,
        [__filename, 'daemon', '--idle-exit', '1800', ...options],
        {
          cwd: directory,
          detached: true,
          stdio: ['ignore', log, log],
          env: { ...process.env, REWIND_DAEMON: '0' },
        },
      );
      child.on('error', () => {});
      child.unref();
    } finally {
      closeSync(log);
    }
  } catch {
    // Only a shortcut for the commands after this one: this one runs here either way.
  }
}

/**
 * Runs the command in the workspace's daemon (`rewind daemon`, src/cli/daemon.ts) when one
 * answers and serves it: its sessions are open and watching, so a checkpoint costs what changed,
 * not a walk. Resolves with the exit code, or undefined to run the command here (no daemon,
 * REWIND_DAEMON=0, a command it does not serve, a daemon that does not answer within 2 s). With
 * REWIND_DAEMON=auto, where no daemon is there to answer, it starts one for the next commands.
 */
async function runInDaemon() {
  // The commands src/cli/daemon.ts serves (SERVED there).
  const served = ['checkpoint', 'checkpoints', 'diff', 'hook', 'log', 'rollback', 'status', 'undo'];
  // The first word that is not an option (`rewind -q checkpoint x`), as the daemon finds it.
  const command = argv.find((arg) => !arg.startsWith('-'));
  if (process.env.REWIND_DAEMON === '0' || !served.includes(command)) return undefined;
  // The workspace as the command finds it: the nearest directory holding .rewind/ from the
  // current directory; for a hook, its project itself (--root, else $CLAUDE_PROJECT_DIR; Claude
  // Code runs hooks from anywhere), where the hook creates a store if there is none: never a
  // store above it. A hook whose project has no store yet runs here and creates it.
  let directory;
  if (command === 'hook') {
    const at = argv.findIndex((arg) => arg === '--root' || arg.startsWith('--root='));
    const root =
      at === -1 ? undefined : argv[at].startsWith('--root=') ? argv[at].slice(7) : argv[at + 1];
    const project = root ?? process.env.CLAUDE_PROJECT_DIR;
    if (!project || !existsSync(join(resolve(project), '.rewind'))) return undefined;
    directory = resolve(project);
  } else {
    directory = resolve('.');
    while (!existsSync(join(directory, '.rewind'))) {
      if (dirname(directory) === directory) return undefined;
      directory = dirname(directory);
    }
  }
  const socketPath = join(directory, '.rewind', 'daemon.sock');
  const isAuto = process.env.REWIND_DAEMON === 'auto';
  // A daemon is known by its socket's inode and change time: the socket of one started later
  // may get the inode of one removed before (another version's, met and remembered).
  const socketStats = require('node:fs').statSync(socketPath, {
    throwIfNoEntry: false,
    bigint: true,
  });
  const socketInode = socketStats && `${socketStats.ino}:${socketStats.ctimeNs}`;
  if (socketInode === undefined) {
    if (isAuto) startDaemon(directory);
    return undefined;
  }
  // A daemon of another version, met before: not asked again, so that it idles out.
  const version = JSON.parse(readFileSync(join(__dirname, '..', 'package.json'), 'utf8')).version;
  const noticePath = join(directory, '.rewind', 'daemon.notice');
  let notice;
  try {
    notice = JSON.parse(readFileSync(noticePath, 'utf8'));
  } catch {}
  if (notice?.inode === socketInode) {
    sayOtherVersion(noticePath, notice, version, isAuto, false);
    return undefined;
  }
  if (command === 'hook') {
    const chunks = [];
    for await (const chunk of process.stdin) chunks.push(chunk);
    readStdin = Buffer.concat(chunks);
  }
  const request = {
    v: 1,
    version,
    argv,
    cwd: process.cwd(),
    // What a served command reads of the environment (PASSED_ENV in src/cli/daemon.ts).
    env: Object.fromEntries(
      ['NO_COLOR', 'FORCE_COLOR', 'CLAUDE_PROJECT_DIR', 'TZ']
        .filter((name) => process.env[name] !== undefined)
        .map((name) => [name, process.env[name]]),
    ),
    isTerminal: isTerminal(1),
    isErrorTerminal: isTerminal(2),
    // Applied by the daemon for this command: the files it creates get this process's modes.
    umask: process.umask(),
    // The digests of what chooses the store (storeEnvironmentOf in src/cli/daemon-requests.ts,
    // the same rule): where they differ from the daemon's, the command runs here.
    storeEnv: Object.fromEntries(
      Object.entries(process.env)
        .filter(
          ([name, value]) =>
            value !== undefined &&
            (/^(AWS_|PG)/.test(name) ||
              ['REWIND_OBJECTS', 'REWIND_LEDGER', 'REWIND_PROGRAM_SHELLS'].includes(name)),
        )
        .map(([name, value]) => [
          name,
          require('node:crypto').createHash('sha256').update(value).digest('hex'),
        ]),
    ),
    ...(readStdin && { stdin: readStdin.toString('base64') }),
  };
  const { connect } = require('node:net');
  return new Promise((done) => {
    let isAccepted = false;
    let isSettled = false;
    const settle = (code) => {
      if (isSettled) return;
      isSettled = true;
      clearTimeout(timer);
      socket.destroy();
      done(code);
    };
    const socket = connect(socketPath);
    const timer = setTimeout(() => settle(undefined), 2000);
    socket.setEncoding('utf8');
    socket.on('connect', () => socket.write(`${JSON.stringify(request)}\n`));
    let buffered = '';
    socket.on('data', (text) => {
      buffered += text;
      for (let end = buffered.indexOf('\n'); end !== -1; end = buffered.indexOf('\n')) {
        const message = JSON.parse(buffered.slice(0, end));
        buffered = buffered.slice(end + 1);
        if (message.accepted) {
          // Committed: from here the daemon runs it, however long it takes.
          isAccepted = true;
          clearTimeout(timer);
          sayWhenInterruptedServed();
          socket.write('{"go":true}\n');
        } else if (message.stdout !== undefined) writeOut(1, message.stdout);
        else if (message.stderr !== undefined) writeOut(2, message.stderr);
        else if (message.stdoutBytes !== undefined)
          writeOut(1, Buffer.from(message.stdoutBytes, 'base64'));
        else if (message.stderrBytes !== undefined)
          writeOut(2, Buffer.from(message.stderrBytes, 'base64'));
        else if (message.exit !== undefined) settle(message.exit);
        else if (message.fallback !== undefined) {
          // Another version's daemon (src/cli/daemon-requests.ts words it so): remembered, so it
          // is not asked again, and with REWIND_DAEMON=auto replaced by one of this version.
          const other = /^the daemon is Rewind (\S+), the command/.exec(message.fallback)?.[1];
          if (other !== undefined && other !== version) {
            sayOtherVersion(
              noticePath,
              { saidAt: notice?.saidAt, inode: socketInode, version: other },
              version,
              isAuto,
              true,
            );
            if (isAuto) startDaemon(directory, '--replace');
          }
          settle(undefined);
        }
      }
    });
    const lost = () => {
      if (isSettled) return;
      if (!isAccepted) return settle(undefined);
      writeOut(
        2,
        'rewind: the daemon stopped before the command finished; it may have run. See `rewind log`, and run it again if need be (REWIND_DAEMON=0 runs it here).\n',
      );
      settle(1);
    };
    socket.on('error', (error) => {
      // A socket left by a daemon that was killed: nobody listens on it.
      if (isAuto && !isAccepted && error.code === 'ECONNREFUSED') startDaemon(directory);
      lost();
    });
    socket.on('close', lost);
  });
}

/**
 * Says, at most once an hour, that the workspace's daemon is of another version of Rewind (as
 * after an upgrade), and remembers it in .rewind/daemon.notice: `{ inode, version, saidAt }`, the
 * inode and change time of the daemon's socket (`INODE:CTIME_NS`). Commands run in their own
 * process meanwhile.
 */
function sayOtherVersion(noticePath, notice, version, isAuto, isNew) {
  const now = Date.now();
  const isDue = !(now - notice.saidAt < 60 * 60 * 1000);
  if (!isDue && !isNew) return;
  if (isDue) {
    writeOut(
      2,
      `rewind: this workspace's daemon is Rewind ${notice.version}, this command ${version}: commands run in their own process ${isAuto ? 'while a daemon of this version replaces it' : 'until it stops (`rewind daemon --replace` serves the workspace with this version instead)'}.\n`,
    );
  }
  try {
    writeFileSync(
      noticePath,
      `${JSON.stringify({ ...notice, saidAt: isDue ? now : notice.saidAt })}\n`,
      { mode: 0o600 },
    );
  } catch {}
}

/** What was read of stdin for the daemon: the command reads it if it runs here after all. */
let readStdin;

/** Bundles compiled in this run whose code cache is still to be written. */
const uncached = [];

/** The SHA-256 of a bundle's `source`, in hexadecimal: from its `.sha256` file when that holds one. */
function contentKey(file, source) {
  try {
    const written = readFileSync(`${file}.sha256`, 'latin1').trim();
    if (/^[0-9a-f]{64}$/.test(written)) return written;
  } catch {}
  return require('node:crypto').createHash('sha256').update(source).digest('hex');
}

/**
 * Loads `dist/bundle/NAME.cjs` (scripts/bundle.mjs), with V8's code cache for it when an earlier
 * run left one: compiling the bundle is most of what the command would otherwise spend starting.
 * The cache lives in $XDG_CACHE_HOME/rewind-agent (else ~/.cache/rewind-agent), one file per
 * bundle content and Node version, so an upgrade never runs against a stale cache; V8 checks it
 * again and ignores one it cannot use. The content is named by the SHA-256 that scripts/bundle.mjs
 * wrote beside the bundle (`NAME.cjs.sha256`), else hashed here: reading 64 characters spares
 * every command loading node:crypto and hashing 0.7 MB. Set REWIND_CODE_CACHE=0 to go without.
 */
function loadBundle(name) {
  const { homedir } = require('node:os');
  const { Script } = require('node:vm');
  const file = join(__dirname, '..', 'dist', 'bundle', `${name}.cjs`);
  // latin1, not utf8: the bundle is ASCII (scripts/bundle.mjs), and a latin1 string is made
  // without decoding (~0.6 ms less for the CLI's 0.7 MB).
  const source = readFileSync(file, 'latin1');
  let cacheFile;
  let cachedData;
  if (process.env.REWIND_CODE_CACHE !== '0') {
    const base = process.env.XDG_CACHE_HOME || join(homedir(), '.cache');
    const key = `${contentKey(file, source).slice(0, 32)}-${process.version}`;
    cacheFile = join(base, 'rewind-agent', `${name}-${key}.v8`);
    try {
      cachedData = readFileSync(cacheFile);
    } catch {}
  }
  const wrapped = `(function (exports, require, module, __filename, __dirname) {${source}\n})`;
  const script = new Script(wrapped, { filename: file, cachedData });
  const module = { exports: {} };
  script.runInThisContext()(module.exports, createRequire(file), module, file, dirname(file));
  if (cacheFile && (cachedData === undefined || script.cachedDataRejected))
    uncached.push({ script, cacheFile });
  return module.exports;
}

/**
 * Writes the code caches of this run's bundles, once the command has run: the cache then holds
 * the functions the command compiled on the way too. A cache that cannot be written is skipped.
 */
function writeCodeCaches() {
  for (const { script, cacheFile } of uncached) {
    const temporary = `${cacheFile}.${process.pid}.tmp`;
    try {
      mkdirSync(dirname(cacheFile), { recursive: true });
      writeFileSync(temporary, script.createCachedData());
      renameSync(temporary, cacheFile);
    } catch {}
  }
}

/** Asks on the terminal; only when there is one, so scripts never hang waiting for an answer. */
async function prompt(question) {
  const { createInterface } = require('node:readline/promises');
  const terminal = createInterface({ input: process.stdin, output: process.stderr });
  try {
    return await terminal.question(question);
  } finally {
    terminal.close();
  }
}

/** `rewind mcp`: the MCP server is an edge of its own (src/mcp), loaded only when asked for. */
async function serveMcp(argv) {
  watchStreamErrors();
  const { runMcp } = loadBundle('mcp');
  writeCodeCaches(); // now: a server runs until it is stopped, often by a signal
  return runMcp(argv, process.cwd());
}

/** `rewind ui`: the web timeline's server is an edge of its own (src/ui), loaded only when asked for. */
async function serveUi(argv) {
  watchStreamErrors();
  const { runUi } = loadBundle('ui');
  writeCodeCaches(); // now: a server runs until it is stopped, often by a signal
  return runUi(argv, {
    stdout: (text) => process.stdout.write(text),
    stderr: (text) => process.stderr.write(text),
    cwd: process.cwd(),
    assets: join(__dirname, '..', 'dist', 'ui-assets'),
  });
}

/** The command `args` name: the first word that is neither an option nor a global option's value. */
function commandOf(args) {
  for (let index = 0; index < args.length; index++) {
    const arg = args[index];
    if (arg === '--dir' || arg === '--redact-pattern') index++;
    else if (!arg.startsWith('-')) return arg;
  }
  return undefined;
}

/**
 * Ctrl-C (or SIGTERM, SIGHUP) ends a command at once, as it would without this, but first says
 * what that leaves: the servers (`daemon`, `mcp`, `ui`) stop on these signals in their own way.
 */
function sayWhenInterrupted() {
  if (['daemon', 'mcp', 'ui'].includes(commandOf(argv))) return;
  for (const signal of ['SIGINT', 'SIGTERM', 'SIGHUP']) {
    process.once(signal, () => {
      try {
        require('node:fs').writeSync(
          2,
          `\nrewind: interrupted (${signal}). If it was changing the workspace, the next rewind command ` +
            'finishes or undoes what it left half-done (`rewind status` shows it): nothing is lost.\n',
        );
      } catch {}
      // No handler now: the signal ends the process, and its exit status says which one.
      process.kill(process.pid, signal);
    });
  }
}

/**
 * Ctrl-C (or SIGTERM, SIGHUP) on a command the daemon runs ends this process at once, but not
 * the command: the daemon runs it to its end, as it would have. Said before this process goes.
 */
function sayWhenInterruptedServed() {
  for (const signal of ['SIGINT', 'SIGTERM', 'SIGHUP']) {
    process.once(signal, () => {
      try {
        require('node:fs').writeSync(
          2,
          `\nrewind: interrupted (${signal}). The daemon goes on with the command to its end: ` +
            '`rewind status` shows it running, `rewind log` how it ended (undo it then if need be).\n',
        );
      } catch {}
      process.kill(process.pid, signal);
    });
  }
}

/** Runs the command in this process. */
async function runHere() {
  sayWhenInterrupted();
  const { runCli } = loadBundle('cli');
  process.exitCode = await runCli(argv, {
    stdout: (text) => writeOut(1, text),
    stderr: (text) => writeOut(2, text),
    cwd: process.cwd(),
    // process.stdin is made only by a command that reads it (see writeOut).
    stdin: readStdin
      ? [readStdin]
      : { [Symbol.asyncIterator]: () => process.stdin[Symbol.asyncIterator]() },
    ...(isTerminal(0) && { prompt }),
    serveMcp,
    serveUi,
    isTerminal: isTerminal(1),
    isErrorTerminal: isTerminal(2),
    env: process.env,
  });
  writeCodeCaches();
}

// A daemon reads nothing of its own stdin (a command it runs reads its caller's, sent with it):
// it is /dev/null, not the terminal or pipe it was started from.
if (commandOf(argv) === 'daemon') {
  const { closeSync, openSync } = require('node:fs');
  closeSync(0);
  openSync('/dev/null', 'r'); // the lowest free descriptor: 0
}

if (argv.length === 1 && (argv[0] === '--version' || argv[0] === '-V')) {
  // `rewind --version` is answered without loading the bundle: it needs only package.json. A
  // write that fails is said at exit, as for any command (it exited 0 in silence before).
  const { version } = JSON.parse(readFileSync(join(__dirname, '..', 'package.json'), 'utf8'));
  writeOut(1, `${version}\n`);
} else {
  runInDaemon().then((daemonExit) => {
    if (daemonExit === undefined) return runHere();
    process.exitCode = daemonExit;
  });
}
