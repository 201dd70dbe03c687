/**
 * `rewind-agent/openai-agents`: Rewind for the OpenAI Agents SDK. {@link RewindAgentsSession} is
 * the SDK's `Session` memory kept by Rewind (the items stored as the session's conversation, in
 * the `openai-agents` format), so a rollback brings files and items back together; {@link
 * rewindTool} journals a function tool and maps `needsApproval` onto Rewind drafts; {@link
 * rewindRun} runs an agent with both, checkpointing first, and hands a halt to the caller. Built
 * on the session's public API only.
 */
import {
  type Agent,
  type AgentInputItem,
  type Session as AgentsMemory,
  type CallModelInputFilter,
  type NonStreamRunOptions,
  type RunResult,
  type RunState,
  type RunToolApprovalItem,
  run,
  type ToolInputParameters,
  type ToolOptions,
  type ToolOutputSchema,
  tool,
  type UnknownContext,
} from '@openai/agents';
import {
  type AutoRollbackReport,
  HaltError,
  RewindError,
  type RollbackOptions,
  type RollbackResult,
  type Session,
} from '../../index.js';

const FORMAT = 'openai-agents';

/**
 * The same item, however the SDK spelled it (a message with `type: "message"` or not): the same
 * role and content, and for a call or its result the same kind and call id.
 */
function sameMessage(a: AgentInputItem, b: AgentInputItem): boolean {
  const shape = (item: AgentInputItem) => {
    const { role, content, type, callId } = item as Record<string, unknown>;
    return JSON.stringify([role, content, type === 'message' ? undefined : type, callId]);
  };
  return shape(a) === shape(b);
}

/** A run's input as the items the SDK stores: a string is one user message. */
function inputItemsOf(input: unknown): AgentInputItem[] {
  if (typeof input === 'string') return [{ role: 'user', content: input }];
  return Array.isArray(input) ? (input as AgentInputItem[]) : [];
}

/** The {@link rewindRun} under way on a session, as its tools see it. */
interface ActiveRun {
  /** The model turn running now: the calls the model asked for at once share it (their step). */
  turn: object;
  /** Stops the run: a rollback happened. */
  onRollback(report: AutoRollbackReport): void;
}

const activeRuns = new WeakMap<Session, ActiveRun>();

/**
 * The SDK's `Session` memory, kept by a Rewind session: the items are the session's
 * conversation (format `openai-agents`), stored item by item and shared between checkpoints. A
 * Rewind rollback (`rollback`, or any `rewind rollback` of a checkpoint holding items) restores
 * them with the files: the next run reads the restored history, repaired (every call answered),
 * with the person's latest request and a note at its end.
 */
export class RewindAgentsSession implements AgentsMemory {
  readonly session: Session;
  /**
   * The items of the run under way: its input, then what its turns added, recorded in the
   * conversation as they come (so that a checkpoint or a rollback during the run holds the
   * person's request and the turns the files went through), but not among the items the SDK
   * reads, since it adds them itself when the run ends.
   */
  #pending: AgentInputItem[] = [];
  /** The run under way: how many items the SDK read before it, and its input. */
  #run: { history: number; input: AgentInputItem[] } | undefined;

  constructor(session: Session) {
    this.session = session;
  }

  /** Records the input of a run about to start; see {@link rewindRun}. */
  async beginRun(input: readonly AgentInputItem[]): Promise<void> {
    const items = await this.getItems();
    this.#pending = [...input];
    this.#run = { history: items.length, input: [...input] };
    await this.#store([...items, ...input]);
  }

  /**
   * Records the run's items as a model turn starts (`turnInput`: what the model is sent, the
   * stored items then the run's input and what its turns added), so that a checkpoint taken
   * during the turn pairs the files with the items the model acted on; see {@link rewindRun}.
   * Does nothing when the input is not shaped so (a run resumed from its state).
   */
  async recordTurn(turnInput: readonly AgentInputItem[]): Promise<void> {
    const run = this.#run;
    if (run === undefined || run.input.length === 0) return;
    const added = turnInput.slice(run.history);
    const isShaped =
      added.length >= run.input.length &&
      run.input.every((item, index) => sameMessage(item, added[index] as AgentInputItem));
    if (!isShaped || added.length === this.#pending.length) return;
    const items = await this.getItems();
    this.#pending = [...added];
    await this.#store([...items, ...added]);
  }

  async getSessionId(): Promise<string> {
    return this.session.id;
  }

  async getItems(limit?: number): Promise<AgentInputItem[]> {
    const conversation = await this.session.conversation();
    if (!conversation) return [];
    if (conversation.format !== FORMAT) {
      throw new RewindError(
        'CONVERSATION_FORMAT_MISMATCH',
        `Session ${this.session.id} holds a ${conversation.format} conversation, not the Agents SDK's items. Give the Agents SDK a session of its own (rewind session new).`,
        { data: { format: conversation.format } },
      );
    }
    let items = conversation.messages as unknown as AgentInputItem[];
    const pending = this.#pending;
    if (
      pending.length > 0 &&
      items.length >= pending.length &&
      items
        .slice(-pending.length)
        .every((item, index) => sameMessage(item, pending[index] as AgentInputItem))
    ) {
      items = items.slice(0, -pending.length);
    }
    return limit === undefined ? items : items.slice(-limit);
  }

  async addItems(items: AgentInputItem[]): Promise<void> {
    if (items.length === 0) return;
    const stored = await this.getItems();
    this.#pending = [];
    await this.#store([...stored, ...items]);
  }

  async popItem(): Promise<AgentInputItem | undefined> {
    const items = await this.getItems();
    const last = items.pop();
    if (last !== undefined) await this.#store(items);
    return last;
  }

  async clearSession(): Promise<void> {
    await this.#store([]);
  }

  /** Replaces every item (after a rollback, with the ones it restored). */
  async replaceItems(items: readonly AgentInputItem[]): Promise<void> {
    this.#pending = [];
    this.#run = undefined;
    await this.#store(items);
  }

  /**
   * Ends a run that stopped without the SDK adding its items: what was recorded of it (its input,
   * the items before its last model turn) stays.
   */
  endRun(): void {
    this.#pending = [];
    this.#run = undefined;
  }

  /** Checkpoints the workspace with the items as they are now; without a label, as `checkpoint-N`. */
  checkpoint(label?: string) {
    return this.session.checkpoint(label);
  }

  /**
   * Rolls back to a checkpoint: files and items (`scope` says which), undoable. The next run
   * goes on from the restored items.
   */
  rollback(label: string, options: RollbackOptions = {}): Promise<RollbackResult> {
    return this.session.rollback(label, options);
  }

  async #store(items: readonly AgentInputItem[]): Promise<void> {
    await this.session.syncConversation(items as unknown as Record<string, unknown>[], {
      format: FORMAT,
    });
  }
}

/** Options of {@link rewindTool}. */
export interface RewindToolOptions {
  /** A tool that only reads: it runs as it is, with no checkpoint and no rollback. */
  readOnly?: boolean;
}

/** The name an external action of a tool is journaled under (`x.<name>`): letters, digits, `.`, `_`, `-`. */
const actionNameOf = (tool: string) => tool.replace(/[^A-Za-z0-9._-]/g, '_').slice(0, 64) || 'tool';

/** The draft Rewind journaled for a call that needs approval, looked up by its target. */
async function draftOf(session: Session, tool: string, callId: string) {
  const target = `${tool} ${callId}`;
  return (await session.actions()).findLast(
    (action) => action.kind === `x.${actionNameOf(tool)}` && action.target === target,
  );
}

/**
 * A function tool (the options `tool()` takes), journaled: each call of a tool that is not
 * read-only runs one at a time through `session.tool` (an automatic checkpoint first under the
 * session's `autoCheckpoint` policy; a failure answered with `ERROR: ...` and, under
 * `autoRollback`, a rollback the model is told about; after it, the run's later calls are
 * refused without running). With `needsApproval`, a call that needs it
 * is journaled as a Rewind draft (`x.<tool>`, its input as the detail) before the run stops for
 * approval: a person approves or discards it with `rewind approve ID` / `rewind discard ID`, and
 * {@link applyApprovals} hands that decision to the run; one approved through the SDK is approved
 * in Rewind too. The call's outcome closes the action. A halt is not handed to the model: it
 * leaves the run (see {@link rewindRun}).
 */
export function rewindTool<
  TParameters extends ToolInputParameters = undefined,
  Context = UnknownContext,
  Result = string,
  TOutputSchema extends ToolOutputSchema | undefined = undefined,
>(
  session: Session,
  options: ToolOptions<TParameters, Context, TOutputSchema>,
  rewind: RewindToolOptions = {},
): ReturnType<typeof tool<TParameters, Context, Result, TOutputSchema>> {
  const name = options.name;
  if (!name) {
    throw new RewindError('INVALID_ARGUMENT', 'A tool that Rewind journals needs a name.', {
      data: {},
    });
  }
  const original = options.execute as (...args: unknown[]) => unknown;
  const journaled = rewind.readOnly
    ? async (...args: unknown[]) => original(...args)
    : session.tool(async (...args: unknown[]) => original(...args), {
        name,
        // A step is one model turn of a rewindRun (the calls the model asked for at once): a
        // rollback goes no later than the checkpoint before its first call, whose items are the
        // ones the model acted on, and its later calls are refused. Outside one, a call is a step
        // of its own.
        step: (..._call: unknown[]) => activeRuns.get(session)?.turn,
        // The run's context names the run: after a rollback, its later calls are refused, since
        // the run goes on from a history the files no longer match.
        run: (_input, context) =>
          typeof context === 'object' && context !== null ? context : undefined,
      });
  const asked = options.needsApproval;
  const needsApproval =
    asked === undefined || asked === false
      ? false
      : async (context: never, input: never, callId?: string): Promise<boolean> => {
          const needed =
            typeof asked === 'function' ? await asked(context, input, callId) : asked === true;
          if (needed && callId !== undefined && !(await draftOf(session, name, callId))) {
            await session.record(actionNameOf(name), {
              draft: true,
              target: `${name} ${callId}`,
              detail: JSON.stringify(input),
            });
          }
          return needed;
        };
  const execute = async (input: unknown, context: unknown, details?: unknown) => {
    const callId = (details as { toolCall?: { callId?: string } } | undefined)?.toolCall?.callId;
    const draft =
      asked !== undefined && asked !== false && callId !== undefined
        ? await draftOf(session, name, callId)
        : undefined;
    if (draft === undefined) return journaled(input, context, details);
    if (draft.state === 'discarded') {
      return `ERROR: this call was discarded in Rewind (draft #${draft.id}); it did not run.`;
    }
    // Approved through the SDK: the person's approval holds for Rewind's draft too.
    if (draft.state === 'draft') await session.approve(draft.id);
    const result = await journaled(input, context, details);
    const failed = typeof result === 'string' && result.startsWith('ERROR: ');
    await session.report(draft.id, failed ? { ok: false, detail: result } : { ok: true });
    return result;
  };
  const watched = async (input: unknown, context: unknown, details?: unknown) => {
    const before = session.lastAutoRollback;
    try {
      return await execute(input, context, details);
    } finally {
      const after = session.lastAutoRollback;
      if (after && after !== before) activeRuns.get(session)?.onRollback(after);
    }
  };
  // The SDK builds the tool (its schema checks, its timeouts); Rewind wraps the call, and its
  // error function lets a halt out of the run instead of handing it to the model.
  return tool({
    ...options,
    execute: watched,
    needsApproval,
    errorFunction: (_context: unknown, error: unknown) => {
      if (error instanceof HaltError) throw error;
      return `ERROR: ${error instanceof Error ? error.message : String(error)}`;
    },
  } as ToolOptions<TParameters, Context, TOutputSchema>);
}

/** The halt a run's error carries (the SDK wraps a tool's error in a ToolCallError), if any. */
export function haltIn(error: unknown): HaltError | undefined {
  for (let cause = error, depth = 0; cause !== undefined && depth < 5; depth++) {
    if (cause instanceof HaltError) return cause;
    cause =
      (cause as { error?: unknown }).error ?? (cause as { cause?: unknown }).cause ?? undefined;
  }
  return undefined;
}

/** What {@link applyApprovals} did with a run's interruptions. */
export interface ApprovalOutcome {
  approved: number;
  rejected: number;
  /** Calls whose draft a person has neither approved nor discarded yet. */
  pending: number;
}

/**
 * Hands the decisions people made in Rewind (`rewind approve ID`, `rewind discard ID`) to a run
 * stopped for approvals: an approved draft approves its call, a discarded one rejects it. Run the
 * agent again with `result.state` to go on.
 */
export async function applyApprovals(
  session: Session,
  result: {
    interruptions?: RunToolApprovalItem[];
    state: { approve(item: RunToolApprovalItem): void; reject(item: RunToolApprovalItem): void };
  },
): Promise<ApprovalOutcome> {
  const outcome: ApprovalOutcome = { approved: 0, rejected: 0, pending: 0 };
  for (const item of result.interruptions ?? []) {
    const raw = item.rawItem as { callId?: string; name?: string };
    const name = item.toolName ?? raw.name;
    const draft =
      raw.callId !== undefined && name !== undefined
        ? await draftOf(session, name, raw.callId)
        : undefined;
    if (draft?.state === 'approved' || draft?.state === 'done') {
      result.state.approve(item);
      outcome.approved += 1;
    } else if (draft?.state === 'discarded') {
      result.state.reject(item);
      outcome.rejected += 1;
    } else {
      outcome.pending += 1;
    }
  }
  return outcome;
}

/** Options of {@link rewindRun}: the SDK's run options, and the checkpoint taken first. */
export type RewindRunOptions<TAgent extends AnyAgent, TContext> = NonStreamRunOptions<
  TContext,
  TAgent
> & {
  /** The checkpoint's label (default `run-<n>-<ms since epoch>`); false takes none. */
  checkpoint?: string | false;
  /** Keep the newest this many `run-` checkpoints, pruning the older ones (default: all). */
  keepLast?: number;
};

// The SDK types its agents with `any`: an agent of any context and output.
// biome-ignore lint/suspicious/noExplicitAny: the SDK's own bound for an agent of any kind.
type AnyAgent = Agent<any, any>;

/** What {@link rewindRun} did. */
export interface RewindRunResult<TContext, TAgent extends AnyAgent> {
  /** The SDK's result; undefined when a rollback stopped the run. */
  result: RunResult<TContext, TAgent> | undefined;
  /** The checkpoint taken before the run, if one was. */
  checkpoint: string | undefined;
  /**
   * The automatic rollback that stopped the run, if one did: the memory now holds the items it
   * restored (with the person's request and a note at their end); run again to go on from them.
   */
  rolledBack: AutoRollbackReport | undefined;
}

let runs = 0;

/**
 * Runs an agent with its memory in Rewind: checkpoints the workspace with the items first (the
 * point `session.rollback(label)` returns to, files and items together), then runs with a
 * {@link RewindAgentsSession} unless another memory is given, which records the items so far
 * before each model turn. A step is one model turn: when a tool's failure rolls back (the
 * session's `autoRollback` policy), it goes no later than the checkpoint taken before the turn's
 * first call (earlier turns stay, files and items), the turn's later calls are refused, the run
 * stops there and the memory holds the restored items, not the abandoned attempt. A halt a tool
 * raised rejects with the `HaltError` itself, not the SDK's wrapper.
 */
export async function rewindRun<TAgent extends AnyAgent, TContext = undefined>(
  session: Session,
  agent: TAgent,
  input: string | AgentInputItem[] | RunState<TContext, TAgent>,
  options: RewindRunOptions<TAgent, TContext> = {},
): Promise<RewindRunResult<TContext, TAgent>> {
  const { checkpoint, keepLast, ...runOptions } = options;
  const memory = runOptions.session ?? new RewindAgentsSession(session);
  let label: string | undefined;
  if (checkpoint !== false) {
    runs += 1;
    label = checkpoint ?? `run-${runs}-${Date.now()}`;
    // The checkpoint holds the items as they are, none included, so a rollback to it restores them.
    if (memory instanceof RewindAgentsSession) await memory.replaceItems(await memory.getItems());
    await session.checkpoint(label);
    if (keepLast !== undefined) await session.prune({ keepLast, labelPrefix: 'run-' });
  }
  const stop = new AbortController();
  let rolledBack: AutoRollbackReport | undefined;
  const active: ActiveRun = {
    turn: {},
    onRollback: (report) => {
      rolledBack = report;
      stop.abort(new Error(`rolled back to ${report.to}`));
    },
  };
  activeRuns.set(session, active);
  const signal = runOptions.signal
    ? AbortSignal.any([runOptions.signal, stop.signal])
    : stop.signal;
  // Called before each model turn: a new step begins, and the memory records the items so far.
  const filter = runOptions.callModelInputFilter;
  const callModelInputFilter: CallModelInputFilter = async (args) => {
    active.turn = {};
    if (memory instanceof RewindAgentsSession) await memory.recordTurn(args.modelData.input);
    return filter ? filter(args) : args.modelData;
  };
  if (memory instanceof RewindAgentsSession) await memory.beginRun(inputItemsOf(input));
  try {
    const result = await run(agent, input, {
      ...runOptions,
      session: memory,
      signal,
      callModelInputFilter,
    });
    return { result, checkpoint: label, rolledBack: undefined };
  } catch (error) {
    const halt = haltIn(error);
    if (halt) throw halt;
    if (!rolledBack) throw error;
    // The memory holds the restored items, not what the run added after them.
    if (memory instanceof RewindAgentsSession && rolledBack.messages) {
      await memory.replaceItems(rolledBack.messages as unknown as AgentInputItem[]);
    }
    return { result: undefined, checkpoint: label, rolledBack };
  } finally {
    if (activeRuns.get(session) === active) activeRuns.delete(session);
    if (memory instanceof RewindAgentsSession) memory.endRun();
  }
}
