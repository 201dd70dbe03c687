/**
 * What `rewind daemon` (src/cli/daemon.ts) is asked, and whether it runs it: a request it does
 * not serve is sent back, and its caller runs it in its own process.
 */
import { lstatSync, readlinkSync, realpathSync } from 'node:fs';
import { dirname, isAbsolute, resolve } from 'node:path';
import { digestBytes, REWIND_VERSION } from '../index.js';

/** The version of the protocol daemon.ts describes. */
export const PROTOCOL = 1;

/**
 * The commands the daemon runs: those that snapshot the workspace or read the session, and need
 * nothing of the caller's but its arguments (and a hook event on stdin). Not `exec` (its command
 * would run with the daemon's environment, not the caller's), nor what asks a person (`approve`)
 * or reads stdin (`write`, `-` for a file). A served command cannot ask: a first checkpoint over
 * its size budget fails with the way on (`--yes`) rather than asking whether to store it.
 * bin/rewind.cjs sends only these (it keeps the same list).
 */
export const SERVED = new Set([
  'checkpoint',
  'checkpoints',
  'diff',
  'hook',
  'log',
  'rollback',
  'status',
  'undo',
]);

/**
 * Global options that change where a command runs or what its session keeps, and `--messages-out`
 * (the caller's own process writes that file: it may be its standard output): run by the caller.
 */
const NOT_SERVED_WITH = [
  '--dir',
  '--redact',
  '--redact-pattern',
  '--block-private',
  '--messages-out',
];

/** The environment variables a served command may read from its caller (TZ: see below). */
export const PASSED_ENV = ['NO_COLOR', 'FORCE_COLOR', 'CLAUDE_PROJECT_DIR', 'TZ'];

/**
 * Whether a variable of the environment decides which store a command reaches, or how: the AWS
 * SDK's (bucket credentials, region, endpoint, profile), PostgreSQL's (the pg client reads PG*),
 * and Rewind's own (REWIND_OBJECTS, REWIND_LEDGER, REWIND_PROGRAM_SHELLS). bin/rewind.cjs keeps
 * the same rule.
 */
const isStoreVariable = (name: string): boolean =>
  /^(AWS_|PG)/.test(name) ||
  ['REWIND_OBJECTS', 'REWIND_LEDGER', 'REWIND_PROGRAM_SHELLS'].includes(name);

/**
 * The SHA-256 of the value of each store variable of `env`, by name: what a caller sends, so the
 * daemon can tell whether it would reach the same store as the caller without being sent a
 * password or key.
 */
export function storeEnvironmentOf(env: NodeJS.ProcessEnv): Record<string, string> {
  const digests: Record<string, string> = {};
  for (const [name, value] of Object.entries(env)) {
    if (value !== undefined && isStoreVariable(name)) {
      // Loaded when needed: a command the daemon is not asked for never loads node:crypto.
      digests[name] = digestBytes(value).slice('sha256:'.length);
    }
  }
  return digests;
}

/**
 * The store variables whose values differ between the caller (`request.storeEnv`) and this
 * process, or that only one of them has. Not taken over for the command, as TZ is: the daemon's
 * session keeps the bucket and database clients it made with its own.
 */
function storeVariablesDiffering(request: Request): string[] {
  const callers = request.storeEnv ?? {};
  const own = storeEnvironmentOf(process.env);
  const names = new Set([...Object.keys(callers), ...Object.keys(own)]);
  return [...names].filter((name) => callers[name] !== own[name]).sort();
}

export interface Request {
  v: number;
  version: string;
  argv: string[];
  cwd: string;
  env: Record<string, string>;
  isTerminal: boolean;
  isErrorTerminal: boolean;
  stdin?: string;
  /** The caller's umask; its TZ is in `env`, when it has one. */
  umask?: number;
  /** {@link storeEnvironmentOf} the caller's environment. */
  storeEnv?: Record<string, string>;
}

/**
 * Gives this process `request`'s time zone (its TZ, or none: the system's) and umask, which a
 * command reads of the process, not of its context: times are printed, files created, as in the
 * caller. Returns what puts the daemon's back. Requests run one at a time (daemon.ts), so no
 * other sees them.
 */
export function takeCallersProcessState(request: Request): () => void {
  const daemonTz = process.env.TZ;
  const setTz = (tz: string | undefined): void => {
    if (tz === undefined) delete process.env.TZ;
    else process.env.TZ = tz;
  };
  setTz(typeof request.env?.TZ === 'string' ? request.env.TZ : undefined);
  const { umask } = request;
  const daemonUmask =
    Number.isInteger(umask) && (umask as number) >= 0 && (umask as number) <= 0o777
      ? process.umask(umask as number)
      : undefined;
  return () => {
    setTz(daemonTz);
    if (daemonUmask !== undefined) process.umask(daemonUmask);
  };
}

/** The command a command line runs: its first word that is not an option. */
export const commandOf = (argv: readonly string[]): string | undefined =>
  argv.find((arg) => !arg.startsWith('-'));

/**
 * Why the daemon does not run `request`, a line a caller sent (the client runs it itself);
 * undefined when it does, and `request` is then a {@link Request}.
 */
export function refusalOf(request: unknown): string | undefined {
  if (typeof request !== 'object' || request === null) return NOT_A_REQUEST;
  const { v, version } = request as Partial<Request>;
  if (v !== PROTOCOL || version !== REWIND_VERSION) {
    // bin/rewind.cjs reads the daemon's version from these words: keep them.
    return `the daemon is Rewind ${REWIND_VERSION}, the command ${String(version)}`;
  }
  if (!isRequest(request)) return NOT_A_REQUEST;
  // The command is the first word that is not an option (`rewind -q checkpoint x`); --dir's
  // value could pass for one, but --dir is not served anyway.
  if (!SERVED.has(commandOf(request.argv) ?? '')) return 'it does not serve this command';
  const option = request.argv.find(
    (arg) =>
      arg === '-' || NOT_SERVED_WITH.some((name) => arg === name || arg.startsWith(`${name}=`)),
  );
  if (option !== undefined) return `it does not serve ${option}`;
  const differing = storeVariablesDiffering(request);
  if (differing.length > 0) {
    return `the caller's ${differing.join(', ')} differ from the daemon's (they choose the store's bucket, database or credentials): it runs there`;
  }
  const own = request.argv.find((arg) => isCallersOwn(resolve(request.cwd, argumentValue(arg))));
  return own === undefined
    ? undefined
    : `${own} may name the caller's own stdin, stdout, terminal or process, or a pipe: it runs there`;
}

const NOT_A_REQUEST = 'the request is not one this daemon reads';

/**
 * Whether a line of this protocol's version has what the daemon reads of a request: one it could
 * not read (a damaged or foreign client's) is sent back, rather than end the daemon or leave the
 * caller waiting.
 */
function isRequest(request: object): request is Request {
  const { argv, cwd, stdin } = request as Partial<Record<keyof Request, unknown>>;
  return (
    Array.isArray(argv) &&
    argv.every((arg) => typeof arg === 'string') &&
    typeof cwd === 'string' &&
    isAbsolute(cwd) &&
    (stdin === undefined || typeof stdin === 'string')
  );
}

/** The value an argument gives: `--option=value`'s value, else the argument itself. */
const argumentValue = (arg: string): string =>
  arg.startsWith('-') && arg.includes('=') ? arg.slice(arg.indexOf('=') + 1) : arg;

/** Whether `path` is under /dev or /proc: what it names depends on the process that opens it. */
const isProcessRelative = (path: string): boolean =>
  /^\/(dev|proc)(\/|$)/.test(path) || /^\/(dev|proc)(\/|$)/.test(realpathOf(dirname(path)));

/** The real path of `path`, or `path` as given when it has none (nothing there yet). */
export function realpathOf(path: string): string {
  try {
    return realpathSync(path);
  } catch {
    return path;
  }
}

/**
 * Whether `path` (an argument, resolved against the caller's directory) would name something else
 * in the daemon than in its caller, or something the daemon must not open for it: a path under
 * /dev or /proc (`/dev/stdout`, `/dev/fd/1`, `/proc/self/...`, `/dev/tty`), directly or through
 * symbolic links, or a pipe, device or socket (a FIFO the caller reads from or writes to).
 */
function isCallersOwn(path: string, hops = 0): boolean {
  if (isProcessRelative(path)) return true;
  try {
    const stats = lstatSync(path);
    if (stats.isSymbolicLink()) {
      return hops >= 40 || isCallersOwn(resolve(dirname(path), readlinkSync(path)), hops + 1);
    }
    return stats.isFIFO() || stats.isCharacterDevice() || stats.isBlockDevice() || stats.isSocket();
  } catch {
    return false; // nothing there (a label, a path to come): the same in either process
  }
}
