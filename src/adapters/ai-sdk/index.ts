/**
 * `rewind-agent/ai-sdk`: Rewind for the Vercel AI SDK (`ai` 6). {@link rewindTools} journals
 * the tools an agent calls (a checkpoint before each call that can change something, paired with
 * the conversation in flight; the session's rollback policy when one fails, the model told in the
 * tool's result), and {@link rewindTurn} runs one turn of `generateText` or `streamText` with a
 * checkpoint of the `ModelMessage[]` before it, stops the loop when a rollback or a halt happened,
 * and hands back the history to go on with. Built on the session's public API only.
 */
import type { ModelMessage, Tool, ToolExecutionOptions, ToolSet } from 'ai';
import { type AutoRollbackReport, HaltError, type Session } from '../../index.js';

/** What a session's adapted tools and turns share: the halt a tool raised in the running turn. */
interface TurnState {
  halt: HaltError | undefined;
  /** The automatic rollback that happened in the running turn, if one did. */
  rolledBack: AutoRollbackReport | undefined;
}

const states = new WeakMap<Session, TurnState>();

/** What the turn's tools left in `state`, which is cleared for the next turn. */
function takeOutcome(state: TurnState): TurnState {
  const outcome = { halt: state.halt, rolledBack: state.rolledBack };
  state.halt = undefined;
  state.rolledBack = undefined;
  return outcome;
}

function stateOf(session: Session): TurnState {
  let state = states.get(session);
  if (!state) {
    state = { halt: undefined, rolledBack: undefined };
    states.set(session, state);
  }
  return state;
}

/** Options of {@link rewindTools}. */
export interface RewindToolsOptions<TOOLS extends ToolSet> {
  /**
   * Tools that only read: they run as they are, with no checkpoint before them and no rollback
   * when they fail (a failed read undoes nothing).
   */
  readOnly?: readonly (keyof TOOLS & string)[];
  /**
   * Checkpoint before each call of a tool that is not read-only (default true), keeping the last
   * `keepLast` of those automatic checkpoints (default: all; `rewind prune` trims them later).
   * Each one holds the conversation as the tool saw it. False leaves the session's own policy.
   */
  checkpoint?: boolean;
  keepLast?: number;
}

/**
 * The same tools, journaled: each call of a tool that can change something runs one at a time
 * after an automatic checkpoint that pairs the workspace with the conversation the model sent
 * (`ai-sdk` format); a call that fails is answered with `ERROR: ...` and, under the session's
 * `autoRollback` policy, a `[REWIND]` notice saying what was rolled back, so the model knows.
 * A halt (an escalation that says stop, a `HaltError` a tool throws) is never handed to the model:
 * the tool call fails, every later call in the turn is refused, and {@link rewindTurn} stops the
 * loop and throws it to the caller. Tools without `execute` are returned unchanged.
 */
export function rewindTools<TOOLS extends ToolSet>(
  session: Session,
  tools: TOOLS,
  options: RewindToolsOptions<TOOLS> = {},
): TOOLS {
  if (options.checkpoint !== false) {
    session.autoCheckpoint({
      ...(options.keepLast !== undefined && { keepLast: options.keepLast }),
    });
  }
  const readOnly = new Set<string>(options.readOnly ?? []);
  const state = stateOf(session);
  const wrapped: Record<string, Tool> = {};
  // The calls of one model step share its `messages`: once one rolled back, the rest are refused.
  const rolledBackSteps = new WeakSet<object>();
  const entering = new WeakMap<object, Promise<void>>();
  for (const [name, tool] of Object.entries(tools)) {
    const execute = tool.execute as
      | ((input: unknown, call: ToolExecutionOptions) => unknown)
      | undefined;
    if (!execute) {
      wrapped[name] = tool;
      continue;
    }
    // A streaming tool (an async generator) runs whole inside the journaled call; its values
    // reach `onValue` as they come, and its last one is the call's result.
    const run = async (
      input: unknown,
      call: ToolExecutionOptions,
      onValue?: (value: unknown) => void,
    ): Promise<unknown> => {
      if (state.halt) throw state.halt;
      const result = await execute(input, call);
      if (!isAsyncIterable(result)) return result;
      let last: unknown;
      for await (const value of result) {
        last = value;
        onValue?.(value);
      }
      return last;
    };
    const journaled = readOnly.has(name)
      ? run
      : session.tool(run, { name, step: (_input, call) => call.messages });
    const call = async (
      input: unknown,
      options: ToolExecutionOptions,
      onValue?: (value: unknown) => void,
    ): Promise<unknown> => {
      if (state.halt) throw state.halt;
      // The calls of a step enter the session's queue in the order the model gave them (the SDK
      // starts them in that order): each one after the one before it is queued.
      const step = options.messages;
      const entered = (entering.get(step) ?? Promise.resolve()).then(async () => {
        // The checkpoint before the call holds the conversation the model acted on (not once a
        // sibling rolled it back: the restored one stays).
        if (!readOnly.has(name) && step.length > 0 && !rolledBackSteps.has(step)) {
          await session.syncConversation(step, { format: 'ai-sdk' });
        }
        const before = session.lastAutoRollback;
        return { before, running: journaled(input, options, onValue) };
      });
      entering.set(
        step,
        entered.then(
          () => {},
          () => {},
        ),
      );
      const { before, running } = await entered;
      try {
        return await running;
      } catch (error) {
        if (error instanceof HaltError) state.halt = error;
        throw error;
      } finally {
        // A rollback in the call (its failure, or a check inside it): the turn starts over from it.
        if (session.lastAutoRollback !== before) {
          state.rolledBack = session.lastAutoRollback;
          rolledBackSteps.add(step);
        }
      }
    };
    wrapped[name] = {
      ...tool,
      execute: isAsyncGeneratorFunction(execute)
        ? (input: unknown, options: ToolExecutionOptions) => streamed(input, options, call)
        : call,
    } as Tool;
  }
  return wrapped as TOOLS;
}

function isAsyncIterable(value: unknown): value is AsyncIterable<unknown> {
  return (
    typeof value === 'object' &&
    value !== null &&
    typeof (value as { [Symbol.asyncIterator]?: unknown })[Symbol.asyncIterator] === 'function'
  );
}

function isAsyncGeneratorFunction(f: unknown): boolean {
  return Object.prototype.toString.call(f) === '[object AsyncGeneratorFunction]';
}

/**
 * A streaming tool's call, as the SDK wants it: an async generator of its values as they come
 * (the SDK's preliminary results), whose last is the result; an error ends it.
 */
async function* streamed(
  input: unknown,
  options: ToolExecutionOptions,
  call: (
    input: unknown,
    options: ToolExecutionOptions,
    onValue: (v: unknown) => void,
  ) => Promise<unknown>,
): AsyncGenerator<unknown> {
  const values: unknown[] = [];
  let wake: () => void = () => {};
  let finished = false;
  let yielded = 0;
  const done = call(input, options, (value) => {
    values.push(value);
    wake();
  }).finally(() => {
    finished = true;
    wake();
  });
  while (true) {
    while (values.length > 0) {
      yielded += 1;
      yield values.shift();
    }
    if (finished) break;
    await new Promise<void>((resolve) => {
      wake = resolve;
      if (values.length > 0 || finished) resolve();
    });
  }
  const result = await done;
  // The call ended without its values (refused, failed into an `ERROR:` string): that is the result.
  if (yielded === 0 || typeof result === 'string') yield result;
}

/** What {@link rewindTurn} hands the function that runs the turn. */
export interface TurnControls {
  /** The history to give the model: the one passed in. */
  messages: ModelMessage[];
  /**
   * Ends the loop once a step rolled back or halted: add it to the turn's `stopWhen` (a
   * `StopCondition` for any tool set).
   */
  stopWhen: () => boolean;
}

/** What {@link rewindTurn} did. */
export interface TurnResult<RESULT> {
  /**
   * The history to go on with: the one given and the turn's response messages; after a rollback,
   * the conversation it restored instead (the checkpoint's, repaired, with the person's request
   * and a note for the model at its end).
   */
  messages: ModelMessage[];
  /** The checkpoint taken before the turn. */
  checkpoint: string;
  /** The automatic rollback that ended the turn early, if one did: run the next turn from `messages`. */
  rolledBack: AutoRollbackReport | undefined;
  /** What the function returned. */
  result: RESULT;
}

/** Options of {@link rewindTurn}. */
export interface TurnOptions {
  /** The checkpoint's label (default `turn-<n>-<ms since epoch>`). */
  label?: string;
}

let turns = 0;

/**
 * Runs one turn of an agent: checkpoints the workspace with `messages` (`ai-sdk` format) first,
 * then calls `run` with a `stopWhen` that ends the loop after a step in which a tool rolled back
 * or halted. Resolves with the history to go on with; throws the `HaltError` a tool raised (after
 * the loop ended), and whatever `run` throws.
 *
 * ```ts
 * const turn = await rewindTurn(session, messages, ({ messages, stopWhen }) =>
 *   generateText({ model, tools, messages, stopWhen: [stepCountIs(8), stopWhen] }));
 * messages = turn.messages;
 * ```
 */
export async function rewindTurn<RESULT extends { response: { messages: ModelMessage[] } }>(
  session: Session,
  messages: ModelMessage[],
  run: (controls: TurnControls) => Promise<RESULT>,
  options: TurnOptions = {},
): Promise<TurnResult<RESULT>> {
  const state = stateOf(session);
  takeOutcome(state);
  turns += 1;
  const label = options.label ?? `turn-${turns}-${Date.now()}`;
  await session.checkpoint(label, { messages, format: 'ai-sdk' });
  const stopWhen = () => state.halt !== undefined || state.rolledBack !== undefined;
  const result = await run({ messages, stopWhen });
  const { halt, rolledBack } = takeOutcome(state);
  if (halt) throw halt;
  if (rolledBack) {
    return {
      messages: (rolledBack.messages as ModelMessage[] | undefined) ?? messages,
      checkpoint: label,
      rolledBack,
      result,
    };
  }
  const history = [...messages, ...result.response.messages];
  await session.syncConversation(history, { format: 'ai-sdk' });
  return { messages: history, checkpoint: label, rolledBack: undefined, result };
}
