import { spawnSync } from 'node:child_process';
import { constants, type Dirent, existsSync } from 'node:fs';
import { cp, lstat, mkdir, readdir, readFile, rm } from 'node:fs/promises';
import { hostname } from 'node:os';
import { join } from 'node:path';
import { createInterface } from 'node:readline/promises';
import {
  type Call,
  checkFormat,
  detectFormat,
  type Format,
  type Message,
  type RepairStrategy,
  type Result,
  readConversation,
  repair,
  storeConversation,
  withResumeNote,
} from '../conversation/index.js';
import { isRewindError, isSystemError, RewindError } from '../errors.js';
import { Ledger, type LedgerEntry, type SessionFile, setCurrentSession } from '../ledger/index.js';
import {
  acquireLock,
  canonicalJson,
  createRedactor,
  type Digest,
  digestBytes,
  type JsonValue,
  normalizeWorkspacePath,
  REWIND_VERSION,
  type RedactionOptions,
  type Redactor,
  resolveWorkspacePath,
  writeFileAtomic,
} from '../lib/index.js';
import {
  type Command,
  checkRequest,
  checkTarget,
  createSandbox,
  type HttpRequest,
  type HttpResponse,
  performRequest,
  type RunResult,
  type Sandbox,
  type SandboxBackend,
} from '../sandbox/index.js';
import {
  createObjectStore,
  encodeTree,
  type ObjectBatch,
  type ObjectStore,
  openStore,
  readTree,
  type StoreLocation,
  type TreeEntry,
} from '../store/index.js';
import {
  formatVerification,
  runVerifier,
  type VerificationResult,
  type VerifierConfig,
} from '../verifier/index.js';
import {
  type ApplyProgress,
  type ApplyResult,
  applyChanges,
  diffEntries,
  diffTrees,
  fileChangeKind,
  isIgnoredPath,
  isSameEntry,
  renderDiff,
  type SnapshotResult,
  snapshot,
  snapshotPath,
  type TreeChange,
} from '../workspace/index.js';
import {
  type ActionClass,
  type ActionRecord,
  type ActionState,
  deriveActions,
  describeState,
  type Effect,
  isRecorded,
  type PathChange,
  referencesOf,
} from './actions.js';
import { type ConversationRef, conversationIn, currentConversation } from './conversation.js';
import { pickSession } from './repository.js';

/** Options of {@link openSession}. */
export interface OpenSessionOptions {
  /** The workspace root: the directory that holds `.rewind/`. */
  workspace: string;
  /** The session to open (id, unique prefix, or file name). Default: the current session. */
  session?: string;
  /** The clock for ledger entries; injected in tests. */
  now?: () => Date;
  /** How long to wait for another process's operation on the same workspace. Default 60 000 ms. */
  lockTimeoutMs?: number;
  /** First-snapshot budget; see {@link SnapshotOptions}. */
  budget?: { maxBytes?: number; maxFiles?: number };
  /**
   * `isolated` without `session` starts a new isolated session (see {@link startIsolatedSession});
   * an existing session is opened as it was created, whatever this says.
   */
  isolation?: 'shared' | 'isolated';
  /**
   * Strips secrets before anything is hashed or stored: credential headers (`headers: true`:
   * Authorization, Cookie, X-Api-Key...) and every match of `patterns` in commands, URLs,
   * headers, bodies and outputs. Off by default. A draft keeps its exact content (under
   * `.rewind/drafts/`, deleted once it runs or is discarded) so it can run as approved.
   */
  redact?: RedactionOptions;
  /** Refuse HTTP requests to loopback and private addresses too. */
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
}

/** Options of {@link startIsolatedSession}. */
export interface IsolatedSessionOptions extends OpenSessionOptions {
  /** Make it the workspace's current session (default true), as `rewind init --isolated` does. */
  makeCurrent?: boolean;
}

/** What {@link Session.end} does when an isolated session's work is over. */
export interface EndOptions {
  /** Commit to the host when the work ended cleanly (no `error`). Default false. */
  autoCommit?: boolean;
  /** Remove the view afterwards, unless that would drop uncommitted work. Default false. */
  destroyOnExit?: boolean;
  /**
   * `interactive` (default) or `agent`: in agent mode a failed run (any `error`) preserves the
   * session for a person to look at, whatever `destroyOnExit` says.
   */
  mode?: 'interactive' | 'agent';
  /** Why the work ended early, if it did: nothing is committed then. */
  error?: unknown;
}

/** What {@link Session.end} did. */
export interface EndResult {
  commit: CommitResult | undefined;
  /** The commit's error, when an auto-commit failed (the session is kept). */
  commitError: unknown;
  isDestroyed: boolean;
  /** True when the view is kept: resume it with `openSession({ workspace, session: id })`. */
  isPreserved: boolean;
}

/** A checkpoint as the ledger records it. */
export interface CheckpointInfo {
  label: string;
  /** The seq of its `checkpoint-created` entry. */
  seq: number;
  at: string;
  tree: Digest;
  fileCount: number;
  sizeBytes: number;
  /** Files changed since the previous checkpoint of the session. */
  added: number;
  modified: number;
  deleted: number;
  isAutomatic: boolean;
  /** The conversation recorded with the files, if any. */
  conversation?: { format: Format; messageCount: number };
}

/** What {@link Session.checkpoint} recorded. */
export interface CheckpointResult extends CheckpointInfo {
  /** Files that had to be read (the rest were unchanged since the last snapshot). */
  readCount: number;
  warnings: string[];
}

/** One path a rollback would change, as a dry run lists it. */
export interface PlannedChange {
  path: string;
  /** `written` (replaced), `created`, or `deleted`. */
  action: 'written' | 'created' | 'deleted';
  /**
   * True when what is there now was never recorded by this session (no checkpoint, rollback or
   * undo saw it): the rollback saves it first, but this is what a user would see disappear.
   */
  isUnrecorded: boolean;
}

/** A path where the host and an isolated session both changed things since the session began. */
export interface CommitConflict {
  path: string;
  /** What the session did there and what happened on the host. */
  session: string;
  host: string;
}

/** What {@link Session.status} reports. */
export interface SessionStatus {
  id: string;
  isolation: 'shared' | 'isolated';
  /** Where the session works (the view, for an isolated session). */
  workspace: string;
  hostWorkspace: string;
  sandbox: SandboxBackend;
  network: boolean;
  /** For an isolated session: what a commit would write, create and delete now. */
  pendingChanges: PlannedChange[];
  /** For an isolated session: what would make a commit refuse now. */
  conflicts: CommitConflict[];
}

/** What {@link Session.commit} did, or would do with `dryRun`. */
export interface CommitResult {
  status: 'committed' | 'refused' | 'nothing-to-commit' | 'dry-run';
  /** The commit's action id, for `undo`. */
  id: number | undefined;
  /** The files the commit writes, creates and deletes on the host. */
  changes: PlannedChange[];
  conflicts: CommitConflict[];
  applied: ApplyResult | undefined;
}

/** How an unknown verdict that survived its retries is resolved. */
export type Resolution = 'continue' | 'rollback' | 'stop';

/** Decides what to do with an unknown verdict; see {@link stopEscalation}. */
export type EscalationHandler = (context: {
  result: VerificationResult;
  /** The checkpoint a rollback would go to. */
  checkpoint: string;
}) => Resolution | Promise<Resolution>;

/** The built-in escalation handler for agent mode: stop (a person must look). */
export const stopEscalation: EscalationHandler = () => 'stop';

/**
 * The built-in escalation handler for interactive use: asks a person what to do, through `ask`
 * (by default on the terminal: the question on stderr, the answer from stdin). Anything but
 * `c`/`continue` or `r`/`rollback` stops.
 */
export function promptEscalation(
  ask: (question: string) => Promise<string> = askOnTerminal,
): EscalationHandler {
  return async ({ result, checkpoint }) => {
    const answer = (
      await ask(
        `The verifier gave no verdict (${result.notes ?? 'unknown'}). [c]ontinue, [r]oll back to ${checkpoint}, or [s]top? `,
      )
    )
      .trim()
      .toLowerCase();
    if (answer === 'c' || answer === 'continue') return 'continue';
    if (answer === 'r' || answer === 'rollback') return 'rollback';
    return 'stop';
  };
}

async function askOnTerminal(question: string): Promise<string> {
  const terminal = createInterface({ input: process.stdin, output: process.stderr });
  try {
    return await terminal.question(question);
  } finally {
    terminal.close();
  }
}

/**
 * The escalation handler a mode implies: `agent` stops; `interactive` asks on the terminal when
 * there is one, and stops when there is none (nobody could answer).
 */
export function escalationFor(mode: 'interactive' | 'agent'): EscalationHandler {
  if (mode !== 'agent' && mode !== 'interactive') {
    throw new RewindError(
      'INVALID_ARGUMENT',
      `mode must be one of interactive, agent; not ${JSON.stringify(mode)}.`,
      {
        data: { mode },
      },
    );
  }
  return mode === 'interactive' && process.stdin.isTTY === true
    ? promptEscalation()
    : stopEscalation;
}

/**
 * Raised when an escalation resolves to stop: carries the checkpoint and the last verification.
 * It passes through every tool wrapper untouched.
 */
export class HaltError extends RewindError {
  readonly checkpoint: string;
  readonly lastResult: VerificationResult;
  constructor(checkpoint: string, lastResult: VerificationResult) {
    super(
      'HALTED',
      `Stopped: the verifier gave no verdict (${lastResult.notes ?? 'unknown'}) and the escalation said stop. The workspace is as it was; checkpoint ${checkpoint} is the known-good point.`,
      { data: { checkpoint, status: lastResult.status } },
    );
    this.checkpoint = checkpoint;
    this.lastResult = lastResult;
  }
}

/** What the last automatic rollback did. */
export interface AutoRollbackReport {
  event: 'exception' | 'test-failure' | 'escalation';
  to: string;
  /** True when it was skipped because it would have changed nothing. */
  isSkipped: boolean;
  /** The restored conversation, when the checkpoint had one. */
  messages: Message[] | undefined;
}

/** The policies of {@link Session.autoCheckpoint} and {@link Session.autoRollback}. */
interface Policies {
  checkpoint?: { trigger: 'before-tool-call'; keepLast: number | undefined };
  rollback?: {
    on: ReadonlySet<'exception' | 'test-failure'>;
    to: string;
    verifier: VerifierConfig | undefined;
    escalation: EscalationHandler;
  };
}

/** Options of {@link Session.checkpoint}. */
export interface CheckpointOptions {
  isAutomatic?: boolean;
  /** The conversation to record with the files (else the session's current one, if any). */
  messages?: readonly unknown[];
  /** Its format; detected when omitted. */
  format?: Format;
}

/** Options of {@link Session.rollback}. */
export interface RollbackOptions {
  dryRun?: boolean;
  onProgress?: (progress: ApplyProgress) => void;
  /** What changed since the checkpoint, told to the model in the resume note. */
  patchNote?: string;
  /** What to do with tool calls left without a result: see {@link RepairStrategy}. */
  repairStrategy?: RepairStrategy;
}

/** The conversation a rollback hands back: repaired for its provider, with the resume note. */
export interface RestoredConversation {
  format: Format;
  messages: Message[];
  /** The note added at the end (as its own message, or merged into the last user turn). */
  note: string;
  /** Calls answered with a synthetic result, or dropped, and results removed, by the repair. */
  answered: Call[];
  dropped: Call[];
  droppedResults: Result[];
}

/** The session's conversation as recorded. */
export interface ConversationState {
  format: Format;
  messages: Message[];
  /** The stored tree of its messages. */
  tree: Digest;
}

/** What a rollback did, or would do with `dryRun`. */
export interface RollbackResult {
  isDryRun: boolean;
  label: string;
  /** The action id (the seq of `rollback-started`), for `undo`; undefined in a dry run. */
  id: number | undefined;
  /** The state the workspace was in: saved before anything moved. */
  beforeTree: Digest;
  afterTree: Digest;
  changes: PlannedChange[];
  applied: ApplyResult | undefined;
  warnings: string[];
  /** The checkpoint's conversation, repaired and with the resume note, when it has one. */
  conversation?: RestoredConversation;
}

/** A path an undo would trample: what the action left there, and what is there now. */
export interface UndoConflict {
  path: string;
  expected: string;
  found: string;
}

/** The outcome of an undo: done, or refused because later edits would be trampled. */
export type UndoResult =
  | { status: 'undone'; id: number; undoes: number; applied: ApplyResult }
  | { status: 'refused'; undoes: number; conflicts: UndoConflict[] };

/** What a file action or a command did: its id (for `undo`), class and the paths it changed. */
export interface ActionResult {
  id: number;
  kind: string;
  class: ActionClass;
  state: ActionState;
  target: string;
  /** The paths the action changed, with their state before and after. */
  changes: PathChange[];
  warnings: string[];
}

/** What {@link Session.exec} recorded. */
export interface ExecResult extends ActionResult {
  exitCode: number | null;
  signal: string | null;
  timedOut: boolean;
  durationMs: number;
  stdout: string;
  stderr: string;
  stdoutTruncated: boolean;
  stderrTruncated: boolean;
  /** Files the command created, modified and deleted in the workspace. */
  created: string[];
  modified: string[];
  deleted: string[];
}

/** An action as {@link Session.actions} lists it. */
export interface ActionInfo {
  id: number;
  kind: string;
  class: ActionClass;
  state: ActionState;
  target: string;
  at: string;
  undoes: number | undefined;
}

/** A compensation, declared up front: a command run in the workspace, or an HTTP request. */
export type Compensation = { command: Command } | { http: HttpRequest };

/** Options of {@link Session.http}. */
export interface HttpActionOptions {
  /** The whole exchange must end within this. Default 30 000 ms. */
  timeoutMs?: number;
  /** Makes the request `compensable`: what offsets it, run by {@link Session.compensate}. */
  compensation?: Compensation;
  /** Journal it without sending it; {@link Session.approve} sends it. */
  draft?: boolean;
}

/** What {@link Session.http} did: the response (redacted as the session says), unless a draft. */
export interface HttpResult extends ActionResult {
  response:
    | { status: number; headers: Record<string, string>; body: string; bodyTruncated: boolean }
    | undefined;
}

/** Options of {@link Session.record}. */
export interface RecordOptions {
  /** `irreversible` (default without a compensation) or `compensable` (default with one). */
  class?: 'compensable' | 'irreversible';
  compensation?: Compensation;
  /** What it acts on, for people (default: the name). */
  target?: string;
  detail?: string;
  draft?: boolean;
}

/** A draft as it will run, and the digest that binds its approval. */
export interface DraftInfo {
  id: number;
  kind: string;
  class: ActionClass;
  digest: string;
  spec: ActionSpec;
}

/** The exact content of an action that can be drafted: what approval runs. */
export type ActionSpec = ExecSpec | HttpSpec | RecordSpec;

/** A command as it will run. */
export interface ExecSpec {
  action: 'exec';
  command: Command;
  timeoutMs: number;
  env?: Record<string, string>;
  maxOutputBytes?: number;
}

/** A request as it will be sent (the body in base64). */
export interface HttpSpec {
  action: 'http';
  request: { method: string; url: string; headers?: Record<string, string>; body?: string };
  timeoutMs: number;
  compensation?: Compensation;
}

/** An external action as recorded. */
export interface RecordSpec {
  action: `x.${string}`;
  target: string;
  detail?: string;
  compensation?: Compensation;
}

/** Options of {@link Session.exec}. */
export interface ExecOptions {
  /** Journal the command without running it; {@link Session.approve} runs it. */
  draft?: boolean;
  /** Ends the command and everything it started after this long. Default 120 000 ms. */
  timeoutMs?: number;
  /** Variables added to the command's clean environment. */
  env?: Record<string, string>;
  /** Bytes of stdout and of stderr kept as evidence. Default 1 MiB each. */
  maxOutputBytes?: number;
}

const LISTED_PATHS = 1000;

/** What {@link Session.diff} found. */
export interface DiffResult {
  from: string;
  to: string;
  changes: { path: string; kind: 'added' | 'deleted' | 'modified' }[];
  /** A unified diff: text files line by line, binary files summarized. */
  text: string;
  /** For one action: where its record was redacted before storing (`request.headers.authorization`). */
  redacted: string[];
}

const LABEL_PATTERN = /^[A-Za-z0-9][A-Za-z0-9._-]{0,127}$/;

/** Checks a checkpoint label: letters, digits, `.`, `_`, `-`; not only digits; not `latest`. */
export function checkLabel(label: string): string {
  if (
    !LABEL_PATTERN.test(label) ||
    /^\d+$/.test(label) ||
    label === 'latest' ||
    label.includes('..')
  ) {
    throw new RewindError(
      'INVALID_ARGUMENT',
      `"${label}" is not a valid checkpoint label. Use letters, digits, ".", "_" and "-" (up to 128, starting with a letter or digit, ` +
        'not only digits, not "latest"), such as "before-refactor".',
      { data: { label } },
    );
  }
  return label;
}

function checkpointOf(entry: LedgerEntry): CheckpointInfo {
  const body = entry.body;
  const conversation = conversationIn(body, 'conversation');
  return {
    label: String(body.label),
    seq: entry.seq,
    at: entry.at,
    tree: body.tree as Digest,
    fileCount: Number(body.fileCount),
    sizeBytes: Number(body.sizeBytes),
    added: Number(body.added),
    modified: Number(body.modified),
    deleted: Number(body.deleted),
    isAutomatic: body.isAutomatic === true,
    ...(conversation && {
      conversation: { format: conversation.format, messageCount: conversation.messageCount },
    }),
  };
}

function countFiles(changes: readonly TreeChange[]): {
  added: number;
  modified: number;
  deleted: number;
} {
  const counts = { added: 0, modified: 0, deleted: 0 };
  for (const change of changes) {
    const kind = fileChangeKind(change);
    if (kind) counts[kind] += 1;
  }
  return counts;
}

async function entryAt(
  store: ObjectStore,
  tree: Digest,
  path: string,
  trees: Map<Digest, Promise<TreeEntry[]>>,
): Promise<TreeEntry | undefined> {
  let current: Digest = tree;
  const parts = path.split('/');
  for (let index = 0; index < parts.length; index++) {
    let entries = trees.get(current);
    if (!entries) {
      entries = readTree(store, current).then((decoded) => decoded.entries);
      trees.set(current, entries);
    }
    const entry = (await entries).find((candidate) => candidate.name === parts[index]);
    if (!entry || index === parts.length - 1) return entry;
    if (entry.type !== 'directory') return undefined;
    current = entry.digest;
  }
  return undefined;
}

/**
 * Copies the workspace into a view: everything but `.rewind` and `.git`, with reflinks where the
 * filesystem has them (GNU cp), then made durable. A later version may mount an overlay instead;
 * callers only see the view's path.
 */
async function copyIntoView(workspace: string, view: string): Promise<void> {
  await mkdir(view, { recursive: true });
  const names = (await readdir(workspace)).filter((name) => name !== '.rewind' && name !== '.git');
  if (names.length > 0) {
    const copied = spawnSync(
      'cp',
      ['-a', '--reflink=auto', '--', ...names.map((name) => join(workspace, name)), `${view}/`],
      {
        encoding: 'utf8',
      },
    );
    if (copied.error || copied.status !== 0) {
      // No GNU cp here: Node's copy (which clones where the filesystem can).
      for (const name of names) {
        await cp(join(workspace, name), join(view, name), {
          recursive: true,
          preserveTimestamps: true,
          verbatimSymlinks: true,
          mode: constants.COPYFILE_FICLONE,
        });
      }
    }
  }
  spawnSync('sync', ['-f', view]);
}

/**
 * Where an isolated session's change and the host's change since the session began collide:
 * the same path changed differently, a path under a directory one side removed, or a directory
 * the session removes that the host changed something in.
 */
function findCommitConflicts(
  sessionChanges: readonly TreeChange[],
  hostChanges: ReadonlyMap<string, TreeChange>,
): CommitConflict[] {
  const describe = (change: TreeChange): string => {
    const kind = fileChangeKind(change);
    if (kind) return kind;
    return change.after ? 'changed a directory' : 'removed a directory';
  };
  const conflicts: CommitConflict[] = [];
  const hostPaths = [...hostChanges.keys()];
  for (const change of sessionChanges) {
    const host = hostChanges.get(change.path);
    if (
      host &&
      !(host.after && change.after
        ? isSameEntry(host.after, change.after)
        : host.after === change.after)
    ) {
      conflicts.push({ path: change.path, session: describe(change), host: describe(host) });
      continue;
    }
    if (change.before?.type === 'directory' && change.after?.type !== 'directory') {
      const inside = hostPaths.find((path) => path.startsWith(`${change.path}/`));
      if (inside) {
        conflicts.push({ path: change.path, session: describe(change), host: `changed ${inside}` });
        continue;
      }
    }
    const parts = change.path.split('/');
    for (let index = 1; index < parts.length; index++) {
      const ancestor = hostChanges.get(parts.slice(0, index).join('/'));
      if (ancestor && ancestor.after?.type !== 'directory') {
        conflicts.push({
          path: change.path,
          session: describe(change),
          host: `${describe(ancestor)} ${ancestor.path}`,
        });
        break;
      }
    }
  }
  return conflicts;
}

/** Where an isolated session's view lives: under the store, so it is never snapshotted itself. */
function viewOf(storeDirectory: string, sessionId: string): string {
  return join(storeDirectory, 'views', sessionId, 'tree');
}

/** The `[REWIND]` notice a model sees after an automatic rollback, with the verifier's words. */
function rewindNotice(
  rolled: AutoRollbackReport | undefined,
  result: VerificationResult | undefined,
): string {
  if (!rolled || rolled.isSkipped) return '';
  const verdict =
    result && result.status !== 'pass' ? ` The verifier said: ${formatVerification(result)}` : '';
  return `\n[REWIND] The workspace and conversation were rolled back to checkpoint "${rolled.to}"; changes made after it were undone.${verdict}`;
}

function notFound(path: string): RewindError {
  return new RewindError('PATH_NOT_FOUND', `Nothing is at ${path} in the workspace.`, {
    data: { path },
  });
}

function sameState(a: TreeEntry | undefined, b: TreeEntry | undefined): boolean {
  if (a === undefined || b === undefined) return a === b;
  return isSameEntry(a, b);
}

function reversePaths(paths: readonly PathChange[]): PathChange[] {
  return paths.map((change) => ({ path: change.path, before: change.after, after: change.before }));
}

/**
 * A session on a workspace: checkpoints, rollback and undo, journaled in its ledger. Open one
 * with {@link openSession}; close it when done (or use `await using`).
 */
export class Session {
  readonly id: string;
  /**
   * Where the session works: the workspace itself, or for an isolated session its private view
   * (the host directory changes only on {@link Session.commit}).
   */
  readonly workspace: string;
  /** The workspace directory on the host (the same as `workspace` unless isolated). */
  readonly hostWorkspace: string;
  /** `shared`: the session works on the workspace; `isolated`: on a private view of it. */
  readonly isolation: 'shared' | 'isolated';
  readonly #location: StoreLocation;
  readonly #store: ObjectStore;
  readonly #ledger: Ledger;
  readonly #options: OpenSessionOptions;
  readonly #redactor: Redactor;
  #sandbox: Sandbox | undefined;
  #isClosed = false;
  #policies: Policies = {};
  #autoCounter = 0;
  /** How many wrapped tool calls are running (at most one): inside one, the wrapper decides. */
  #toolDepth = 0;
  /** Tool calls run one at a time: a checkpoint never interleaves with another call's write. */
  #toolQueue: Promise<unknown> = Promise.resolve();
  /** What the last automatic rollback did, if one was attempted. */
  lastAutoRollback: AutoRollbackReport | undefined;

  private constructor(
    location: StoreLocation,
    ledger: Ledger,
    options: OpenSessionOptions,
    isIsolated: boolean,
  ) {
    this.#redactor = createRedactor(options.redact);
    this.id = ledger.session.id;
    this.hostWorkspace = location.workspace;
    this.isolation = isIsolated ? 'isolated' : 'shared';
    this.workspace = isIsolated
      ? viewOf(location.directory, ledger.session.id)
      : location.workspace;
    this.#location = location;
    this.#store = createObjectStore(location.directory);
    this.#ledger = ledger;
    this.#options = options;
  }

  /** See {@link openSession}. */
  static async open(options: OpenSessionOptions): Promise<Session> {
    createRedactor(options.redact); // a pattern that does not compile fails before anything opens
    const location = await openStore(options.workspace);
    const file: SessionFile = await pickSession(location, options.session);
    const ledger = await Ledger.open(file, { ...(options.now && { now: options.now }) });
    const isIsolated = (await ledger.read()).entries[0]?.body.isolation === 'isolated';
    if (isIsolated && !existsSync(viewOf(location.directory, ledger.session.id))) {
      await ledger.close();
      throw new RewindError(
        'SESSION_NOT_FOUND',
        `Session ${ledger.session.id} is isolated and its view is gone (the session was destroyed). Start another with \`rewind init --isolated\`.`,
        { data: { session: ledger.session.id } },
      );
    }
    const session = new Session(location, ledger, options, isIsolated);
    try {
      // Taking the lock finishes any interrupted operation first.
      await session.#withOperationLock('opening the session', async () => {});
    } catch (error) {
      await ledger.close();
      throw error;
    }
    return session;
  }

  /** See {@link startIsolatedSession}. */
  static async startIsolated(options: IsolatedSessionOptions): Promise<Session> {
    const location = await openStore(options.workspace);
    const ledger = await Ledger.create(location.directory, {
      ...(options.now && { now: options.now }),
      startedBody: {
        rewindVersion: REWIND_VERSION,
        workspace: location.workspace,
        host: hostname(),
        pid: process.pid,
        isolation: 'isolated',
        ...(options.sandbox && { sandbox: options.sandbox }),
        ...(options.network !== undefined && { network: options.network }),
      },
    });
    const view = viewOf(location.directory, ledger.session.id);
    const session = new Session(location, ledger, options, true);
    try {
      await copyIntoView(location.workspace, view);
      await session.#withOperationLock('starting the isolated session', async () => {
        const base = await session.#snapshot();
        await ledger.append(
          'view-created',
          {
            view: `views/${ledger.session.id}/tree`,
            baseTree: base.tree,
            fileCount: base.fileCount,
            sizeBytes: base.sizeBytes,
          },
          [{ type: 'tree', digest: base.tree }],
        );
      });
      if (options.makeCurrent !== false)
        await setCurrentSession(location.directory, ledger.session);
    } catch (error) {
      await rm(join(location.directory, 'views', ledger.session.id), {
        recursive: true,
        force: true,
      });
      await ledger.close();
      throw error;
    }
    return session;
  }

  async #withOperationLock<T>(purpose: string, fn: () => Promise<T>): Promise<T> {
    const lock = await acquireLock(join(this.#location.directory, 'workspace.lock'), {
      timeoutMs: this.#options.lockTimeoutMs ?? 60_000,
      purpose: `${purpose} (session ${this.id})`,
    });
    try {
      await this.#recover();
      return await fn();
    } finally {
      await lock.release();
    }
  }

  async #entries(): Promise<LedgerEntry[]> {
    return (await this.#ledger.read()).entries;
  }

  /**
   * Finishes what a killed process left between intent and completion: a rollback, an undo or a
   * file action is applied again (all are idempotent) and journaled as completed; a command cannot
   * be finished, so the workspace it left is recorded and it is closed as interrupted (its file
   * effects can then still be undone).
   */
  async #recover(): Promise<void> {
    for (const action of deriveActions(await this.#entries()).values()) {
      // Drafts wait for approval, recorded actions for their report: neither was interrupted.
      if (action.closed || action.state === 'draft' || action.state === 'discarded') continue;
      if (isRecorded(action)) continue;
      if (action.effect) {
        const changes = await this.#changesOf(action.effect);
        await this.#finish(action.started, changes, { isRecovery: true });
        continue;
      }
      const snap = action.kind === 'exec' ? await this.#snapshot() : undefined;
      await this.#ledger.append(
        'action-failed',
        {
          startedSeq: action.id,
          ...(snap && { afterTree: snap.tree }),
          error: {
            code: 'INTERRUPTED',
            message:
              'The process running it ended before it finished; the workspace as it was then is recorded.',
          },
          isRecovery: true,
        },
        snap ? [{ type: 'tree', digest: snap.tree }] : [],
      );
    }
  }

  async #changesOf(effect: Effect): Promise<TreeChange[]> {
    if (effect.type === 'trees') return diffTrees(this.#store, effect.beforeTree, effect.afterTree);
    const changes: TreeChange[] = [];
    for (const change of effect.paths) {
      changes.push(...(await diffEntries(this.#store, change.path, change.before, change.after)));
    }
    return changes;
  }

  /**
   * Applies an announced restore and journals how it ended. If it fails (a missing object, a
   * path that became a link), the paths it touched are put back as they were, the failure is
   * journaled (closing the intent, so it is not retried forever), and the error is rethrown
   * saying whether the workspace is back as it was.
   */
  async #finish(
    started: LedgerEntry,
    changes: readonly TreeChange[],
    options: { isRecovery: boolean; onProgress?: (progress: ApplyProgress) => void },
  ): Promise<ApplyResult> {
    const kind = started.kind.replace(/-started$/, '') as 'rollback' | 'undo' | 'action';
    const common = {
      startedSeq: started.seq,
      ...(kind === 'undo' && { undoes: started.body.undoes }),
      isRecovery: options.isRecovery,
    };
    try {
      const target = started.body.on === 'host' ? this.hostWorkspace : this.workspace;
      const applied = await applyChanges(target, this.#store, changes, {
        isRecovery: options.isRecovery,
        ...(options.onProgress && { onProgress: options.onProgress }),
      });
      await this.#ledger.append(`${kind}-completed`, { ...common, ...applied });
      return applied;
    } catch (error) {
      let isReverted = false;
      try {
        const back = changes.map((change) => ({
          path: change.path,
          before: change.after,
          after: change.before,
        }));
        await applyChanges(
          started.body.on === 'host' ? this.hostWorkspace : this.workspace,
          this.#store,
          back,
          { isRecovery: true },
        );
        isReverted = true;
      } catch {}
      const code = isRewindError(error) ? error.code : 'IO_FAILED';
      const message = error instanceof Error ? error.message : String(error);
      await this.#ledger.append(`${kind}-failed`, {
        ...common,
        error: { code, message },
        isReverted,
      });
      throw new RewindError(
        code,
        `The ${kind === 'action' ? String(started.body.action) : kind} #${started.seq} failed: ${message} ` +
          (isReverted
            ? 'The workspace was put back as it was before; nothing was lost.'
            : 'Putting the workspace back failed too, so it is partly restored: `rewind diff` shows where it stands, and every state is still in the store.'),
        { data: { id: started.seq, isReverted }, cause: error },
      );
    }
  }

  async #snapshot(): Promise<SnapshotResult> {
    return snapshot(this.workspace, {
      store: this.#store,
      // A view keeps its own caches: the host's describe another directory.
      storeDirectory:
        this.isolation === 'isolated'
          ? join(this.#location.directory, 'views', this.id)
          : this.#location.directory,
      ...(this.#options.budget && { budget: this.#options.budget }),
    });
  }

  #checkMessages(
    messages: readonly unknown[],
    format: Format | undefined,
  ): { messages: Message[]; format: Format } {
    const resolved = format ?? detectFormat(messages);
    return { messages: checkFormat(messages, resolved), format: resolved };
  }

  async #storeConversation(messages: readonly Message[], format: Format): Promise<ConversationRef> {
    const batch = this.#store.batch();
    try {
      const stored = await storeConversation(messages, batch);
      return { tree: stored.tree, format, messageCount: stored.messageCount };
    } finally {
      await batch.commit();
    }
  }

  /**
   * Records the agent's current conversation (format detected unless given). Messages are stored
   * one object each, so syncing a longer history costs only the new messages; a ledger entry is
   * written only when the conversation changed. Throws `CONVERSATION_FORMAT_UNKNOWN` and
   * `CONVERSATION_FORMAT_MISMATCH`.
   */
  async syncConversation(
    messages: readonly unknown[],
    options: { format?: Format } = {},
  ): Promise<{ tree: Digest; format: Format; messageCount: number; isChanged: boolean }> {
    const given = this.#checkMessages(messages, options.format);
    return this.#withOperationLock('recording the conversation', async () => {
      const ref = await this.#storeConversation(given.messages, given.format);
      const current = currentConversation(await this.#entries());
      const isChanged = current?.tree !== ref.tree || current.format !== ref.format;
      if (isChanged) {
        await this.#ledger.append('conversation-synced', { conversation: ref }, [
          { type: 'tree', digest: ref.tree },
        ]);
      }
      return { ...ref, isChanged };
    });
  }

  /** The session's current conversation, exactly as recorded; undefined when it has none. */
  async conversation(): Promise<ConversationState | undefined> {
    const ref = currentConversation(await this.#entries());
    if (!ref) return undefined;
    return {
      format: ref.format,
      messages: await readConversation(this.#store, ref.tree),
      tree: ref.tree,
    };
  }

  /**
   * The conversation a checkpoint recorded, as a rollback to it would hand it back: repaired for
   * its provider, with the resume note. Undefined when the checkpoint has no conversation.
   */
  async conversationAt(
    label: string,
    options: Pick<RollbackOptions, 'patchNote' | 'repairStrategy'> = {},
  ): Promise<RestoredConversation | undefined> {
    const target = await this.#findCheckpoint(label);
    return (await this.#restoredConversation(target, options))?.result;
  }

  async #restoredConversation(
    target: CheckpointInfo,
    options: Pick<RollbackOptions, 'patchNote' | 'repairStrategy' | 'dryRun'>,
  ): Promise<{ ref: ConversationRef; result: RestoredConversation } | undefined> {
    const entry = (await this.#entries()).find((candidate) => candidate.seq === target.seq);
    const recorded = entry ? conversationIn(entry.body, 'conversation') : undefined;
    if (!recorded) return undefined;
    const messages = await readConversation(this.#store, recorded.tree);
    const repaired = repair(messages, recorded.format, {
      ...(options.repairStrategy && { strategy: options.repairStrategy }),
      resultText: `Rewind: this tool call was rolled back with the workspace to checkpoint "${target.label}" before it completed, so it had no effect. Call it again if it is still needed.`,
    });
    const note = `Rewind: the workspace and this conversation were rolled back to checkpoint "${target.label}". Everything done after it was undone (it is still recorded); tool calls that were in flight were cancelled. Resume from this exact state.`;
    const restored = withResumeNote(repaired.messages, recorded.format, note, {
      ...(options.patchNote && { patchNote: options.patchNote }),
    });
    const ref = options.dryRun
      ? { ...recorded, messageCount: restored.length }
      : await this.#storeConversation(restored, recorded.format);
    return {
      ref,
      result: {
        format: recorded.format,
        messages: restored,
        note: options.patchNote ? `${note} Patch applied since: ${options.patchNote}` : note,
        answered: repaired.answered,
        dropped: repaired.dropped,
        droppedResults: repaired.droppedResults,
      },
    };
  }

  /** Every checkpoint of the session, oldest first. */
  async checkpoints(): Promise<CheckpointInfo[]> {
    const entries = await this.#entries();
    const pruned = new Set(
      entries
        .filter((entry) => entry.kind === 'checkpoint-pruned')
        .map((entry) => Number(entry.body.checkpointSeq)),
    );
    return entries
      .filter((entry) => entry.kind === 'checkpoint-created' && !pruned.has(entry.seq))
      .map(checkpointOf);
  }

  async #findCheckpoint(label: string): Promise<CheckpointInfo> {
    const checkpoints = await this.checkpoints();
    const found =
      label === 'latest'
        ? checkpoints.at(-1)
        : checkpoints.find((checkpoint) => checkpoint.label === label);
    if (found) return found;
    const known = checkpoints.map((checkpoint) => checkpoint.label);
    throw new RewindError(
      'CHECKPOINT_NOT_FOUND',
      label === 'latest'
        ? `Session ${this.id} has no checkpoint yet. Create one with \`rewind checkpoint LABEL\`.`
        : `Session ${this.id} has no checkpoint "${label}". ` +
            (known.length > 0
              ? `Its checkpoints: ${known.join(', ')}.`
              : 'It has no checkpoint yet.'),
      { data: { label, known } },
    );
  }

  /**
   * Records the workspace under `label` (unique in the session) with a `checkpoint-created` entry.
   * Costs what changed since the last snapshot. Throws `INVALID_ARGUMENT` for a malformed label,
   * `CHECKPOINT_EXISTS`, and the errors of {@link snapshot}.
   */
  async checkpoint(label: string, options: CheckpointOptions = {}): Promise<CheckpointResult> {
    checkLabel(label);
    const given = options.messages
      ? this.#checkMessages(options.messages, options.format)
      : undefined;
    return this.#withOperationLock(`creating checkpoint ${label}`, async () => {
      const checkpoints = await this.checkpoints();
      const existing = checkpoints.find((checkpoint) => checkpoint.label === label);
      if (existing) {
        throw new RewindError(
          'CHECKPOINT_EXISTS',
          `Session ${this.id} already has a checkpoint "${label}" (#${existing.seq}). Choose another label.`,
          { data: { label, seq: existing.seq } },
        );
      }
      const snap = await this.#snapshot();
      const counts = countFiles(await diffTrees(this.#store, checkpoints.at(-1)?.tree, snap.tree));
      const conversation = given
        ? await this.#storeConversation(given.messages, given.format)
        : currentConversation(await this.#entries());
      const entry = await this.#ledger.append(
        'checkpoint-created',
        {
          label,
          tree: snap.tree,
          fileCount: snap.fileCount,
          sizeBytes: snap.sizeBytes,
          ...counts,
          isAutomatic: options.isAutomatic === true,
          ...(conversation && { conversation }),
        },
        [
          { type: 'tree', digest: snap.tree },
          ...(conversation ? [{ type: 'tree' as const, digest: conversation.tree }] : []),
        ],
      );
      return { ...checkpointOf(entry), readCount: snap.readCount, warnings: snap.warnings };
    });
  }

  /**
   * Restores the workspace to a checkpoint (`latest` is the newest). The current state is saved
   * first, so nothing is lost and the rollback can be undone (`undo(result.id)`). An intent entry
   * names both states before anything moves, so a process killed midway is finished by the next
   * {@link openSession}. With `dryRun`, only lists what would change, marking what this session
   * never recorded.
   *
   * Throws `CHECKPOINT_NOT_FOUND`, and the errors of {@link snapshot} and {@link applyChanges}.
   */
  async rollback(label: string, options: RollbackOptions = {}): Promise<RollbackResult> {
    const target = await this.#findCheckpoint(label);
    return this.#withOperationLock(`rolling back to ${target.label}`, async () => {
      const snap = await this.#snapshot();
      const changes = await diffTrees(this.#store, snap.tree, target.tree);
      const planned = await this.#plan(changes, options.dryRun === true);
      const result: RollbackResult = {
        isDryRun: options.dryRun === true,
        label: target.label,
        id: undefined,
        beforeTree: snap.tree,
        afterTree: target.tree,
        changes: planned,
        applied: undefined,
        warnings: snap.warnings,
      };
      const restored = await this.#restoredConversation(target, options);
      if (restored) result.conversation = restored.result;
      if (result.isDryRun) return result;
      const before = currentConversation(await this.#entries());
      const started = await this.#ledger.append(
        'rollback-started',
        {
          label: target.label,
          checkpointSeq: target.seq,
          beforeTree: snap.tree,
          afterTree: target.tree,
          changeCount: changes.length,
          ...(restored && {
            ...(before && { conversationBefore: before }),
            conversationAfter: restored.ref,
          }),
        },
        [
          { type: 'tree', digest: snap.tree },
          { type: 'tree', digest: target.tree },
          ...(restored ? [{ type: 'tree' as const, digest: restored.ref.tree }] : []),
          ...(restored && before ? [{ type: 'tree' as const, digest: before.tree }] : []),
        ],
      );
      const applied = await this.#finish(started, changes, {
        isRecovery: false,
        ...(options.onProgress && { onProgress: options.onProgress }),
      });
      return { ...result, id: started.seq, applied };
    });
  }

  async #plan(changes: readonly TreeChange[], isDryRun: boolean): Promise<PlannedChange[]> {
    const recordedTrees = isDryRun
      ? new Set(
          (await this.#entries()).flatMap((entry) =>
            (entry.refs ?? []).filter((ref) => ref.type === 'tree').map((ref) => ref.digest),
          ),
        )
      : new Set<Digest>();
    const planned: PlannedChange[] = [];
    const trees = new Map<Digest, Promise<TreeEntry[]>>();
    const actions = { added: 'created', deleted: 'deleted', modified: 'written' } as const;
    for (const change of changes) {
      const kind = fileChangeKind(change);
      if (!kind) continue;
      const action = actions[kind];
      let isUnrecorded = false;
      if (isDryRun && kind !== 'added' && change.before) {
        isUnrecorded = true;
        for (const tree of recordedTrees) {
          const seen = await entryAt(this.#store, tree, change.path, trees);
          if (seen && JSON.stringify(seen) === JSON.stringify(change.before)) {
            isUnrecorded = false;
            break;
          }
        }
      }
      planned.push({ path: change.path, action, isUnrecorded });
    }
    return planned;
  }

  /**
   * Undoes a reversible action: a file action, a command (its file effects), a rollback or an
   * undo (redo). `'last'` names the most recent action that can still be undone (not an undo, not
   * undone already), so repeated calls step back through the session. Every path the action
   * changed goes back to what it was, and nothing else is touched. Refused, and the refusal
   * journaled, when any of those paths no longer holds what the action left: undo never
   * tramples later edits.
   *
   * Throws `ACTION_NOT_FOUND` for an id that names no action, `ACTION_NOT_ALLOWED` for one that
   * cannot be undone (irreversible, never run, already undone, failed and put back).
   */
  async undo(id: number | 'last'): Promise<UndoResult> {
    return this.#withOperationLock(
      `undoing ${id === 'last' ? 'the last action' : `#${id}`}`,
      async () => {
        const action = id === 'last' ? await this.#lastUndoable() : await this.#findAction(id);
        const effect = this.#checkUndoable(action);
        const touched = await this.#changesOf(effect);
        const conflicts = await this.#findConflicts(
          effect,
          touched,
          action.started.body.on === 'host' ? this.hostWorkspace : this.workspace,
        );
        if (conflicts.length > 0) {
          await this.#ledger.append('undo-refused', {
            undoes: action.id,
            paths: conflicts.slice(0, 50).map((conflict) => conflict.path),
            conflicts: conflicts.slice(0, 50),
            pathCount: conflicts.length,
          });
          return { status: 'refused', undoes: action.id, conflicts };
        }
        // Undoing what moved the conversation moves it back (to none, if there was none).
        const movedTo = conversationIn(action.started.body, 'conversationAfter');
        const movedFrom = conversationIn(action.started.body, 'conversationBefore');
        const current = currentConversation(await this.#entries());
        const moved = {
          ...(movedTo && {
            ...(movedFrom && { conversationAfter: movedFrom }),
            ...(current && { conversationBefore: current }),
          }),
          // An undo acts where the action did: the host, for a commit.
          ...(action.started.body.on === 'host' && { on: 'host' }),
        };
        const conversationRefs = [movedFrom, current].flatMap((ref) =>
          movedTo && ref ? [{ type: 'tree' as const, digest: ref.tree }] : [],
        );
        const started =
          effect.type === 'trees'
            ? await this.#ledger.append(
                'undo-started',
                {
                  undoes: action.id,
                  beforeTree: effect.afterTree,
                  afterTree: effect.beforeTree,
                  ...moved,
                },
                [
                  { type: 'tree', digest: effect.afterTree },
                  { type: 'tree', digest: effect.beforeTree },
                  ...conversationRefs,
                ],
              )
            : await this.#ledger.append(
                'undo-started',
                { undoes: action.id, paths: reversePaths(effect.paths), ...moved },
                [...referencesOf(effect.paths), ...conversationRefs],
              );
        const reverse = touched.map((change) => ({
          path: change.path,
          before: change.after,
          after: change.before,
        }));
        const applied = await this.#finish(started, reverse, { isRecovery: false });
        return { status: 'undone', id: started.seq, undoes: action.id, applied };
      },
    );
  }

  #checkUndoable(action: ActionRecord): Effect {
    const refuse = (why: string, next: string): never => {
      throw new RewindError(
        'ACTION_NOT_ALLOWED',
        `Action #${action.id} (${action.kind} ${action.target}) ${why}. ${next}`,
        { data: { id: action.id, state: action.state, class: action.class } },
      );
    };
    if (action.class !== 'reversible') {
      refuse(
        `is ${action.class}: Rewind holds no state to put back`,
        action.class === 'compensable'
          ? `Run its declared compensation with \`rewind compensate ${action.id}\`.`
          : 'Nothing can undo it; record what you do about it with `rewind note`.',
      );
    }
    if (action.state === 'undone') {
      refuse('is undone already', 'Run `rewind log` to find the undo, and undo that to redo it.');
    }
    if (action.state === 'draft' || action.state === 'discarded') {
      refuse(`never ran (it is ${action.state})`, 'There is nothing to undo.');
    }
    if (action.effect === undefined || (action.state === 'failed' && action.kind !== 'exec')) {
      refuse(
        'failed and was put back as it was',
        'There is nothing to undo; `rewind log` shows what happened.',
      );
    }
    return action.effect as Effect;
  }

  async #lastUndoable(): Promise<ActionRecord> {
    const actions = [...deriveActions(await this.#entries()).values()].reverse();
    const found = actions.find(
      (action) =>
        action.kind !== 'undo' &&
        action.class === 'reversible' &&
        action.effect !== undefined &&
        (action.state === 'done' ||
          action.state === 'undo-refused' ||
          action.state === 'interrupted' ||
          (action.state === 'failed' && action.kind === 'exec')),
    );
    if (found) return found;
    throw new RewindError(
      'ACTION_NOT_FOUND',
      `Session ${this.id} has no action left to undo. Run \`rewind log\` to see its actions.`,
      { data: { id: 'last' } },
    );
  }

  /** The touched paths that no longer hold what the action left there. */
  async #findConflicts(
    effect: Effect,
    touched: readonly TreeChange[],
    target: string,
  ): Promise<UndoConflict[]> {
    const conflicts: UndoConflict[] = [];
    if (effect.type === 'trees') {
      const snap = await this.#snapshot();
      const drift = new Map(
        (await diffTrees(this.#store, snap.tree, effect.afterTree)).map((change) => [
          change.path,
          change,
        ]),
      );
      for (const change of touched) {
        const drifted = drift.get(change.path);
        if (drifted) {
          conflicts.push({
            path: change.path,
            expected: describeState(drifted.after),
            found: describeState(drifted.before),
          });
        }
      }
      return conflicts;
    }
    const batch = this.#store.batch();
    try {
      for (const change of effect.paths) {
        const { entry: current } = await snapshotPath(target, change.path, batch);
        if (sameState(current, change.after)) continue;
        if (current?.type === 'directory' && change.after?.type === 'directory') {
          for (const inner of await diffTrees(this.#store, current.digest, change.after.digest)) {
            conflicts.push({
              path: `${change.path}/${inner.path}`,
              expected: describeState(inner.after),
              found: describeState(inner.before),
            });
          }
          if (current.mode !== change.after.mode) {
            conflicts.push({
              path: change.path,
              expected: `mode ${change.after.mode.toString(8)}`,
              found: `mode ${current.mode.toString(8)}`,
            });
          }
        } else {
          conflicts.push({
            path: change.path,
            expected: describeState(change.after),
            found: describeState(current),
          });
        }
      }
    } finally {
      await batch.commit();
    }
    return conflicts;
  }

  async #findAction(id: number): Promise<ActionRecord> {
    const action = deriveActions(await this.#entries()).get(id);
    if (action) return action;
    throw new RewindError(
      'ACTION_NOT_FOUND',
      `Entry #${id} of session ${this.id} is not an action. Run \`rewind log\` to see the action ids.`,
      { data: { id } },
    );
  }

  /** Every action of the session, oldest first, with its class and derived state. */
  async actions(): Promise<ActionInfo[]> {
    return [...deriveActions(await this.#entries()).values()].map((action) => ({
      id: action.id,
      kind: action.kind,
      class: action.class,
      state: action.state,
      target: action.target,
      at: action.at,
      undoes: action.undoes,
    }));
  }

  async #resolveSide(side: string | undefined): Promise<{ name: string; tree: Digest }> {
    if (side === undefined) return { name: 'working tree', tree: (await this.#snapshot()).tree };
    if (/^\d+$/.test(side)) {
      const action = await this.#findAction(Number(side));
      if (action.effect?.type !== 'trees') {
        throw new RewindError(
          'INVALID_ARGUMENT',
          `Action #${side} changed only some paths, so it names no whole state to compare with. Run \`rewind diff ${side}\` alone to see what it changed.`,
          { data: { id: Number(side) } },
        );
      }
      return { name: `#${side}`, tree: action.effect.afterTree };
    }
    const checkpoint = await this.#findCheckpoint(side);
    return { name: checkpoint.label, tree: checkpoint.tree };
  }

  /**
   * The differences between two states: each side is a checkpoint label (or `latest`), an action
   * id, or the working tree when omitted. `diff(id)` alone, for an action, shows the changes that
   * action made.
   */
  async diff(from: string, to?: string): Promise<DiffResult> {
    return this.#withOperationLock('comparing states', async () => {
      let changes: TreeChange[];
      let names: [string, string];
      let redacted: string[] = [];
      if (/^\d+$/.test(from) && to === undefined) {
        const action = await this.#findAction(Number(from));
        redacted = [
          ...((action.started.body.redacted as string[] | undefined) ?? []),
          ...((action.closed?.body.redacted as string[] | undefined) ?? []),
        ];
        if (!action.effect) {
          // Not a file action: what it did, as journaled.
          const record = {
            action: action.kind,
            class: action.class,
            state: action.state,
            ...Object.fromEntries(
              Object.entries(action.started.body).filter(([key]) =>
                ['target', 'request', 'detail', 'compensation', 'command'].includes(key),
              ),
            ),
            ...(action.closed && {
              outcome: action.closed.body.evidence ?? action.closed.body.detail ?? null,
            }),
          };
          const note =
            redacted.length > 0 ? `Redacted before storing: ${redacted.join(', ')}\n` : '';
          return {
            from: `before #${from}`,
            to: `after #${from}`,
            changes: [],
            text: `${JSON.stringify(record, null, 2)}\n${note}`,
            redacted,
          };
        }
        changes = await this.#changesOf(action.effect);
        names = [`before #${from}`, `after #${from}`];
      } else {
        const a = await this.#resolveSide(from);
        const b = await this.#resolveSide(to);
        changes = await diffTrees(this.#store, a.tree, b.tree);
        names = [a.name, b.name];
      }
      return {
        from: names[0],
        to: names[1],
        changes: changes.flatMap((change) => {
          const kind = fileChangeKind(change);
          return kind ? [{ path: change.path, kind }] : [];
        }),
        text:
          (await renderDiff(this.#store, changes)) +
          (redacted.length > 0 ? `Redacted before storing: ${redacted.join(', ')}\n` : ''),
        redacted,
      };
    });
  }

  /**
   * Journals and performs one file action: `compute` takes the pre-image of every path the action
   * changes and stores the post-image, so the intent names both before anything moves; a process
   * killed midway is finished by the next open.
   */
  async #act(
    kind: string,
    target: string,
    compute: (batch: ObjectBatch) => Promise<PathChange[]>,
  ): Promise<ActionResult> {
    return this.#withOperationLock(`${kind} ${target}`, async () => {
      const batch = this.#store.batch();
      let paths: PathChange[];
      try {
        paths = await compute(batch);
      } finally {
        await batch.commit();
      }
      const started = await this.#ledger.append(
        'action-started',
        { action: kind, class: 'reversible', target, paths },
        referencesOf(paths),
      );
      const changes = await this.#changesOf({ type: 'paths', paths });
      await this.#finish(started, changes, { isRecovery: false });
      return {
        id: started.seq,
        kind,
        class: 'reversible',
        state: 'done',
        target,
        changes: paths,
        warnings: [],
      };
    });
  }

  /** Resolves an action's path: inside the workspace, through no symbolic link, not left out. */
  async #actionPath(path: string, isDirectory: boolean): Promise<string> {
    const relative = normalizeWorkspacePath(path);
    await resolveWorkspacePath(this.workspace, relative);
    if (isIgnoredPath(this.workspace, relative, isDirectory)) {
      throw new RewindError(
        'PATH_IGNORED',
        `${relative} is left out of snapshots (by .rewindignore, or it is in .git or .rewind), so Rewind could not undo an action on it. ` +
          'Act on it without Rewind, or take it out of .rewindignore.',
        { data: { path: relative } },
      );
    }
    return relative;
  }

  /** The current state of a path, stored; refuses one that holds what snapshots leave out. */
  async #preImage(relative: string, batch: ObjectBatch): Promise<TreeEntry | undefined> {
    const { entry, ignored } = await snapshotPath(this.workspace, relative, batch);
    if (ignored.length > 0) {
      throw new RewindError(
        'PATH_IGNORED',
        `${relative} holds ${ignored.slice(0, 5).join(', ')}${ignored.length > 5 ? ` and ${ignored.length - 5} more` : ''}, ` +
          'which snapshots leave out (.rewindignore, .git, .rewind): Rewind could not bring them back. Move them out first, or act without Rewind.',
        { data: { path: relative, ignored: ignored.slice(0, 50) } },
      );
    }
    return entry;
  }

  /**
   * The change that puts `entry` at `relative`, creating missing parent directories: the path
   * changed is the topmost directory created, or `relative` itself when its parent exists.
   */
  async #placement(
    relative: string,
    entry: TreeEntry,
    batch: ObjectBatch,
  ): Promise<{ path: string; after: TreeEntry }> {
    const parts = relative.split('/');
    let missing = parts.length - 1;
    for (let index = 0; index < parts.length - 1; index++) {
      const prefix = parts.slice(0, index + 1).join('/');
      const stats = await lstat(join(this.workspace, prefix)).catch((error: unknown) => {
        if (isSystemError(error, 'ENOENT')) return undefined;
        throw error;
      });
      if (stats === undefined) {
        missing = index;
        break;
      }
      if (!stats.isDirectory()) {
        throw new RewindError(
          'PATH_CONFLICT',
          `Cannot create ${relative}: ${prefix} is a file, not a directory.`,
          { data: { path: relative, conflict: prefix } },
        );
      }
    }
    let after: TreeEntry = { ...entry, name: parts.at(-1) as string };
    for (let index = parts.length - 2; index >= missing; index--) {
      const { digest } = await batch.put(encodeTree([after]));
      after = { name: parts[index] as string, type: 'directory', mode: 0o755, digest };
    }
    return { path: parts.slice(0, missing + 1).join('/'), after };
  }

  /**
   * Writes a file (created with its missing parent directories, or overwritten in place of what
   * was there, keeping its mode), atomically and durably, as a reversible action: the previous
   * content is stored first. Throws `PATH_INVALID`, `SYMLINK_REFUSED`, `PATH_IGNORED`, and
   * `PATH_CONFLICT` when a directory is at the path or a file where a parent should be.
   */
  async write(
    path: string,
    content: string | Uint8Array,
    options: { mode?: number } = {},
  ): Promise<ActionResult> {
    const relative = await this.#actionPath(path, false);
    return this.#act('write', relative, async (batch) => {
      const before = await this.#preImage(relative, batch);
      if (before?.type === 'directory') {
        throw new RewindError(
          'PATH_CONFLICT',
          `Cannot write ${relative}: it is a directory. Delete it first, or write a path inside it.`,
          { data: { path: relative } },
        );
      }
      const bytes = typeof content === 'string' ? Buffer.from(content) : content;
      const { digest, sizeBytes } = await batch.put(bytes);
      const mode = options.mode ?? (before?.type === 'file' ? before.mode : 0o644);
      const file: TreeEntry = { name: '', type: 'file', mode, sizeBytes, digest };
      if (before) return [{ path: relative, before, after: { ...file, name: before.name } }];
      const placed = await this.#placement(relative, file, batch);
      return [{ path: placed.path, before: undefined, after: placed.after }];
    });
  }

  /**
   * Deletes a file, a symbolic link or a whole directory tree as a reversible action: everything
   * is stored first. Refuses a tree that holds what snapshots leave out (`PATH_IGNORED`), since
   * it could not be brought back. Throws `PATH_NOT_FOUND` when nothing is there.
   */
  async delete(path: string): Promise<ActionResult> {
    const relative = await this.#actionPath(path, true);
    return this.#act('delete', relative, async (batch) => {
      const before = await this.#preImage(relative, batch);
      if (!before) throw notFound(relative);
      return [{ path: relative, before, after: undefined }];
    });
  }

  /**
   * Moves a file, link or directory tree to a new path (missing parents are created) as a
   * reversible action. The destination must not exist, except a file replaced by a file, whose
   * content is stored first. Throws `PATH_NOT_FOUND`, `PATH_CONFLICT` and the path errors of
   * {@link Session.write}.
   */
  async move(from: string, to: string): Promise<ActionResult> {
    const source = await this.#actionPath(from, true);
    const destination = await this.#actionPath(to, true);
    if (destination === source || destination.startsWith(`${source}/`)) {
      throw new RewindError(
        'PATH_CONFLICT',
        `Cannot move ${source} to ${destination}: that is the same path or inside it.`,
        { data: { path: source, to: destination } },
      );
    }
    return this.#act('move', `${source} -> ${destination}`, async (batch) => {
      const moved = await this.#preImage(source, batch);
      if (!moved) throw notFound(source);
      const replaced = await this.#preImage(destination, batch);
      if (replaced && (replaced.type !== 'file' || moved.type !== 'file')) {
        throw new RewindError(
          'PATH_CONFLICT',
          `Cannot move ${source} to ${destination}: a ${replaced.type} is there. Delete it first, or choose a free path.`,
          { data: { path: destination } },
        );
      }
      const gone: PathChange = { path: source, before: moved, after: undefined };
      if (replaced) {
        return [
          gone,
          { path: destination, before: replaced, after: { ...moved, name: replaced.name } },
        ];
      }
      const placed = await this.#placement(destination, moved, batch);
      return [gone, { path: placed.path, before: undefined, after: placed.after }];
    });
  }

  /** Creates a directory and its missing parents as a reversible action. Throws `PATH_CONFLICT` when something is there. */
  async mkdir(path: string): Promise<ActionResult> {
    const relative = await this.#actionPath(path, true);
    return this.#act('mkdir', relative, async (batch) => {
      const existing = await this.#preImage(relative, batch);
      if (existing) {
        throw new RewindError(
          'PATH_CONFLICT',
          `Cannot create the directory ${relative}: a ${existing.type} is there already.`,
          { data: { path: relative } },
        );
      }
      const { digest } = await batch.put(encodeTree([]));
      const placed = await this.#placement(
        relative,
        { name: '', type: 'directory', mode: 0o755, digest },
        batch,
      );
      return [{ path: placed.path, before: undefined, after: placed.after }];
    });
  }

  /**
   * Runs a command in the workspace as a journaled action (a string runs through `/bin/sh -c`, an
   * argv as is), with a clean environment, a timeout that ends every process it started, and
   * capped output. The workspace is snapshotted before and after, so the entry records exactly
   * which files the command created, modified and deleted, and `undo` can revert them; what it
   * did outside the workspace is unknown. Exit code, signal, duration, stdout and stderr are kept
   * as evidence. A command that exits non-zero or times out is `failed`, and still undoable.
   * With `draft`, it is journaled and not run: see {@link Session.approve}.
   *
   * Throws `EXEC_FAILED` when the command cannot be started (journaled as failed too).
   */
  async exec(command: Command, options: ExecOptions & { draft: true }): Promise<ActionResult>;
  async exec(command: Command, options?: ExecOptions): Promise<ExecResult>;
  async exec(command: Command, options: ExecOptions = {}): Promise<ExecResult | ActionResult> {
    if ((typeof command === 'string' ? command : command.join('')) === '') {
      throw new RewindError(
        'INVALID_ARGUMENT',
        'The command is empty. Give the program to run and its arguments.',
      );
    }
    const spec: ExecSpec = {
      action: 'exec',
      command: typeof command === 'string' ? command : [...command],
      timeoutMs: options.timeoutMs ?? 120_000,
      ...(options.env && { env: options.env }),
      ...(options.maxOutputBytes !== undefined && { maxOutputBytes: options.maxOutputBytes }),
    };
    if (options.draft) return this.#draft(spec, 'reversible');
    return this.#withOperationLock(`running ${this.#targetOf(spec)}`, async () => {
      const before = await this.#snapshot();
      const started = await this.#ledger.append(
        'action-started',
        { ...this.#journaledSpec(spec), class: 'reversible', beforeTree: before.tree },
        [{ type: 'tree', digest: before.tree }],
      );
      return this.#runExec(started.seq, spec, before);
    });
  }

  /**
   * The sandbox commands run in, from the options or the session's recorded configuration;
   * created once. Throws `SANDBOX_UNAVAILABLE` for a `bwrap` sandbox that cannot start here.
   */
  async #sandboxOf(): Promise<Sandbox> {
    if (this.#sandbox) return this.#sandbox;
    const started = (await this.#entries())[0]?.body ?? {};
    const backend =
      this.#options.sandbox ?? (started.sandbox as SandboxBackend | 'auto' | undefined) ?? 'none';
    const network = this.#options.network ?? started.network === true;
    this.#sandbox = createSandbox({
      backend,
      workspace: this.workspace,
      network,
      // A view lives inside the host's store, which the command must not see either.
      ...(this.isolation === 'isolated' && { masked: [this.#location.directory] }),
    });
    return this.#sandbox;
  }

  /** Where this session's commands run, and what the caller should know about it. */
  async sandbox(): Promise<{ backend: SandboxBackend; network: boolean; warnings: string[] }> {
    const sandbox = await this.#sandboxOf();
    const started = (await this.#entries())[0]?.body ?? {};
    return {
      backend: sandbox.backend,
      network: this.#options.network ?? started.network === true,
      warnings: sandbox.warnings,
    };
  }

  /**
   * Runs a command like {@link Session.exec}, but a failure (non-zero exit, signal, timeout) is
   * thrown (`COMMAND_FAILED`, with the tail of its stderr), after an automatic rollback when the
   * `exception` policy is on (see {@link Session.autoRollback}); inside a wrapped tool, the
   * wrapper decides instead. Its file effects stay journaled and undoable either way.
   */
  async run(command: Command, options: Omit<ExecOptions, 'draft'> = {}): Promise<ExecResult> {
    const result = await this.exec(command, options);
    if (result.state !== 'failed') return result;
    const how = result.timedOut
      ? `timed out after ${Math.round(result.durationMs)} ms`
      : result.signal !== null
        ? `ended by ${result.signal}`
        : `exit ${result.exitCode}`;
    const stderr = result.stderr.trim().split('\n').slice(-5).join('\n');
    const message = `Command failed (${how}): ${result.target}${stderr ? `\n${stderr}` : ''}`;
    const rolled =
      this.#toolDepth === 0 && this.#policies.rollback?.on.has('exception')
        ? await this.#autoRollbackTo('exception', message)
        : undefined;
    throw new RewindError('COMMAND_FAILED', `${message}${rewindNotice(rolled, undefined)}`, {
      data: { id: result.id, exitCode: result.exitCode, timedOut: result.timedOut },
    });
  }

  /** What the ledger keeps of a spec: redacted, and without environment values. */
  #journaledSpec(spec: ActionSpec): Record<string, unknown> {
    const redact = this.#redactor;
    const target = this.#targetOf(spec);
    if (spec.action === 'exec') {
      return {
        action: 'exec',
        target,
        command:
          typeof spec.command === 'string'
            ? redact.text(spec.command).text
            : spec.command.map((word) => redact.text(word).text),
        timeoutMs: spec.timeoutMs,
        ...(spec.env && { env: Object.keys(spec.env) }),
        outsideWorkspace: 'unknown',
        ...(target !==
          (typeof spec.command === 'string' ? spec.command : spec.command.join(' ')) && {
          redacted: ['command'],
        }),
      };
    }
    if (spec.action === 'http') {
      const { headers, redacted } = redact.headers(spec.request.headers ?? {});
      return {
        action: 'http',
        target,
        request: {
          method: spec.request.method,
          url: redact.text(spec.request.url).text,
          headers,
          ...(spec.request.body !== undefined && {
            bodyBytes: Buffer.from(spec.request.body, 'base64').length,
          }),
        },
        ...((redacted.length > 0 || target !== `${spec.request.method} ${spec.request.url}`) && {
          redacted: [
            ...(target !== `${spec.request.method} ${spec.request.url}` ? ['request.url'] : []),
            ...redacted.map((name) => `request.headers.${name}`),
          ],
        }),
        ...(spec.compensation && { compensation: this.#journaledCompensation(spec.compensation) }),
      };
    }
    return {
      action: spec.action,
      target,
      ...(spec.detail !== undefined && { detail: redact.text(spec.detail).text }),
      ...(spec.compensation && { compensation: this.#journaledCompensation(spec.compensation) }),
    };
  }

  #journaledCompensation(compensation: Compensation): Record<string, unknown> {
    if ('command' in compensation) {
      const command = compensation.command;
      return {
        command:
          typeof command === 'string'
            ? this.#redactor.text(command).text
            : command.map((word) => this.#redactor.text(word).text),
      };
    }
    const request = compensation.http;
    return {
      http: {
        method: request.method,
        url: this.#redactor.text(request.url).text,
        headers: this.#redactor.headers(request.headers ?? {}).headers,
      },
    };
  }

  #targetOf(spec: ActionSpec): string {
    if (spec.action === 'exec') {
      const text = typeof spec.command === 'string' ? spec.command : spec.command.join(' ');
      return this.#redactor.text(text).text;
    }
    if (spec.action === 'http') {
      return `${spec.request.method} ${this.#redactor.text(spec.request.url).text}`;
    }
    return this.#redactor.text(spec.target).text;
  }

  async #runExec(id: number, spec: ExecSpec, before: SnapshotResult): Promise<ExecResult> {
    let run: RunResult;
    try {
      run = await (await this.#sandboxOf()).run(spec.command, {
        cwd: this.workspace,
        timeoutMs: spec.timeoutMs,
        ...(spec.env && { env: spec.env }),
        ...(spec.maxOutputBytes !== undefined && { maxOutputBytes: spec.maxOutputBytes }),
      });
    } catch (error) {
      const code = isRewindError(error) ? error.code : 'EXEC_FAILED';
      await this.#ledger.append(
        'action-failed',
        {
          startedSeq: id,
          afterTree: before.tree,
          error: {
            code,
            message: this.#redactor.text(error instanceof Error ? error.message : String(error))
              .text,
          },
        },
        [{ type: 'tree', digest: before.tree }],
      );
      throw error;
    }
    const after = await this.#snapshot();
    const out = this.#redactBytes(run.stdout);
    const err = this.#redactBytes(run.stderr);
    const batch = this.#store.batch();
    const stdout = await batch.put(out.bytes);
    const stderr = await batch.put(err.bytes);
    await batch.commit();
    const changes = await diffTrees(this.#store, before.tree, after.tree);
    const files = { created: [] as string[], modified: [] as string[], deleted: [] as string[] };
    const keys = { added: 'created', modified: 'modified', deleted: 'deleted' } as const;
    for (const change of changes) {
      const kind = fileChangeKind(change);
      if (kind) files[keys[kind]].push(change.path);
    }
    const isDone = run.exitCode === 0 && !run.timedOut;
    const sandbox = await this.#sandboxOf();
    const redacted = [...(out.count > 0 ? ['stdout'] : []), ...(err.count > 0 ? ['stderr'] : [])];
    await this.#ledger.append(
      isDone ? 'action-completed' : 'action-failed',
      {
        startedSeq: id,
        afterTree: after.tree,
        created: files.created.slice(0, LISTED_PATHS),
        modified: files.modified.slice(0, LISTED_PATHS),
        deleted: files.deleted.slice(0, LISTED_PATHS),
        counts: {
          created: files.created.length,
          modified: files.modified.length,
          deleted: files.deleted.length,
        },
        evidence: {
          exitCode: run.exitCode,
          signal: run.signal,
          timedOut: run.timedOut,
          durationMs: Math.round(run.durationMs),
          sandbox: sandbox.backend,
          stdout: { ...stdout, truncated: run.stdoutTruncated },
          stderr: { ...stderr, truncated: run.stderrTruncated },
        },
        ...(redacted.length > 0 && { redacted }),
        ...(!isDone && {
          error: run.timedOut
            ? {
                code: 'TIMED_OUT',
                message: `It ran longer than ${spec.timeoutMs} ms and was ended.`,
              }
            : {
                code: 'EXIT_NONZERO',
                message:
                  run.signal !== null
                    ? `It was ended by ${run.signal}.`
                    : `It exited with ${run.exitCode}.`,
              },
        }),
      },
      [
        { type: 'tree', digest: after.tree },
        { type: 'blob', digest: stdout.digest },
        { type: 'blob', digest: stderr.digest },
      ],
    );
    return {
      id,
      kind: 'exec',
      class: 'reversible',
      state: isDone ? 'done' : 'failed',
      target: this.#targetOf(spec),
      changes: changes
        .filter((change) => fileChangeKind(change) !== undefined)
        .map((change) => ({ path: change.path, before: change.before, after: change.after })),
      warnings: [...sandbox.warnings, ...before.warnings, ...after.warnings],
      exitCode: run.exitCode,
      signal: run.signal,
      timedOut: run.timedOut,
      durationMs: run.durationMs,
      stdout: out.bytes.toString('utf8'),
      stderr: err.bytes.toString('utf8'),
      stdoutTruncated: run.stdoutTruncated,
      stderrTruncated: run.stderrTruncated,
      ...files,
    };
  }

  /** Bytes with every redaction pattern match replaced (matched on a byte-for-byte decoding). */
  #redactBytes(bytes: Buffer, literals: readonly string[] = []): { bytes: Buffer; count: number } {
    if (!this.#redactor.isActive) return { bytes, count: 0 };
    const { text, count } = this.#redactor.text(bytes.toString('latin1'), literals);
    return { bytes: count > 0 ? Buffer.from(text, 'latin1') : bytes, count };
  }

  /**
   * Performs an HTTP request as a journaled action, refusing before sending targets with no
   * legitimate use (link-local such as 169.254.169.254, multicast, unspecified, reserved, in IPv4
   * and IPv6, after resolving the name), and with the session's `blockPrivate` loopback and
   * private ones too. Status, headers and body are kept as evidence. `irreversible`, unless a
   * compensation is declared (then `compensable`). With `draft`, journaled and not sent.
   *
   * Throws `INVALID_ARGUMENT` (malformed URL, method or header), `ADDRESS_REFUSED` (nothing is
   * sent or journaled), `HTTP_FAILED` (journaled as failed).
   */
  async http(request: HttpRequest, options: HttpActionOptions = {}): Promise<HttpResult> {
    checkRequest(request);
    if (options.compensation) this.#checkCompensation(options.compensation);
    const spec: HttpSpec = {
      action: 'http',
      request: {
        method: request.method.toUpperCase(),
        url: request.url,
        ...(request.headers && { headers: request.headers }),
        ...(request.body !== undefined && { body: Buffer.from(request.body).toString('base64') }),
      },
      timeoutMs: options.timeoutMs ?? 30_000,
      ...(options.compensation && { compensation: options.compensation }),
    };
    const actionClass: ActionClass = options.compensation ? 'compensable' : 'irreversible';
    if (options.draft) return { ...(await this.#draft(spec, actionClass)), response: undefined };
    // Refused targets never reach the ledger: nothing was attempted.
    await checkTarget(new URL(request.url), this.#options.blockPrivate === true);
    return this.#withOperationLock(`requesting ${this.#targetOf(spec)}`, async () => {
      const started = await this.#ledger.append('action-started', {
        ...this.#journaledSpec(spec),
        ...(await this.#keepCompensation(spec)),
        class: actionClass,
      });
      return this.#runHttp(started.seq, spec, actionClass);
    });
  }

  async #runHttp(id: number, spec: HttpSpec, actionClass: ActionClass): Promise<HttpResult> {
    const base = {
      id,
      kind: 'http',
      class: actionClass,
      target: this.#targetOf(spec),
      changes: [],
      warnings: [],
    };
    let response: HttpResponse;
    try {
      response = await performRequest(
        {
          method: spec.request.method,
          url: spec.request.url,
          headers: spec.request.headers ?? {},
          ...(spec.request.body !== undefined && {
            body: Buffer.from(spec.request.body, 'base64'),
          }),
        },
        { timeoutMs: spec.timeoutMs, blockPrivate: this.#options.blockPrivate === true },
      );
    } catch (error) {
      const code = isRewindError(error) ? error.code : 'HTTP_FAILED';
      await this.#ledger.append('action-failed', {
        startedSeq: id,
        error: {
          code,
          message: this.#redactor.text(error instanceof Error ? error.message : String(error)).text,
        },
      });
      throw error;
    }
    // Secret values the request carried are scrubbed wherever they come back, too.
    const secrets = [
      ...this.#redactor.secretsOf(spec.request.headers ?? {}),
      ...this.#redactor.secretsOf(response.headers),
    ];
    const { headers, redacted } = this.#redactor.headers(response.headers, secrets);
    const body = this.#redactBytes(response.body, secrets);
    const sent = this.#redactBytes(Buffer.from(spec.request.body ?? '', 'base64'), secrets);
    const batch = this.#store.batch();
    const stored = await batch.put(body.bytes);
    const requestBody = await batch.put(sent.bytes);
    await batch.commit();
    const isDone = response.status < 400;
    await this.#ledger.append(
      isDone ? 'action-completed' : 'action-failed',
      {
        startedSeq: id,
        evidence: {
          status: response.status,
          headers,
          body: { ...stored, truncated: response.bodyTruncated },
          durationMs: Math.round(response.durationMs),
          address: response.address,
          requestBody,
        },
        ...((redacted.length > 0 || body.count > 0 || sent.count > 0) && {
          redacted: [
            ...redacted.map((name) => `response.headers.${name}`),
            ...(body.count > 0 ? ['response.body'] : []),
            ...(sent.count > 0 ? ['request.body'] : []),
          ],
        }),
        ...(!isDone && {
          error: { code: 'HTTP_STATUS', message: `The server answered ${response.status}.` },
        }),
      },
      [
        { type: 'blob', digest: stored.digest },
        { type: 'blob', digest: requestBody.digest },
      ],
    );
    return {
      ...base,
      state: isDone ? 'done' : 'failed',
      response: {
        status: response.status,
        headers,
        body: body.bytes.toString('utf8'),
        bodyTruncated: response.bodyTruncated,
      },
    };
  }

  /**
   * Journals an external action (kind `x.<name>`) before it happens: `irreversible` by default,
   * or `compensable` with the compensation declared up front (a command or an HTTP request).
   * Close it with {@link Session.report} once it happened. With `draft`, it waits for approval.
   * Throws `INVALID_ARGUMENT` for a bad name, a `reversible` class (Rewind holds nothing to put
   * back), or a compensable one without a compensation.
   */
  async record(name: string, options: RecordOptions = {}): Promise<ActionResult> {
    if (!/^[a-z0-9][a-z0-9._-]{0,63}$/i.test(name)) {
      throw new RewindError(
        'INVALID_ARGUMENT',
        `"${name}" is not an action name: use letters, digits, ".", "_" and "-", such as "deploy" (it is journaled as x.${name}).`,
        { data: { name } },
      );
    }
    const actionClass = options.class ?? (options.compensation ? 'compensable' : 'irreversible');
    if (
      (actionClass as string) === 'reversible' ||
      (actionClass === 'compensable') !== (options.compensation !== undefined)
    ) {
      throw new RewindError(
        'INVALID_ARGUMENT',
        (actionClass as string) === 'reversible'
          ? 'An external action cannot be reversible: Rewind holds nothing to put back. Record it as compensable (with its compensation) or irreversible.'
          : actionClass === 'compensable'
            ? 'A compensable action needs its compensation declared up front: a command or an HTTP request.'
            : 'An irreversible action has no compensation; record it as compensable to declare one.',
        { data: { class: actionClass } },
      );
    }
    if (options.compensation) this.#checkCompensation(options.compensation);
    const spec: RecordSpec = {
      action: `x.${name}`,
      target: options.target ?? name,
      ...(options.detail !== undefined && { detail: options.detail }),
      ...(options.compensation && { compensation: options.compensation }),
    };
    if (options.draft) return this.#draft(spec, actionClass);
    return this.#withOperationLock(`recording x.${name}`, async () => {
      const started = await this.#ledger.append('action-started', {
        ...this.#journaledSpec(spec),
        ...(await this.#keepCompensation(spec)),
        class: actionClass,
      });
      return {
        id: started.seq,
        kind: spec.action,
        class: actionClass,
        state: 'interrupted',
        target: this.#targetOf(spec),
        changes: [],
        warnings: [],
      };
    });
  }

  /**
   * Closes a recorded external action with its outcome (`ok` or not), and an optional detail.
   * Throws `ACTION_NOT_FOUND`, and `ACTION_NOT_ALLOWED` for an action that is not a recorded one
   * waiting for its outcome (a draft must be approved first).
   */
  async report(id: number, outcome: { ok: boolean; detail?: string }): Promise<ActionResult> {
    return this.#withOperationLock(`reporting #${id}`, async () => {
      const action = await this.#findAction(id);
      if (
        !isRecorded(action) ||
        action.closed ||
        action.state === 'draft' ||
        action.state === 'discarded'
      ) {
        throw new RewindError(
          'ACTION_NOT_ALLOWED',
          `Action #${id} (${action.kind}, ${action.state}) is not a recorded action waiting for its outcome.` +
            (action.state === 'draft' ? ` Approve it first: \`rewind approve ${id}\`.` : ''),
          { data: { id, state: action.state } },
        );
      }
      await this.#ledger.append(outcome.ok ? 'action-completed' : 'action-failed', {
        startedSeq: id,
        reported: true,
        ...(outcome.detail !== undefined && { detail: this.#redactor.text(outcome.detail).text }),
        ...(!outcome.ok && {
          error: {
            code: 'REPORTED_FAILED',
            message: this.#redactor.text(outcome.detail ?? 'reported as failed').text,
          },
        }),
      });
      return {
        id,
        kind: action.kind,
        class: action.class,
        state: outcome.ok ? 'done' : 'failed',
        target: action.target,
        changes: [],
        warnings: [],
      };
    });
  }

  /**
   * Keeps a declared compensation verbatim under `.rewind/drafts/` (the journaled one may be
   * redacted), so it can run later; the entry names it by digest.
   */
  async #keepCompensation(spec: ActionSpec): Promise<{ compensationDigest?: string }> {
    if (spec.action === 'exec' || !spec.compensation) return {};
    const text = canonicalJson(spec.compensation as unknown as JsonValue);
    const digest = digestBytes(text);
    await mkdir(join(this.#location.directory, 'drafts'), { recursive: true });
    await writeFileAtomic(this.#draftFile(digest), text);
    return { compensationDigest: digest };
  }

  #checkCompensation(compensation: Compensation): void {
    if ('command' in compensation) {
      const text =
        typeof compensation.command === 'string'
          ? compensation.command
          : compensation.command.join('');
      if (text === '')
        throw new RewindError('INVALID_ARGUMENT', 'The compensation command is empty.');
    } else {
      checkRequest(compensation.http);
    }
  }

  /** Journals a draft: the exact content is kept under `.rewind/drafts/` until it runs or is discarded. */
  async #draft(spec: ActionSpec, actionClass: ActionClass): Promise<ActionResult> {
    const text = canonicalJson(spec as unknown as JsonValue);
    const digest = digestBytes(text);
    return this.#withOperationLock(`drafting ${this.#targetOf(spec)}`, async () => {
      await mkdir(join(this.#location.directory, 'drafts'), { recursive: true });
      await writeFileAtomic(this.#draftFile(digest), text);
      const started = await this.#ledger.append('action-started', {
        ...this.#journaledSpec(spec),
        ...(await this.#keepCompensation(spec)),
        class: actionClass,
        draft: true,
        draftDigest: digest,
      });
      return {
        id: started.seq,
        kind: spec.action,
        class: actionClass,
        state: 'draft',
        target: this.#targetOf(spec),
        changes: [],
        warnings: [],
      };
    });
  }

  #draftFile(digest: string): string {
    return join(this.#location.directory, 'drafts', `${digest.slice(7)}.json`);
  }

  /**
   * What a draft will do, exactly as it will run (verbatim, unredacted), and the digest an
   * approval must name. Throws `ACTION_NOT_FOUND`, `ACTION_NOT_ALLOWED` (not a draft waiting for
   * approval, or its content no longer matches the digest it was journaled with).
   */
  async draft(id: number): Promise<DraftInfo> {
    const action = await this.#findAction(id);
    return this.#readDraft(action);
  }

  async #readDraft(action: ActionRecord): Promise<DraftInfo> {
    if (action.state !== 'draft') {
      throw new RewindError(
        'ACTION_NOT_ALLOWED',
        `Action #${action.id} (${action.kind}) is ${action.state}, not a draft waiting for approval.`,
        { data: { id: action.id, state: action.state } },
      );
    }
    const digest = String(action.started.body.draftDigest);
    let text: string;
    try {
      text = await readFile(this.#draftFile(digest), 'utf8');
    } catch (error) {
      throw new RewindError(
        'ACTION_NOT_ALLOWED',
        `The content of draft #${action.id} is missing from .rewind/drafts, so there is nothing to approve. Discard it and draft it again.`,
        { data: { id: action.id }, cause: error },
      );
    }
    if (digestBytes(text) !== digest) {
      throw new RewindError(
        'ACTION_NOT_ALLOWED',
        `The content of draft #${action.id} changed since it was journaled (its digest is no longer ${digest}), so nothing runs. Discard it and draft it again.`,
        { data: { id: action.id, digest } },
      );
    }
    return {
      id: action.id,
      kind: action.kind,
      class: action.class,
      digest,
      spec: JSON.parse(text) as ActionSpec,
    };
  }

  /**
   * Runs a draft. `digest` (what the approver saw, from {@link Session.draft}) binds the approval
   * to the exact content: if the draft differs, nothing runs. An `exec` or `http` draft runs now
   * and its result is returned; a recorded one is approved and waits for its `report`.
   * Throws `ACTION_NOT_FOUND`, `ACTION_NOT_ALLOWED` (not a draft: discarded, approved already;
   * the content changed), and what running it throws.
   */
  async approve(id: number, options: { digest?: string } = {}): Promise<ActionResult> {
    const result = await this.#withOperationLock(`approving #${id}`, async () => {
      const action = await this.#findAction(id);
      const draft = await this.#readDraft(action);
      if (options.digest !== undefined && options.digest !== draft.digest) {
        throw new RewindError(
          'ACTION_NOT_ALLOWED',
          `Draft #${id} is not the content that was approved (approved ${options.digest}, the draft is ${draft.digest}), so nothing runs.`,
          { data: { id, digest: draft.digest, approved: options.digest } },
        );
      }
      const spec = draft.spec;
      if (spec.action === 'http') {
        await checkTarget(new URL(spec.request.url), this.#options.blockPrivate === true);
      }
      const before = spec.action === 'exec' ? await this.#snapshot() : undefined;
      await this.#ledger.append(
        'action-approved',
        { startedSeq: id, digest: draft.digest, ...(before && { beforeTree: before.tree }) },
        before ? [{ type: 'tree', digest: before.tree }] : [],
      );
      try {
        if (spec.action === 'exec') return await this.#runExec(id, spec, before as SnapshotResult);
        if (spec.action === 'http') return await this.#runHttp(id, spec, action.class);
        return {
          id,
          kind: action.kind,
          class: action.class,
          state: 'approved' as ActionState,
          target: action.target,
          changes: [],
          warnings: [],
        };
      } finally {
        await rm(this.#draftFile(draft.digest), { force: true });
      }
    });
    return result;
  }

  /** Discards a draft, visibly and for good. Throws `ACTION_NOT_FOUND`, `ACTION_NOT_ALLOWED` (not a draft). */
  async discard(id: number): Promise<ActionResult> {
    return this.#withOperationLock(`discarding #${id}`, async () => {
      const action = await this.#findAction(id);
      if (action.state !== 'draft') {
        throw new RewindError(
          'ACTION_NOT_ALLOWED',
          `Action #${id} (${action.kind}) is ${action.state}, not a draft, so it cannot be discarded.`,
          { data: { id, state: action.state } },
        );
      }
      await this.#ledger.append('action-discarded', { startedSeq: id });
      await rm(this.#draftFile(String(action.started.body.draftDigest)), { force: true });
      return {
        id,
        kind: action.kind,
        class: action.class,
        state: 'discarded',
        target: action.target,
        changes: [],
        warnings: [],
      };
    });
  }

  /**
   * The compensation a compensable action declared, verbatim as it will run. Throws
   * `ACTION_NOT_FOUND`, `ACTION_NOT_ALLOWED` (not compensable, or compensated already).
   */
  async compensation(id: number): Promise<Compensation> {
    const action = await this.#findAction(id);
    return this.#compensationOf(action);
  }

  async #compensationOf(action: ActionRecord): Promise<Compensation> {
    const declared = action.started.body.compensation as Compensation | undefined;
    const kept = action.started.body.compensationDigest;
    if (
      action.class !== 'compensable' ||
      !declared ||
      action.state === 'compensated' ||
      action.state === 'draft' ||
      action.state === 'discarded'
    ) {
      throw new RewindError(
        'ACTION_NOT_ALLOWED',
        `Action #${action.id} (${action.kind}, ${action.class}, ${action.state}) has no compensation to run` +
          (action.state === 'compensated' ? ': it is compensated already.' : '.'),
        { data: { id: action.id, state: action.state, class: action.class } },
      );
    }
    if (typeof kept !== 'string') return declared;
    let text: string;
    try {
      text = await readFile(this.#draftFile(kept), 'utf8');
    } catch (error) {
      throw new RewindError(
        'ACTION_NOT_ALLOWED',
        `The compensation of #${action.id} is missing from .rewind/drafts, so it cannot run as declared. Its journaled form: ${JSON.stringify(declared)}.`,
        { data: { id: action.id }, cause: error },
      );
    }
    if (digestBytes(text) !== kept) {
      throw new RewindError(
        'ACTION_NOT_ALLOWED',
        `The compensation of #${action.id} changed since it was declared, so it does not run.`,
        { data: { id: action.id } },
      );
    }
    return JSON.parse(text) as Compensation;
  }

  /**
   * Runs the compensation a compensable action declared, as an action of its own (an `exec` or an
   * `http` naming what it compensates); once it succeeds, the action is `compensated`.
   */
  async compensate(id: number): Promise<ActionResult> {
    return this.#withOperationLock(`compensating #${id}`, async () => {
      // Checked under the lock: two processes cannot both run the same compensation.
      const action = await this.#findAction(id);
      const compensation = await this.#compensationOf(action);
      let result: ActionResult;
      if ('command' in compensation) {
        const spec: ExecSpec = {
          action: 'exec',
          command: compensation.command,
          timeoutMs: 120_000,
        };
        const before = await this.#snapshot();
        const started = await this.#ledger.append(
          'action-started',
          {
            ...this.#journaledSpec(spec),
            class: 'reversible',
            beforeTree: before.tree,
            compensates: id,
          },
          [{ type: 'tree', digest: before.tree }],
        );
        result = await this.#runExec(started.seq, spec, before);
      } else {
        const spec: HttpSpec = {
          action: 'http',
          request: {
            method: compensation.http.method,
            url: compensation.http.url,
            ...(compensation.http.headers && { headers: compensation.http.headers }),
          },
          timeoutMs: 30_000,
        };
        await checkTarget(new URL(spec.request.url), this.#options.blockPrivate === true);
        const started = await this.#ledger.append('action-started', {
          ...this.#journaledSpec(spec),
          class: 'irreversible',
          compensates: id,
        });
        result = await this.#runHttp(started.seq, spec, 'irreversible');
      }
      await this.#forgetCompensation(action, result.state);
      return result;
    });
  }

  /** Once a compensation ran, its verbatim copy (which may hold secrets) is no longer kept. */
  async #forgetCompensation(action: ActionRecord, state: ActionState): Promise<void> {
    const kept = action.started.body.compensationDigest;
    if (state === 'done' && typeof kept === 'string')
      await rm(this.#draftFile(kept), { force: true });
  }

  /**
   * The tree the session's view started from, or was last committed at: what `commit` compares
   * the host and the view against.
   */
  async #baseTree(): Promise<Digest> {
    const entries = await this.#entries();
    let base = entries.find((entry) => entry.kind === 'view-created')?.body.baseTree as
      | Digest
      | undefined;
    const actions = deriveActions(entries);
    for (const action of actions.values()) {
      if (action.kind === 'commit' && action.state === 'done')
        base = action.started.body.sessionTree as Digest;
    }
    if (base === undefined) {
      throw new RewindError(
        'INVALID_ARGUMENT',
        `Session ${this.id} is not isolated: it works on the workspace itself, so there is nothing to commit.`,
        { data: { session: this.id } },
      );
    }
    return base;
  }

  /**
   * Applies an isolated session's net change (from the tree it started from, or was last
   * committed at, to its view now) to the host workspace, with a three-way check: a path the
   * session changed that also changed on the host since (or whose directory the host removed, or
   * under a directory the session removes) is a conflict, and by default the commit refuses,
   * lists every conflict, journals the refusal and changes nothing. Deletions are propagated;
   * paths are workspace-relative tree names (nothing lands outside the workspace or through a
   * symbolic link); the host's previous state is stored first and the commit is an action, so
   * `undo` puts the host back, and a crash midway is finished by the next open. The host ends
   * either fully committed or unchanged.
   */
  async commit(options: { dryRun?: boolean } = {}): Promise<CommitResult> {
    return this.#withOperationLock('committing to the host', async () => {
      const base = await this.#baseTree();
      const current = await this.#snapshot();
      const host = await snapshot(this.hostWorkspace, {
        store: this.#store,
        storeDirectory: this.#location.directory,
      });
      const sessionChanges = await diffTrees(this.#store, base, current.tree);
      const hostChanges = new Map(
        (await diffTrees(this.#store, base, host.tree)).map((change) => [change.path, change]),
      );
      const conflicts = findCommitConflicts(sessionChanges, hostChanges);
      const planned = await this.#plan(sessionChanges, false);
      const result: CommitResult = {
        status: 'dry-run',
        id: undefined,
        changes: planned,
        conflicts,
        applied: undefined,
      };
      if (options.dryRun) return result;
      if (conflicts.length > 0) {
        await this.#ledger.append('commit-refused', {
          conflicts: conflicts.slice(0, 50),
          conflictCount: conflicts.length,
          sessionTree: current.tree,
          hostTree: host.tree,
        });
        return { ...result, status: 'refused' };
      }
      // The topmost changed paths; a directory that only changed its mode is left as it is.
      const tops = sessionChanges.filter(
        (change) =>
          !(change.before?.type === 'directory' && change.after?.type === 'directory') &&
          !sessionChanges.some(
            (other) =>
              other !== change &&
              change.path.startsWith(`${other.path}/`) &&
              !(other.before?.type === 'directory' && other.after?.type === 'directory'),
          ),
      );
      if (tops.length === 0) return { ...result, status: 'nothing-to-commit' };
      const trees = new Map<Digest, Promise<TreeEntry[]>>();
      const paths: PathChange[] = [];
      for (const change of tops) {
        paths.push({
          path: change.path,
          before: await entryAt(this.#store, host.tree, change.path, trees),
          after: change.after,
        });
      }
      const started = await this.#ledger.append(
        'action-started',
        {
          action: 'commit',
          class: 'reversible',
          target: this.hostWorkspace,
          on: 'host',
          paths,
          sessionTree: current.tree,
          hostTree: host.tree,
        },
        [
          ...referencesOf(paths),
          { type: 'tree', digest: current.tree },
          { type: 'tree', digest: host.tree },
        ],
      );
      const applied = await this.#finish(started, await this.#changesOf({ type: 'paths', paths }), {
        isRecovery: false,
      });
      return { ...result, status: 'committed', id: started.seq, applied };
    });
  }

  /**
   * Removes an isolated session's view and journals it; the session cannot be used afterwards
   * (its ledger and everything it stored stay). Refuses (`UNCOMMITTED_CHANGES`) while the view
   * holds changes not committed to the host, unless `force`.
   */
  async destroy(options: { force?: boolean } = {}): Promise<void> {
    await this.#withOperationLock('destroying the session', async () => {
      const base = await this.#baseTree();
      const current = await this.#snapshot();
      const pending = (await diffTrees(this.#store, base, current.tree)).filter(
        (change) => fileChangeKind(change) !== undefined,
      );
      if (pending.length > 0 && options.force !== true) {
        throw new RewindError(
          'UNCOMMITTED_CHANGES',
          `Session ${this.id} has ${pending.length} uncommitted change${pending.length === 1 ? '' : 's'} (${pending
            .slice(0, 5)
            .map((change) => change.path)
            .join(
              ', ',
            )}${pending.length > 5 ? ', ...' : ''}). Commit them with \`rewind commit\`, or destroy with --force to drop them (they stay in the store).`,
          { data: { session: this.id, paths: pending.slice(0, 50).map((change) => change.path) } },
        );
      }
      await this.#ledger.append(
        'session-destroyed',
        { pendingCount: pending.length, viewTree: current.tree },
        [{ type: 'tree', digest: current.tree }],
      );
      await rm(join(this.#location.directory, 'views', this.id), { recursive: true, force: true });
    });
    await this.close();
  }

  /**
   * Ends an isolated session's work, as the first seed's context manager did, fixed: commits
   * only when the work ended cleanly and `autoCommit` is on; a refused or failed commit never
   * destroys anything; `destroyOnExit` removes the view only when nothing uncommitted is left
   * (and never after a failure in agent mode). Then closes the session.
   */
  async end(options: EndOptions = {}): Promise<EndResult> {
    const result: EndResult = {
      commit: undefined,
      commitError: undefined,
      isDestroyed: false,
      isPreserved: true,
    };
    const failed = options.error !== undefined;
    try {
      if (this.isolation === 'isolated') {
        if (!failed && options.autoCommit) {
          try {
            result.commit = await this.commit();
          } catch (error) {
            result.commitError = error;
          }
        }
        const isSettled =
          result.commitError === undefined &&
          (result.commit === undefined ||
            result.commit.status === 'committed' ||
            result.commit.status === 'nothing-to-commit');
        const keepForInspection = failed && options.mode === 'agent';
        if (options.destroyOnExit && isSettled && !keepForInspection) {
          try {
            await this.destroy();
            result.isDestroyed = true;
            result.isPreserved = false;
          } catch (error) {
            // Uncommitted work: kept, never dropped.
            if (!isRewindError(error, 'UNCOMMITTED_CHANGES')) throw error;
          }
        }
      }
    } finally {
      await this.close();
    }
    return result;
  }

  /** What the session is and, for an isolated one, what a commit would do now. */
  async status(): Promise<SessionStatus> {
    const sandbox = await this.sandbox();
    const pending = this.isolation === 'isolated' ? await this.commit({ dryRun: true }) : undefined;
    return {
      id: this.id,
      isolation: this.isolation,
      workspace: this.workspace,
      hostWorkspace: this.hostWorkspace,
      sandbox: sandbox.backend,
      network: sandbox.network,
      pendingChanges: pending?.changes ?? [],
      conflicts: pending?.conflicts ?? [],
    };
  }

  /**
   * The verifier this session runs: `.rewind/config.json`'s `verifier` (`command`, `retries`,
   * `retryDelayMs`, `timeoutMs`), unless one is given. Undefined when there is none.
   */
  async #verifierConfig(given: VerifierConfig | undefined): Promise<VerifierConfig | undefined> {
    if (given) return given;
    let text: string;
    try {
      text = await readFile(join(this.#location.directory, 'config.json'), 'utf8');
    } catch (error) {
      if (isSystemError(error, 'ENOENT')) return undefined;
      throw error;
    }
    let config: { verifier?: VerifierConfig };
    try {
      config = JSON.parse(text);
    } catch (error) {
      throw new RewindError(
        'INVALID_ARGUMENT',
        `.rewind/config.json is not JSON (${(error as Error).message}). Fix it, or pass the verifier explicitly.`,
        { cause: error },
      );
    }
    return config.verifier;
  }

  /**
   * Runs the session's verifier in its workspace (through its sandbox) and journals the verdict
   * (`verification-recorded`, with the output as evidence). The verdict is the JSON object the
   * verifier prints (`status` pass, fail or unknown); the exit code is recorded but never decides;
   * an unknown verdict is retried up to `retries` times and is never treated as a pass.
   * Throws `INVALID_ARGUMENT` when no verifier is configured or given.
   */
  async test(
    options: { verifier?: VerifierConfig } = {},
  ): Promise<VerificationResult & { id: number }> {
    const config = await this.#verifierConfig(options.verifier);
    if (
      !config ||
      (typeof config.command === 'string'
        ? config.command.trim() === ''
        : config.command.length === 0)
    ) {
      throw new RewindError(
        'INVALID_ARGUMENT',
        'No verifier is configured. Pass one (`rewind test --verifier CMD`), or set "verifier": {"command": "..."} in .rewind/config.json. It must print {"status": "pass" | "fail" | "unknown"} on stdout.',
      );
    }
    return this.#withOperationLock('running the verifier', async () => {
      const sandbox = await this.#sandboxOf();
      const result = await runVerifier(config, async (command, timeoutMs) => {
        const run = await sandbox.run(command, { cwd: this.workspace, timeoutMs });
        return {
          stdout: run.stdout.toString('utf8'),
          stderr: run.stderr.toString('utf8'),
          exitCode: run.exitCode,
          timedOut: run.timedOut,
        };
      });
      const last = result.attempts.at(-1);
      const batch = this.#store.batch();
      const stdout = await batch.put(this.#redactBytes(Buffer.from(last?.stdout ?? '')).bytes);
      const stderr = await batch.put(this.#redactBytes(Buffer.from(last?.stderr ?? '')).bytes);
      await batch.commit();
      const command =
        typeof config.command === 'string' ? config.command : config.command.join(' ');
      const entry = await this.#ledger.append(
        'verification-recorded',
        {
          status: result.status,
          ...(result.summary !== undefined && {
            summary: this.#redactor.text(result.summary).text,
          }),
          errors: result.errors.map((error) => this.#redactor.text(error).text),
          ...(result.notes !== undefined && { notes: result.notes }),
          command: this.#redactor.text(command).text,
          attempts: result.attempts.map((attempt) => ({
            status: attempt.status,
            exitCode: attempt.exitCode,
          })),
          evidence: { stdout, stderr, sandbox: sandbox.backend },
        },
        [
          { type: 'blob', digest: stdout.digest },
          { type: 'blob', digest: stderr.digest },
        ],
      );
      return { ...result, id: entry.seq };
    });
  }

  /**
   * Takes an automatic checkpoint before every wrapped tool call ({@link Session.tool}), keeping
   * the last `keepLast`: older automatic checkpoints are pruned (journaled; they stop being
   * listed and keeping objects alive, so `rewind gc` reclaims what only they held).
   */
  autoCheckpoint(options: { trigger?: 'before-tool-call'; keepLast?: number } = {}): void {
    if (
      options.keepLast !== undefined &&
      (!Number.isInteger(options.keepLast) || options.keepLast < 1)
    ) {
      throw new RewindError(
        'INVALID_ARGUMENT',
        `keepLast must be a whole number of 1 or more, not ${options.keepLast}.`,
        {
          data: { keepLast: options.keepLast },
        },
      );
    }
    this.#policies.checkpoint = {
      trigger: options.trigger ?? 'before-tool-call',
      keepLast: options.keepLast,
    };
  }

  /**
   * Rolls back files and conversation to `to` (default `latest`: the newest checkpoint of any
   * kind) when a wrapped tool fails (`exception`) or the verifier fails (`test-failure`, through
   * {@link Session.check}). A rollback that would change nothing is skipped and journaled.
   * An unknown verdict goes to `escalation` (default {@link stopEscalation}).
   */
  autoRollback(
    options: {
      on?: readonly ('exception' | 'test-failure')[];
      to?: string;
      verifier?: VerifierConfig;
      escalation?: EscalationHandler;
      /** Picks the escalation handler when none is given: see {@link escalationFor}. Default agent. */
      mode?: 'interactive' | 'agent';
    } = {},
  ): void {
    const on = options.on ?? ['exception', 'test-failure'];
    for (const event of on) {
      if (event !== 'exception' && event !== 'test-failure') {
        throw new RewindError(
          'INVALID_ARGUMENT',
          `"${String(event)}" is not an event: use exception or test-failure.`,
          {
            data: { event },
          },
        );
      }
    }
    if (options.to !== undefined && options.to !== 'latest') checkLabel(options.to);
    this.#policies.rollback = {
      on: new Set(on),
      to: options.to ?? 'latest',
      verifier: options.verifier,
      escalation: options.escalation ?? escalationFor(options.mode ?? 'agent'),
    };
  }

  /** The automatic checkpoint before a tool call, and the pruning of older ones. */
  async #checkpointBeforeTool(name: string): Promise<string | undefined> {
    const policy = this.#policies.checkpoint;
    if (!policy) return undefined;
    this.#autoCounter += 1;
    const label = `auto-${String(this.#autoCounter).padStart(4, '0')}-${name.replace(/[^A-Za-z0-9_-]/g, '_').slice(0, 40) || 'tool'}-${Date.now()}`;
    await this.checkpoint(label, { isAutomatic: true });
    if (policy.keepLast !== undefined) {
      const automatic = (await this.checkpoints()).filter((checkpoint) => checkpoint.isAutomatic);
      for (const old of automatic.slice(0, Math.max(0, automatic.length - policy.keepLast))) {
        await this.#withOperationLock(`pruning ${old.label}`, () =>
          this.#ledger.append('checkpoint-pruned', { label: old.label, checkpointSeq: old.seq }),
        );
      }
    }
    return label;
  }

  /**
   * Rolls back for a policy unless that would change nothing (files and conversation already as
   * at the checkpoint): then the skip is journaled instead. Records `lastAutoRollback`.
   */
  async #autoRollbackTo(
    event: AutoRollbackReport['event'],
    patchNote: string | undefined,
  ): Promise<AutoRollbackReport | undefined> {
    const policy = this.#policies.rollback;
    if (!policy) return undefined;
    const to = policy.to;
    let plan: RollbackResult;
    try {
      plan = await this.rollback(to, { dryRun: true });
    } catch (error) {
      if (isRewindError(error, 'CHECKPOINT_NOT_FOUND')) {
        // Nothing to go back to: the failure propagates as it is.
        await this.#withOperationLock('journaling a skipped rollback', () =>
          this.#ledger.append('rollback-skipped', {
            label: to,
            event,
            reason: 'no checkpoint to roll back to',
          }),
        );
        return undefined;
      }
      throw error;
    }
    // One read of the ledger: the conversation now, the checkpoint's, and the last one restored.
    const entries = await this.#entries();
    const current = currentConversation(entries);
    const targetEntry = entries.find(
      (entry) => entry.kind === 'checkpoint-created' && entry.body.label === plan.label,
    );
    const targetConversation = targetEntry
      ? conversationIn(targetEntry.body, 'conversation')
      : undefined;
    const lastRestored = entries.findLast(
      (entry) => entry.kind === 'rollback-started' && entry.body.label === plan.label,
    );
    const conversationUnchanged =
      targetConversation === undefined ||
      current?.tree === targetConversation.tree ||
      (lastRestored !== undefined &&
        current?.tree === conversationIn(lastRestored.body, 'conversationAfter')?.tree);
    if (plan.changes.length === 0 && conversationUnchanged) {
      await this.#withOperationLock('journaling a skipped rollback', () =>
        this.#ledger.append('rollback-skipped', {
          label: plan.label,
          event,
          reason: 'nothing changed since that checkpoint',
        }),
      );
      this.lastAutoRollback = { event, to: plan.label, isSkipped: true, messages: undefined };
      return this.lastAutoRollback;
    }
    const result = await this.rollback(to, { ...(patchNote !== undefined && { patchNote }) });
    this.lastAutoRollback = {
      event,
      to: result.label,
      isSkipped: false,
      messages: result.conversation?.messages,
    };
    return this.lastAutoRollback;
  }

  /**
   * Verifies the workspace with the policy's verifier (or the session's) and acts on the verdict:
   * pass returns it; fail rolls back (with `test-failure` on) and throws `VERIFICATION_FAILED`;
   * unknown is escalated: `continue` throws `VERIFICATION_UNKNOWN`, `rollback` rolls back and
   * throws it, `stop` throws a {@link HaltError}. Every step is journaled.
   */
  async check(): Promise<VerificationResult & { id: number }> {
    const policy = this.#policies.rollback;
    const result = await this.test({ ...(policy?.verifier && { verifier: policy.verifier }) });
    if (result.status === 'pass') return result;
    const to = policy?.to ?? 'latest';
    if (result.status === 'fail') {
      const rolled = policy?.on.has('test-failure')
        ? await this.#autoRollbackTo('test-failure', formatVerification(result))
        : undefined;
      throw new RewindError(
        'VERIFICATION_FAILED',
        `Tests failed. ${formatVerification(result)}${rewindNotice(rolled, result)}`,
        {
          data: {
            verificationSeq: result.id,
            rolledBackTo: rolled && !rolled.isSkipped ? rolled.to : undefined,
          },
        },
      );
    }
    const handler = policy?.escalation ?? stopEscalation;
    let resolution: Resolution;
    let handlerError: string | undefined;
    try {
      resolution = await handler({ result, checkpoint: to });
      if (resolution !== 'continue' && resolution !== 'rollback' && resolution !== 'stop') {
        throw new Error(`it answered ${JSON.stringify(resolution)}`);
      }
    } catch (error) {
      // A handler that fails cannot say "go on": stop, and say why.
      resolution = 'stop';
      handlerError = error instanceof Error ? error.message : String(error);
    }
    await this.#withOperationLock('journaling an escalation', () =>
      this.#ledger.append('escalation-resolved', {
        verificationSeq: result.id,
        resolution,
        checkpoint: to,
        ...(handlerError !== undefined && { error: handlerError }),
      }),
    );
    if (resolution === 'stop') throw new HaltError(to, result);
    const rolled =
      resolution === 'rollback'
        ? await this.#autoRollbackTo('escalation', result.notes)
        : undefined;
    throw new RewindError(
      'VERIFICATION_UNKNOWN',
      `The verifier gave no verdict: ${formatVerification(result)}${rewindNotice(rolled, result)}`,
      {
        data: { verificationSeq: result.id, resolution },
      },
    );
  }

  /**
   * Wraps a tool function for any agent framework: tool calls run one at a time (a checkpoint
   * never interleaves with another call's write); with {@link Session.autoCheckpoint}, a
   * checkpoint comes first; a failure becomes a string for the model that starts with `ERROR:`,
   * after an automatic rollback (with `exception` in {@link Session.autoRollback}, unless
   * `rollbackOnError: false`, for read-only tools) and a `[REWIND]` notice naming the
   * checkpoint restored. A {@link HaltError} always propagates.
   */
  tool<A extends unknown[], R>(
    fn: (...args: A) => Promise<R> | R,
    options: { name?: string; rollbackOnError?: boolean } = {},
  ): (...args: A) => Promise<R | string> {
    const name = options.name ?? (fn.name || 'tool');
    return (...args: A) => {
      const call = this.#toolQueue.then(async () => {
        await this.#checkpointBeforeTool(name);
        this.#toolDepth += 1;
        try {
          return await fn(...args);
        } catch (error) {
          if (error instanceof HaltError) throw error;
          const message = error instanceof Error ? error.message : String(error);
          const rolled =
            options.rollbackOnError !== false && this.#policies.rollback?.on.has('exception')
              ? await this.#autoRollbackTo('exception', message)
              : undefined;
          return `ERROR: ${message}${rewindNotice(rolled, undefined)}`;
        } finally {
          this.#toolDepth -= 1;
        }
      });
      this.#toolQueue = call.catch(() => {});
      return call;
    };
  }

  /**
   * Reads a text file of the session's workspace (not journaled). Throws `PATH_INVALID` and
   * `SYMLINK_REFUSED` like the file actions, `PATH_NOT_FOUND` when nothing is there.
   */
  async read(path: string): Promise<string> {
    const absolute = await resolveWorkspacePath(this.workspace, path);
    try {
      return await readFile(absolute, 'utf8');
    } catch (error) {
      if (isSystemError(error, 'ENOENT')) throw notFound(normalizeWorkspacePath(path));
      throw error;
    }
  }

  /**
   * The entries of a directory of the session's workspace (`.` for its root), directories marked
   * with a trailing `/`, the store left out (not journaled).
   */
  async list(path = '.'): Promise<string[]> {
    const absolute =
      path === '.' || path === ''
        ? this.workspace
        : await resolveWorkspacePath(this.workspace, path);
    let entries: Dirent[];
    try {
      entries = await readdir(absolute, { withFileTypes: true });
    } catch (error) {
      if (isSystemError(error, 'ENOENT')) throw notFound(normalizeWorkspacePath(path));
      throw error;
    }
    return entries
      .filter((entry) => entry.name !== '.rewind')
      .map((entry) => `${entry.name}${entry.isDirectory() ? '/' : ''}`)
      .sort();
  }

  /** Closes the session's ledger. */
  async close(): Promise<void> {
    if (this.#isClosed) return;
    this.#isClosed = true;
    await this.#ledger.close();
  }

  async [Symbol.asyncDispose](): Promise<void> {
    await this.close();
  }
}

/**
 * Opens a session of a workspace that has a store (`init` makes one): the current session unless
 * `session` names another. Before returning, finishes any rollback or undo that a killed process
 * left half-done, so the workspace is in a state the ledger names.
 *
 * Throws `STORE_NOT_FOUND`, `SESSION_NOT_FOUND`, `LOCK_HELD`, and `ENTRY_KIND_UNKNOWN` /
 * `LEDGER_VERSION_UNSUPPORTED` for a session a newer Rewind wrote to.
 */
export function openSession(options: OpenSessionOptions): Promise<Session> {
  if (options.isolation === 'isolated' && options.session === undefined) {
    return Session.startIsolated(options);
  }
  return Session.open(options);
}

/**
 * Resumes a session by id after a crash or a restart: an isolated session finds its view as it
 * was left, and anything interrupted is finished first. The same as `openSession` with `session`.
 */
export function attachSession(
  workspace: string,
  id: string,
  options: Omit<OpenSessionOptions, 'workspace' | 'session'> = {},
): Promise<Session> {
  return Session.open({ ...options, workspace, session: id });
}

/**
 * Starts an isolated session on a workspace that has a store: the session works on a private
 * view of the workspace (a copy under `.rewind/views/`, with reflinks where the filesystem has
 * them) and the host directory changes only through {@link Session.commit}. Files, commands,
 * checkpoints, rollback and undo all act on the view. Resume it later with
 * `openSession({ workspace, session: id })`.
 */
export function startIsolatedSession(options: IsolatedSessionOptions): Promise<Session> {
  return Session.startIsolated(options);
}

/**
 * Runs `work` in an isolated session and ends it (see {@link Session.end}): a clean return
 * auto-commits when asked; a throw commits nothing, and in agent mode keeps the session. The
 * error `work` threw is rethrown after.
 */
export async function withIsolatedSession<T>(
  options: IsolatedSessionOptions & Omit<EndOptions, 'error'>,
  work: (session: Session) => Promise<T>,
): Promise<{ value: T; end: EndResult }> {
  const session = await startIsolatedSession(options);
  let value: T;
  try {
    value = await work(session);
  } catch (error) {
    await session.end({ ...options, error });
    throw error;
  }
  return { value, end: await session.end(options) };
}
