/**
 * `rewind daemon`: a process that stays up for one workspace and runs the `rewind` commands sent
 * to it on a Unix socket (`.rewind/daemon.sock`), with their sessions kept open and watching the
 * workspace, as `rewind mcp` keeps its own. A command then costs what it costs in a live process
 * (a checkpoint after one change: what the watcher saw, no walk) plus Node's start, instead of a
 * walk of the whole workspace. The `rewind` command (bin/rewind.cjs) sends the commands the daemon
 * serves there and runs everything else itself, as it does when no daemon answers.
 *
 * The protocol, one JSON document per line: the client sends `{ v, version, argv, cwd, env,
 * isTerminal, isErrorTerminal, stdin?, umask? }`; the daemon answers `{ accepted: true }` as it
 * reads it, or only `{ fallback: why }` for a command it does not serve, or a line it cannot read
 * (the client runs it itself). The
 * client answers `{ go: true }`, and the daemon runs the command, in turn, sending `{ stdout }`
 * and `{ stderr }` as it prints (`{ stdoutBytes }`, `{ stderrBytes }` in base64 for bytes that are
 * not text) and `{ exit }` last. A client that heard nothing within 2 s
 * closes the connection and runs the command itself; the daemon, without its go, does not. The
 * daemon closes a connection that sent no request line within 5 s, sends `{ fallback }` to one
 * that sent no go within 5 s of its `{ accepted }`, and closes a connection whose client has not
 * closed its end 5 s after the daemon ended its own: a silent client does not keep it from
 * ending once it stops. Only the commands it runs count as activity for `--idle-exit`.
 */
import { statSync } from 'node:fs';
import { link, readdir, rename, rm } from 'node:fs/promises';
import type { Socket } from 'node:net';
import { join, resolve } from 'node:path';
import type { Command } from 'commander';
import {
  currentSessionId,
  type LockWait,
  locateWorkspace,
  type OpenSessionOptions,
  openSession,
  type Session,
} from '../index.js';
import { type CliIo, EXIT_FAILED, EXIT_OK, type SessionKeeper } from './context.js';
import {
  commandOf,
  PASSED_ENV,
  type Request,
  realpathOf,
  refusalOf,
  SERVED,
  takeCallersProcessState,
} from './daemon-requests.js';
import { UsageError } from './errors.js';
import { outsideTable } from './options.js';

/**
 * The daemon's socket, in the store directory of its workspace: the name callers connect to. Each
 * daemon listens on a socket of its own, `.rewind/daemon-PID.sock`, and publishes it under this
 * name as a hard link; on exit it removes this name only while it is still its own socket (a
 * daemon started as it stopped has published its own there).
 */
const DAEMON_SOCKET = join('.rewind', 'daemon.sock');

/** The socket daemon `pid` listens on, in `root`'s store. */
const ownSocketOf = (root: string, pid: number): string =>
  join(root, '.rewind', `daemon-${pid}.sock`);

/** The longest path a Unix socket may have on Linux (sun_path less its terminating zero). */
const LONGEST_SOCKET_PATH = 107;

/** The longest line the daemon reads from a caller, in characters. */
const LONGEST_LINE = 64 * 1024 * 1024;

/**
 * How long a caller has for each line it sends before its command runs (its request, then its
 * go), and to close its end once the daemon ended its own: bin/rewind.cjs sends each line as soon
 * as it can, and gives up after 2 s anyway. A connection kept open past that, saying nothing,
 * would keep the daemon from ending once it stops (its server closes when its last connection
 * does).
 */
const LINE_WAIT_MS = 5_000;

/** What {@link within} resolves with once its time is up. */
const LATE = Symbol('late');

/** `promise`, or {@link LATE} when it has not settled within {@link LINE_WAIT_MS}. */
function within<T>(promise: Promise<T>): Promise<T | typeof LATE> {
  let timer: NodeJS.Timeout | undefined;
  const late = new Promise<typeof LATE>((resolve) => {
    timer = setTimeout(() => resolve(LATE), LINE_WAIT_MS);
  });
  return Promise.race([promise, late]).finally(() => clearTimeout(timer));
}

/** Ends `socket`, and destroys it if its other end is still open {@link LINE_WAIT_MS} later. */
function endSoon(socket: Socket): void {
  socket.end();
  setTimeout(() => socket.destroy(), LINE_WAIT_MS).unref();
}

/**
 * The daemon's session: its workspace's current one, opened once, watching, and kept while it is
 * the current one; anything else (another session named, another workspace, protections asked
 * for) is opened for the command alone.
 */
class KeptSessions implements SessionKeeper {
  readonly #root: string;
  readonly #kept = new Map<string, Promise<Session>>();
  readonly #own = new WeakSet<Session>();
  readonly #said = new WeakSet<Session>();
  /** Told why when a kept session's watcher stops or keeps failing, and when it watches again. */
  readonly #watchReports: Pick<OpenSessionOptions, 'onWatchStopped' | 'onWatchResumed'>;
  /**
   * Where the command being served hears that a kept session waits for the workspace lock: its
   * own stderr (commands run one at a time), and nowhere between commands.
   */
  #onLockWait: ((wait: LockWait) => void) | undefined;
  /** Likewise, where it hears that a kept session starts finishing what a killed process left. */
  #onRecoveryStart: ((message: string) => void) | undefined;
  /**
   * The last wait for the workspace lock of a kept session being opened, told again to a command
   * that comes to wait for it too ({@link warm} opens it before any command asks).
   */
  #lastWait: LockWait | undefined;

  constructor(
    root: string,
    watchReports: Pick<OpenSessionOptions, 'onWatchStopped' | 'onWatchResumed'>,
  ) {
    this.#root = root;
    this.#watchReports = watchReports;
  }

  async open(options: OpenSessionOptions): Promise<Session> {
    const isOurs =
      realpathOf(options.workspace) === this.#root &&
      options.redact === undefined &&
      options.blockPrivate === undefined &&
      options.isolation === undefined;
    if (!isOurs) return openSession(options);
    // The current session may have changed since the last command: it is asked each time.
    const id = await currentSessionId({ workspace: this.#root });
    // Another session, named: opened for the command alone.
    if (id === undefined || (options.session !== undefined && options.session !== id)) {
      return openSession(options);
    }
    // Those kept while others were current go (each holds a watcher and its inotify watches);
    // commands run one at a time, so none is in use.
    for (const [other, session] of this.#kept) {
      if (other === id) continue;
      this.#kept.delete(other);
      await (await session.catch(() => undefined))?.close();
    }
    this.#onLockWait = options.onLockWait;
    this.#onRecoveryStart = options.onRecoveryStart;
    // Still being opened, and waiting for the workspace: this command waits too, and hears why.
    if (this.#kept.has(id) && this.#lastWait !== undefined) options.onLockWait?.(this.#lastWait);
    return this.#keep(id);
  }

  /** The kept session `id`, opened (watching) unless it is open or being opened. */
  #keep(id: string): Promise<Session> {
    let kept = this.#kept.get(id);
    if (kept === undefined) {
      kept = openSession({
        workspace: this.#root,
        session: id,
        watch: true,
        ...this.#watchReports,
        onLockWait: (wait) => {
          this.#lastWait = wait;
          this.#onLockWait?.(wait);
        },
        onRecoveryStart: (message) => this.#onRecoveryStart?.(message),
      });
      this.#kept.set(id, kept);
      kept.then(
        (session) => this.#own.add(session),
        () => this.#kept.delete(id),
      );
      void kept
        .catch(() => {})
        .then(() => {
          this.#lastWait = undefined;
        });
    }
    return kept;
  }

  /**
   * Opens the current session, watching, before any command asks for it: the watch is live by
   * the time commands come (a failure is the first command's to meet). Commands do not wait for
   * it in turn: the workspace may be another process's for a while, and a command that opens no
   * session (status) need not wait for that; one that does waits with it, told why.
   */
  async warm(): Promise<void> {
    const id = await currentSessionId({ workspace: this.#root }).catch(() => undefined);
    if (id !== undefined) await this.#keep(id).catch(() => {});
  }

  async release(session: Session): Promise<void> {
    if (this.#own.has(session)) {
      this.#onLockWait = undefined;
      this.#onRecoveryStart = undefined;
    } else await session.close();
  }

  recoveriesToSay(session: Session): readonly string[] {
    if (this.#said.has(session)) return [];
    if (this.#own.has(session)) this.#said.add(session);
    return session.recoveries();
  }

  async closeAll(): Promise<void> {
    const kept = [...this.#kept.values()];
    this.#kept.clear();
    for (const session of kept) await (await session.catch(() => undefined))?.close();
  }
}

/** The command a request line names, as its log says it: "a request" when it names none. */
function namedIn(request: unknown): string {
  const argv = (request as { argv?: unknown } | null)?.argv;
  const words = Array.isArray(argv) ? argv.filter((arg) => typeof arg === 'string') : [];
  return commandOf(words) ?? 'a request';
}

/**
 * `node:net`, loaded when a daemon runs or is probed: every `rewind` command loads this module
 * as it starts, and net brings Node's stream machinery (docs/performance.md).
 */
const nodeNet = (): typeof import('node:net') => process.getBuiltinModule('node:net');

/** What a served command reads as its stdin: the bytes its caller sent, if any. */
async function* stdinOf(request: Request): AsyncGenerator<Uint8Array> {
  if (request.stdin !== undefined) yield Buffer.from(request.stdin, 'base64');
}

/** Whether a daemon answers on `socket`. */
function isAnswering(socket: string): Promise<boolean> {
  return new Promise((done) => {
    const probe = nodeNet().connect(socket);
    probe.once('connect', () => {
      probe.destroy();
      done(true);
    });
    probe.once('error', () => done(false));
  });
}

/** The lines `socket` sends, one at a time; undefined once it ended or failed. */
function linesOf(socket: Socket): () => Promise<string | undefined> {
  const lines: string[] = [];
  const waiting: ((line: string | undefined) => void)[] = [];
  let buffered = '';
  let isOver = false;
  socket.setEncoding('utf8');
  socket.on('data', (text: string) => {
    buffered += text;
    // A request is a command line and a hook event: no caller sends this much without a line.
    if (buffered.length > LONGEST_LINE) socket.destroy();
    for (let end = buffered.indexOf('\n'); end !== -1; end = buffered.indexOf('\n')) {
      const line = buffered.slice(0, end);
      buffered = buffered.slice(end + 1);
      const waiter = waiting.shift();
      if (waiter) waiter(line);
      else lines.push(line);
    }
  });
  const over = (): void => {
    isOver = true;
    for (const waiter of waiting.splice(0)) waiter(undefined);
  };
  socket.once('end', over);
  socket.once('close', over);
  return () =>
    new Promise((resolve) => {
      const line = lines.shift();
      if (line !== undefined || isOver) resolve(line);
      else waiting.push(resolve);
    });
}

/**
 * Serves `root` until SIGINT, SIGTERM or SIGHUP: each request runs through `run` (the CLI itself) with
 * the caller's arguments, directory and output, one after another.
 */
async function serve(
  root: string,
  io: CliIo,
  run: (argv: readonly string[], io: CliIo) => Promise<number>,
  idleExitMs: number | undefined,
  isReplacing: boolean,
): Promise<number> {
  // The workspace must have a store: the socket goes in it (STORE_NOT_FOUND says what to do).
  await currentSessionId({ workspace: root });
  const socketPath = join(root, DAEMON_SOCKET);
  const ownPath = ownSocketOf(root, process.pid);
  if (Buffer.byteLength(ownPath) > LONGEST_SOCKET_PATH) {
    throw new UsageError(
      `The daemon's socket would be ${ownPath}, longer than a Unix socket's path may be (${LONGEST_SOCKET_PATH} bytes). Move the workspace to a shorter path to run a daemon for it; commands run without one.`,
    );
  }
  // A watcher that retries says so, and says when it watches again: only a stop is for good.
  const sessions = new KeptSessions(root, {
    onWatchStopped: (why, isRetrying) =>
      io.stderr(
        isRetrying
          ? `rewind daemon: cannot watch ${root} yet (${why}): it keeps trying, less and less often (at most once a minute); meanwhile its checkpoints look at every entry, as without the daemon.\n`
          : `rewind daemon: not watching ${root} (${why}): its checkpoints look at every entry, as without the daemon.\n`,
      ),
    onWatchResumed: () =>
      io.stderr(
        `rewind daemon: watching ${root} again: its checkpoints look only at what changed.\n`,
      ),
  });
  let queue: Promise<void> = Promise.resolve();
  // For --idle-exit: the requests accepted and not yet run or given up, and when the last command
  // run ended. Only a command run here counts: a connection that sends none, or one sent back
  // (another version's, one it does not serve), would otherwise keep up a daemon nobody uses.
  let accepted = 0;
  let lastCommandEnded = Date.now();
  const server = nodeNet().createServer((socket) => {
    socket.on('error', () => {});
    void receive(socket);
  });
  const send = (socket: Socket, message: object): void => {
    if (!socket.destroyed) socket.write(`${JSON.stringify(message)}\n`);
  };
  // Accepted (or sent back) as soon as it is read, so the caller knows the daemon is alive; run
  // in turn, one at a time.
  const receive = async (socket: Socket): Promise<void> => {
    const nextLine = linesOf(socket);
    const line = await within(nextLine());
    if (line === LATE) {
      io.stderr(
        `rewind daemon: closed a connection that sent no request within ${LINE_WAIT_MS / 1000} s\n`,
      );
      socket.destroy();
      return;
    }
    let request: Request;
    try {
      request = JSON.parse(line ?? '') as Request;
    } catch {
      socket.destroy();
      return;
    }
    const refusal = refusalOf(request);
    if (refusal !== undefined) {
      // Logged as a command it runs is: what the caller then runs itself, and why.
      io.stderr(`rewind daemon: ${namedIn(request)} sent back to its caller: ${refusal}\n`);
      send(socket, { fallback: refusal });
      endSoon(socket);
      return;
    }
    send(socket, { accepted: true });
    accepted += 1;
    // The caller says go once it heard back: one that gave up waiting (2 s) runs the command
    // itself, and its command must not run here too. One that says nothing is told to run it
    // itself (it does, if it is still there).
    const go = await within(nextLine());
    if (go === LATE || go === undefined) {
      accepted -= 1;
      if (go === undefined) return;
      send(socket, {
        fallback: `the caller said no go within ${LINE_WAIT_MS / 1000} s: it runs there`,
      });
      endSoon(socket);
      return;
    }
    queue = queue
      .then(() => handle(socket, request))
      .catch(() => {})
      .finally(() => {
        accepted -= 1;
        lastCommandEnded = Date.now();
      });
  };
  const handle = async (socket: Socket, request: Request): Promise<void> => {
    const started = Date.now();
    const env = Object.fromEntries(
      PASSED_ENV.filter((name) => request.env?.[name] !== undefined).map((name) => [
        name,
        request.env[name],
      ]),
    );
    const restore = takeCallersProcessState(request);
    const code = await run(request.argv, {
      // Bytes (a stored output that is not UTF-8) go in base64, and come out as they are.
      stdout: (text) =>
        send(socket, typeof text === 'string' ? { stdout: text } : { stdoutBytes: base64Of(text) }),
      stderr: (text) =>
        send(socket, typeof text === 'string' ? { stderr: text } : { stderrBytes: base64Of(text) }),
      cwd: request.cwd,
      stdin: stdinOf(request),
      sessions,
      isTerminal: request.isTerminal === true,
      isErrorTerminal: request.isErrorTerminal === true,
      env,
    })
      .catch(() => EXIT_FAILED)
      .finally(restore);
    // Said before the caller hears the end: what waits on the caller finds it said.
    io.stderr(
      `rewind daemon: ${commandOf(request.argv)} exit ${code} (${Date.now() - started} ms)\n`,
    );
    send(socket, { exit: code });
    endSoon(socket);
  };
  // A socket left by a killed process of our pid is no one's.
  await rm(ownPath, { force: true });
  // Made for its user alone from the start (a chmod after would leave a moment for others).
  const umask = process.umask(0o177);
  try {
    await new Promise<void>((listening, failed) => {
      server.once('error', failed);
      server.listen(ownPath, () => {
        server.off('error', failed);
        listening();
      });
    });
  } finally {
    process.umask(umask);
  }
  try {
    await publish(ownPath, socketPath, root, io, isReplacing);
  } catch (error) {
    await new Promise((closed) => server.close(closed));
    throw error;
  }
  const socketInode = inodeOf(ownPath);
  io.stderr(
    `rewind daemon: serving ${root} on ${socketPath} (pid ${process.pid}); ` +
      `\`rewind ${[...SERVED].join('`, `')}\` run here now. Stop with Ctrl-C` +
      `${idleExitMs === undefined ? '' : `, or it stops after ${idleExitMs / 1000} s without a command`}.\n`,
  );
  // Beside the queue: the first command that opens the session waits for this opening of it.
  const warmed = sessions.warm();
  const why = await new Promise<string | undefined>((stopped) => {
    const stop = (reason?: string): void => {
      for (const signal of STOPPING_SIGNALS) process.off(signal, onSignal);
      clearInterval(check);
      stopped(reason);
    };
    const onSignal = (signal: NodeJS.Signals): void => {
      io.stderr(`rewind daemon: ${signal}: stopping once the command it runs is done\n`);
      stop(signal);
    };
    for (const signal of STOPPING_SIGNALS) process.on(signal, onSignal);
    // A daemon whose socket is gone (the store removed, or another daemon that started at the
    // same moment took the path) cannot be reached: it stops rather than watch for nobody.
    const check = setInterval(
      () => {
        if (inodeOf(socketPath) !== socketInode) {
          stop(`its socket ${socketPath} is gone or another's`);
        } else if (
          idleExitMs !== undefined &&
          accepted === 0 &&
          Date.now() - lastCommandEnded >= idleExitMs
        ) {
          stop(`no command for ${idleExitMs / 1000} s`);
        }
      },
      Math.min(CHECK_EVERY_MS, idleExitMs ?? CHECK_EVERY_MS),
    );
  });
  // The published name goes only while it is this daemon's (its own path keeps the inode its
  // own: no other socket can have it); closing the server removes its own path.
  if (inodeOf(socketPath) === socketInode) await rm(socketPath, { force: true });
  await new Promise<void>((closed) => server.close(() => closed()));
  await queue;
  await warmed;
  await sessions.closeAll();
  io.stderr(`rewind daemon: stopped${why === undefined ? '' : ` (${why})`}\n`);
  return EXIT_OK;
}

/**
 * Publishes the socket at `ownPath` as `socketPath`, where callers look for it: a hard link, made
 * only where no socket is, so two daemons starting at once cannot both take it. One a killed
 * daemon left (nobody answers on it) is replaced; one a daemon serves on is a usage error.
 * Sockets killed daemons left under their own names go too.
 */
async function publish(
  ownPath: string,
  socketPath: string,
  root: string,
  io: CliIo,
  isReplacing: boolean,
): Promise<void> {
  try {
    await link(ownPath, socketPath);
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code !== 'EEXIST') throw error;
    if (await isAnswering(socketPath)) {
      if (!isReplacing) {
        throw new UsageError(
          `A daemon already serves ${root} (on ${socketPath}). Stop it first (Ctrl-C where it runs, or kill its process), or start this one with --replace.`,
        );
      }
      // The other, its socket no longer its own, stops at its next check (within 10 s), once
      // the command it runs is done.
      io.stderr(`rewind daemon: replacing the daemon that served on ${socketPath}\n`);
    }
    // Replaced in one step (a link beside it, renamed over it).
    const linked = `${ownPath}.link`;
    await rm(linked, { force: true });
    await link(ownPath, linked);
    await rename(linked, socketPath);
  }
  const store = join(root, '.rewind');
  for (const name of await readdir(store)) {
    const path = join(store, name);
    if (/^daemon-\d+\.sock$/.test(name) && path !== ownPath && !(await isAnswering(path))) {
      await rm(path, { force: true });
    }
  }
}

/** The inode of what is at `path`, or undefined when nothing is. */
function inodeOf(path: string): number | undefined {
  try {
    return statSync(path).ino;
  } catch {
    return undefined;
  }
}

/**
 * The signals that stop a daemon, after the command it runs: SIGHUP too (its terminal closed, or
 * a service manager's reload), which would otherwise end it at once and leave its socket.
 */
const STOPPING_SIGNALS: readonly NodeJS.Signals[] = ['SIGINT', 'SIGTERM', 'SIGHUP'];

/** How often a daemon checks that its socket is its own, and how long it has been idle. */
const CHECK_EVERY_MS = 10_000;

/** The milliseconds an `--idle-exit` value in seconds gives; undefined without one. */
function idleExitOf(value: string | undefined): number | undefined {
  if (value === undefined) return undefined;
  const seconds = Number(value);
  if (!Number.isFinite(seconds) || seconds <= 0) {
    throw new UsageError(`--idle-exit takes a number of seconds above 0, not "${value}".`);
  }
  return seconds * 1000;
}

/** Adds `rewind daemon`; `run` runs one command line (the CLI's own entry point). */
export function addDaemonCommand(
  program: Command,
  io: CliIo,
  state: { exitCode: number },
  run: (argv: readonly string[], io: CliIo) => Promise<number>,
): void {
  const daemon = program
    .command('daemon')
    .description(
      "keep this workspace's sessions open and watching, and run the `rewind` commands that snapshot or read it (checkpoint, rollback, undo, diff, log, status, hook): they then cost what changed, not a walk",
    )
    .option(
      '--idle-exit <seconds>',
      'stop once it ran no command for this long (as a daemon that REWIND_DAEMON=auto started does, after 1800)',
    )
    .option(
      '--replace',
      "take over from a daemon serving the workspace (one of another version, after an upgrade): it stops within 10 s, after the command it runs, as REWIND_DAEMON=auto's daemons do",
    )
    .action(async (flags: { idleExit?: string; replace?: boolean }, command: Command) => {
      const idleExitMs = idleExitOf(flags.idleExit);
      const dir = command.optsWithGlobals<{ dir?: string }>().dir;
      const root = realpathOf(
        dir !== undefined ? resolve(io.cwd, dir) : await locateWorkspace(io.cwd),
      );
      state.exitCode = await serve(root, io, run, idleExitMs, flags.replace === true);
    });
  outsideTable(daemon, 'a process that serves the CLI its own commands, not an operation');
}

function base64Of(bytes: Uint8Array): string {
  return Buffer.from(bytes.buffer, bytes.byteOffset, bytes.byteLength).toString('base64');
}
