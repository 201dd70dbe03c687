// Sessions across machines: resuming one from the shared backends (`rewind attach`), and
// copying one between a local store and the shared backends (`rewind push`, `rewind pull`).
import { readdir } from 'node:fs/promises';
import { hostname } from 'node:os';
import { isRewindError, RewindError } from '../errors.js';
import {
  checkLedger,
  fileLedgers,
  findSharedSession,
  type LedgerEntry,
  type LedgerStore,
  listSharedSessions,
  migratePostgres,
  postgresLedgers,
  readCurrentSession,
  type SessionFile,
  type SharedSessionInfo,
  setCurrentSession,
  sharedPrefixOf,
  storeOfSharedSession,
} from '../ledger/index.js';
import { type Digest, nodeCrypto, withoutUrlPasswords } from '../lib/index.js';
import {
  createObjectStore,
  createS3ObjectStore,
  initStore,
  isPostgresUrl,
  type ObjectStore,
  openObjectStore,
  openStore,
  parseS3Url,
  reachableObjects,
  STORE_DIRECTORY_NAME,
  type StoreLocation,
  type Transfer,
  walkReferences,
} from '../store/index.js';
import type { RollbackResult } from './history/rollback.js';
import { openSession } from './open-session.js';
import { interruptedOf } from './repository.js';
import { ledgersOf, pickSession } from './session-files.js';
import { liveReferences } from './store-checks.js';

/** What {@link attachShared} did. */
export interface AttachResult {
  workspace: string;
  session: string;
  /** The store's id in the ledger database. */
  store: string;
  /** The checkpoint the workspace now holds, if the session had one. */
  checkpoint: string | undefined;
  restored: RollbackResult | undefined;
}

/**
 * Resumes on this machine a session whose ledger is in PostgreSQL and whose objects are in a
 * bucket: makes a store in `workspace` (an empty directory) on the same backends and under the
 * same store id, makes the session current, and brings the workspace to the session's last
 * checkpoint with a rollback (journaled in the shared ledger, so every machine sees where the
 * session went on). Throws `INVALID_ARGUMENT` for a directory that is not empty or a ledger that
 * is not a PostgreSQL URL, `SESSION_NOT_FOUND`, `SESSION_AMBIGUOUS`, `IO_FAILED`.
 */
export async function attachShared(options: {
  workspace: string;
  /** The session's id, or a unique prefix of it. */
  session: string;
  /** The PostgreSQL URL its ledger is in. */
  ledger: string;
  /**
   * The bucket its objects are in (`s3://BUCKET/PREFIX`), else `REWIND_OBJECTS`; without either,
   * none can be restored.
   */
  objects?: string;
}): Promise<AttachResult> {
  checkLedgerUrl(options.ledger);
  const objects = options.objects ?? (process.env.REWIND_OBJECTS || undefined);
  const names = await readdir(options.workspace).catch(() => [] as string[]);
  if (names.length > 0) {
    const what = names.includes(STORE_DIRECTORY_NAME)
      ? 'already has a Rewind store'
      : 'is not empty';
    throw new RewindError(
      'INVALID_ARGUMENT',
      `${options.workspace} ${what}: attach into an empty directory, where the session's last checkpoint is restored.`,
      { data: { workspace: options.workspace } },
    );
  }
  await migratePostgres(options.ledger);
  const { store, id } = await findSharedSession(options.ledger, options.session);
  const location = await initStore(options.workspace, {
    ledger: options.ledger,
    store,
    ...(objects !== undefined && { objects }),
  });
  const session = (await ledgersOf(location).names()).find((listed) => listed.id === id);
  if (!session) {
    throw new RewindError('SESSION_NOT_FOUND', `Session ${id} vanished from the database.`, {
      data: { session: id },
    });
  }
  await setCurrentSession(location.directory, session);
  const opened = await openSession({ workspace: location.workspace, session: id });
  try {
    const checkpoints = await opened.checkpoints();
    const last = checkpoints.at(-1)?.label;
    const restored = last === undefined ? undefined : await opened.rollback(last);
    return { workspace: location.workspace, session: id, store, checkpoint: last, restored };
  } finally {
    await opened.close();
  }
}

/** Throws `INVALID_ARGUMENT` unless `url` is a PostgreSQL URL. */
function checkLedgerUrl(url: string): void {
  if (isPostgresUrl(url)) return;
  throw new RewindError(
    'INVALID_ARGUMENT',
    `--ledger must be the PostgreSQL URL the shared ledgers are in (postgres://USER@HOST/DB), not ${JSON.stringify(withoutUrlPasswords(url))}.`,
    { data: {} },
  );
}

/**
 * Where `rewind push` and `rewind pull` copy sessions to and from. Either left out is taken from
 * the environment, as `rewind init` takes them: `REWIND_LEDGER`, `REWIND_OBJECTS`.
 */
export interface SharedBackends {
  /** The PostgreSQL URL of the shared ledgers. */
  ledger?: string | undefined;
  /** The bucket of the shared objects: `s3://BUCKET/PREFIX`. */
  objects?: string | undefined;
}

/**
 * The backends asked for, else the environment's; throws `INVALID_ARGUMENT` naming each of
 * `needed` neither gives, and for a ledger that is not a PostgreSQL URL.
 */
function backendsOf<Needed extends keyof SharedBackends>(
  asked: SharedBackends,
  needed: readonly Needed[],
  command: string,
): Record<Needed, string> {
  const found: SharedBackends = {
    ledger: asked.ledger ?? (process.env.REWIND_LEDGER || undefined),
    objects: asked.objects ?? (process.env.REWIND_OBJECTS || undefined),
  };
  const missing = needed.filter((name) => found[name] === undefined);
  if (missing.length > 0) {
    const spelled = {
      ledger: '--ledger postgres://USER@HOST/DB (or REWIND_LEDGER)',
      objects: '--objects s3://BUCKET/PREFIX (or REWIND_OBJECTS)',
    };
    throw new RewindError(
      'INVALID_ARGUMENT',
      `${command} needs the shared ${missing.length === 2 ? 'backends' : missing[0] === 'ledger' ? 'ledgers' : 'objects'}: give ${missing.map((name) => spelled[name]).join(' and ')}.`,
      { data: {} },
    );
  }
  if (found.ledger !== undefined) checkLedgerUrl(found.ledger);
  return found as Record<Needed, string>;
}

/** What {@link pushSession} or {@link pullSession} did. */
export interface CopyResult {
  session: string;
  /** The store the session belongs to in the database. */
  store: string;
  /** Entries copied: those the other side lacked. */
  appended: number;
  /** Entries the receiving side holds beyond the sender's: it went on without them. */
  ahead: number;
  /** Objects (and bytes) uploaded or downloaded. */
  objects: Transfer;
  /** For a pull: whether the session became the current one (the store had none). */
  isCurrent?: boolean;
  warnings: string[];
}

/**
 * The store id a workspace's sessions are pushed under when the database does not know them yet:
 * derived from the machine's name and the store's path, so every session pushed from one
 * workspace belongs to one store there (and `rewind attach` of one lists them all).
 */
export function pushedStoreId(location: StoreLocation): string {
  const hex = nodeCrypto()
    .createHash('sha256')
    .update(`${hostname()}\0${location.directory}`)
    .digest('hex');
  return `${hex.slice(0, 8)}-${hex.slice(8, 12)}-${hex.slice(12, 16)}-${hex.slice(16, 20)}-${hex.slice(20, 32)}`;
}

/** Refuses a store whose ledgers or objects are shared already, or elsewhere than `backends`. */
function checkLocalStore(
  location: StoreLocation,
  backends: { objects: string },
  doing: string,
): void {
  if (location.ledger) {
    throw new RewindError(
      'INVALID_ARGUMENT',
      `The store in ${location.workspace} keeps its ledgers in ${withoutUrlPasswords(location.ledger.url)} already: its sessions are shared as they are written, so there is nothing to ${doing}. ` +
        '`rewind attach SESSION` in an empty directory resumes one of them on another machine.',
      { data: { workspace: location.workspace } },
    );
  }
  if (location.objects !== undefined && location.objects !== backends.objects) {
    throw new RewindError(
      'INVALID_ARGUMENT',
      `The store in ${location.workspace} keeps its objects in ${location.objects}, not ${backends.objects}: ${doing} with --objects ${location.objects}.`,
      { data: { workspace: location.workspace, objects: location.objects } },
    );
  }
}

/** A session's entries, refused when damaged (copied as they are, damage would travel). */
async function readWhole(ledgers: LedgerStore, session: SessionFile): Promise<LedgerEntry[]> {
  const reading = await ledgers.read(session);
  const problem = checkLedger(reading, reading.entries[0]?.body.hashChain === true)[0];
  if (problem) {
    throw new RewindError(
      'LEDGER_CORRUPT',
      `Session ${session.id} is damaged (${problem.message}), so it is not copied. Run \`rewind verify\`.`,
      { data: { session: session.id } },
    );
  }
  return reading.entries;
}

/**
 * The objects the entries after the first `shared` reach and the entries up to it do not: what
 * the side that holds only those first entries lacks. What the first `shared` reach is present
 * on both sides (an entry is written only once its objects are); a tree of theirs that cannot
 * be read here (collected since it was pruned) is only left out of what is taken as known.
 */
async function objectsToCopy(
  entries: readonly LedgerEntry[],
  shared: number,
  known: ObjectStore,
  source: ObjectStore,
  beforeReading?: (trees: Digest[]) => Promise<unknown>,
): Promise<Digest[]> {
  const references = liveReferences(entries);
  const present = new Set<Digest>();
  await walkReferences(
    known,
    references.filter(({ seq }) => seq <= shared).map(({ reference }) => reference),
    (reference) => {
      present.add(reference.digest);
    },
    () => {},
  );
  const { trees, blobs } = await reachableObjects(
    source,
    references.filter(({ seq }) => seq > shared).map(({ reference }) => reference),
    { isKnown: (digest) => present.has(digest), ...(beforeReading && { beforeReading }) },
  );
  return [...trees, ...blobs];
}

/**
 * A warning when the session's last operation in a local copy was cut short where it ran: an
 * intent that names no copy of the workspace is finished by whichever copy runs a command next.
 */
function pendingWarning(entries: readonly LedgerEntry[], where: string): string[] {
  const pending = interruptedOf(entries);
  return pending
    ? [
        `${pending.kind} #${pending.id} (${pending.target}) was cut short and is still pending: the next command in this session ${where} finishes it against that workspace's files, saving first what it finds.`,
      ]
    : [];
}

/**
 * Copies a session of a local store to the shared backends (`rewind push`): every object its
 * entries reach that the shared copy does not already have goes up to the bucket first, then the
 * entries the shared ledger lacks are inserted exactly as they are (same seq, times and hash
 * chain), in one transaction. A session the database does not know yet is put under
 * {@link pushedStoreId}. Pushing again sends only what was added since. Throws
 * `SESSION_DIVERGED` (nothing is written) when the shared copy went on with other entries,
 * `INVALID_ARGUMENT` for a store already on shared backends, `LEDGER_CORRUPT`, `IO_FAILED`.
 */
export async function pushSession(
  options: SharedBackends & { workspace: string; session?: string },
): Promise<CopyResult> {
  const backends = backendsOf(options, ['ledger', 'objects'], 'rewind push');
  const bucket = parseS3Url(backends.objects);
  const location = await openStore(options.workspace);
  checkLocalStore(location, backends, 'push');
  const session = await pickSession(location, options.session);
  const entries = await readWhole(ledgersOf(location), session);
  await migratePostgres(backends.ledger);
  const store =
    (await storeOfSharedSession(backends.ledger, session.id)) ?? pushedStoreId(location);
  const shared = postgresLedgers(backends.ledger, store);
  const theirs = (await shared.names()).find((listed) => listed.id === session.id);
  const held = theirs ? await readWhole(shared, theirs) : [];
  // Refused before anything is uploaded when the copies differ.
  const common = sharedPrefixOf(session.id, held, entries);
  let sent: Transfer = { objects: 0, bytes: 0 };
  if (common < entries.length && location.objects === undefined) {
    const local = openObjectStore(location);
    const missing = await objectsToCopy(entries, common, local, local);
    sent = await createS3ObjectStore({ ...bucket, cache: local }).upload(missing);
  }
  const copied = await shared.copyIn(session.id, entries);
  return {
    session: session.id,
    store,
    appended: copied.appended,
    ahead: copied.ahead,
    objects: sent,
    warnings: pendingWarning(entries, 'on the machine that resumes it'),
  };
}

/**
 * Copies a session from the shared backends into the local store of `workspace` (`rewind pull`;
 * the store is made when there is none): the objects its entries reach that the local copy does
 * not have come down first (verified, made durable together), then the entries it lacks are
 * appended exactly as they are. The workspace's files are left alone: `rewind rollback LABEL
 * --session ID` brings a checkpoint's. The session becomes the current one when the store has
 * none. Throws `SESSION_NOT_FOUND`, `SESSION_AMBIGUOUS`, `SESSION_DIVERGED` (nothing is written),
 * `INVALID_ARGUMENT` for an isolated session (its view stays on the machine that made it) or a
 * store on shared backends, `LEDGER_CORRUPT`, `OBJECT_CORRUPT`, `IO_FAILED`.
 */
export async function pullSession(
  options: SharedBackends & { workspace: string; session: string },
): Promise<CopyResult> {
  const backends = backendsOf(options, ['ledger', 'objects'], 'rewind pull');
  const bucket = parseS3Url(backends.objects);
  const existing = await openStore(options.workspace).catch((error: unknown) => {
    if (isRewindError(error, 'STORE_NOT_FOUND')) return undefined;
    throw error;
  });
  if (existing) checkLocalStore(existing, backends, 'pull');
  await migratePostgres(backends.ledger);
  const { store, id } = await findSharedSession(backends.ledger, options.session);
  const shared = postgresLedgers(backends.ledger, store);
  const theirs = (await shared.names()).find((listed) => listed.id === id);
  if (!theirs) {
    throw new RewindError('SESSION_NOT_FOUND', `Session ${id} vanished from the database.`, {
      data: { session: id },
    });
  }
  const entries = await readWhole(shared, theirs);
  if (entries[0]?.body.isolation === 'isolated') {
    throw new RewindError(
      'INVALID_ARGUMENT',
      `Session ${id} is an isolated session: its view of the workspace stays on the machine that made it, so it cannot be pulled. Commit it on that machine, then push and pull a session of the workspace it committed to.`,
      { data: { session: id } },
    );
  }
  const location = existing ?? (await initStore(options.workspace));
  const local = fileLedgers(location.directory);
  const ours = (await local.names()).find((listed) => listed.id === id);
  const held = ours ? await readWhole(local, ours) : [];
  const common = sharedPrefixOf(id, held, entries);
  const received: Transfer = { objects: 0, bytes: 0 };
  if (common < entries.length && location.objects === undefined) {
    const cache = createObjectStore(location.directory);
    const remote = createS3ObjectStore({ ...bucket, cache });
    const download = async (digests: Digest[]) => {
      const got = await remote.download(digests);
      received.objects += got.objects;
      received.bytes += got.bytes;
    };
    // Trees come down a level at a time as the walk reads them, then the files.
    await download(await objectsToCopy(entries, common, cache, remote, download));
  }
  const copied = await local.copyIn(id, entries);
  const isCurrent = (await readCurrentSession(location.directory, local)) === undefined;
  if (isCurrent) await setCurrentSession(location.directory, copied.session);
  return {
    session: id,
    store,
    appended: copied.appended,
    ahead: copied.ahead,
    objects: received,
    isCurrent,
    warnings: pendingWarning(entries, 'here'),
  };
}

/**
 * The sessions in a shared ledger database, of every store, most recently written first: all,
 * or those whose id starts with `query` or whose host or workspace holds it. What to attach or
 * pull. Throws `INVALID_ARGUMENT` for a URL that is not PostgreSQL, `IO_FAILED`.
 */
export async function findSharedSessions(options: {
  /** The PostgreSQL URL of the shared ledgers, else `REWIND_LEDGER`. */
  ledger?: string | undefined;
  query?: string;
  /** At most this many. Default 20. */
  limit?: number;
}): Promise<SharedSessionInfo[]> {
  const { ledger } = backendsOf(options, ['ledger'], 'rewind session find');
  await migratePostgres(ledger);
  return listSharedSessions(ledger, {
    ...(options.query !== undefined && { query: options.query }),
    limit: options.limit ?? 20,
  });
}
