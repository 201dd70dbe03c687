import { fstatSync, writeSync } from 'node:fs';
import { mkdir, open } from 'node:fs/promises';
import { join } from 'node:path';
import { isRewindError, RewindError } from '../errors.js';
import {
  createLimiter,
  nodeCrypto,
  parseJsonLines,
  syncPath,
  type UnreadableLine,
  withLock,
} from '../lib/index.js';
import type { ObjectReference } from '../store/index.js';
import {
  checkEntryKind,
  checkEnvelope,
  type EntryKind,
  encodeNewEntry,
  entryAfter,
  isKnownEntryKind,
  LEDGER_FORMAT_VERSION,
  type LedgerEntry,
} from './entry.js';
import { LedgerReader, openLedgerFile } from './reader.js';

type FileHandle = Awaited<ReturnType<typeof open>>;

/** Where a session's ledger lives. */
export interface SessionFile {
  /** The session id, as users type it (`rewind log --session ID`). */
  id: string;
  /** The file name without `.jsonl`: `<UTC date>_<id>`. */
  stem: string;
  /** Absolute path of the `.jsonl` file. */
  file: string;
}

/** Everything read from a ledger file, problems included. */
export interface LedgerReading {
  /** Every line that has the shape of an entry, in file order, whatever its kind or version. */
  entries: LedgerEntry[];
  /** Lines that are not entries, each with why; a torn final line is marked `isTorn`. */
  unreadable: UnreadableLine[];
  /** True when the file ends without a newline (a torn final line). */
  endsMidLine: boolean;
  /**
   * The last line when it is complete (newline-terminated) yet not an entry: damage, not a torn
   * write, since an append writes its newline last in the same write.
   */
  damagedLastLine: UnreadableLine | undefined;
}

/**
 * A check an append runs against every entry of the ledger as it stands at that moment, under the
 * lock that allocates the entry's seq: what it throws is thrown by the append, and nothing is
 * appended. This is how a "check, then append" (a label not taken yet, an action not undone yet)
 * holds against other writers of the same session, on other machines too.
 */
export type AppendCheck = (entries: readonly LedgerEntry[]) => void | Promise<void>;

/** Options shared by the functions that write a ledger. */
export interface LedgerOptions {
  /** The clock for `at`; injected in tests. Default: the system clock. */
  now?: () => Date;
  /** How long an append waits for another writer's lock. Default 10 000 ms. */
  lockTimeoutMs?: number;
}

const SESSION_FILE_PATTERN = /^(\d{4}-\d{2}-\d{2})_([0-9a-z]+)\.jsonl$/;
const ID_ALPHABET = '0123456789abcdefghjkmnpqrstvwxyz';
const TAIL_WINDOW_BYTES = 64 * 1024;

/** A new random session id: 10 characters of lowercase Crockford base 32. */
export function generateSessionId(): string {
  return [...nodeCrypto().randomBytes(10)].map((byte) => ID_ALPHABET[byte % 32]).join('');
}

/** The session file of `stem` (`<date>_<id>`) in a store, or undefined when the name is not one. */
export function sessionFileOf(storeDirectory: string, name: string): SessionFile | undefined {
  const match = SESSION_FILE_PATTERN.exec(name.endsWith('.jsonl') ? name : `${name}.jsonl`);
  if (!match?.[2]) return undefined;
  const stem = `${match[1]}_${match[2]}`;
  return { id: match[2], stem, file: join(storeDirectory, 'sessions', `${stem}.jsonl`) };
}

/**
 * Reads a whole ledger file. Never throws on bad lines: they are reported in `unreadable`. Throws
 * `LEDGER_CORRUPT` when the file is not a plain file (a directory, a link), and ENOENT.
 */
export async function readLedgerFile(file: string): Promise<LedgerReading> {
  const handle = await openLedgerFile(file);
  let bytes: Buffer;
  try {
    bytes = await handle.readFile();
  } finally {
    await handle.close();
  }
  const parsed = parseJsonLines(bytes);
  const entries: LedgerEntry[] = [];
  const unreadable = [...parsed.unreadable];
  for (const record of parsed.records) {
    const reason = checkEnvelope(record.value);
    if (reason === undefined) {
      entries.push(record.value as LedgerEntry);
    } else {
      unreadable.push({
        line: record.line,
        offset: -1,
        text: record.text.slice(0, 200),
        isTorn: false,
        reason: `not a ledger entry: ${reason}`,
      });
    }
  }
  unreadable.sort((a, b) => a.line - b.line);
  const lastLine = Math.max(parsed.records.at(-1)?.line ?? 0, parsed.unreadable.at(-1)?.line ?? 0);
  const last = unreadable.at(-1);
  const damagedLastLine = last && last.line === lastLine && !last.isTorn ? last : undefined;
  return { entries, unreadable, endsMidLine: parsed.endsMidLine, damagedLastLine };
}

/**
 * The first entry this Rewind cannot interpret: one with a newer format version or an unknown
 * kind, both written by a newer Rewind. Undefined when there is none.
 */
export function findUnsupportedEntry(entries: readonly LedgerEntry[]): LedgerEntry | undefined {
  return entries.find((entry) => entry.v > LEDGER_FORMAT_VERSION || !isKnownEntryKind(entry.kind));
}

/** The error for an entry that {@link findUnsupportedEntry} found. */
export function unsupportedEntryError(session: SessionFile, entry: LedgerEntry): RewindError {
  if (entry.v > LEDGER_FORMAT_VERSION) {
    return new RewindError(
      'LEDGER_VERSION_UNSUPPORTED',
      `Session ${session.id} has entry #${entry.seq} in ledger format ${entry.v}, written by a newer Rewind; ` +
        `this version reads format ${LEDGER_FORMAT_VERSION}. Upgrade Rewind to work with this session. Nothing was changed.`,
      { data: { session: session.id, seq: entry.seq, version: entry.v } },
    );
  }
  return new RewindError(
    'ENTRY_KIND_UNKNOWN',
    `Session ${session.id} has entry #${entry.seq} of kind "${entry.kind}", which this version of Rewind does not know ` +
      '(a newer Rewind wrote it). Upgrade Rewind to work with this session. Nothing was changed.',
    { data: { session: session.id, seq: entry.seq, kind: entry.kind } },
  );
}

/** The lock file that serializes the appends to a session's ledger file. */
export function appendLockOf(session: SessionFile): string {
  return join(session.file, '..', `${session.stem}.lock`);
}

interface Tail {
  sizeBytes: number;
  last: LedgerEntry | undefined;
  endsMidLine: boolean;
  /** The last complete line is not an entry: damage that an append must not bury. */
  isLastLineDamaged: boolean;
}

function parseEntryLine(line: string): LedgerEntry | undefined {
  try {
    const value: unknown = JSON.parse(line);
    return checkEnvelope(value) === undefined ? (value as LedgerEntry) : undefined;
  } catch {
    return undefined;
  }
}

/** Finds the last valid entry of an open ledger by reading backwards from its end. */
async function readTail(handle: FileHandle, sizeBytes: number): Promise<Tail> {
  const tail: Tail = { sizeBytes, last: undefined, endsMidLine: false, isLastLineDamaged: false };
  if (sizeBytes === 0) return tail;
  for (let window = TAIL_WINDOW_BYTES; ; window *= 2) {
    const start = Math.max(0, sizeBytes - window);
    const buffer = Buffer.alloc(sizeBytes - start);
    await handle.read(buffer, 0, buffer.length, start);
    const lines = buffer.toString('utf8').split('\n');
    // The last piece is '' after a final newline, or a torn write: never an entry.
    tail.endsMidLine = lines.pop() !== '';
    // A window that starts mid-file may cut its first line: never trust it.
    const first = start === 0 ? 0 : 1;
    for (let index = lines.length - 1; index >= first; index--) {
      const line = lines[index];
      if (!line) continue;
      tail.last = parseEntryLine(line);
      if (tail.last) return tail;
      if (index === lines.length - 1) tail.isLastLineDamaged = true;
    }
    if (start === 0) return tail;
  }
}

/**
 * One session's append-only ledger, open for appending. Appends from any number of processes
 * are serialized by a lock file beside the ledger; within a process they are queued.
 */
export class Ledger {
  readonly session: SessionFile;
  /** True when every entry carries the digest of the one before it. */
  readonly isHashChained: boolean;
  readonly #handle: FileHandle;
  readonly #now: () => Date;
  readonly #lockTimeoutMs: number;
  readonly #reader: LedgerReader;
  /** Appends run one at a time, in the order they were asked for. */
  readonly #serial = createLimiter(1);
  #tail: Tail | undefined;

  private constructor(
    session: SessionFile,
    handle: FileHandle,
    isHashChained: boolean,
    options: LedgerOptions,
    reader = new LedgerReader(session.file),
  ) {
    this.session = session;
    this.#handle = handle;
    this.isHashChained = isHashChained;
    this.#now = options.now ?? (() => new Date());
    this.#lockTimeoutMs = options.lockTimeoutMs ?? 10_000;
    this.#reader = reader;
  }

  /**
   * Starts a new session in a store: creates `sessions/<UTC date>_<id>.jsonl` and appends its
   * `session-started` entry, with `hashChain` and the given body fields.
   */
  static async create(
    storeDirectory: string,
    options: LedgerOptions & {
      hashChain?: boolean;
      generateId?: () => string;
      startedBody?: Record<string, unknown>;
    } = {},
  ): Promise<Ledger> {
    const now = options.now ?? (() => new Date());
    const id = (options.generateId ?? generateSessionId)();
    const session = sessionFileOf(storeDirectory, `${now().toISOString().slice(0, 10)}_${id}`);
    if (!session) {
      throw new RewindError(
        'INVALID_ARGUMENT',
        `"${id}" is not a valid session id: use lowercase letters and digits.`,
        {
          data: { id },
        },
      );
    }
    const directory = join(storeDirectory, 'sessions');
    await mkdir(directory, { recursive: true });
    const handle = await open(session.file, 'ax+', 0o644);
    await syncPath(directory);
    const ledger = new Ledger(session, handle, options.hashChain === true, options);
    await ledger.append('session-started', {
      ...options.startedBody,
      hashChain: options.hashChain === true,
    });
    return ledger;
  }

  /**
   * Opens an existing session's ledger for appending. Throws `SESSION_NOT_FOUND` when the file is
   * gone, `LEDGER_CORRUPT` when it has no `session-started` entry, and
   * `LEDGER_VERSION_UNSUPPORTED` / `ENTRY_KIND_UNKNOWN` when a newer Rewind wrote to it.
   */
  static async open(session: SessionFile, options: LedgerOptions = {}): Promise<Ledger> {
    // The reader that checks the file here keeps what it parsed for the session's later reads.
    const reader = new LedgerReader(session.file);
    let reading: LedgerReading;
    try {
      reading = await reader.read();
    } catch (error) {
      if (isRewindError(error)) throw error;
      throw new RewindError(
        'SESSION_NOT_FOUND',
        `The ledger of session ${session.id} cannot be read (${session.file}). Run \`rewind session list\` to list the sessions.`,
        { data: { session: session.id, file: session.file }, cause: error },
      );
    }
    const started = reading.entries[0];
    if (started?.kind !== 'session-started') {
      throw new RewindError(
        'LEDGER_CORRUPT',
        `The ledger ${session.file} does not begin with a session-started entry, so it is not a Rewind session. ` +
          'Nothing was changed; move the file aside if it does not belong there.',
        { data: { file: session.file, line: 1 } },
      );
    }
    const unsupported = findUnsupportedEntry(reading.entries);
    if (unsupported) throw unsupportedEntryError(session, unsupported);
    const handle = await openLedgerFile(session.file, { append: true });
    return new Ledger(session, handle, started.body.hashChain === true, options, reader);
  }

  /**
   * Appends one entry and resolves once it is on disk (written in one `write`, then fdatasynced).
   * `seq` is assigned under the session's lock, so concurrent writers never collide or leave a
   * gap. A torn final line left by a crash is left as it is; the entry starts on a fresh line.
   *
   * With `check`, the ledger is read under the lock and `check` runs on its entries before
   * anything is written (see {@link AppendCheck}).
   *
   * Throws `INVALID_ARGUMENT` for an unknown kind or a body JSON cannot hold, and `LOCK_HELD`
   * when another writer keeps the lock too long.
   */
  append(
    kind: EntryKind,
    body: Record<string, unknown>,
    refs?: readonly ObjectReference[],
    check?: AppendCheck,
  ): Promise<LedgerEntry> {
    return this.#serial(() => this.#appendNow(kind, body, refs, check));
  }

  async #appendNow(
    kind: EntryKind,
    body: Record<string, unknown>,
    refs: readonly ObjectReference[] | undefined,
    check: AppendCheck | undefined,
  ): Promise<LedgerEntry> {
    checkEntryKind(kind);
    return withLock(
      appendLockOf(this.session),
      async () => {
        if (check) await check((await this.#reader.read()).entries);
        // fstat and a one-line write take microseconds: done synchronously; only the sync waits.
        const { size } = fstatSync(this.#handle.fd);
        const tail =
          this.#tail?.sizeBytes === size ? this.#tail : await readTail(this.#handle, size);
        if (tail.isLastLineDamaged) {
          throw new RewindError(
            'LEDGER_CORRUPT',
            `The last line of ${this.session.file} is complete but is not a ledger entry, so the newest entry may be damaged. ` +
              'Nothing was written. Run `rewind verify`, and restore the file from a backup or move the damaged line aside.',
            { data: { file: this.session.file } },
          );
        }
        const entry = entryAfter(
          tail.last,
          { kind, body, at: this.#now().toISOString(), ...(refs && { refs }) },
          this.isHashChained,
          {
            where: `of ${this.session.file}`,
            repair: 'restore the file from a backup or move the damaged line aside',
            data: { file: this.session.file },
          },
        );
        const line = `${tail.endsMidLine ? '\n' : ''}${encodeNewEntry(entry)}\n`;
        const bytes = Buffer.from(line);
        const bytesWritten = writeSync(this.#handle.fd, bytes, 0, bytes.length);
        if (bytesWritten !== bytes.length) {
          throw new RewindError(
            'IO_FAILED',
            `Only ${bytesWritten} of ${bytes.length} bytes reached ${this.session.file}.`,
            {
              data: { file: this.session.file },
            },
          );
        }
        await this.#handle.datasync();
        this.#tail = {
          sizeBytes: size + bytes.length,
          last: entry,
          endsMidLine: false,
          isLastLineDamaged: false,
        };
        return entry;
      },
      { timeoutMs: this.#lockTimeoutMs, purpose: `appending to session ${this.session.id}` },
    );
  }

  /**
   * Reads the whole ledger, as {@link readLedgerFile} does, but parses only what was appended
   * since this ledger's previous read (see {@link LedgerReader}).
   */
  read(): Promise<LedgerReading> {
    return this.#reader.read();
  }

  /** Waits for pending appends and closes the file. */
  async close(): Promise<void> {
    await this.#serial(async () => {});
    await this.#handle.close();
  }

  async [Symbol.asyncDispose](): Promise<void> {
    await this.close();
  }
}
