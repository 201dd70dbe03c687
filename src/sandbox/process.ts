import { spawn } from 'node:child_process';
import { RewindError } from '../errors.js';
import { timerDelayOf } from '../lib/index.js';

/** What a command is: an argv (run as is) or a string (run by `/bin/sh -c`). */
export type Command = string | readonly string[];

/** Options of {@link runProcess}. */
export interface RunOptions {
  /** The working directory. */
  cwd: string;
  /**
   * Variables added to the clean environment. The command sees only these and the allow-listed
   * ones of this process ({@link ENVIRONMENT_ALLOW_LIST}), never tokens or keys it happens to hold.
   */
  env?: Record<string, string>;
  /** After this, the whole process group gets SIGTERM, then SIGKILL 2 s later. Default 120 000. */
  timeoutMs?: number;
  /** Bytes of stdout and of stderr kept; the rest is read and dropped. Default 1 MiB each. */
  maxOutputBytes?: number;
  /** Bytes written to the command's stdin, which is closed after them (empty by default). */
  input?: Uint8Array | string;
  /** The user and group to run the command as (only root can ask for another). */
  user?: { uid: number; gid: number };
}

/** How a command ended, the same shape whether it succeeded or not. */
export interface RunResult {
  /** The exit code, or null when a signal ended it. */
  exitCode: number | null;
  signal: NodeJS.Signals | null;
  /** True when the timeout ended it. */
  timedOut: boolean;
  durationMs: number;
  stdout: Buffer;
  stderr: Buffer;
  stdoutTruncated: boolean;
  stderrTruncated: boolean;
}

/** Variables passed through from this process's environment when set; everything else is not. */
export const ENVIRONMENT_ALLOW_LIST = [
  'PATH',
  'HOME',
  'USER',
  'LOGNAME',
  'SHELL',
  'LANG',
  'LC_ALL',
  'LC_CTYPE',
  'TERM',
  'TZ',
  'TMPDIR',
] as const;

const DEFAULT_TIMEOUT_MS = 120_000;
/** The bytes of stdout and of stderr a command keeps unless told otherwise. */
export const DEFAULT_MAX_OUTPUT_BYTES = 1024 * 1024;
const KILL_GRACE_MS = 2_000;

/** The clean environment of a command: the allow-list, then the caller's variables. */
export function cleanEnvironment(extra: Record<string, string> = {}): Record<string, string> {
  const env: Record<string, string> = {};
  for (const name of ENVIRONMENT_ALLOW_LIST) {
    const value = process.env[name];
    if (value !== undefined) env[name] = value;
  }
  return { ...env, ...extra };
}

function collector(limit: number): {
  push: (chunk: Buffer) => void;
  result: () => { bytes: Buffer; truncated: boolean };
} {
  const chunks: Buffer[] = [];
  let kept = 0;
  let truncated = false;
  return {
    push(chunk) {
      if (kept >= limit) {
        truncated = true;
        return;
      }
      const room = limit - kept;
      if (chunk.length > room) truncated = true;
      const part = chunk.length > room ? chunk.subarray(0, room) : chunk;
      chunks.push(part);
      kept += part.length;
    },
    result: () => ({ bytes: Buffer.concat(chunks), truncated }),
  };
}

/** The process groups of the commands running now, ended as this process exits. */
const runningGroups = new Set<number>();
let isExitHooked = false;

/**
 * Ends the group of every command still running when this process exits (`process.exit()`, as a
 * second Ctrl-C or SIGTERM does), before it is gone: a process started again at once must not
 * find the old one's commands still changing the workspace. {@link watchGroup} covers the deaths
 * no exit handler sees, a moment after.
 */
function endGroupsAtExit(groupId: number): void {
  runningGroups.add(groupId);
  if (isExitHooked) return;
  isExitHooked = true;
  process.on('exit', () => {
    for (const group of runningGroups) {
      try {
        process.kill(-group, 'SIGKILL');
      } catch {}
    }
  });
}

/**
 * A watcher that ends the process group `groupId` if this process dies first, however it dies
 * (SIGKILL included, which no exit handler sees; Node has no `PR_SET_PDEATHSIG`). It is a
 * shell in a session of its own, deaf to terminal signals, that waits on a pipe only this
 * process writes to: the kernel closes the pipe when this process dies, and the watcher then
 * kills the group. `release` (the command ended) tells it to exit without killing anything.
 */
function watchGroup(groupId: number): { release: () => void } {
  let watcher: ReturnType<typeof spawn>;
  try {
    watcher = spawn(
      '/bin/sh',
      [
        '-c',
        'trap "" HUP INT TERM; read -r _ || kill -KILL "-$1" 2>/dev/null',
        'rewind-watch',
        String(groupId),
      ],
      { detached: true, stdio: ['pipe', 'ignore', 'ignore'] },
    );
  } catch {
    return { release: () => {} };
  }
  watcher.on('error', () => {});
  watcher.stdin?.on('error', () => {});
  watcher.unref();
  return {
    release: () => {
      watcher.stdin?.end('\n');
    },
  };
}

/**
 * Runs a command as a plain child process in its own process group, with a clean environment,
 * a timeout that ends every process of the group (SIGTERM, then SIGKILL), and capped output.
 * The group dies with this process: as it exits, and a moment after it is killed (SIGKILL
 * included).
 * Resolves with the same shape however the command ends; rejects only when it cannot be started
 * (`INVALID_ARGUMENT` for an empty command, `EXEC_FAILED` for a missing program or directory).
 * Nothing here isolates the command from the rest of the machine.
 */
export function runProcess(command: Command, options: RunOptions): Promise<RunResult> {
  const argv = typeof command === 'string' ? ['/bin/sh', '-c', command] : [...command];
  const [program, ...args] = argv;
  if (program === undefined || program === '' || (typeof command === 'string' && command === '')) {
    return Promise.reject(
      new RewindError(
        'INVALID_ARGUMENT',
        'The command is empty. Give the program to run and its arguments.',
      ),
    );
  }
  const timeoutMs = options.timeoutMs ?? DEFAULT_TIMEOUT_MS;
  const limit = options.maxOutputBytes ?? DEFAULT_MAX_OUTPUT_BYTES;
  const started = process.hrtime.bigint();
  return new Promise((resolve, reject) => {
    const child = spawn(program, args, {
      cwd: options.cwd,
      env: cleanEnvironment(options.env),
      detached: true,
      stdio: ['pipe', 'pipe', 'pipe'],
      ...(options.user && { uid: options.user.uid, gid: options.user.gid }),
    });
    const watch = child.pid !== undefined ? watchGroup(child.pid) : undefined;
    if (child.pid !== undefined) endGroupsAtExit(child.pid);
    const forget = () => {
      if (child.pid !== undefined) runningGroups.delete(child.pid);
    };
    const stdout = collector(limit);
    const stderr = collector(limit);
    child.stdout.on('data', stdout.push);
    child.stderr.on('data', stderr.push);
    child.stdin.on('error', () => {});
    child.stdin.end(options.input ?? '');
    let timedOut = false;
    const killGroup = (signal: NodeJS.Signals) => {
      try {
        if (child.pid !== undefined) process.kill(-child.pid, signal);
      } catch {}
    };
    let killTimer: NodeJS.Timeout | undefined;
    const timer = setTimeout(() => {
      timedOut = true;
      killGroup('SIGTERM');
      killTimer = setTimeout(() => killGroup('SIGKILL'), KILL_GRACE_MS);
    }, timerDelayOf(timeoutMs));
    child.on('error', (error) => {
      clearTimeout(timer);
      watch?.release();
      forget();
      reject(
        new RewindError(
          'EXEC_FAILED',
          `Cannot run ${program}: ${error.message}. Check that the program exists and is executable.`,
          { data: { program }, cause: error },
        ),
      );
    });
    child.on('close', (exitCode, signal) => {
      clearTimeout(timer);
      if (killTimer) clearTimeout(killTimer);
      // Whatever the command left running in its group goes with it.
      killGroup('SIGKILL');
      watch?.release();
      forget();
      const out = stdout.result();
      const err = stderr.result();
      resolve({
        exitCode,
        signal,
        timedOut,
        durationMs: Number(process.hrtime.bigint() - started) / 1e6,
        stdout: out.bytes,
        stderr: err.bytes,
        stdoutTruncated: out.truncated,
        stderrTruncated: err.truncated,
      });
    });
  });
}
