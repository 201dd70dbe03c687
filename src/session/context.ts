import { join } from 'node:path';
import { RewindError } from '../errors.js';
import type { SessionLedger } from '../ledger/index.js';
import type { LockWait, Redactor } from '../lib/index.js';
import { createSandbox, type Sandbox, type SandboxBackend } from '../sandbox/index.js';
import type { ObjectStore } from '../store/index.js';
import {
  type CopySource,
  hasStatCache,
  type OutsideRules,
  previewSnapshot,
  readOutsideRules,
  type SnapshotPreview,
  type SnapshotProgress,
  type SnapshotResult,
  snapshot,
  WorkspaceWatcher,
} from '../workspace/index.js';

/**
 * What every part of a session shares: fixed when the session opens, never changed. Feature
 * modules take it as their first argument; the ledger's journal is reached only through
 * `withWorkspaceLock` and `readJournal`.
 */
export interface SessionContext {
  readonly id: string;
  readonly isolation: 'shared' | 'isolated';
  /** Where the session works: the workspace, or an isolated session's private view of it. */
  readonly workspace: string;
  /** The workspace on the host (the same as `workspace` unless isolated). */
  readonly hostWorkspace: string;
  /** The `.rewind/` directory. */
  readonly storeDirectory: string;
  /**
   * On a shared ledger, the id of this copy of the workspace (`.rewind/config.json`): every
   * intent carries it, and recovery finishes only this copy's. Undefined for a local ledger.
   */
  readonly workspaceId?: string;
  readonly store: ObjectStore;
  readonly ledger: SessionLedger;
  readonly redactor: Redactor;
  readonly settings: SessionSettings;
  /**
   * What recovery did in this session since it was opened, one sentence each, oldest first:
   * an operation a killed process left half-done, finished (and what was saved first) or closed.
   */
  readonly recoveries: string[];
}

/** A session's options with every default applied, in one place. */
export interface SessionSettings {
  /** How long to wait for another operation on the workspace. Default 60 000 ms. */
  readonly lockTimeoutMs: number;
  /** Default timeout of commands (exec and command compensations). 120 000 ms. */
  readonly execTimeoutMs: number;
  /** Default timeout of requests (http and request compensations). 30 000 ms. */
  readonly httpTimeoutMs: number;
  /** Refuse private addresses: what the session records, or what this opening adds. */
  readonly blockPrivate: boolean;
  /** Where commands run: the option, else what `init` recorded, else `none`. */
  readonly sandbox: SandboxBackend | 'auto';
  /** Whether sandboxed commands may use the network: the option, else what `init` recorded. */
  readonly network: boolean;
  readonly budget: { maxBytes?: number; maxFiles?: number } | undefined;
  /** Whether the session's workspace is watched while it is open (see `OpenSessionOptions`). */
  readonly watch: boolean;
  /** Told why the watcher stopped, or keeps failing and retries (see `OpenSessionOptions`). */
  readonly onWatchStopped?: (why: string, isRetrying: boolean) => void;
  /** Told when the watcher watches again after it kept failing (see `OpenSessionOptions`). */
  readonly onWatchResumed?: () => void;
  /** Told of a wait for the workspace lock (see `OpenSessionOptions`). */
  readonly onLockWait?: (wait: LockWait) => void;
  /** Told when recovery starts on what a killed process left half-done (see `OpenSessionOptions`). */
  readonly onRecoveryStart?: (message: string) => void;
  /** The clock for ledger entries and automatic checkpoint labels. */
  readonly now: () => Date;
}

export const DEFAULT_LOCK_TIMEOUT_MS = 60_000;
export const DEFAULT_EXEC_TIMEOUT_MS = 120_000;
export const DEFAULT_HTTP_TIMEOUT_MS = 30_000;

/**
 * The rules that apply to the workspace from outside it (its git repository's): an isolated
 * session's view, which lives inside the store, takes its host's.
 */
export function outsideRulesOf(context: SessionContext): OutsideRules {
  return readOutsideRules(context.hostWorkspace);
}

/** Where the session's snapshots keep their caches: a view keeps its own (the host's describe another directory). */
function cacheDirectoryOf(context: SessionContext): string {
  return context.isolation === 'isolated'
    ? join(context.storeDirectory, 'views', context.id)
    : context.storeDirectory;
}

const watchers = new WeakMap<SessionContext, WorkspaceWatcher>();

/** The snapshot a watching session is taking to give its watch a base: see {@link startWatching}. */
const primes = new WeakMap<SessionContext, Promise<void>>();

/**
 * Starts watching the session's workspace, when its settings ask for it. With `prime` (a
 * snapshot, taken under the workspace lock if it is free), each time the watch goes live (once
 * started, and after each restart: events lost, a directory moved), unless a snapshot has given
 * it its base since, `prime` gives it one: the first snapshot after a watch goes live must ask
 * find (see `WorkspaceWatcher.drain`), and this way it is not the next checkpoint that does, in
 * a process that has just started (`rewind mcp`, `rewind daemon`) or after a directory moved.
 * Not in a workspace never snapshotted: a first snapshot reads every file, nothing to start
 * unasked; nor after one found paths it could not read (every snapshot then looks at every
 * entry, and starts the watch again: each start would prime another). {@link closeContext}
 * waits for one under way.
 */
export function startWatching(
  context: SessionContext,
  prime?: () => Promise<SnapshotResult>,
): void {
  if (!context.settings.watch || watchers.has(context)) return;
  const watcher = new WorkspaceWatcher(
    context.workspace,
    cacheDirectoryOf(context),
    outsideRulesOf(context),
    context.settings.onWatchStopped,
    context.settings.onWatchResumed,
  );
  watchers.set(context, watcher);
  if (prime === undefined) return;
  let isPriming = true;
  watcher.onLive(() => {
    if (!isPriming || primes.has(context) || watchers.get(context) !== watcher) return;
    if (watcher.canAnswer || isFirstSnapshotOf(context)) return;
    // Only a head start: whatever stops it (the lock held, an unreadable path), the session's
    // own snapshots meet it again, and say so.
    const primed = prime().then(
      ({ unreadable }) => {
        if (unreadable.length > 0) isPriming = false;
      },
      () => {},
    );
    primes.set(context, primed);
    void primed.then(() => primes.delete(context));
  });
}

/** The watcher of the session's workspace, while it has one. */
export function watcherOf(context: SessionContext): WorkspaceWatcher | undefined {
  return watchers.get(context);
}

/**
 * Stops the session's watcher for good, before what the session is about to remove (a view it
 * destroys): a watcher still running would hear the removals, start again, and make its
 * sentinel directory again inside what is being removed.
 */
export function stopWatching(context: SessionContext): void {
  watchers.get(context)?.close();
  watchers.delete(context);
}

/** Closes what a session holds open: its watcher (first), its ledger. */
export async function closeContext(context: SessionContext): Promise<void> {
  stopWatching(context);
  await primes.get(context);
  primes.delete(context);
  await context.ledger.close();
}

/** Snapshots the session's workspace (its view, for an isolated session). */
export function snapshotWorkspace(
  context: SessionContext,
  onProgress?: (progress: SnapshotProgress) => void,
  copyOf?: CopySource,
): Promise<SnapshotResult> {
  return snapshot(context.workspace, {
    store: context.store,
    outside: outsideRulesOf(context),
    storeDirectory: cacheDirectoryOf(context),
    ...(context.settings.budget && { budget: context.settings.budget }),
    ...(onProgress && { onProgress }),
    ...(copyOf && { copyOf }),
    ...(watchers.has(context) && { watcher: watchers.get(context) }),
  });
}

/** True when the session's next snapshot is a first one: it must read and store every file. */
export function isFirstSnapshotOf(context: SessionContext): boolean {
  return !hasStatCache(cacheDirectoryOf(context));
}

/** What a snapshot of the session's workspace would take, without reading a file. */
export function previewOfSession(context: SessionContext): SnapshotPreview {
  return previewSnapshot(context.workspace, {
    storeDirectory: cacheDirectoryOf(context),
    outside: outsideRulesOf(context),
  });
}

/** Snapshots the workspace on the host (for an isolated session's commit). */
export function snapshotHost(context: SessionContext): Promise<SnapshotResult> {
  return snapshot(context.hostWorkspace, {
    store: context.store,
    storeDirectory: context.storeDirectory,
    outside: outsideRulesOf(context),
  });
}

/** Where an action acted: the host, for a commit (`on: 'host'`), else the session's workspace. */
export function workspaceFor(context: SessionContext, body: Record<string, unknown>): string {
  return body.on === 'host' ? context.hostWorkspace : context.workspace;
}

const sandboxes = new WeakMap<SessionContext, Sandbox>();

/**
 * The sandbox the session's commands run in, created on first use. Throws `SANDBOX_UNAVAILABLE`
 * for a `bwrap` sandbox that cannot start here.
 */
export function sandboxFor(context: SessionContext): Sandbox {
  let sandbox = sandboxes.get(context);
  if (!sandbox) {
    sandbox = createSandbox({
      backend: context.settings.sandbox,
      workspace: context.workspace,
      network: context.settings.network,
      // A view lives inside the host's store, which the command must not see either; it is
      // mounted where the host workspace is, so the workspace's absolute path leads to it.
      ...(context.isolation === 'isolated' && {
        masked: [context.storeDirectory],
        mountAt: context.hostWorkspace,
        hostGit: join(context.hostWorkspace, '.git'),
      }),
    });
    sandboxes.set(context, sandbox);
  }
  return sandbox;
}

/**
 * Throws `INVALID_ARGUMENT` when a command to run (`what` names it) holds a NUL byte: the system
 * ends an argument there, so another command would run than the one given and journaled.
 */
export function refuseNulIn(command: string | readonly string[], what: string): void {
  const words = typeof command === 'string' ? [command] : command;
  if (words.some((word) => word.includes('\0'))) {
    throw new RewindError(
      'INVALID_ARGUMENT',
      `${what} holds a NUL byte, which no program argument can. Remove it.`,
    );
  }
}
