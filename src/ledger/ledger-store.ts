// Where a store's sessions keep their ledgers: files under `sessions/` (the default), or a
// PostgreSQL database (SPEC.md §5a). The session layer works with either through this surface.
import { mkdir, open, readdir, stat } from 'node:fs/promises';
import { join } from 'node:path';
import { isSystemError, RewindError } from '../errors.js';
import { syncPath, withLock } from '../lib/index.js';
import type { ObjectReference } from '../store/index.js';
import { type EntryKind, encodeEntry, type LedgerEntry } from './entry.js';
import {
  type AppendCheck,
  appendLockOf,
  Ledger,
  type LedgerOptions,
  type LedgerReading,
  readLedgerFile,
  type SessionFile,
  sessionFileOf,
} from './ledger.js';
import { openLedgerFile } from './reader.js';
import { listSessions, sessionFilesIn } from './sessions.js';
import { checkLedger } from './verify.js';

/** One session's ledger, open for appending: a file or a database's rows. */
export interface SessionLedger {
  readonly session: SessionFile;
  /** True when every entry carries the digest of the one before it. */
  readonly isHashChained: boolean;
  /**
   * Appends one entry; resolves once it is durable. `check`, when given, runs on every entry the
   * ledger holds at that moment, under the lock that allocates the seq (the file's lock, the
   * session row's lock in PostgreSQL), and what it throws stops the append: see
   * {@link AppendCheck}.
   */
  append(
    kind: EntryKind,
    body: Record<string, unknown>,
    refs?: readonly ObjectReference[],
    check?: AppendCheck,
  ): Promise<LedgerEntry>;
  read(): Promise<LedgerReading>;
  close(): Promise<void>;
}

/** How a new session's ledger starts. */
export interface CreateLedgerOptions extends LedgerOptions {
  hashChain?: boolean;
  generateId?: () => string;
  startedBody?: Record<string, unknown>;
}

/** The ledgers of a store's sessions. */
export interface LedgerStore {
  /** Every session, oldest first. */
  list(): Promise<SessionFile[]>;
  /**
   * Every session, in no set order, as cheaply as the store can name them (files: the names
   * under `sessions/`, no ledger read): what finding one by its id needs.
   */
  names(): Promise<SessionFile[]>;
  /** Everything one session's ledger holds, problems included. */
  read(session: SessionFile): Promise<LedgerReading>;
  /** Starts a new session with its `session-started` entry; the ledger is left open. */
  create(options: CreateLedgerOptions): Promise<SessionLedger>;
  /** Opens a session's ledger for appending. */
  open(session: SessionFile, options?: LedgerOptions): Promise<SessionLedger>;
  /**
   * Brings this store's copy of session `id` up to `entries`, the whole ledger of the same
   * session kept elsewhere (`rewind push`, `rewind pull`): creates it when this store lacks it,
   * else appends the entries it lacks, each exactly as given (same seq, time and chain), in one
   * write or transaction. Throws `SESSION_DIVERGED` when the copy here holds an entry that differs
   * from the one with its seq in `entries` (nothing is written), `LEDGER_CORRUPT` when `entries`
   * are not a whole ledger (see {@link checkCopiedEntries}).
   */
  copyIn(id: string, entries: readonly LedgerEntry[]): Promise<CopyInResult>;
  /**
   * A value that changes whenever a session starts or an entry is appended to one: what a live
   * view (`rewind ui`) polls, cheaply, to know when to read again.
   */
  revision(): Promise<string>;
}

/** What {@link LedgerStore.copyIn} did. */
export interface CopyInResult {
  session: SessionFile;
  /** Entries written: those the copy here lacked. */
  appended: number;
  /** Entries the copy here holds beyond those given: it had gone on without them. */
  ahead: number;
}

/**
 * Throws `LEDGER_CORRUPT` unless `entries` are a whole ledger that can be copied as it is: a
 * `session-started` entry first, seq 1, 2, 3... and, in a hash-chained session, an unbroken chain.
 */
export function checkCopiedEntries(id: string, entries: readonly LedgerEntry[]): void {
  const started = entries[0];
  const problem =
    started?.kind !== 'session-started'
      ? 'it does not begin with a session-started entry'
      : checkLedger(
          { entries: [...entries], damagedLastLine: undefined },
          started.body.hashChain === true,
        )[0]?.message;
  if (problem === undefined) return;
  throw new RewindError(
    'LEDGER_CORRUPT',
    `Session ${id} cannot be copied: ${problem}. Nothing was copied; run \`rewind verify\` where it comes from.`,
    { data: { session: id } },
  );
}

/**
 * How many of `incoming` the copy that holds `held` has already: every entry both hold must be the
 * same, byte for byte. Throws `SESSION_DIVERGED` naming the first seq where they differ.
 */
export function sharedPrefixOf(
  id: string,
  held: readonly LedgerEntry[],
  incoming: readonly LedgerEntry[],
): number {
  const overlap = Math.min(held.length, incoming.length);
  for (let index = 0; index < overlap; index++) {
    const here = held[index] as LedgerEntry;
    if (encodeEntry(here) === encodeEntry(incoming[index] as LedgerEntry)) continue;
    throw new RewindError(
      'SESSION_DIVERGED',
      `The two copies of session ${id} differ from entry #${here.seq} on (${here.kind} here, ${incoming[index]?.kind} in the other): each went on without the other, so neither can take the other's entries. Nothing was copied. Keep working in one of them, or start a new session from the other's last checkpoint.`,
      { data: { session: id, seq: here.seq } },
    );
  }
  return overlap;
}

/** The ledgers of a store kept as files under `sessions/`. */
export function fileLedgers(storeDirectory: string): LedgerStore {
  return {
    list: () => listSessions(storeDirectory),
    names: () => sessionFilesIn(storeDirectory),
    read: (session) => readLedgerFile(session.file),
    create: (options) => Ledger.create(storeDirectory, options),
    open: (session, options) => Ledger.open(session, options),
    copyIn: (id, entries) => copyIntoFile(storeDirectory, id, entries),
    revision: () => filesRevision(join(storeDirectory, 'sessions')),
  };
}

/** The names, sizes and change times of the files under `sessions/`: an append changes them. */
async function filesRevision(directory: string): Promise<string> {
  let names: string[];
  try {
    names = await readdir(directory);
  } catch {
    return '';
  }
  const parts: string[] = [];
  for (const name of names.sort()) {
    try {
      const stats = await stat(join(directory, name));
      parts.push(`${name}:${stats.size}:${stats.mtimeMs}`);
    } catch {}
  }
  return parts.join('|');
}

/**
 * {@link LedgerStore.copyIn} for a ledger file, under the lock its appends take: a session this
 * store lacks is created (never over one made meanwhile) and written whole, one it has gets the
 * entries it lacks; each in one write, then fdatasync, as an append. A copy cut short leaves a
 * prefix of the session, which the next copy completes.
 */
async function copyIntoFile(
  storeDirectory: string,
  id: string,
  entries: readonly LedgerEntry[],
): Promise<CopyInResult> {
  checkCopiedEntries(id, entries);
  const started = entries[0] as LedgerEntry;
  const held = (await sessionFilesIn(storeDirectory)).find((session) => session.id === id);
  const session = held ?? sessionFileOf(storeDirectory, `${started.at.slice(0, 10)}_${id}`);
  if (!session) {
    throw new RewindError(
      'INVALID_ARGUMENT',
      `"${id}" is not a session id: use lowercase letters and digits.`,
      { data: { session: id } },
    );
  }
  const lines = (from: number) =>
    Buffer.from(
      entries
        .slice(from)
        .map((entry) => `${encodeEntry(entry)}\n`)
        .join(''),
    );
  return withLock(
    appendLockOf(session),
    async () => {
      if (!held) {
        const directory = join(storeDirectory, 'sessions');
        await mkdir(directory, { recursive: true });
        try {
          // Made only if missing: a session made meanwhile is compared and completed below.
          const handle = await open(session.file, 'wx', 0o644);
          try {
            await handle.writeFile(lines(0));
            await handle.datasync();
          } finally {
            await handle.close();
          }
          await syncPath(directory);
          return { session, appended: entries.length, ahead: 0 };
        } catch (error) {
          if (!isSystemError(error, 'EEXIST')) throw error;
        }
      }
      const reading = await readLedgerFile(session.file);
      const problem = checkLedger(reading, reading.entries[0]?.body.hashChain === true)[0];
      if (problem) {
        throw new RewindError(
          'LEDGER_CORRUPT',
          `Session ${id} here (${session.file}) is damaged: ${problem.message}. Nothing was copied. Run \`rewind verify\`.`,
          { data: { session: id, file: session.file } },
        );
      }
      const shared = sharedPrefixOf(id, reading.entries, entries);
      const ahead = reading.entries.length - shared;
      if (shared === entries.length) return { session, appended: 0, ahead };
      const handle = await openLedgerFile(session.file, { append: true });
      try {
        // A torn final line left by a crash stays as it is: the copy starts on a fresh line.
        const bytes = lines(shared);
        await handle.writeFile(
          reading.endsMidLine ? Buffer.concat([Buffer.from('\n'), bytes]) : bytes,
        );
        await handle.datasync();
      } finally {
        await handle.close();
      }
      return { session, appended: entries.length - shared, ahead: 0 };
    },
    { timeoutMs: 10_000, purpose: `copying session ${id}` },
  );
}
