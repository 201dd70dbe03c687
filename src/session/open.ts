import { spawnSync } from 'node:child_process';
import { constants, existsSync } from 'node:fs';
import { access, chown, cp, lstat, mkdir, rm, stat } from 'node:fs/promises';
import { join } from 'node:path';
import { isSystemError, RewindError } from '../errors.js';
import { type SessionLedger, setCurrentSession } from '../ledger/index.js';
import {
  createRedactor,
  type LockWait,
  type RedactionOptions,
  readNamesSync,
} from '../lib/index.js';
import type { SandboxBackend } from '../sandbox/index.js';
import { openObjectStore, openStore, type StoreLocation } from '../store/index.js';
import type { SnapshotResult } from '../workspace/index.js';
import {
  DEFAULT_EXEC_TIMEOUT_MS,
  DEFAULT_HTTP_TIMEOUT_MS,
  DEFAULT_LOCK_TIMEOUT_MS,
  type SessionContext,
  snapshotHost,
  snapshotWorkspace,
  startWatching,
} from './context.js';
import { recordLeftOut, viewDirectoryOf } from './isolation.js';
import { withWorkspaceLock } from './journal/journal.js';
import { isLooser, protectionsIn, protectionsOf, tighteningOf } from './protections.js';
import { ledgersOf, pickSession, startLedger } from './session-files.js';

/** Options of `openSession`. */
export interface OpenSessionOptions {
  /** The workspace root: the directory that holds `.rewind/`. */
  workspace: string;
  /** The session to open (id, unique prefix, or file name). Default: the current session. */
  session?: string;
  /** The clock for ledger entries and automatic checkpoint labels; injected in tests. */
  now?: () => Date;
  /** The id of a session this starts (an isolated one); injected in tests. Default: random. */
  generateId?: () => string;
  /** How long to wait for another process's operation on the same workspace. Default 60 000 ms. */
  lockTimeoutMs?: number;
  /** First-snapshot budget; see `SnapshotOptions`. */
  budget?: { maxBytes?: number; maxFiles?: number };
  /**
   * `isolated` without `session` starts a new isolated session (see `startIsolatedSession`);
   * an existing session is opened as it was created, whatever this says.
   */
  isolation?: 'shared' | 'isolated';
  /**
   * Strips secrets before anything is hashed or stored: credentials (`headers: true`: the
   * Authorization, Cookie, X-Api-Key... headers and URL passwords) and every match of `patterns`
   * in commands, URLs, headers, bodies and outputs. Off by default. A draft keeps its exact
   * content (under `.rewind/drafts/`, deleted once it runs or is discarded) so it can run as
   * approved.
   *
   * Redaction belongs to the session: what a session was started with is applied whatever this
   * says, and what this adds to an existing session is recorded in it (a `settings-tightened`
   * entry), so every later process applies it too. Nothing here takes redaction away: start a
   * new session to work without it.
   */
  redact?: RedactionOptions;
  /**
   * Refuse HTTP requests to loopback and private addresses too. Like `redact`, it belongs to the
   * session: recorded when given, never taken away.
   */
  blockPrivate?: boolean;
  /**
   * Where `exec` runs commands: `bwrap` (bubblewrap: the system read-only, only the workspace
   * writable, `.rewind/` hidden, no network, no capabilities, an unprivileged uid), `none` (a
   * plain child process), or `auto` (bwrap when it works here, else none with a warning).
   * Default: what `init` recorded for the session, else `none`.
   */
  sandbox?: SandboxBackend | 'auto';
  /** Let sandboxed commands use the network. Default: what `init` recorded, else no. */
  network?: boolean;
  /**
   * `false` opens the session without taking the workspace lock: for a reader that must not wait
   * for an agent's running command (`rewind ui`). Nothing interrupted is finished at open, and
   * `redact` and `blockPrivate` are refused (recording them needs the lock); every operation that
   * changes something still takes the lock, and finishes what was interrupted first. Default true.
   */
  lockOnOpen?: boolean;
  /**
   * Watch the workspace for changes while the session is open (Linux, with inotify-tools'
   * `inotifywait`): a checkpoint then looks at only what the watcher saw change, instead of a
   * find over every entry, so its cost no longer grows with the size of the workspace. For a
   * process that keeps the session open (an agent's runtime, `rewind mcp`); a watcher costs a
   * child process and an inotify watch per directory. Where it cannot run, or may have missed
   * something (its queue overflowed, a directory moved), checkpoints use find as without it.
   * The first snapshot after a watch starts (or starts again) asks find too: each time the watch
   * goes live, the session takes that one itself (under the workspace lock, if it is free then,
   * and only in a workspace snapshotted before), so that its next checkpoint looks only at what
   * changed; `close` waits for one under way. Default false. See docs/performance.md, "A watcher
   * in a long-lived process".
   */
  watch?: boolean;
  /**
   * With `watch`: told why, once, if the watcher stops for good (inotifywait is not installed,
   * the filesystem is not one it trusts, no inotify watches are left, the workspace or the store
   * was deleted; `isRetrying` false), and once if inotifywait keeps dying or failing to start
   * (`isRetrying` true: the watcher goes on starting it, less and less often, at most every
   * minute), so that a process can say why its checkpoints look at every entry again.
   */
  onWatchStopped?: (why: string, isRetrying: boolean) => void;
  /** With `watch`: told when the watch is live again after `onWatchStopped` said it retries. */
  onWatchResumed?: () => void;
  /**
   * Told when an operation of the session has waited a second for the workspace lock, which
   * another process holds (an agent's command, a long first checkpoint), and again if that holder
   * changes, or stops or resumes (`wait.isStopped`: suspended by Ctrl-Z or SIGSTOP, it releases
   * nothing until resumed): `wait.message` says so for people. The CLI prints it on stderr.
   */
  onLockWait?: (wait: LockWait) => void;
  /**
   * Told, before it begins, that an operation a killed process left half-done is being finished
   * (or closed) first, with what it is: that can take a while (a rollback of many files). What
   * it came to is {@link Session.recoveries}. The CLI prints it on stderr.
   */
  onRecoveryStart?: (message: string) => void;
}

/** Options of `startIsolatedSession`. */
export interface IsolatedSessionOptions extends OpenSessionOptions {
  /**
   * Make it the workspace's current session, as `rewind init --isolated` does: default true,
   * except for `withIsolatedSession`, which leaves the current session as it is.
   */
  makeCurrent?: boolean;
  /** Every entry of its ledger commits to the one before (as `rewind session new --hash-chain`). */
  hashChain?: boolean;
  /**
   * What starts it, recorded in its `session-started` entry (letters, digits, `-`), so that it
   * can find its session again: `rewind mcp --isolated` records `mcp` and resumes the newest.
   */
  startedBy?: string;
  /**
   * Told of each warning of the host's snapshot as the view is made: paths it could not read
   * (no permission, ...), left out of the view, as a checkpoint leaves them out. The CLI prints
   * them on stderr.
   */
  onWarning?: (message: string) => void;
}

/**
 * The context of a session whose ledger is open; the session-started body read once, and the
 * protections the session records, with what `options` adds.
 */
async function createContext(
  location: StoreLocation,
  ledger: SessionLedger,
  options: OpenSessionOptions,
): Promise<SessionContext> {
  const { entries } = await ledger.read();
  const started = entries[0]?.body ?? {};
  const protections = protectionsIn(protectionsOf(entries), options);
  const redactor = createRedactor(protections.redact);
  const isIsolated = started.isolation === 'isolated';
  const id = ledger.session.id;
  return Object.freeze({
    id,
    isolation: isIsolated ? 'isolated' : 'shared',
    workspace: isIsolated ? viewDirectoryOf(location.directory, id) : location.workspace,
    hostWorkspace: location.workspace,
    storeDirectory: location.directory,
    ...(location.ledger?.workspaceId !== undefined && {
      workspaceId: location.ledger.workspaceId,
    }),
    store: openObjectStore(location),
    ledger,
    redactor,
    recoveries: [],
    settings: Object.freeze({
      lockTimeoutMs: options.lockTimeoutMs ?? DEFAULT_LOCK_TIMEOUT_MS,
      execTimeoutMs: DEFAULT_EXEC_TIMEOUT_MS,
      httpTimeoutMs: DEFAULT_HTTP_TIMEOUT_MS,
      blockPrivate: protections.blockPrivate,
      sandbox:
        options.sandbox ?? (started.sandbox as SandboxBackend | 'auto' | undefined) ?? 'none',
      network: options.network ?? started.network === true,
      budget: options.budget,
      watch: options.watch === true,
      ...(options.onWatchStopped && { onWatchStopped: options.onWatchStopped }),
      ...(options.onWatchResumed && { onWatchResumed: options.onWatchResumed }),
      ...(options.onLockWait && { onLockWait: options.onLockWait }),
      ...(options.onRecoveryStart && { onRecoveryStart: options.onRecoveryStart }),
      now: options.now ?? (() => new Date()),
    }),
  } satisfies SessionContext);
}

/**
 * Opens an existing session and finishes what a killed process left half-done. Throws
 * `STORE_NOT_FOUND`, `SESSION_NOT_FOUND` (an isolated session whose view is gone), `LOCK_HELD`,
 * and the ledger's errors.
 */
export async function openContext(options: OpenSessionOptions): Promise<SessionContext> {
  // A pattern that does not compile fails before anything opens.
  createRedactor(options.redact);
  const location = await openStore(options.workspace);
  const file = await pickSession(location, options.session);
  const ledger = await ledgersOf(location).open(file, { ...(options.now && { now: options.now }) });
  try {
    const recorded = protectionsOf((await ledger.read()).entries);
    let context = await createContext(location, ledger, options);
    if (context.isolation === 'isolated' && !existsSync(context.workspace)) {
      throw new RewindError(
        'SESSION_NOT_FOUND',
        `Session ${context.id} is isolated and its view is gone (the session was destroyed). Pick another with \`rewind session use ID\` (\`rewind session list\` lists them), or start one with \`rewind init --isolated\`.`,
        { data: { session: context.id } },
      );
    }
    if (options.lockOnOpen === false) {
      if (tighteningOf(recorded, options)) {
        throw new RewindError(
          'INVALID_ARGUMENT',
          'A session opened without the lock cannot record protections (redact, blockPrivate): open it with the lock to add them.',
        );
      }
      startWatching(context);
      return context;
    }
    // Taking the lock finishes any interrupted operation first. What this process adds to the
    // session's protections is recorded, so that every later process applies it too.
    let recordedNow = recorded;
    await withWorkspaceLock(context, 'opening the session', async (journal) => {
      recordedNow = protectionsOf((await ledger.read()).entries);
      const added = tighteningOf(recordedNow, options);
      if (added) await journal.append('settings-tightened', added);
    });
    // Another process added some meanwhile: they apply here too.
    if (isLooser(recorded, recordedNow)) context = await createContext(location, ledger, options);
    startWatching(context, () => primeWatch(context));
    return context;
  } catch (error) {
    await ledger.close();
    throw error;
  }
}

/**
 * The snapshot that gives the watch its base each time it goes live (see `startWatching`): taken
 * under the workspace lock, and only if the lock is free at once (whoever holds it is taking a
 * snapshot anyway).
 */
function primeWatch(context: SessionContext): Promise<SnapshotResult> {
  return withWorkspaceLock(context, 'giving the watch its base', () => snapshotWorkspace(context), {
    timeoutMs: 0,
  });
}

/**
 * Starts an isolated session: a new ledger, and a view of the workspace recorded as the tree the
 * session starts from. Nothing is left behind when it fails.
 */
export async function startIsolatedContext(
  options: IsolatedSessionOptions,
): Promise<SessionContext> {
  if (options.startedBy !== undefined && !/^[A-Za-z0-9-]{1,40}$/.test(options.startedBy)) {
    throw new RewindError(
      'INVALID_ARGUMENT',
      `startedBy must be 1 to 40 letters, digits or "-", not ${JSON.stringify(options.startedBy)}.`,
      { data: { startedBy: options.startedBy } },
    );
  }
  const location = await openStore(options.workspace);
  const ledger = await startLedger(location, {
    isolation: 'isolated',
    ...(options.hashChain === true && { hashChain: true }),
    ...(options.now && { now: options.now }),
    ...(options.generateId && { generateId: options.generateId }),
    ...(options.sandbox && { sandbox: options.sandbox }),
    ...(options.network !== undefined && { network: options.network }),
    ...(options.redact && { redact: options.redact }),
    ...(options.blockPrivate === true && { blockPrivate: true }),
    ...(options.startedBy !== undefined && { startedBy: options.startedBy }),
  });
  const id = ledger.session.id;
  try {
    const context = await createContext(location, ledger, options);
    const sinceNs = BigInt(Date.now()) * 1_000_000n;
    await copyIntoView(location.workspace, context.workspace);
    await recordLeftOut(context);
    await withWorkspaceLock(context, 'starting the isolated session', async (journal) => {
      // The host's snapshot (incremental when it has been snapshotted before) gives the view's
      // first snapshot the contents of every file that did not change during the copy, and
      // leaves the first commit an incremental snapshot of the host instead of a first one.
      const host = await snapshotHost(context);
      for (const warning of host.warnings) options.onWarning?.(warning);
      const base = await snapshotWorkspace(context, undefined, {
        workspace: context.hostWorkspace,
        tree: host.tree,
        sinceNs,
      });
      await journal.append(
        'view-created',
        {
          view: `views/${id}/tree`,
          baseTree: base.tree,
          fileCount: base.fileCount,
          sizeBytes: base.sizeBytes,
          hostTree: host.tree,
          ...(host.unreadable.length > 0 && {
            unreadable: host.unreadable.map(({ path }) => path),
          }),
        },
        [
          { type: 'tree', digest: base.tree },
          { type: 'tree', digest: host.tree },
        ],
      );
    });
    if (options.makeCurrent !== false) await setCurrentSession(location.directory, ledger.session);
    startWatching(context, () => primeWatch(context));
    return context;
  } catch (error) {
    await rm(join(location.directory, 'views', id), { recursive: true, force: true });
    await ledger.close();
    throw error;
  }
}

/** Whether a path can be copied: a file that can be read, a folder that can be listed. */
async function isReadable(path: string): Promise<boolean> {
  try {
    const stats = await lstat(path);
    if (stats.isSymbolicLink()) return true;
    await access(path, stats.isDirectory() ? constants.R_OK | constants.X_OK : constants.R_OK);
    return true;
  } catch (error) {
    if (isSystemError(error, 'EACCES') || isSystemError(error, 'EPERM')) return false;
    throw error;
  }
}

/**
 * Copies the workspace into a view: everything but `.rewind` and `.git`, with reflinks where the
 * filesystem has them (GNU cp), then made durable. Run as root, the view belongs to the owner of
 * the workspace, as its files do (copied with their owners): sandboxed commands run as that user.
 * A later version may mount an overlay instead; callers only see the view's path.
 */
async function copyIntoView(workspace: string, view: string): Promise<void> {
  await mkdir(view, { recursive: true });
  if (process.getuid?.() === 0) {
    const owner = await stat(workspace);
    if (owner.uid !== 0) await chown(view, owner.uid, owner.gid);
  }
  const names = readNamesSync(workspace).filter((name) => name !== '.rewind' && name !== '.git');
  if (names.length > 0) {
    // find hands cp each name as bytes: one that is not UTF-8 is copied as it is (an argument
    // given as a JavaScript string could not hold it).
    const copied = spawnSync(
      'find',
      [
        '.',
        '-mindepth',
        '1',
        '-maxdepth',
        '1',
        '!',
        '-name',
        '.rewind',
        '!',
        '-name',
        '.git',
        '-exec',
        'cp',
        '-a',
        '--reflink=auto',
        '--target-directory',
        view,
        '--',
        '{}',
        '+',
      ],
      { cwd: workspace, encoding: 'utf8' },
    );
    if (copied.error || copied.status !== 0) {
      // No GNU find and cp here, or something it could not read: Node's copy (which clones where
      // the filesystem can), over an emptied view, leaving out what cannot be read (the host's
      // snapshot leaves it out too, and says so).
      for (const name of readNamesSync(view)) {
        await rm(join(view, name), { recursive: true, force: true });
      }
      for (const name of names) {
        await cp(join(workspace, name), join(view, name), {
          recursive: true,
          preserveTimestamps: true,
          verbatimSymlinks: true,
          mode: constants.COPYFILE_FICLONE,
          filter: isReadable,
        });
      }
    }
  }
  spawnSync('sync', ['-f', view]);
}
