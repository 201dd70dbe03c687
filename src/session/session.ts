import type { Format } from '../conversation/index.js';
import { RewindError } from '../errors.js';
import type { Digest } from '../lib/index.js';
import type { Command, HttpRequest, SandboxBackend } from '../sandbox/index.js';
import type { VerificationResult, VerifierConfig } from '../verifier/index.js';
import type { SnapshotPreview } from '../workspace/index.js';
import { compensateAction, readCompensation } from './actions/compensation.js';
import {
  approveDraft,
  type DraftInfo,
  discardDraft,
  draftAction,
  readDraft,
} from './actions/drafts.js';
import { type ExecOptions, type ExecResult, execCommand, execSpecOf } from './actions/exec.js';
import {
  type RecordOptions,
  recordExternal,
  recordSpecOf,
  reportOutcome,
} from './actions/external.js';
import { deletePath, makeDirectory, movePath, writePath } from './actions/file-actions.js';
import {
  type HttpActionOptions,
  type HttpResult,
  httpSpecOf,
  sendRequest,
} from './actions/http.js';
import type { ActionResult, Compensation } from './actions/journaled-spec.js';
import { closeContext, previewOfSession, type SessionContext } from './context.js';
import {
  type CheckpointOptions,
  type CheckpointResult,
  checkpointWorkspace,
  listCheckpoints,
} from './history/checkpoints.js';
import {
  type ConversationState,
  checkMessages,
  conversationAt,
  type RestoredConversation,
  readCurrentConversation,
  syncConversation,
} from './history/conversation.js';
import { type DiffResult, diffStates } from './history/diff.js';
import { type PruneOptions, type PruneResult, pruneCheckpoints } from './history/prune.js';
import { type RollbackOptions, type RollbackResult, rollbackTo } from './history/rollback.js';
import { type UndoOptions, type UndoResult, undoAction } from './history/undo.js';
import {
  type CommitOptions,
  type CommitResult,
  commitToHost,
  destroyView,
  type EndOptions,
  type EndResult,
  endSession,
  type SessionStatus,
  sandboxInfo,
  sessionStatus,
} from './isolation.js';
import type { CheckpointInfo } from './journal/checkpoint-records.js';
import { readJournal } from './journal/journal.js';
import {
  type IsolatedSessionOptions,
  type OpenSessionOptions,
  openContext,
  startIsolatedContext,
} from './open.js';
import { type AutoCheckpointOptions, setAutoCheckpoint } from './policies/auto-checkpoint.js';
import {
  type AutoRollbackOptions,
  checkVerdict,
  rollbackTargetsOf,
  setAutoRollback,
} from './policies/auto-rollback.js';
import {
  type AutoRollbackReport,
  createPolicyState,
  type PolicyState,
  type SessionPolicies,
} from './policies/policy-state.js';
import { runCommand, type ToolOptions, wrapTool } from './policies/tool-wrapper.js';
import {
  type ActionDetail,
  type ActionInfo,
  listActions,
  listDirectory,
  readText,
  showAction,
} from './reads.js';
import { runVerification } from './verification.js';

/**
 * A session on a workspace: checkpoints, rollback and undo, journaled in its ledger. Open one
 * with {@link openSession}; close it when done (or use `await using`).
 *
 * This class is the public face of the session: it checks arguments and hands each call to the
 * module that owns the concept (history, actions, policies, isolation, verification), all
 * sharing one immutable context.
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
  readonly #context: SessionContext;
  readonly #policies: PolicyState = createPolicyState();
  #isClosed = false;

  private constructor(context: SessionContext) {
    this.#context = context;
    this.id = context.id;
    this.workspace = context.workspace;
    this.hostWorkspace = context.hostWorkspace;
    this.isolation = context.isolation;
  }

  /** See {@link openSession}. */
  static async open(options: OpenSessionOptions): Promise<Session> {
    return new Session(await openContext(options));
  }

  /** See {@link startIsolatedSession}. */
  static async startIsolated(options: IsolatedSessionOptions): Promise<Session> {
    return new Session(await startIsolatedContext(options));
  }

  /**
   * What recovery did in this session since it was opened, one sentence each, oldest first: an
   * operation a killed process left half-done, finished before the next one (and what it saved
   * first) or closed. Empty when nothing was pending.
   */
  recoveries(): readonly string[] {
    return [...this.#context.recoveries];
  }

  /** What the last automatic rollback that changed something did, if one did. */
  get lastAutoRollback(): AutoRollbackReport | undefined {
    return this.#policies.lastAutoRollback;
  }

  set lastAutoRollback(report: AutoRollbackReport | undefined) {
    this.#policies.lastAutoRollback = report;
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
    return syncConversation(this.#context, checkMessages(messages, options.format));
  }

  /** The session's current conversation, exactly as recorded; undefined when it has none. */
  async conversation(): Promise<ConversationState | undefined> {
    return readCurrentConversation(this.#context);
  }

  /**
   * The conversation a checkpoint recorded, as a rollback to it would hand it back: repaired for
   * its provider, with the resume note. Undefined when the checkpoint has no conversation.
   */
  async conversationAt(
    label: string,
    options: Pick<RollbackOptions, 'patchNote' | 'repairStrategy'> = {},
  ): Promise<RestoredConversation | undefined> {
    return conversationAt(this.#context, label, options);
  }

  /**
   * Every checkpoint of the session, oldest first, from the ledger; `withLines`: each but the first
   * with the lines of text added and removed since the one before (cached; binary and over 1 MiB
   * skipped), or with `linesUncounted` when an object they need is missing or damaged in the store.
   */
  async checkpoints(options: { withLines?: boolean } = {}): Promise<CheckpointInfo[]> {
    return listCheckpoints(this.#context, options);
  }

  /**
   * Records the workspace under `label` (unique in the session) with a `checkpoint-created` entry;
   * without one, under `checkpoint-N`, N the number of checkpoints plus one (or the next number
   * free), chosen as the entry is appended, so checkpoints made at once never share one; the
   * result's `label` says which. Costs what changed since the last snapshot. With `budget`, a
   * first checkpoint (which reads and stores every file) larger than it is refused before
   * anything is stored. Throws `INVALID_ARGUMENT` for a malformed label, `CHECKPOINT_EXISTS`,
   * `SNAPSHOT_TOO_LARGE`, and the errors of {@link snapshot}.
   */
  checkpoint(label?: string, options?: CheckpointOptions): Promise<CheckpointResult>;
  /** The same without a label (under `checkpoint-N`): `checkpoint({ messages, format })`. */
  checkpoint(options: CheckpointOptions): Promise<CheckpointResult>;
  checkpoint(label?: string | CheckpointOptions, options?: CheckpointOptions) {
    return checkpointWorkspace(this.#context, label, options);
  }

  /**
   * Drops checkpoints: all but the newest `keepLast`, those older than `olderThanMs`, or the
   * oldest beyond `maxSizeBytes` of distinct files (any criterion selects). Each is journaled as
   * pruned (undone by nothing), stops being listed and stops keeping its objects alive, so
   * `rewind gc` then frees what only it held. The newest checkpoint is never dropped, nor the one
   * an automatic-rollback policy aims at. With `dryRun`, only lists them. Throws `INVALID_ARGUMENT`.
   */
  async prune(options: Omit<PruneOptions, 'protect'>): Promise<PruneResult> {
    const protect = rollbackTargetsOf(this.#policies, await readJournal(this.#context));
    return pruneCheckpoints(this.#context, { ...options, protect });
  }

  /**
   * Restores the workspace to a checkpoint (`latest` is the newest). The current state is saved
   * first, so nothing is lost and the rollback can be undone (`undo(result.id)`). An intent entry
   * names both states before anything moves, so a process killed midway is finished by the next
   * {@link openSession}. With `dryRun`, only lists what would change, marking what this session
   * never recorded. With `paths`, restores only those files or directories (creating missing
   * parent directories with only what was asked for), leaving the rest of the workspace and the
   * conversation as they are; undone like any rollback. Paths that the rules of either side leave
   * out (`.gitignore`, `.rewindignore`) are never touched.
   *
   * Throws `CHECKPOINT_NOT_FOUND`, `INVALID_ARGUMENT` (an empty `paths`), `PATH_NOT_FOUND` (a path
   * neither side has), `PATH_CONFLICT`, and the errors of {@link snapshot} and {@link applyChanges}.
   */
  async rollback(label: string, options: RollbackOptions = {}): Promise<RollbackResult> {
    if (options.paths !== undefined && options.paths.length === 0) {
      throw new RewindError(
        'INVALID_ARGUMENT',
        'No path to restore: name the files or directories, or leave paths out to restore everything.',
      );
    }
    return rollbackTo(this.#context, label, options);
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
  async undo(id: number | 'last', options: UndoOptions = {}): Promise<UndoResult> {
    return undoAction(this.#context, id, options);
  }

  /**
   * What a checkpoint of the workspace would take, without reading a file: files, bytes, the
   * largest directories, what git's rules and `.rewindignore` leave out, and whether it would be
   * the first (reading and storing every file).
   */
  async preview(): Promise<SnapshotPreview> {
    return previewOfSession(this.#context);
  }

  /** Every action of the session, oldest first, with its class and derived state. */
  async actions(): Promise<ActionInfo[]> {
    return listActions(this.#context);
  }

  /**
   * What an action stored, as it was stored (redacted when the session redacts): a command's
   * exit status, stdout and stderr; a request's method, URL, headers and body and the response's
   * status, headers and body; for any other action, its entries. Throws `ACTION_NOT_FOUND`.
   */
  async show(id: number): Promise<ActionDetail> {
    return showAction(this.#context, id);
  }

  /**
   * The differences between two states: each side is a checkpoint label (or `latest`), an action
   * id, or the working tree when omitted. `diff(id)` alone, for an action, shows the changes that
   * action made.
   */
  async diff(from: string, to?: string): Promise<DiffResult> {
    return diffStates(this.#context, from, to);
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
    return writePath(this.#context, path, content, options.mode);
  }

  /**
   * Deletes a file, a symbolic link or a whole directory tree as a reversible action: everything
   * is stored first. Refuses a tree that holds what snapshots leave out (`PATH_IGNORED`), since
   * it could not be brought back. Throws `PATH_NOT_FOUND` when nothing is there.
   */
  async delete(path: string): Promise<ActionResult> {
    return deletePath(this.#context, path);
  }

  /**
   * Moves a file, link or directory tree to a new path (missing parents are created) as a
   * reversible action. The destination must not exist, except a file replaced by a file, whose
   * content is stored first. Throws `PATH_NOT_FOUND`, `PATH_CONFLICT` and the path errors of
   * {@link Session.write}.
   */
  async move(from: string, to: string): Promise<ActionResult> {
    return movePath(this.#context, from, to);
  }

  /** Creates a directory and its missing parents as a reversible action. Throws `PATH_CONFLICT` when something is there. */
  async mkdir(path: string): Promise<ActionResult> {
    return makeDirectory(this.#context, path);
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
    const spec = execSpecOf(this.#context, command, options);
    return options.draft
      ? draftAction(this.#context, spec, 'reversible')
      : execCommand(this.#context, spec);
  }

  /** Where this session's commands run, and what the caller should know about it. */
  async sandbox(): Promise<{ backend: SandboxBackend; network: boolean; warnings: string[] }> {
    return sandboxInfo(this.#context);
  }

  /**
   * Runs a command like {@link Session.exec}, but a failure (non-zero exit, signal, timeout) is
   * thrown (`COMMAND_FAILED`, with the tail of its stderr), after an automatic rollback when the
   * `exception` policy is on (see {@link Session.autoRollback}); inside a wrapped tool, the
   * wrapper decides instead. Its file effects stay journaled and undoable either way.
   */
  async run(command: Command, options: Omit<ExecOptions, 'draft'> = {}): Promise<ExecResult> {
    return runCommand(this.#context, this.#policies, command, options);
  }

  /**
   * Performs an HTTP request as a journaled action, refusing before sending targets with no
   * legitimate use (link-local such as 169.254.169.254, multicast, unspecified, reserved, in IPv4
   * and IPv6, after resolving the name), and with the session's `blockPrivate` loopback and
   * private ones too. Status, headers and body are kept as evidence. `irreversible`, unless a
   * compensation is declared (then `compensable`). With `draft`, journaled and not sent.
   * Throws `INVALID_ARGUMENT` (malformed URL, method or header), `ADDRESS_REFUSED` (nothing is
   * sent or journaled), `HTTP_FAILED` (journaled as failed, its `data` with `actionId` and
   * `actionClass`; or, with neither, a host that does not resolve: nothing is journaled).
   */
  async http(request: HttpRequest, options: HttpActionOptions = {}): Promise<HttpResult> {
    const spec = httpSpecOf(this.#context, request, options);
    const actionClass = options.compensation ? 'compensable' : 'irreversible';
    return options.draft
      ? { ...(await draftAction(this.#context, spec, actionClass)), response: undefined }
      : sendRequest(this.#context, spec, actionClass);
  }

  /**
   * Journals an external action (kind `x.<name>`) before it happens: `irreversible` by default,
   * or `compensable` with the compensation declared up front (a command or an HTTP request).
   * Close it with {@link Session.report} once it happened. With `draft`, it waits for approval.
   * Throws `INVALID_ARGUMENT` for a bad name, a `reversible` class (Rewind holds nothing to put
   * back), or a compensable one without a compensation.
   */
  async record(name: string, options: RecordOptions = {}): Promise<ActionResult> {
    const { spec, actionClass } = recordSpecOf(name, options);
    return options.draft
      ? draftAction(this.#context, spec, actionClass)
      : recordExternal(this.#context, spec, actionClass);
  }

  /**
   * Closes a recorded external action with its outcome (`ok` or not), and an optional detail.
   * Throws `ACTION_NOT_FOUND`, and `ACTION_NOT_ALLOWED` for an action that is not a recorded one
   * waiting for its outcome (a draft must be approved first).
   */
  async report(id: number, outcome: { ok: boolean; detail?: string }): Promise<ActionResult> {
    return reportOutcome(this.#context, id, outcome);
  }

  /**
   * What a draft will do, exactly as it will run (verbatim, unredacted), and the digest an
   * approval must name. Throws `ACTION_NOT_FOUND`, `ACTION_NOT_ALLOWED` (not a draft waiting for
   * approval, or its content no longer matches the digest it was journaled with).
   */
  async draft(id: number): Promise<DraftInfo> {
    return readDraft(this.#context, id);
  }

  /**
   * Runs a draft. `digest` (what the approver saw, from {@link Session.draft}) binds the approval
   * to the exact content: if the draft differs, nothing runs. An `exec` or `http` draft runs now
   * and its result is returned; a recorded one is approved and waits for its `report`.
   * Throws `ACTION_NOT_FOUND`, `ACTION_NOT_ALLOWED` (not a draft: discarded, approved already;
   * the content changed), and what running it throws.
   */
  async approve(id: number, options: { digest?: string } = {}): Promise<ActionResult> {
    return approveDraft(this.#context, id, options.digest);
  }

  /** Discards a draft, visibly and for good. Throws `ACTION_NOT_FOUND`, `ACTION_NOT_ALLOWED` (not a draft). */
  async discard(id: number): Promise<ActionResult> {
    return discardDraft(this.#context, id);
  }

  /**
   * The compensation a compensable action declared, verbatim as it will run. Throws
   * `ACTION_NOT_FOUND`, `ACTION_NOT_ALLOWED` (not compensable, or compensated already).
   */
  async compensation(id: number): Promise<Compensation> {
    return readCompensation(this.#context, id);
  }

  /**
   * Runs the compensation a compensable action declared, as an action of its own (an `exec` or an
   * `http` naming what it compensates); once it succeeds, the action is `compensated`.
   */
  async compensate(id: number): Promise<ActionResult> {
    return compensateAction(this.#context, id);
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
   * either fully committed or unchanged. `dryRun` only says what it would do; `diff` adds how,
   * as a unified diff (`INVALID_ARGUMENT` without `dryRun`).
   */
  async commit(options: CommitOptions = {}): Promise<CommitResult> {
    return commitToHost(this.#context, options);
  }

  /**
   * Removes an isolated session's view and journals it; the session cannot be used afterwards
   * (its ledger and what it stored stay), nor be current (`wasCurrent`: it was). Refuses
   * (`UNCOMMITTED_CHANGES`) while the view holds changes not committed, unless `force`.
   */
  async destroy(options: { force?: boolean } = {}): Promise<{ wasCurrent: boolean }> {
    const destroyed = await destroyView(this.#context, options);
    return this.close().then(() => destroyed);
  }

  /**
   * Ends an isolated session's work, as the first seed's context manager did, fixed: commits
   * only when the work ended cleanly and `autoCommit` is on; a refused or failed commit never
   * destroys anything; `destroyOnExit` removes the view only when nothing uncommitted is left
   * (and never after a failure in agent mode). Then closes the session.
   */
  async end(options: EndOptions = {}): Promise<EndResult> {
    try {
      return await endSession(this.#context, options);
    } finally {
      await this.close();
    }
  }

  /** What the session is and, for an isolated one, what a commit would do now. */
  async status(): Promise<SessionStatus> {
    return sessionStatus(this.#context);
  }

  /**
   * Runs the session's verifier in its workspace (through its sandbox) and journals the verdict
   * (`verification-recorded`, with the output as evidence). The verdict is the JSON object the
   * verifier prints (`status` pass, fail or unknown); the exit code is recorded but never decides;
   * an unknown verdict is retried up to `retries` times and is never treated as a pass. The
   * verifier is `options.verifier`, else `.rewind/config.json`'s `verifier`.
   * Throws `INVALID_ARGUMENT` when no verifier is configured or given.
   */
  async test(
    options: { verifier?: VerifierConfig } = {},
  ): Promise<VerificationResult & { id: number }> {
    return runVerification(this.#context, options.verifier);
  }

  /**
   * Takes an automatic checkpoint before every wrapped tool call ({@link Session.tool}), keeping
   * the last `keepLast`: older automatic checkpoints are pruned (journaled; they stop being
   * listed and keeping objects alive, so `rewind gc` reclaims what only they held). Labels are
   * `auto-NNNN-<tool>-<ms>`, the time from the session's clock (`now`). The checkpoint an
   * automatic rollback would go back to is never pruned.
   */
  autoCheckpoint(options: AutoCheckpointOptions | false = {}): void {
    if (options === false) this.#policies.checkpoint = undefined;
    else setAutoCheckpoint(this.#policies, options);
  }

  /**
   * Rolls back files and conversation to `to` when a wrapped tool fails (`exception`) or the
   * verifier fails (`test-failure`, through {@link Session.check}). The default, `latest`, is the
   * newest checkpoint that is not already broken: after a failed verdict, the newest one a
   * verifier passed, else the newest one no verifier failed; after an exception, the newest one
   * no verifier failed (the one taken before the failing call). A rollback that would change
   * nothing is skipped and journaled; {@link Session.lastAutoRollback} keeps the last one that
   * changed something.
   * An unknown verdict goes to `escalation` (default {@link stopEscalation}).
   */
  autoRollback(options: AutoRollbackOptions | false = {}): void {
    if (options === false) this.#policies.rollback = undefined;
    else setAutoRollback(this.#policies, options);
  }

  /** The policies on now (false turns one off: `autoCheckpoint(false)`, `autoRollback(false)`). */
  policies(): SessionPolicies {
    const { checkpoint, rollback } = this.#policies;
    return {
      autoCheckpoint: checkpoint && {
        trigger: checkpoint.trigger,
        ...(checkpoint.keepLast !== undefined && { keepLast: checkpoint.keepLast }),
      },
      autoRollback: rollback && {
        on: [...rollback.on],
        to: rollback.to,
        scope: rollback.scope,
        ...(rollback.verifier && { verifier: rollback.verifier }),
      },
    };
  }

  /**
   * Verifies the workspace with the policy's verifier (or the session's) and acts on the verdict:
   * pass returns it; fail rolls back (with `test-failure` on) and throws `VERIFICATION_FAILED`;
   * unknown is escalated: `continue` throws `VERIFICATION_UNKNOWN`, `rollback` rolls back and
   * throws it, `stop` throws a {@link HaltError}. Every step is journaled.
   */
  async check(): Promise<VerificationResult & { id: number }> {
    return checkVerdict(this.#context, this.#policies);
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
    work: (...args: A) => Promise<R> | R,
    options: ToolOptions<A> = {},
  ): (...args: A) => Promise<R | string> {
    return wrapTool(this.#context, this.#policies, work, options);
  }

  /**
   * Reads a text file of the session's workspace (not journaled). Throws `PATH_INVALID` and
   * `SYMLINK_REFUSED` like the file actions, `PATH_NOT_FOUND` when nothing is there.
   */
  async read(path: string): Promise<string> {
    return readText(this.#context, path);
  }

  /**
   * The entries of a directory of the session's workspace (`.` for its root), directories marked
   * with a trailing `/`, the store left out (not journaled).
   */
  async list(path = '.'): Promise<string[]> {
    return listDirectory(this.#context, path);
  }

  /** Closes the session's ledger, and stops its watcher. */
  async close(): Promise<void> {
    if (this.#isClosed) return;
    this.#isClosed = true;
    await closeContext(this.#context);
  }

  async [Symbol.asyncDispose](): Promise<void> {
    await this.close();
  }
}
