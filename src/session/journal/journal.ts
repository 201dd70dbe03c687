import { RewindError } from '../../errors.js';
import type { EntryKind, LedgerEntry, SessionLedger } from '../../ledger/index.js';
import { acquireLock, clipped, createLimiter, type Digest } from '../../lib/index.js';
import { type ObjectReference, workspaceLockOf } from '../../store/index.js';
import type { SessionContext } from '../context.js';
import {
  type ActionIndex,
  type ActionRecord,
  addToActionIndex,
  createActionIndex,
  newestActionOf,
  STARTING_KINDS,
} from './action-records.js';
import { CheckpointIndex, type CheckpointInfo } from './checkpoint-records.js';
import { type ConversationRef, ConversationTracker, conversationIn } from './conversation-refs.js';
import { recover } from './recovery.js';

/**
 * A session's ledger as read, with the views every operation asks of it (actions, checkpoints,
 * the conversation) kept current entry by entry: each refresh parses only the entries appended
 * since the last one (see the ledger's reader) and folds only those in, so an operation costs the
 * same in a session of ten entries or ten thousand. Appends go through {@link Journal.append},
 * which folds them in at once, together with anything another process appended meanwhile.
 */
export class Journal {
  readonly #ledger: SessionLedger;
  /** The workspace copy this process works in, on a shared ledger: recorded in every intent. */
  readonly #workspaceId: string | undefined;
  /** The entries folded in so far: the reading they came from. */
  #entries: readonly LedgerEntry[] = [];
  #actions: ActionIndex = createActionIndex();
  #checkpoints = new CheckpointIndex();
  #conversation = new ConversationTracker();
  /** Each tree some entry references, with the seqs of the entries that do. */
  #treeReferrers = new Map<Digest, number[]>();
  /** The seqs of checkpoints pruned since: gc may reclaim what only they reference. */
  #pruned = new Set<number>();
  #verdicts = new Map<Digest, 'pass' | 'fail'>();
  #viewCreated: LedgerEntry | undefined;
  /** Refreshes run one at a time, in the order they were asked for. */
  readonly #serial = createLimiter(1);

  constructor(ledger: SessionLedger, workspaceId?: string) {
    this.#ledger = ledger;
    this.#workspaceId = workspaceId;
  }

  /** Reads what was appended since the last refresh and folds it in. */
  refresh(): Promise<void> {
    return this.#serial(() => this.#refreshNow());
  }

  async #refreshNow(): Promise<void> {
    this.#foldIn((await this.#ledger.read()).entries);
  }

  /**
   * Folds in the entries of a reading that were not folded in yet. Synchronous, so that readings
   * folded in from a refresh and from an append's check never interleave; a reading older than
   * what was folded in already (the same entries, fewer of them) brings nothing.
   */
  #foldIn(entries: readonly LedgerEntry[]): void {
    let from = this.#entries.length;
    const last = entries.length - 1;
    if (last >= 0 && last < from - 1 && entries[last] === this.#entries[last]) return;
    // The reader hands back the entries it parsed before as the same objects, unless it had to
    // start over (the file was replaced or rewritten): then every view is rebuilt.
    if (entries.length < from || (from > 0 && entries[from - 1] !== this.#entries[from - 1])) {
      this.#actions = createActionIndex();
      this.#checkpoints = new CheckpointIndex();
      this.#conversation = new ConversationTracker();
      this.#treeReferrers = new Map();
      this.#pruned = new Set();
      this.#verdicts = new Map();
      this.#viewCreated = undefined;
      from = 0;
    }
    for (let index = from; index < entries.length; index++) {
      this.#add(entries[index] as LedgerEntry);
    }
    this.#entries = entries;
  }

  #add(entry: LedgerEntry): void {
    addToActionIndex(this.#actions, entry);
    this.#checkpoints.add(entry);
    this.#conversation.add(entry);
    for (const reference of entry.refs ?? []) {
      if (reference.type !== 'tree') continue;
      const referrers = this.#treeReferrers.get(reference.digest);
      if (referrers) referrers.push(entry.seq);
      else this.#treeReferrers.set(reference.digest, [entry.seq]);
    }
    if (entry.kind === 'checkpoint-pruned') this.#pruned.add(Number(entry.body.checkpointSeq));
    if (entry.kind === 'view-created' && !this.#viewCreated) this.#viewCreated = entry;
    if (entry.kind === 'verification-recorded') {
      const { tree, status } = entry.body;
      if (typeof tree === 'string' && (status === 'pass' || status === 'fail')) {
        this.#verdicts.set(tree as Digest, status);
      }
    }
  }

  /**
   * Appends an entry to the ledger and folds it in (with anything another process appended
   * first). Resolves once it is durable; see `Ledger.append`.
   *
   * `check` runs on this journal brought up to the very entries the entry is appended after,
   * under the ledger's lock (see `AppendCheck`): what it throws stops the append. An operation
   * checks under the workspace lock before it starts, but on a shared ledger other copies of the
   * workspace, each under its own lock, append to the same session meanwhile; `check` asks again
   * where no other writer can come between.
   */
  async append(
    kind: EntryKind,
    body: Record<string, unknown>,
    refs?: readonly ObjectReference[],
    check?: (journal: Journal) => void,
  ): Promise<LedgerEntry> {
    const stamped =
      this.#workspaceId !== undefined && STARTING_KINDS.has(kind)
        ? { ...body, workspaceId: this.#workspaceId }
        : body;
    const entry = await this.#ledger.append(
      kind,
      stamped,
      refs,
      check &&
        ((entries) => {
          this.#foldIn(entries);
          check(this);
        }),
    );
    await this.refresh();
    return entry;
  }

  /** Every action, by id, oldest first. */
  actions(): ReadonlyMap<number, ActionRecord> {
    return this.#actions.byId;
  }

  /** The newest action this copy of the workspace started: see {@link newestActionOf}. */
  newestAction(): ActionRecord | undefined {
    return newestActionOf(this.#actions, this.#workspaceId);
  }

  /** The action `id`. Throws `ACTION_NOT_FOUND` when that entry started no action. */
  findAction(id: number): ActionRecord {
    const action = this.#actions.byId.get(id);
    if (action) return action;
    const last = this.#entries.at(-1)?.seq ?? 0;
    const what =
      id > last || id < 1
        ? `has no entry #${id} (its last is #${last})`
        : `has entry #${id}, which is not an action`;
    throw new RewindError(
      'ACTION_NOT_FOUND',
      `Session ${this.#ledger.session.id} ${what}. Run \`rewind log\` to see the action ids.`,
      { data: { id } },
    );
  }

  /** Every checkpoint not pruned, oldest first. */
  checkpoints(): CheckpointInfo[] {
    return this.#checkpoints.list();
  }

  /**
   * The checkpoint labelled `label`, or the newest for `latest`. Throws `CHECKPOINT_NOT_FOUND`,
   * listing the labels there are.
   */
  findCheckpoint(label: string): CheckpointInfo {
    const found =
      label === 'latest' ? this.#checkpoints.latest() : this.#checkpoints.byLabel(label);
    if (found) return found;
    const id = this.#ledger.session.id;
    const known = this.#checkpoints.list().map((checkpoint) => checkpoint.label);
    throw new RewindError(
      'CHECKPOINT_NOT_FOUND',
      label === 'latest'
        ? `Session ${id} has no checkpoint yet. Create one with \`rewind checkpoint\` (a label is optional).`
        : `Session ${id} has no checkpoint "${clipped(label)}". ` +
            (known.length === 0
              ? 'It has no checkpoint yet.'
              : known.length <= 10
                ? `Its checkpoints: ${known.join(', ')}.`
                : `Its newest checkpoints: ${known.slice(-10).join(', ')} (\`rewind checkpoints\` lists all ${known.length}).`),
      { data: { label, known } },
    );
  }

  /** The conversation the checkpoint recorded, if it recorded one. */
  conversationAt(checkpoint: CheckpointInfo): ConversationRef | undefined {
    return this.#checkpoints.conversationOf(checkpoint.seq);
  }

  /** The rules from outside the workspace the checkpoint recorded, if any. */
  rulesAt(checkpoint: CheckpointInfo): Digest | undefined {
    return this.#checkpoints.rulesOf(checkpoint.seq);
  }

  /** The conversation the newest rollback to the checkpoint `label` restored, if any. */
  lastRestoredFrom(label: string): ConversationRef | undefined {
    const started = this.#checkpoints.lastRollbackTo(label);
    return started ? conversationIn(started.body, 'conversationAfter') : undefined;
  }

  /** The session's current conversation, if it has one. */
  currentConversation(): ConversationRef | undefined {
    return this.#conversation.current;
  }

  /**
   * The seq of the newest entry that moved the session's conversation or began to: an operation
   * that records the conversation it replaces checks, as it appends, that this has not changed
   * since it planned (see {@link checkConversationUnmoved}).
   */
  conversationMovedAt(): number {
    return this.#conversation.movedAt;
  }

  /**
   * The actions under way (started, not closed yet) that another copy of the workspace started,
   * on a shared ledger: each copy finishes only its own. Empty on a ledger of one copy.
   */
  underWayElsewhere(): ActionRecord[] {
    const own = this.#workspaceId;
    if (own === undefined) return [];
    return [...this.#actions.open].flatMap((id) => {
      const action = this.#actions.byId.get(id);
      const copy = action?.started.body.workspaceId;
      return action && typeof copy === 'string' && copy !== own ? [action] : [];
    });
  }

  /**
   * Every tree some entry references, but those only pruned checkpoints reference: gc may have
   * reclaimed them (the same notion of live as gc's, see `liveReferences`).
   */
  recordedTrees(): ReadonlySet<Digest> {
    const live = new Set<Digest>();
    for (const [tree, seqs] of this.#treeReferrers) {
      if (seqs.some((seq) => !this.#pruned.has(seq))) live.add(tree);
    }
    return live;
  }

  /** The newest verdict a verifier gave on exactly these files, if one judged them. */
  verdictOn(tree: Digest): 'pass' | 'fail' | undefined {
    return this.#verdicts.get(tree);
  }

  /** The `view-created` entry of an isolated session. */
  get viewCreated(): LedgerEntry | undefined {
    return this.#viewCreated;
  }
}

const journals = new WeakMap<SessionContext, Journal>();

function journalOf(context: SessionContext): Journal {
  let journal = journals.get(context);
  if (!journal) {
    journal = new Journal(context.ledger, context.workspaceId);
    journals.set(context, journal);
  }
  return journal;
}

/**
 * Runs `work` holding the workspace lock, after finishing what a killed process left half-done.
 * `work` gets the session's journal, current as of the lock; what it appends through the journal
 * is in it at once. Throws `LOCK_HELD` when another operation keeps the lock past the session's
 * lock timeout (or `options.timeoutMs`).
 */
export async function withWorkspaceLock<T>(
  context: SessionContext,
  purpose: string,
  work: (journal: Journal) => Promise<T>,
  options: { timeoutMs?: number } = {},
): Promise<T> {
  const lock = await acquireLock(workspaceLockOf(context.storeDirectory), {
    timeoutMs: options.timeoutMs ?? context.settings.lockTimeoutMs,
    purpose: `${purpose} (session ${context.id})`,
    ...(context.settings.onLockWait && { onWait: context.settings.onLockWait }),
  });
  try {
    const journal = journalOf(context);
    await journal.refresh();
    const recovered = await recover(context, journal);
    if (recovered) context.recoveries.push(recovered);
    return await work(journal);
  } finally {
    await lock.release();
  }
}

/** The session's journal, current as of now, without the lock: for listings and reads. */
export async function readJournal(context: SessionContext): Promise<Journal> {
  const journal = journalOf(context);
  await journal.refresh();
  return journal;
}

/**
 * Thrown by an append's check when what the operation planned with changed meanwhile: on a
 * shared ledger, another copy of the workspace appends under its own lock. Nothing was appended;
 * {@link planningAgain} waits for the other copy's action `waitFor` to end, when one is under
 * way, and plans the operation again. Past the session's lock timeout, this is the error
 * (`LOCK_HELD`).
 */
export class ChangedMeanwhile extends RewindError {
  readonly waitFor: number | undefined;

  constructor(message: string, session: string, waitFor?: number) {
    super('LOCK_HELD', `${message} Nothing was changed; run it again.`, {
      data: { session, ...(waitFor !== undefined && { seq: waitFor }) },
    });
    this.waitFor = waitFor;
  }
}

/**
 * Throws {@link ChangedMeanwhile} when the conversation moved after entry `movedAt` (what
 * {@link Journal.conversationMovedAt} said as the operation planned), or another copy of the
 * workspace is moving it: what the operation would record as the conversation it replaces would
 * not be the one it replaces.
 */
export function checkConversationUnmoved(journal: Journal, session: string, movedAt: number): void {
  const moving = journal
    .underWayElsewhere()
    .find((action) => action.started.body.conversationAfter !== undefined);
  if (moving) {
    throw new ChangedMeanwhile(
      `Another copy of the workspace is changing the conversation of session ${session} (${moving.kind} #${moving.id}) and has not finished.`,
      session,
      moving.id,
    );
  }
  const now = journal.conversationMovedAt();
  if (now !== movedAt) {
    throw new ChangedMeanwhile(
      `The conversation of session ${session} kept changing (entry #${now}) while this was prepared.`,
      session,
    );
  }
}

/**
 * Runs `plan` (which plans an operation and appends its intent with a check that may throw
 * {@link ChangedMeanwhile}) again whenever what it planned with changed, once the other copy's
 * action it names has ended: as the operation would run after that one under one lock.
 */
export async function planningAgain<T>(
  context: SessionContext,
  journal: Journal,
  plan: () => Promise<T>,
): Promise<T> {
  const deadline = Date.now() + context.settings.lockTimeoutMs;
  for (;;) {
    try {
      return await plan();
    } catch (error) {
      if (!(error instanceof ChangedMeanwhile) || Date.now() > deadline) throw error;
      // The journal is current as the check saw it; the other copy's action ends with its
      // completion or failure entry.
      const waitFor = error.waitFor;
      while (waitFor !== undefined && journal.actions().get(waitFor)?.closed === undefined) {
        if (Date.now() > deadline) throw error;
        await new Promise((resolve) => setTimeout(resolve, 100));
        await journal.refresh();
      }
    }
  }
}
