import { existsSync } from 'node:fs';
import { stat } from 'node:fs/promises';
import { basename, join } from 'node:path';
import { isRewindError, RewindError } from '../errors.js';
import {
  describeEntry,
  ENTRY_KINDS,
  findUnsupportedEntry,
  type LedgerEntry,
  type LedgerReading,
  migratePostgres,
  readCurrentSession,
  type SessionFile,
  setCurrentSession,
  unsupportedEntryError,
} from '../ledger/index.js';
import {
  acquireLock,
  clipped,
  createRedactor,
  type Digest,
  forEachConcurrently,
  type LockWait,
  liveHolderOf,
  type UnreadableLine,
  withLock,
} from '../lib/index.js';
import {
  createObjectStore,
  findStore,
  initStore,
  isPostgresUrl,
  openObjectStore,
  openStore,
  type StoreLocation,
  workspaceLockOf,
} from '../store/index.js';
import { checkWorkspace, previewSnapshot, type SnapshotPreview } from '../workspace/index.js';
import {
  type ActionClass,
  type ActionState,
  addToActionIndex,
  createActionIndex,
  deriveActions,
  isRecorded,
  newestActionOf,
} from './journal/action-records.js';
import { type ProtectionOptions, type Protections, protectionsOf } from './protections.js';
import { ledgersOf, pickSession, startLedger } from './session-files.js';

/** Options every store operation takes. */
export interface WorkspaceOptions {
  /** The workspace root: the directory that holds (or will hold) `.rewind/`. */
  workspace: string;
}

/** A session as `status` and `log` show it. */
export interface SessionSummary {
  id: string;
  /** The ledger file. */
  file: string;
  /** `at` of the session-started entry. */
  startedAt: string | undefined;
  /** `at` of the newest entry. */
  lastAt: string | undefined;
  entryCount: number;
  isHashChained: boolean;
  isCurrent: boolean;
  /** A torn final line left by a crash (ignored), when there is one. */
  tornLine: UnreadableLine | undefined;
  /** Why this Rewind cannot work with the session (a newer Rewind wrote to it), if so. */
  unsupported: RewindError | undefined;
  /** Where its commands run, as `init` recorded it (`none` unless said otherwise). */
  sandbox: string;
  /** `isolated` when it works on a private view of the workspace, else `shared`. */
  isolation: 'shared' | 'isolated';
  /** Whether its sandboxed commands may use the network. */
  network: boolean;
  /** What started it, when that was recorded (`mcp` for `rewind mcp --isolated`). */
  startedBy: string | undefined;
  /** What every process that opens it applies: redaction, refusal of private addresses. */
  protections: Protections;
  /**
   * The operation a killed process left half-done, if any: the next command that opens the
   * session finishes it (saving first whatever was edited since).
   */
  interrupted: { id: number; kind: string; target: string } | undefined;
  /**
   * The operation a live process is running in the session now (it holds the workspace lock,
   * naming the session): not cut short, though not ended yet. `pid`: that process (a daemon's,
   * for a command the daemon runs).
   */
  running?: { id: number; kind: string; target: string; pid: number };
}

/**
 * The newest action of this copy of the workspace (see `newestActionOf`; `workspaceId` is the
 * store's, on a shared ledger) when it never ended: drafts and recorded actions wait by design.
 */
export function interruptedOf(
  entries: readonly LedgerEntry[],
  workspaceId?: string,
): SessionSummary['interrupted'] {
  const index = createActionIndex();
  for (const entry of entries) addToActionIndex(index, entry);
  const newest = newestActionOf(index, workspaceId);
  if (!newest || newest.closed || newest.state === 'draft' || newest.state === 'discarded') {
    return undefined;
  }
  if (isRecorded(newest)) return undefined;
  return { id: newest.id, kind: newest.kind, target: newest.target };
}

function summarize(
  session: SessionFile,
  reading: LedgerReading,
  current: SessionFile | undefined,
  location: StoreLocation,
): SessionSummary {
  const unsupportedEntry = findUnsupportedEntry(reading.entries);
  const pending = interruptedOf(reading.entries, location.ledger?.workspaceId);
  // Still running, when the process that holds the workspace lock works in this session.
  const holder = pending && liveHolderOf(workspaceLockOf(location.directory));
  const isRunning = holder?.purpose?.endsWith(`(session ${session.id})`) === true;
  return {
    id: session.id,
    file: session.file,
    startedAt: reading.entries[0]?.at,
    lastAt: reading.entries.at(-1)?.at,
    entryCount: reading.entries.length,
    isHashChained: reading.entries[0]?.body.hashChain === true,
    isCurrent: current?.id === session.id,
    tornLine: reading.unreadable.find((line) => line.isTorn),
    unsupported: unsupportedEntry ? unsupportedEntryError(session, unsupportedEntry) : undefined,
    sandbox: String(reading.entries[0]?.body.sandbox ?? 'none'),
    isolation: reading.entries[0]?.body.isolation === 'isolated' ? 'isolated' : 'shared',
    network: reading.entries[0]?.body.network === true,
    startedBy:
      typeof reading.entries[0]?.body.startedBy === 'string'
        ? reading.entries[0].body.startedBy
        : undefined,
    protections: protectionsOf(reading.entries),
    interrupted: isRunning ? undefined : pending,
    ...(isRunning && pending && holder && { running: { ...pending, pid: holder.pid } }),
  };
}

/**
 * The workspace that commands run in when none is named: the nearest directory at or above
 * `start` that holds a `.rewind/` store, else `start` itself.
 */
export async function locateWorkspace(start: string): Promise<string> {
  return (await findStore(start))?.workspace ?? start;
}

/** What {@link init} did. */
export interface InitResult {
  workspace: string;
  storeDirectory: string;
  /** False when the store was there already (nothing was changed then). */
  isNewStore: boolean;
  /** The current session: the new one, or the existing one when the store was there. */
  session: SessionSummary;
  isNewSession: boolean;
}

/**
 * Creates the store `.rewind/` in a workspace and starts its first session, which becomes the
 * current one. On a workspace that has a store already, changes nothing and reports its current
 * session. `hashChain` makes every entry of the new session commit to the previous one.
 *
 * Throws `STORE_NOT_OURS` when a `.rewind/` exists that Rewind did not make, and
 * `WORKSPACE_REFUSED` for `/` or a home directory.
 */
/** How a new session is started (by {@link init} on a new store, or {@link startSession}). */
export interface NewSessionOptions extends ProtectionOptions {
  hashChain?: boolean;
  now?: () => Date;
  generateId?: () => string;
  /** Where the session's commands run (`bwrap`, `none`, `auto`); recorded in the session. */
  sandbox?: 'bwrap' | 'none' | 'auto';
  /** Whether sandboxed commands may use the network; recorded in the session. */
  network?: boolean;
}

function startOptionsOf(options: NewSessionOptions): Parameters<typeof startLedger>[1] {
  return {
    hashChain: options.hashChain === true,
    ...(options.now && { now: options.now }),
    ...(options.generateId && { generateId: options.generateId }),
    ...(options.sandbox && { sandbox: options.sandbox }),
    ...(options.network !== undefined && { network: options.network }),
    ...(options.redact && { redact: options.redact }),
    ...(options.blockPrivate === true && { blockPrivate: true }),
  };
}

export async function init(
  options: WorkspaceOptions &
    NewSessionOptions & {
      /**
       * Keep the store's objects in an S3-compatible bucket, `s3://BUCKET/PREFIX`, instead of
       * `.rewind/objects/` (which then caches them); recorded in `.rewind/config.json`. Default:
       * the `REWIND_OBJECTS` environment variable, for a new store. Refused for a store that
       * keeps its objects elsewhere.
       */
      objects?: string;
      /**
       * Keep the store's sessions' ledgers in a PostgreSQL database, `postgres://USER@HOST/DB`
       * (the password in the URL or in PGPASSWORD), instead of `.rewind/sessions/`; recorded in
       * `.rewind/config.json` with a new id for the store. The tables are created or migrated.
       * Default: the `REWIND_LEDGER` environment variable, for a new store.
       */
      ledger?: string;
    },
): Promise<InitResult> {
  // A redaction pattern that does not compile is refused before anything is created.
  createRedactor(options.redact);
  // A store in / or a home directory could never be snapshotted: refuse before creating it.
  const stats = await stat(options.workspace).catch(() => undefined);
  if (stats) checkWorkspace(options.workspace);
  const objects = options.objects ?? (process.env.REWIND_OBJECTS || undefined);
  const ledger = options.ledger ?? (process.env.REWIND_LEDGER || undefined);
  // The database is reached (and its tables made) before anything is written here: a store is
  // never left naming a database it cannot use.
  const isNew = (await openStore(options.workspace).catch(() => undefined)) === undefined;
  if (isNew && ledger !== undefined && isPostgresUrl(ledger)) await migratePostgres(ledger);
  const location = await initStore(options.workspace, {
    ...(options.now && { now: options.now }),
    ...(objects !== undefined && { objects }),
    ...(ledger !== undefined && { ledger }),
  });
  // The tables of a store made earlier, brought up to date; idempotent.
  if (location.ledger && location.ledger.url !== ledger) await migratePostgres(location.ledger.url);
  const ledgers = ledgersOf(location);
  const readCurrent = () =>
    readCurrentSession(location.directory, ledgers).catch((error: unknown) => {
      if (isRewindError(error, 'SESSION_NOT_FOUND')) return undefined;
      throw error;
    });
  let current = await readCurrent();
  let isNewSession = false;
  if (!current) {
    // Under the workspace lock, looked for again: processes starting on a new store at once
    // (parallel hook calls) all take the one session the first of them starts.
    current = await withLock(
      workspaceLockOf(location.directory),
      async () => {
        const found = await readCurrent();
        if (found) return found;
        const started = await startLedger(location, startOptionsOf(options));
        await started.close();
        await setCurrentSession(location.directory, started.session);
        isNewSession = true;
        return started.session;
      },
      { timeoutMs: 60_000, purpose: 'starting a session' },
    );
  }
  return {
    workspace: location.workspace,
    storeDirectory: location.directory,
    isNewStore: location.isNew,
    session: summarize(current, await ledgers.read(current), current, location),
    isNewSession,
  };
}

/**
 * Starts a new session on a workspace that has a store, with its own ledger (and hash chain,
 * sandbox and network, as asked), and makes it the current one unless `makeCurrent` is false.
 * The other sessions stay as they are. Throws `STORE_NOT_FOUND`.
 */
export async function startSession(
  options: WorkspaceOptions & NewSessionOptions & { makeCurrent?: boolean },
): Promise<SessionSummary> {
  const location = await openStore(options.workspace);
  const ledger = await startLedger(location, startOptionsOf(options));
  await ledger.close();
  if (options.makeCurrent !== false) await setCurrentSession(location.directory, ledger.session);
  const current = options.makeCurrent !== false ? ledger.session : undefined;
  return summarize(
    ledger.session,
    await ledgersOf(location).read(ledger.session),
    current,
    location,
  );
}

/**
 * Makes a session (an id, a unique prefix, or a ledger file name) the current one: the one that
 * commands and `openSession` use when none is named. Throws `STORE_NOT_FOUND`,
 * `SESSION_NOT_FOUND`, `SESSION_AMBIGUOUS`, and for an isolated session whose view is gone,
 * `SESSION_NOT_FOUND`.
 */
export async function useSession(
  options: WorkspaceOptions & { session: string },
): Promise<SessionSummary> {
  const location = await openStore(options.workspace);
  const session = await pickSession(location, options.session);
  const reading = await ledgersOf(location).read(session);
  const summary = summarize(session, reading, session, location);
  if (
    summary.isolation === 'isolated' &&
    !existsSync(join(location.directory, 'views', session.id))
  ) {
    throw new RewindError(
      'SESSION_NOT_FOUND',
      `Session ${session.id} is isolated and its view is gone (it was destroyed), so it cannot be the current session. Start another with \`rewind session new\`.`,
      { data: { session: session.id } },
    );
  }
  await setCurrentSession(location.directory, session);
  return summary;
}

/**
 * What the first checkpoint of a workspace with a store would take, without reading a file:
 * files, bytes, the largest directories, and what git's rules and `.rewindignore` leave out
 * (see `Session.preview`). Throws `STORE_NOT_FOUND`.
 */
export async function previewWorkspace(options: WorkspaceOptions): Promise<SnapshotPreview> {
  const location = await openStore(options.workspace);
  return previewSnapshot(location.workspace, { storeDirectory: location.directory });
}

/**
 * A value that changes whenever one of the store's sessions starts or gets an entry, whether its
 * ledgers are files or rows in a database: what a live view polls to know when to read again.
 * Throws `STORE_NOT_FOUND`, and `IO_FAILED` when the database cannot be reached.
 */
export async function ledgerRevision(options: WorkspaceOptions): Promise<string> {
  return ledgersOf(await openStore(options.workspace)).revision();
}

/**
 * The id of the session {@link openSession} opens when given none: the workspace's current one;
 * undefined when none is set. Reads the store's small `current` file (a process that keeps
 * sessions open checks with it that the one it holds is still the current one). Throws
 * `STORE_NOT_FOUND`.
 */
export async function currentSessionId(options: WorkspaceOptions): Promise<string | undefined> {
  const location = await openStore(options.workspace);
  return (await readCurrentSession(location.directory, ledgersOf(location)))?.id;
}

/** How many ledgers {@link status} reads at a time. */
const LEDGERS_AT_ONCE = 8;

/** What {@link status} reports. */
export interface StatusReport {
  workspace: string;
  storeDirectory: string;
  currentSession: string | undefined;
  sessions: SessionSummary[];
  /**
   * The objects the store holds. `bucketError` is set when the bucket the objects are in could
   * not be counted (unreachable, credentials refused): then `count` and `sizeBytes` are what the
   * local cache holds, and it says why.
   */
  objects: { count: number; sizeBytes: number; bucketError?: string };
}

/** The objects' usage for {@link status}: the bucket's, else, when it fails, the local cache's. */
async function objectsUsage(location: StoreLocation): Promise<StatusReport['objects']> {
  try {
    return await openObjectStore(location).usage();
  } catch (error) {
    if (location.objects === undefined || !isRewindError(error, 'IO_FAILED')) throw error;
    return {
      ...(await createObjectStore(location.directory).usage()),
      bucketError: error.message,
    };
  }
}

/**
 * The store at a glance: its sessions (oldest first) with their entry counts, which one is
 * current, and how many objects the store holds and their size (of a bucket that cannot be
 * counted, what the local cache holds, with why: see {@link StatusReport}). Throws
 * `STORE_NOT_FOUND`.
 */
export async function status(options: WorkspaceOptions): Promise<StatusReport> {
  const location = await openStore(options.workspace);
  const ledgers = ledgersOf(location);
  const current = await readCurrentSession(location.directory, ledgers).catch(() => undefined);
  const listed = await ledgers.list();
  const sessions: SessionSummary[] = new Array(listed.length);
  // A few at a time: each read waits on the disk (or the database) more than it computes.
  await forEachConcurrently([...listed.keys()], LEDGERS_AT_ONCE, async (index) => {
    const session = listed[index] as SessionFile;
    sessions[index] = summarize(session, await ledgers.read(session), current, location);
  });
  const objects = await objectsUsage(location);
  return {
    workspace: location.workspace,
    storeDirectory: location.directory,
    currentSession: current?.id,
    sessions,
    objects,
  };
}

/** One entry as {@link log} returns it. */
export interface LogLine {
  seq: number;
  at: string;
  kind: string;
  summary: string;
  entry: LedgerEntry;
  /** For the entry that started an action: its class and its state now, derived from the ledger. */
  action?: { class: ActionClass; state: ActionState };
}

/** What {@link log} returns. */
export interface LogReport {
  session: SessionSummary;
  entries: LogLine[];
  /** Lines that are not entries (a torn final line is one of them, marked `isTorn`). */
  unreadable: UnreadableLine[];
}

/**
 * The timeline of a session (the current one unless `session` names another): every entry in
 * order with a one-line summary. Entries written by a newer Rewind are listed with a note
 * (`session.unsupported` says so), never hidden. Throws `STORE_NOT_FOUND`, `SESSION_NOT_FOUND`,
 * `SESSION_AMBIGUOUS`.
 */
export async function log(
  options: WorkspaceOptions & {
    session?: string;
    /** Only entries of this kind, or of its family (`verification` is `verification-recorded`). */
    kind?: string;
    /** Only entries about this checkpoint: its creation, rollbacks to it, escalations naming it. */
    checkpoint?: string;
  },
): Promise<LogReport> {
  if (options.kind !== undefined) checkKindFilter(options.kind);
  const location = await openStore(options.workspace);
  const ledgers = ledgersOf(location);
  const current = await readCurrentSession(location.directory, ledgers).catch(() => undefined);
  // Read once: the session shown when none is named, and marked current in the summary.
  const session =
    options.session === undefined && current
      ? current
      : await pickSession(location, options.session);
  const reading = await ledgers.read(session);
  const label = options.checkpoint;
  // A label the session never had is a typo, as an unknown kind is: not an empty timeline.
  if (
    label !== undefined &&
    !reading.entries.some(
      (entry) => entry.kind === 'checkpoint-created' && entry.body.label === label,
    )
  ) {
    throw new RewindError(
      'CHECKPOINT_NOT_FOUND',
      `Session ${session.id} never had a checkpoint ${JSON.stringify(clipped(label))}: \`rewind checkpoints\` lists its checkpoints.`,
      { data: { label, session: session.id } },
    );
  }
  const actions = deriveActions(reading.entries);
  return {
    session: summarize(session, reading, current, location),
    entries: reading.entries
      .filter((entry) => matchesFilter(entry, options))
      .map((entry) => {
        const action = actions.get(entry.seq);
        return {
          seq: entry.seq,
          at: entry.at,
          kind: entry.kind,
          summary: describeEntry(entry),
          entry,
          ...(action && { action: { class: action.class, state: action.state } }),
        };
      }),
    unreadable: reading.unreadable,
  };
}

/**
 * Refuses a kind that names no entry kind nor family of them (`checkpoint`, `rollback`...), and
 * no external action (`x.deploy`): a typo would list an empty timeline.
 */
function checkKindFilter(kind: string): void {
  const kinds = Object.keys(ENTRY_KINDS);
  if (
    kind.startsWith('x.') ||
    kinds.some((known) => known === kind || known.startsWith(`${kind}-`))
  )
    return;
  const families = [...new Set(kinds.map((known) => known.split('-')[0] as string))];
  throw new RewindError(
    'INVALID_ARGUMENT',
    `No entry is of kind "${kind}". Give a kind or its first word (${families.join(', ')}), or x.NAME for an external action.`,
    { data: { field: 'kind', kind, families } },
  );
}

function matchesFilter(
  entry: LedgerEntry,
  filter: { kind?: string; checkpoint?: string },
): boolean {
  if (
    filter.kind !== undefined &&
    entry.kind !== filter.kind &&
    !entry.kind.startsWith(`${filter.kind}-`)
  ) {
    return false;
  }
  if (filter.checkpoint !== undefined) {
    const body = entry.body;
    return body.label === filter.checkpoint || body.checkpoint === filter.checkpoint;
  }
  return true;
}

/** What {@link note} recorded. */
export interface NoteResult {
  session: string;
  entry: LedgerEntry;
}

/**
 * Adds a note to a session's timeline (the current session unless `session` names another),
 * with files attached: each is stored as an object first, so the entry never names content the
 * store does not hold. Throws `STORE_NOT_FOUND`, `SESSION_NOT_FOUND`, `INVALID_ARGUMENT` (empty
 * text, an attachment that is not a readable file), and `ENTRY_KIND_UNKNOWN` /
 * `LEDGER_VERSION_UNSUPPORTED` when a newer Rewind wrote to the session.
 */
export async function note(
  options: WorkspaceOptions & {
    text: string;
    attachments?: readonly string[];
    session?: string;
    now?: () => Date;
    /** Told after a second of waiting for another process's lock (attachments only). */
    onLockWait?: (wait: LockWait) => void;
  },
): Promise<NoteResult> {
  if (options.text.trim() === '') {
    throw new RewindError('INVALID_ARGUMENT', 'A note needs some text.', {
      data: { field: 'text' },
    });
  }
  const location = await openStore(options.workspace);
  const session = await pickSession(location, options.session);
  const ledger = await ledgersOf(location).open(session, {
    ...(options.now && { now: options.now }),
  });
  // Only a note with attachments writes objects: it then holds the workspace lock, so gc cannot
  // take them before the entry references them. A plain note never waits for a running agent.
  const isLocked = (options.attachments ?? []).length > 0;
  const lock = isLocked
    ? await acquireLock(workspaceLockOf(location.directory), {
        timeoutMs: 60_000,
        purpose: `adding a note to session ${session.id}`,
        ...(options.onLockWait && { onWait: options.onLockWait }),
      })
    : undefined;
  try {
    const store = openObjectStore(location);
    const attachments: { name: string; digest: Digest; sizeBytes: number }[] = [];
    for (const path of options.attachments ?? []) {
      const info = await store.put({ file: path }).catch((error: unknown) => {
        throw new RewindError(
          'INVALID_ARGUMENT',
          `Cannot attach ${path}: ${(error as Error).message}. Attach a readable file.`,
          {
            data: { path },
            cause: error,
          },
        );
      });
      attachments.push({ name: basename(path), ...info });
    }
    const entry = await ledger.append(
      'note-added',
      { text: options.text, ...(attachments.length > 0 && { attachments }) },
      attachments.map(({ digest }) => ({ type: 'blob', digest })),
    );
    return { session: session.id, entry };
  } finally {
    await lock?.release();
    await ledger.close();
  }
}
