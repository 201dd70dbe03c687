/**
 * `rewind-agent/langgraph`: Rewind for LangGraph.js. {@link RewindCheckpointer} is a checkpoint
 * saver that wraps any other (MemorySaver by default) and pairs every checkpoint of a graph with
 * the workspace's files, so that LangGraph's own time travel brings the files back too: a run
 * resumed or forked from a past checkpoint starts from that checkpoint's files. {@link
 * rewindToolNode} is a `ToolNode` whose tools are journaled and whose halts leave the graph. Built
 * on the session's public API only.
 */

import { ToolMessage } from '@langchain/core/messages';
import type { RunnableConfig } from '@langchain/core/runnables';
import { type StructuredToolInterface, tool } from '@langchain/core/tools';
import {
  BaseCheckpointSaver,
  type Checkpoint,
  type CheckpointMetadata,
  type CheckpointTuple,
  type LangGraphRunnableConfig,
  MemorySaver,
} from '@langchain/langgraph';
import { ToolNode } from '@langchain/langgraph/prebuilt';
import { isRewindError, RewindError, type Session } from '../../index.js';

// The saver's own parameter types, as LangGraph declares them.
type ChannelVersions = Parameters<BaseCheckpointSaver['put']>[3];
type CheckpointListOptions = Parameters<BaseCheckpointSaver['list']>[1];
type PendingWrite = Parameters<BaseCheckpointSaver['putWrites']>[1][number];

/** Where a checkpoint's pairing is kept: a Rewind checkpoint labelled by the LangGraph id. */
const PAIRING_PREFIX = 'lg-';

/** The label of the Rewind checkpoint paired with a LangGraph checkpoint. */
export function pairingLabelOf(checkpointId: string): string {
  return `${PAIRING_PREFIX}${checkpointId}`;
}

/** Options of {@link RewindCheckpointer}. */
export interface RewindCheckpointerOptions {
  /** The saver that keeps the graph's state (default: a new `MemorySaver`). */
  inner?: BaseCheckpointSaver;
  /**
   * Keep the files of the newest this many checkpoints (default: all). A run resumed or forked
   * from an older one is refused, since its files are no longer kept.
   */
  keepLast?: number;
}

/**
 * True for the config of a run: LangGraph adds its callbacks, signal and writer to it, while a
 * read of the state (`getState`, `getStateHistory`) passes the `configurable` part alone.
 */
function isRunConfig(config: RunnableConfig): boolean {
  return Object.keys(config).some((key) => key !== 'configurable');
}

/** The thread and namespace a config names. */
function addressOf(config: RunnableConfig): {
  threadId: string | undefined;
  namespace: string;
  checkpointId: string | undefined;
} {
  const configurable = config.configurable ?? {};
  return {
    threadId: typeof configurable.thread_id === 'string' ? configurable.thread_id : undefined,
    namespace: typeof configurable.checkpoint_ns === 'string' ? configurable.checkpoint_ns : '',
    checkpointId:
      typeof configurable.checkpoint_id === 'string' ? configurable.checkpoint_id : undefined,
  };
}

/**
 * A LangGraph checkpoint saver that pairs the graph's checkpoints with the workspace. Every
 * checkpoint of the root graph is saved by the inner saver and, beside it, the workspace's files
 * are checkpointed in the Rewind session under `lg-<checkpoint id>`. When a run continues from a
 * checkpoint other than the one the workspace was last paired with (a fork or a replay from the
 * past, `invoke(input, { configurable: { thread_id, checkpoint_id } })`, an `updateState` on a
 * past config, or another thread), the workspace is first rolled back to that checkpoint's files,
 * as an undoable rollback, before any node of the new branch runs. Reads (`getState`,
 * `getStateHistory`, `list`) never touch files.
 */
export class RewindCheckpointer extends BaseCheckpointSaver {
  readonly session: Session;
  readonly inner: BaseCheckpointSaver;
  readonly #keepLast: number | undefined;
  /** The LangGraph checkpoint the workspace's files were last paired with or restored to. */
  #current: string | undefined;
  /** Puts run one at a time: a restore and a pairing never interleave. */
  #queue: Promise<unknown> = Promise.resolve();

  constructor(session: Session, options: RewindCheckpointerOptions = {}) {
    const inner = options.inner ?? new MemorySaver();
    super(inner.serde);
    if (
      options.keepLast !== undefined &&
      (!Number.isInteger(options.keepLast) || options.keepLast < 1)
    ) {
      throw new RewindError(
        'INVALID_ARGUMENT',
        `keepLast must be a whole number of 1 or more, not ${options.keepLast}.`,
        { data: { keepLast: options.keepLast } },
      );
    }
    this.session = session;
    this.inner = inner;
    this.#keepLast = options.keepLast;
  }

  async getTuple(config: RunnableConfig): Promise<CheckpointTuple | undefined> {
    const tuple = await this.inner.getTuple(config);
    // A run from a past checkpoint loads it before any node runs: that is when its files must
    // be put back. A read (getState, getStateHistory) passes only the configurable part; a run
    // on a thread's latest checkpoint names none, and leaves the files as they are.
    const { namespace, checkpointId } = addressOf(config);
    if (tuple && checkpointId !== undefined && namespace === '' && isRunConfig(config)) {
      const id = tuple.checkpoint.id;
      await this.#enqueue(async () => {
        if (id !== (await this.#currentPairing())) await this.#restore(id);
      });
    }
    return tuple;
  }

  list(config: RunnableConfig, options?: CheckpointListOptions): AsyncGenerator<CheckpointTuple> {
    return this.inner.list(config, options);
  }

  putWrites(config: RunnableConfig, writes: PendingWrite[], taskId: string, taskPath?: string) {
    return this.inner.putWrites(config, writes, taskId, taskPath);
  }

  deleteThread(threadId: string): Promise<void> {
    return this.inner.deleteThread(threadId);
  }

  override getNextVersion(current: number | undefined): number {
    return this.inner.getNextVersion(current);
  }

  put(
    config: RunnableConfig,
    checkpoint: Checkpoint,
    metadata: CheckpointMetadata,
    newVersions: ChannelVersions,
  ): Promise<RunnableConfig> {
    return this.#enqueue(() => this.#put(config, checkpoint, metadata, newVersions));
  }

  /** Runs `work` after the restores and pairings asked for before it. */
  #enqueue<T>(work: () => Promise<T>): Promise<T> {
    const run = this.#queue.then(work);
    this.#queue = run.catch(() => {});
    return run;
  }

  async #put(
    config: RunnableConfig,
    checkpoint: Checkpoint,
    metadata: CheckpointMetadata,
    newVersions: ChannelVersions,
  ): Promise<RunnableConfig> {
    const { namespace, checkpointId: parent } = addressOf(config);
    // Subgraphs checkpoint in their own namespaces, within a step of the root graph.
    const isRoot = namespace === '';
    // updateState on a past checkpoint: the new branch starts from that checkpoint's files.
    if (
      isRoot &&
      metadata.source === 'update' &&
      parent !== undefined &&
      parent !== (await this.#currentPairing())
    ) {
      await this.#restore(parent);
    }
    const saved = await this.inner.put(config, checkpoint, metadata, newVersions);
    if (isRoot) {
      await this.session.checkpoint(pairingLabelOf(checkpoint.id));
      this.#current = checkpoint.id;
      if (this.#keepLast !== undefined) {
        await this.session.prune({ keepLast: this.#keepLast, labelPrefix: PAIRING_PREFIX });
      }
    }
    return saved;
  }

  /** The checkpoint the workspace was last paired with: this process's, else the session's newest pairing. */
  async #currentPairing(): Promise<string | undefined> {
    if (this.#current !== undefined) return this.#current;
    const pairings = (await this.session.checkpoints()).filter((checkpoint) =>
      checkpoint.label.startsWith(PAIRING_PREFIX),
    );
    return pairings.at(-1)?.label.slice(PAIRING_PREFIX.length);
  }

  /**
   * Puts the workspace at the files paired with `checkpointId`, as an undoable rollback. Throws
   * `CHECKPOINT_NOT_FOUND` when they are not kept: the run cannot go on from there with its files.
   */
  async #restore(checkpointId: string): Promise<void> {
    try {
      await this.session.rollback(pairingLabelOf(checkpointId), { scope: 'files' });
    } catch (error) {
      if (!isRewindError(error, 'CHECKPOINT_NOT_FOUND')) throw error;
      throw new RewindError(
        'CHECKPOINT_NOT_FOUND',
        `The files of LangGraph checkpoint ${checkpointId} are not kept (it is older than keepLast, or was saved without Rewind), so a run cannot go on from it with its files. Go on from a newer checkpoint, or raise keepLast.`,
        { data: { label: pairingLabelOf(checkpointId) }, cause: error },
      );
    }
    this.#current = checkpointId;
  }
}

/** Options of {@link rewindToolNode}. */
export interface RewindToolNodeOptions {
  /** Tools that only read: they run as they are, with no checkpoint and no rollback. */
  readOnly?: readonly string[];
  /** The node's name (default `tools`). */
  name?: string;
}

/**
 * A `ToolNode` whose tools are journaled: each call of a tool that is not read-only runs one at
 * a time through `session.tool` (an automatic checkpoint first when the session's policy asks for
 * it; a failure answered with `ERROR: ...` and, under the session's `autoRollback` policy, a
 * rollback the model is told about). A halt (`HaltError`) is not turned into a tool message: it
 * leaves the graph, and `invoke` rejects with it.
 */
export function rewindToolNode(
  session: Session,
  tools: readonly StructuredToolInterface[],
  options: RewindToolNodeOptions = {},
): ToolNode {
  const readOnly = new Set(options.readOnly ?? []);
  const journaled = tools.map((original) => {
    const run = (input: unknown, config: RunnableConfig | undefined) =>
      original.invoke(input as never, config);
    const call = readOnly.has(original.name)
      ? run
      : session.tool(run, {
          name: original.name,
          // The node's input is the same object for the calls of one AI message: its step.
          step: (_input, config) => stepOf(config),
        });
    return tool(async (input: unknown, config: RunnableConfig) => call(input, config), {
      name: original.name,
      description: original.description,
      schema: original.schema as never,
    });
  });
  // Failures come back as results already; what is thrown (a halt) must leave the graph.
  return new RewindToolNode(session, readOnly, journaled, {
    name: options.name ?? 'tools',
    handleToolErrors: false,
  });
}

function stepOf(config: RunnableConfig | undefined): object | undefined {
  const state = (config as { state?: unknown } | undefined)?.state;
  return typeof state === 'object' && state !== null ? state : undefined;
}

/**
 * A `ToolNode` that keeps the graph's messages true after an automatic rollback in one of its
 * calls: the graph's state is LangGraph's, and is not rolled back, so the result of a sibling
 * call that ran before the rollback (and whose changes it undid) says so instead of claiming
 * its effect.
 */
class RewindToolNode extends ToolNode {
  readonly #session: Session;
  readonly #readOnly: ReadonlySet<string>;

  constructor(
    session: Session,
    readOnly: ReadonlySet<string>,
    tools: StructuredToolInterface[],
    options: { name: string; handleToolErrors: boolean },
  ) {
    super(tools, options);
    this.#session = session;
    this.#readOnly = readOnly;
  }

  protected override async run(input: unknown, config: LangGraphRunnableConfig): Promise<unknown> {
    const before = this.#session.lastAutoRollback;
    const output = await super.run(input, config);
    const rolled = this.#session.lastAutoRollback;
    if (rolled === undefined || rolled === before) return output;
    const messages = Array.isArray(output)
      ? output
      : (output as { messages?: unknown } | undefined)?.messages;
    if (!Array.isArray(messages)) return output;
    for (const message of messages) {
      if (!(message instanceof ToolMessage) || this.#readOnly.has(message.name ?? '')) continue;
      const content = typeof message.content === 'string' ? message.content : '';
      if (content.startsWith('ERROR: ')) continue;
      message.content = `ERROR: this call ran, but another call made in the same step failed and the workspace's files were rolled back to checkpoint "${rolled.to}", which undid its changes; call it again if it is still needed. It had answered: ${content}`;
      message.status = 'error';
    }
    return output;
  }
}
