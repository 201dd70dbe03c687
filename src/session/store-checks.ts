// Checking and cleaning the store as a whole: verify every ledger and object, collect garbage.
import { readdir } from 'node:fs/promises';
import { join } from 'node:path';
import { isRewindError, RewindError } from '../errors.js';
import {
  checkLedger,
  findUnsupportedEntry,
  type LedgerEntry,
  type LedgerProblem,
  type LedgerReading,
  type SessionFile,
} from '../ledger/index.js';
import { type Digest, type LockWait, withLock } from '../lib/index.js';
import {
  createObjectStore,
  type ObjectReference,
  openObjectStore,
  openStore,
  type StoreLocation,
  walkReferences,
  workspaceLockOf,
} from '../store/index.js';
import { forgetUnkept, forgetUnkeptLineCounts } from '../workspace/index.js';
import { interruptedOf, type WorkspaceOptions } from './repository.js';
import { ledgersOf } from './session-files.js';

/** A problem {@link verify} found. */
export interface VerifyProblem {
  type:
    | LedgerProblem['type']
    | 'object-missing'
    | 'object-corrupt'
    | 'tree-invalid'
    | 'pack-index-damaged';
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
  /**
   * Things that are not damage: a torn final line, entries from a newer Rewind, an operation a
   * killed process left pending.
   */
  warnings: string[];
}

/**
 * The operations killed processes left pending, one warning each: neither verify nor gc
 * finishes them (they change no workspace), so they say so.
 */
function pendingWarnings(
  sessions: { session: SessionFile; reading: LedgerReading }[],
  location: StoreLocation,
): string[] {
  return sessions.flatMap(({ session, reading }) => {
    const pending = interruptedOf(reading.entries, location.ledger?.workspaceId);
    return pending
      ? [
          `session ${session.id}: ${pending.kind} #${pending.id} (${pending.target}) was cut short and is still pending: the next command in that session finishes it, saving first whatever was edited since`,
        ]
      : [];
  });
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
    for (const { seq, reference } of liveReferences(reading.entries)) {
      roots.push(reference);
      if (!referrers.has(reference.digest))
        referrers.set(reference.digest, { session: session.id, seq });
    }
  }
  return { roots, referrers };
}

/**
 * The references of a session's entries that keep objects alive, with the seq of the entry that
 * makes each: all but those of automatic checkpoints pruned since (gc may reclaim what they hold).
 */
export function liveReferences(
  entries: readonly LedgerEntry[],
): { seq: number; reference: ObjectReference }[] {
  const pruned = new Set(
    entries
      .filter((entry) => entry.kind === 'checkpoint-pruned')
      .map((entry) => Number(entry.body.checkpointSeq)),
  );
  return entries.flatMap((entry) =>
    pruned.has(entry.seq)
      ? []
      : (entry.refs ?? []).map((reference) => ({ seq: entry.seq, reference })),
  );
}

async function readAllSessions(
  location: StoreLocation,
): Promise<{ session: SessionFile; reading: LedgerReading }[]> {
  const result = [];
  const ledgers = ledgersOf(location);
  for (const session of await ledgers.list()) {
    result.push({ session, reading: await ledgers.read(session) });
  }
  return result;
}

/**
 * What verify says of a damaged object: storing its content again repairs it (a put rewrites a
 * damaged object), so it says how to make Rewind read that content again, and that only a backup
 * brings back content no file holds any more.
 */
function unrepairedMessage(error: RewindError): string {
  const { digest, file, damage } = error.data as { digest: string; file: string; damage?: string };
  // Not the object itself but the store around it (a fan-out that is a file): said as it is.
  if (damage === undefined) return error.message;
  return (
    `Object ${digest} is damaged: ${file} ${damage}. ` +
    'Rewind writes a damaged object again whenever it stores that content again: if a workspace file still holds it, ' +
    '`touch` that file and run `rewind checkpoint` (the file is read again and the object repaired). ' +
    'Otherwise it cannot be repaired from what Rewind has: restore the object file from a backup if you have one; until then, restoring what refers to it fails.'
  );
}

/** How many objects `verify` checks at once in a bucket. */
const REMOTE_CHECKS_AT_ONCE = 16;

/**
 * Checks the whole store: every ledger's seq order and hash chain (the first break is reported
 * with its seq), and every object the ledgers reference, directly or through trees, re-hashed.
 * Changes nothing. `isOk` is false on any problem. Throws `STORE_NOT_FOUND`.
 */
export async function verify(options: WorkspaceOptions): Promise<VerifyReport> {
  const location = await openStore(options.workspace);
  const store = openObjectStore(location);
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
  report.warnings.push(...pendingWarnings(sessions, location));
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
        const { repaired } = await store.verify(reference.digest);
        if (repaired) report.warnings.push(repaired);
      } catch (error) {
        if (isRewindError(error, 'OBJECT_NOT_FOUND')) {
          report.problems.push({
            type: 'object-missing',
            digest: reference.digest,
            message: error.message,
            ...where(reference.digest),
          });
          return;
        }
        if (isRewindError(error, 'OBJECT_CORRUPT')) {
          report.problems.push({
            type: 'object-corrupt',
            digest: reference.digest,
            message: unrepairedMessage(error),
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
    // A bucket answers each request after a round trip: many are asked at once.
    location.objects === undefined ? 1 : REMOTE_CHECKS_AT_ONCE,
  );
  for (const { file, damage } of await store.damage()) {
    report.problems.push({
      type: 'pack-index-damaged',
      message:
        `${file} ${damage}: the objects it listed count as missing (those referenced are listed as such). ` +
        'Rewind stores an object again whenever it stores that content again: `touch` the workspace files that still hold it and run `rewind checkpoint`. ' +
        'Restore the index from a backup if you have one; it can be removed once nothing is missing.',
    });
  }
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
  /** What is worth knowing meanwhile: an operation a killed process left pending. */
  warnings: string[];
}

/**
 * Removes the objects that no ledger references, directly or through trees (pruned checkpoints
 * no longer count), and the temporary files crashed writes left, holding the workspace lock.
 * The snapshot caches forget what is removed (the next snapshot reads those files again), and the
 * cache of line counts the pairs of trees it removes.
 * Objects written within `graceMs` (default one hour) are spared. With `dryRun`, only
 * reports. Refuses (`TREE_INVALID`, `OBJECT_NOT_FOUND`, `OBJECT_CORRUPT`) when a referenced tree
 * cannot be read, since what lies under it would be unknown; nothing is removed then.
 */
export async function gc(
  options: WorkspaceOptions & {
    dryRun?: boolean;
    graceMs?: number;
    now?: () => Date;
    /** How long to wait for an operation in progress. Default 60 000 ms. */
    lockTimeoutMs?: number;
    /** Told after a second of waiting for another process's lock: see `acquireLock`. */
    onLockWait?: (wait: LockWait) => void;
  },
): Promise<GcReport> {
  const location = await openStore(options.workspace);
  // Under the workspace lock: no checkpoint, action or note is between writing its objects and
  // appending the entry that references them.
  return withLock(workspaceLockOf(location.directory), () => collectGarbage(location, options), {
    timeoutMs: options.lockTimeoutMs ?? 60_000,
    purpose: 'collecting garbage',
    ...(options.onLockWait && { onWait: options.onLockWait }),
  });
}

async function collectGarbage(
  location: StoreLocation,
  options: { dryRun?: boolean; graceMs?: number; now?: () => Date },
): Promise<GcReport> {
  // References are read wherever the objects are; what is collected is what this store holds
  // itself: its objects, or, when they are kept in a bucket, its cache of them. A bucket may
  // hold objects other workspaces' ledgers refer to: nothing here can tell, so it is left alone.
  const store = openObjectStore(location);
  const collected = location.objects === undefined ? store : createObjectStore(location.directory);
  const graceMs = options.graceMs ?? 60 * 60 * 1000;
  const nowMs = (options.now ?? (() => new Date()))().getTime();
  const sessions = await readAllSessions(location);
  const { roots } = collectReferences(sessions);
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
  // The caches let the next snapshot reuse objects without reading them. An object only a cache
  // names is not kept for it (it would keep what pruned checkpoints held forever): the cache
  // forgets it instead, and the next snapshot reads those files again.
  const views = await readdir(join(location.directory, 'views')).catch(() => [] as string[]);
  if (options.dryRun !== true) {
    for (const directory of [
      location.directory,
      ...views.map((view) => join(location.directory, 'views', view)),
    ]) {
      await forgetUnkept(directory, (digest) => reachable.has(digest));
    }
    await forgetUnkeptLineCounts(location.directory, (digest) => reachable.has(digest));
  }
  const report: GcReport = {
    isDryRun: options.dryRun === true,
    removed: [],
    freedBytes: 0,
    keptCount: 0,
    recentCount: 0,
    abandonedFiles: [],
    warnings: [
      ...pendingWarnings(sessions, location),
      ...(location.objects === undefined
        ? []
        : [
            `Only the local cache of ${location.objects} was collected: the bucket may hold objects that other workspaces refer to, so nothing was removed from it.`,
          ]),
    ],
  };
  for await (const object of collected.list()) {
    if (reachable.has(object.digest)) {
      report.keptCount += 1;
    } else if (nowMs - object.modifiedAtMs < graceMs) {
      report.recentCount += 1;
    } else {
      report.removed.push({ digest: object.digest, sizeBytes: object.sizeBytes });
      report.freedBytes += object.sizeBytes;
    }
  }
  // Packs holding removed objects are written again without them (and small packs merged).
  if (!report.isDryRun) await collected.remove(report.removed.map(({ digest }) => digest));
  for (const abandoned of await collected.listAbandoned(graceMs)) {
    if (!report.isDryRun) await collected.removeAbandoned(abandoned.file);
    report.abandonedFiles.push(abandoned.file);
    report.freedBytes += abandoned.sizeBytes;
  }
  return report;
}
