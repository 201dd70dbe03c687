import { linkSync, readFileSync, unlinkSync, writeFileSync } from 'node:fs';
import { readdir, stat, unlink } from 'node:fs/promises';
import { hostname } from 'node:os';
import { basename, dirname, join } from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { isSystemError, RewindError } from '../errors.js';
import { temporaryPathBeside } from './atomic-write.js';
import { nodeCrypto } from './builtins.js';
import { readPlainFileSync } from './plain-file.js';

/** Who holds a lock, as written in the lock file. */
export interface LockHolder {
  pid: number;
  host: string;
  /** When the lock was taken, ISO 8601 UTC. */
  acquiredAt: string;
  /** Random and unique to one acquisition, so a takeover can name exactly the lock it replaces. */
  token: string;
  /** The holder's process start time (Linux `/proc/PID/stat` field 22), to see through pid reuse. */
  processStart?: string;
  /** What the holder is doing, for error messages. */
  purpose?: string;
}

/** A held lock. Release it exactly once, or use `await using`. */
export interface Lock {
  readonly path: string;
  readonly holder: LockHolder;
  release(): Promise<void>;
  [Symbol.asyncDispose](): Promise<void>;
}

/** A wait for a lock, as {@link AcquireLockOptions.onWait} is told of it. */
export interface LockWait {
  readonly path: string;
  readonly holder: LockHolder;
  /** The holder is stopped (Ctrl-Z, SIGSTOP, a debugger): it releases nothing until resumed. */
  readonly isStopped: boolean;
  /** The wait, for people: who holds the lock, how long this waits, and what to do. */
  readonly message: string;
}

/** Options of {@link acquireLock}. */
export interface AcquireLockOptions {
  /** How long to wait for a live holder before failing with `LOCK_HELD`. Default 10 000 ms. */
  timeoutMs?: number;
  /** Shown to a process that has to wait for this lock. */
  purpose?: string;
  /**
   * Told when this has waited {@link LOCK_WAIT_NOTICE_MS} for the lock, and again whenever the
   * holder changes or stops or resumes meanwhile: so that a person is not left waiting in silence.
   */
  onWait?: (wait: LockWait) => void;
}

/** How long {@link acquireLock} waits before it tells `onWait`. */
const LOCK_WAIT_NOTICE_MS = 1000;

/** Tombstones of taken-over locks older than this are removed. */
const TOMBSTONE_MAX_AGE_MS = 10 * 60 * 1000;

/** Fields 3 on of Linux's `/proc/PID/stat` (state, ppid...), or undefined where there is none. */
function processStatFields(pid: number): string[] | undefined {
  try {
    const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
    // The command name (field 2) may hold spaces and parentheses, so count from the last ')'.
    return stat.slice(stat.lastIndexOf(')') + 2).split(' ');
  } catch {
    return undefined;
  }
}

function readProcessStart(pid: number): string | undefined {
  return processStatFields(pid)?.[19];
}

/**
 * True when the holder is a process of this host that is stopped (state T, or t when traced):
 * it holds the lock until someone resumes it.
 */
export function isHolderStopped(holder: LockHolder): boolean {
  if (holder.host !== hostname()) return false;
  const fields = processStatFields(holder.pid);
  if (fields === undefined) return false;
  if (holder.processStart !== undefined && fields[19] !== holder.processStart) return false;
  return fields[0] === 'T' || fields[0] === 't';
}

let cachedOwnStart: { value: string | undefined } | undefined;

function ownProcessStart(): string | undefined {
  cachedOwnStart ??= { value: readProcessStart(process.pid) };
  return cachedOwnStart.value;
}

function removeFile(path: string): void {
  try {
    unlinkSync(path);
  } catch (error) {
    if (!isSystemError(error, 'ENOENT')) throw error;
  }
}

/**
 * True unless the holder is certainly gone: same host, and its pid no longer exists or now
 * belongs to a process that started at another time. A holder on another host is presumed alive.
 */
export function isHolderAlive(holder: LockHolder): boolean {
  if (holder.host !== hostname()) return true;
  try {
    process.kill(holder.pid, 0);
  } catch (error) {
    if (isSystemError(error, 'ESRCH')) return false;
  }
  if (holder.processStart === undefined) return true;
  const current = readProcessStart(holder.pid);
  return current === undefined || current === holder.processStart;
}

/** Who holds the lock at `path`, when a live process does (see {@link isHolderAlive}). */
export function liveHolderOf(path: string): LockHolder | undefined {
  try {
    const holder = readHolder(path);
    return typeof holder === 'object' && isHolderAlive(holder) ? holder : undefined;
  } catch {
    return undefined;
  }
}

function parseHolder(text: string): LockHolder | undefined {
  try {
    const value = JSON.parse(text) as Partial<LockHolder>;
    if (
      typeof value.pid === 'number' &&
      typeof value.host === 'string' &&
      typeof value.token === 'string'
    ) {
      return value as LockHolder;
    }
  } catch {}
  return undefined;
}

// Lock files are tiny and local: the lock's own I/O is synchronous, a few microseconds per call,
// which costs far less than a round trip through the thread pool on every append.
function readHolder(path: string): LockHolder | 'missing' | 'unreadable' {
  try {
    // A directory or a link there is no record either; never read through a link, or a pipe.
    const read = readPlainFileSync(path);
    return (read.isFile && parseHolder(read.value.toString('utf8'))) || 'unreadable';
  } catch (error) {
    if (isSystemError(error, 'ENOENT')) return 'missing';
    throw error;
  }
}

/**
 * Tries once to create the lock file with the holder's record already inside: the record is
 * written to a temporary file and hard-linked into place, which fails if the lock exists, so
 * no reader ever sees an empty lock file.
 */
function tryCreate(path: string, holder: LockHolder): boolean {
  const temporary = temporaryPathBeside(path);
  writeFileSync(temporary, JSON.stringify(holder), { flag: 'wx' });
  try {
    linkSync(temporary, path);
    return true;
  } catch (error) {
    if (isSystemError(error, 'EEXIST')) return false;
    throw error;
  } finally {
    // What matters is whether the link was made; a temporary file left behind (a failing disk)
    // is harmless.
    try {
      unlinkSync(temporary);
    } catch {}
  }
}

/**
 * Removes the lock file of a holder that is gone. Racing takers are arbitrated by an exclusive
 * tombstone named after the dead holder's token: exactly one process may remove that holder's
 * file, and because the tombstone stays, a slow racer that read the same dead holder cannot later
 * remove the lock of the process that replaced it. A taker that itself dies mid-takeover is taken
 * over the same way, through a tombstone named after its own token.
 */
async function takeOver(
  path: string,
  dead: LockHolder,
  me: LockHolder,
  tombstone: string,
): Promise<void> {
  if (!tryCreate(tombstone, me)) {
    const taker = readHolder(tombstone);
    if (typeof taker === 'object' && !isHolderAlive(taker)) {
      await takeOver(path, dead, me, `${tombstone}-${taker.token}`);
    }
    return;
  }
  const current = readHolder(path);
  if (typeof current === 'object' && current.token === dead.token) removeFile(path);
  await removeOldTombstones(path);
}

async function removeOldTombstones(path: string): Promise<void> {
  const directory = dirname(path);
  const prefix = `${basename(path)}.taken-`;
  const now = Date.now();
  for (const name of await readdir(directory)) {
    if (!name.startsWith(prefix)) continue;
    const file = join(directory, name);
    try {
      if (now - (await stat(file)).mtimeMs > TOMBSTONE_MAX_AGE_MS) await unlink(file);
    } catch {}
  }
}

/** The error for a lock file that holds no record a Rewind process wrote. */
function unreadableLock(path: string): RewindError {
  return new RewindError(
    'LOCK_HELD',
    `The lock ${path} holds no record that a Rewind process wrote (it is damaged, or not a file), so Rewind cannot tell who holds it, and waiting would not tell. ` +
      'If no Rewind process is working on this store, delete it and retry.',
    { data: { path, holder: 'unreadable' } },
  );
}

function describeHolder(holder: LockHolder): string {
  const purpose = holder.purpose ? ` (${holder.purpose})` : '';
  return `process ${holder.pid} on ${holder.host}${purpose} since ${holder.acquiredAt}`;
}

function resumeAdvice(holder: LockHolder): string {
  return `It is stopped (suspended by Ctrl-Z, SIGSTOP or a debugger) and releases nothing until it is resumed: \`fg\` in its shell, or \`kill -CONT ${holder.pid}\`.`;
}

/**
 * Takes an exclusive cross-process lock by creating `path` (a file holding pid, host and a unique
 * token). Waits while a live process holds it; takes it over when the holder's process is gone,
 * safely even when several processes race for it. A lock file whose record cannot be read is
 * refused at once: the record is linked in whole, so no holder leaves a partial one, and waiting
 * would not make it readable.
 *
 * Throws `LOCK_HELD` when a live holder keeps it past `timeoutMs`, or its record is unreadable.
 */
export async function acquireLock(path: string, options: AcquireLockOptions = {}): Promise<Lock> {
  const timeoutMs = options.timeoutMs ?? 10_000;
  const holder: LockHolder = {
    pid: process.pid,
    host: hostname(),
    acquiredAt: new Date().toISOString(),
    token: nodeCrypto().randomBytes(12).toString('hex'),
  };
  const processStart = ownProcessStart();
  if (processStart !== undefined) holder.processStart = processStart;
  if (options.purpose !== undefined) holder.purpose = options.purpose;

  const startedAt = Date.now();
  const deadline = startedAt + timeoutMs;
  let delayMs = 1;
  /** The holder and state `onWait` was last told of. */
  let told: { token: string; isStopped: boolean } | undefined;
  for (;;) {
    if (tryCreate(path, holder)) return createLock(path, holder);
    const current = readHolder(path);
    if (current === 'missing') continue;
    if (current === 'unreadable') throw unreadableLock(path);
    if (abandonedTokens.has(current.token) || !isHolderAlive(current)) {
      await takeOver(path, current, holder, `${path}.taken-${current.token}`);
      continue;
    }
    const now = Date.now();
    if (now >= deadline) {
      const isStopped = isHolderStopped(current);
      throw new RewindError(
        'LOCK_HELD',
        `The lock ${path} is held by ${describeHolder(current)}, and was not released within ${timeoutMs} ms. ` +
          (isStopped
            ? resumeAdvice(current)
            : 'Wait for that process to finish; if it is certainly gone, delete the lock file and retry.'),
        { data: { path, holder: current, timeoutMs, ...(isStopped && { isStopped }) } },
      );
    }
    if (options.onWait && now - startedAt >= LOCK_WAIT_NOTICE_MS) {
      const isStopped = isHolderStopped(current);
      if (told?.token !== current.token || told.isStopped !== isStopped) {
        told = { token: current.token, isStopped };
        const message =
          `Waiting for the lock ${path}, held by ${describeHolder(current)}; giving up after ${Math.ceil(timeoutMs / 1000)} s.` +
          (isStopped ? ` ${resumeAdvice(current)}` : '');
        options.onWait({ path, holder: current, isStopped, message });
      }
    }
    await sleep(delayMs + Math.random() * delayMs);
    delayMs = Math.min(delayMs * 2, 50);
  }
}

/**
 * Tokens of the locks this process released but could not remove (a full or failing disk): their
 * files name a live process, this one, but hold nothing, so it takes them over like a dead one's.
 */
const abandonedTokens = new Set<string>();

function createLock(path: string, holder: LockHolder): Lock {
  let isReleased = false;
  // Releasing never throws: the work done under the lock is what succeeded or failed, and its
  // error must not be replaced by the lock's. A lock file that stays is taken over later.
  const release = async (): Promise<void> => {
    if (isReleased) return;
    isReleased = true;
    try {
      const current = readHolder(path);
      // Only remove our own record: never the lock of a process that took over after us.
      if (typeof current === 'object' && current.token === holder.token) removeFile(path);
    } catch {
      abandonedTokens.add(holder.token);
    }
  };
  return { path, holder, release, [Symbol.asyncDispose]: release };
}

/** Runs `fn` while holding the lock at `path`, and always releases it. */
export async function withLock<T>(
  path: string,
  fn: () => Promise<T>,
  options: AcquireLockOptions = {},
): Promise<T> {
  const lock = await acquireLock(path, options);
  try {
    return await fn();
  } finally {
    await lock.release();
  }
}
