import { readdir, stat } from 'node:fs/promises';
import { basename, join } from 'node:path';
import { isRewindError, RewindError } from '../errors.js';
import {
  checkLedger,
  describeEntry,
  findUnsupportedEntry,
  Ledger,
  type LedgerEntry,
  type LedgerProblem,
  type LedgerReading,
  listSessions,
  readCurrentSession,
  readLedgerFile,
  type SessionFile,
  setCurrentSession,
  unsupportedEntryError,
} from '../ledger/index.js';
import type { Digest, UnreadableLine } from '../lib/index.js';
import {
  createObjectStore,
  findStore,
  initStore,
  type ObjectReference,
  openStore,
  type StoreLocation,
  walkReferences,
} from '../store/index.js';
import { cachedReferences, checkWorkspace, clearStatCache } from '../workspace/index.js';
import { type ActionClass, type ActionState, deriveActions } from './journal/action-records.js';
import { pickSession, startLedger } from './session-files.js';

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
}

function summarize(
  session: SessionFile,
  reading: LedgerReading,
  current: SessionFile | undefined,
): SessionSummary {
  const unsupportedEntry = findUnsupportedEntry(reading.entries);
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
export async function init(
  options: WorkspaceOptions & {
    hashChain?: boolean;
    now?: () => Date;
    generateId?: () => string;
    /** Where the session's commands run (`bwrap`, `none`, `auto`); recorded in the session. */
    sandbox?: 'bwrap' | 'none' | 'auto';
    /** Whether sandboxed commands may use the network; recorded in the session. */
    network?: boolean;
  },
): Promise<InitResult> {
  // A store in / or a home directory could never be snapshotted: refuse before creating it.
  const stats = await stat(options.workspace).catch(() => undefined);
  if (stats) checkWorkspace(options.workspace);
  const location = await initStore(options.workspace, { ...(options.now && { now: options.now }) });
  let current = await readCurrentSession(location.directory).catch((error: unknown) => {
    if (isRewindError(error, 'SESSION_NOT_FOUND')) return undefined;
    throw error;
  });
  const isNewSession = current === undefined;
  if (!current) {
    const ledger = await startLedger(location, {
      hashChain: options.hashChain === true,
      ...(options.now && { now: options.now }),
      ...(options.generateId && { generateId: options.generateId }),
      ...(options.sandbox && { sandbox: options.sandbox }),
      ...(options.network !== undefined && { network: options.network }),
    });
    await ledger.close();
    await setCurrentSession(location.directory, ledger.session);
    current = ledger.session;
  }
  return {
    workspace: location.workspace,
    storeDirectory: location.directory,
    isNewStore: location.isNew,
    session: summarize(current, await readLedgerFile(current.file), current),
    isNewSession,
  };
}

/** What {@link status} reports. */
export interface StatusReport {
  workspace: string;
  storeDirectory: string;
  currentSession: string | undefined;
  sessions: SessionSummary[];
  objects: { count: number; sizeBytes: number };
}

/**
 * The store at a glance: its sessions (oldest first) with their entry counts, which one is
 * current, and how many objects the store holds and their size. Throws `STORE_NOT_FOUND`.
 */
export async function status(options: WorkspaceOptions): Promise<StatusReport> {
  const location = await openStore(options.workspace);
  const current = await readCurrentSession(location.directory).catch(() => undefined);
  const sessions: SessionSummary[] = [];
  for (const session of await listSessions(location.directory)) {
    sessions.push(summarize(session, await readLedgerFile(session.file), current));
  }
  const objects = { count: 0, sizeBytes: 0 };
  for await (const object of createObjectStore(location.directory).list()) {
    objects.count += 1;
    objects.sizeBytes += object.sizeBytes;
  }
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
  const location = await openStore(options.workspace);
  const session = await pickSession(location, options.session);
  const current = await readCurrentSession(location.directory).catch(() => undefined);
  const reading = await readLedgerFile(session.file);
  const actions = deriveActions(reading.entries);
  return {
    session: summarize(session, reading, current),
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
  },
): Promise<NoteResult> {
  if (options.text.trim() === '') {
    throw new RewindError('INVALID_ARGUMENT', 'A note needs some text.', {
      data: { field: 'text' },
    });
  }
  const location = await openStore(options.workspace);
  const session = await pickSession(location, options.session);
  const ledger = await Ledger.open(session, { ...(options.now && { now: options.now }) });
  try {
    const store = createObjectStore(location.directory);
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
    await ledger.close();
  }
}

/** A problem {@link verify} found. */
export interface VerifyProblem {
  type: LedgerProblem['type'] | 'object-missing' | 'object-corrupt' | 'tree-invalid';
  session?: string;
  seq?: number;
  line?: number;
  digest?: Digest;
  message: string;
}

/** What {@link verify} found. */
export interface VerifyReport {
  isOk: boolean;
  sessions: { id: string; entryCount: number; isHashChained: boolean }[];
  objectsChecked: number;
  problems: VerifyProblem[];
  /** Things that are not damage: a torn final line, entries from a newer Rewind. */
  warnings: string[];
}

interface Referrer {
  session: string;
  seq: number;
}

function collectReferences(sessions: { session: SessionFile; reading: LedgerReading }[]): {
  roots: ObjectReference[];
  referrers: Map<Digest, Referrer>;
} {
  const roots: ObjectReference[] = [];
  const referrers = new Map<Digest, Referrer>();
  for (const { session, reading } of sessions) {
    // An automatic checkpoint pruned by keepLast is no longer a reference: gc may reclaim it.
    const pruned = new Set(
      reading.entries
        .filter((entry) => entry.kind === 'checkpoint-pruned')
        .map((entry) => Number(entry.body.checkpointSeq)),
    );
    for (const entry of reading.entries) {
      if (pruned.has(entry.seq)) continue;
      for (const reference of entry.refs ?? []) {
        roots.push(reference);
        if (!referrers.has(reference.digest))
          referrers.set(reference.digest, { session: session.id, seq: entry.seq });
      }
    }
  }
  return { roots, referrers };
}

async function readAllSessions(
  location: StoreLocation,
): Promise<{ session: SessionFile; reading: LedgerReading }[]> {
  const result = [];
  for (const session of await listSessions(location.directory)) {
    result.push({ session, reading: await readLedgerFile(session.file) });
  }
  return result;
}

/**
 * Checks the whole store: every ledger's seq order and hash chain (the first break is reported
 * with its seq), and every object the ledgers reference, directly or through trees, re-hashed.
 * Changes nothing. `isOk` is false on any problem. Throws `STORE_NOT_FOUND`.
 */
export async function verify(options: WorkspaceOptions): Promise<VerifyReport> {
  const location = await openStore(options.workspace);
  const store = createObjectStore(location.directory);
  const sessions = await readAllSessions(location);
  const report: VerifyReport = {
    isOk: true,
    sessions: [],
    objectsChecked: 0,
    problems: [],
    warnings: [],
  };
  for (const { session, reading } of sessions) {
    const isHashChained = reading.entries[0]?.body.hashChain === true;
    report.sessions.push({ id: session.id, entryCount: reading.entries.length, isHashChained });
    for (const problem of checkLedger(reading, isHashChained)) {
      report.problems.push({ ...problem, session: session.id });
    }
    for (const line of reading.unreadable) {
      if (line === reading.damagedLastLine) continue;
      report.warnings.push(
        line.isTorn
          ? `session ${session.id}: line ${line.line} is a torn write left by a crash; it is ignored and the next entry starts on a new line`
          : `session ${session.id}: line ${line.line} is not a ledger entry and was ignored (a torn write that a later append sealed, or junk); an entry lost with it would show as a seq gap`,
      );
    }
    const unsupported = findUnsupportedEntry(reading.entries);
    if (unsupported) {
      report.warnings.push(
        `session ${session.id}: entry #${unsupported.seq} (${unsupported.kind}, format ${unsupported.v}) was written by a newer Rewind; its references were still checked`,
      );
    }
  }
  const { roots, referrers } = collectReferences(sessions);
  const where = (digest: Digest): Partial<VerifyProblem> => {
    const referrer = referrers.get(digest);
    return referrer ? { session: referrer.session, seq: referrer.seq } : {};
  };
  await walkReferences(
    store,
    roots,
    async (reference) => {
      report.objectsChecked += 1;
      try {
        await store.verify(reference.digest);
      } catch (error) {
        if (isRewindError(error, 'OBJECT_NOT_FOUND') || isRewindError(error, 'OBJECT_CORRUPT')) {
          report.problems.push({
            type: error.code === 'OBJECT_NOT_FOUND' ? 'object-missing' : 'object-corrupt',
            digest: reference.digest,
            message: error.message,
            ...where(reference.digest),
          });
          return;
        }
        throw error;
      }
    },
    (reference, error) => {
      if (isRewindError(error, 'TREE_INVALID')) {
        report.problems.push({
          type: 'tree-invalid',
          digest: reference.digest,
          message: error.message,
          ...where(reference.digest),
        });
      }
    },
  );
  report.isOk = report.problems.length === 0;
  return report;
}

/** What {@link gc} removed, or would remove with `dryRun`. */
export interface GcReport {
  isDryRun: boolean;
  removed: { digest: Digest; sizeBytes: number }[];
  freedBytes: number;
  /** Objects still referenced by a ledger, directly or through a tree. */
  keptCount: number;
  /** Unreferenced objects spared because they are younger than the grace period. */
  recentCount: number;
  /** Temporary files of crashed writes that were removed. */
  abandonedFiles: string[];
}

/**
 * Removes the objects that no ledger references, directly or through trees (nor the stat cache
 * of the last snapshot, which the next snapshot reuses without reading), and the temporary
 * files crashed writes left. Objects written within `graceMs` (default one hour) are spared,
 * since a writer may be about to record the entry that references them. With `dryRun`, only
 * reports. Refuses (`TREE_INVALID`, `OBJECT_NOT_FOUND`, `OBJECT_CORRUPT`) when a referenced tree
 * cannot be read, since what lies under it would be unknown; nothing is removed then.
 */
export async function gc(
  options: WorkspaceOptions & { dryRun?: boolean; graceMs?: number; now?: () => Date },
): Promise<GcReport> {
  const location = await openStore(options.workspace);
  const store = createObjectStore(location.directory);
  const graceMs = options.graceMs ?? 60 * 60 * 1000;
  const nowMs = (options.now ?? (() => new Date()))().getTime();
  const { roots } = collectReferences(await readAllSessions(location));
  const reachable = new Set<Digest>();
  await walkReferences(
    store,
    roots,
    (reference) => {
      reachable.add(reference.digest);
    },
    (reference, error) => {
      throw new RewindError(
        isRewindError(error) ? error.code : 'IO_FAILED',
        `gc stopped before removing anything: the referenced tree ${reference.digest} cannot be read, so what it keeps alive is unknown. ` +
          'Run `rewind verify` for details.',
        { data: { digest: reference.digest }, cause: error },
      );
    },
  );
  // The stat cache lets the next snapshot reuse objects without reading them: keep those too. A
  // cache naming a tree that cannot be read is stale: dropped, so the next snapshot reads all.
  let isCacheStale = false;
  // Isolated sessions' views keep caches of their own.
  const views = await readdir(join(location.directory, 'views')).catch(() => [] as string[]);
  const viewReferences = (
    await Promise.all(
      views.map((view) => cachedReferences(join(location.directory, 'views', view))),
    )
  ).flat();
  await walkReferences(
    store,
    [...(await cachedReferences(location.directory)), ...viewReferences],
    (reference) => {
      reachable.add(reference.digest);
    },
    () => {
      isCacheStale = true;
    },
  );
  if (isCacheStale && options.dryRun !== true) await clearStatCache(location.directory);
  const report: GcReport = {
    isDryRun: options.dryRun === true,
    removed: [],
    freedBytes: 0,
    keptCount: 0,
    recentCount: 0,
    abandonedFiles: [],
  };
  for await (const object of store.list()) {
    if (reachable.has(object.digest)) {
      report.keptCount += 1;
    } else if (nowMs - object.modifiedAtMs < graceMs) {
      report.recentCount += 1;
    } else {
      if (!report.isDryRun) await store.remove(object.digest);
      report.removed.push({ digest: object.digest, sizeBytes: object.sizeBytes });
      report.freedBytes += object.sizeBytes;
    }
  }
  for (const abandoned of await store.listAbandoned(graceMs)) {
    if (!report.isDryRun) await store.removeAbandoned(abandoned.file);
    report.abandonedFiles.push(abandoned.file);
    report.freedBytes += abandoned.sizeBytes;
  }
  return report;
}
