// Checking a history against its provider's rules, in time linear in its calls and results.
import type { Adapter, Call, Format, Message } from './format-adapter.js';
import { adapterOf, checkIsList } from './formats.js';

/** One rule of the provider that a history breaks. */
export interface ConversationProblem {
  /** The index of the message at fault. */
  index: number;
  message: string;
}

/** What {@link validate} found. */
export interface ValidationReport {
  isValid: boolean;
  problems: ConversationProblem[];
}

/** The calls of a turn waiting for their results. */
interface PendingCalls {
  /** Takes the first waiting call with `key`; false when none waits. */
  take(key: string): boolean;
  /** The calls not taken, in order. */
  remaining(): Call[];
}

/**
 * Calls waiting for results that take them by key, each take in constant time: a turn may hold
 * thousands of parallel calls, and a search of the list per result would be quadratic.
 */
function pendingCalls(calls: readonly Call[], keyOf: (call: Call) => string): PendingCalls {
  const queues = new Map<string, { indexes: number[]; next: number }>();
  calls.forEach((call, index) => {
    const key = keyOf(call);
    const queue = queues.get(key);
    if (queue) queue.indexes.push(index);
    else queues.set(key, { indexes: [index], next: 0 });
  });
  const taken = new Set<number>();
  return {
    take: (key) => {
      const queue = queues.get(key);
      const index = queue?.indexes[queue.next];
      if (queue === undefined || index === undefined) return false;
      queue.next += 1;
      taken.add(index);
      return true;
    },
    remaining: () => calls.filter((_call, index) => !taken.has(index)),
  };
}

/** A call or result by id; for one without an id (Gemini), by name. */
const idOrName = (item: { id: string | undefined; name: string | undefined }): string =>
  item.id !== undefined ? `id:${item.id}` : `name:${item.name}`;

/** A call or result by id alone, an absent id being one more. */
const idOnly = (item: { id: string | undefined }): string =>
  item.id !== undefined ? `id:${item.id}` : 'none';

/**
 * Checks a history against its provider's rules: only roles the provider accepts; every tool
 * call answered, where the provider requires (the tool messages right after it for OpenAI Chat,
 * the AI SDK and LangChain; the start of the very next user turn for Anthropic and Gemini,
 * with as many Gemini responses as calls; any later item for OpenAI Responses); no result
 * without its call; no call id used twice.
 */
export function validate(messages: readonly unknown[], format: Format): ValidationReport {
  const adapter = adapterOf(format);
  checkIsList(messages, 'CONVERSATION_FORMAT_MISMATCH');
  const problems: ConversationProblem[] = [];
  const list = messages as Message[];
  const seenIds = new Set<string>();
  list.forEach((message, index) => {
    if (!adapter.isMessage(message)) {
      problems.push({
        index,
        message: `message ${index} is not ${/^[aeiou]/.test(format) ? 'an' : 'a'} ${format} message`,
      });
      return;
    }
    if (!adapter.roles.includes(adapter.roleOf(message))) {
      problems.push({
        index,
        message: `role "${adapter.roleOf(message)}" is not accepted by ${format}`,
      });
    }
    for (const call of adapter.callsOf(message)) {
      if (call.id === undefined) continue;
      if (seenIds.has(call.id))
        problems.push({ index, message: `tool call id ${call.id} is used twice` });
      seenIds.add(call.id);
    }
  });
  if (problems.length > 0) return { isValid: false, problems };
  if (adapter.placement === 'items') validateItems(adapter, list, problems);
  else if (adapter.placement === 'tool-messages') validateToolMessages(adapter, list, problems);
  else validateNextTurn(adapter, list, problems);
  return { isValid: problems.length === 0, problems };
}

function validateItems(
  adapter: Adapter,
  list: readonly Message[],
  problems: ConversationProblem[],
): void {
  const open = new Set<string>();
  const callAt = new Map<string, number>();
  list.forEach((message, index) => {
    for (const call of adapter.callsOf(message)) {
      open.add(String(call.id));
      callAt.set(String(call.id), index);
    }
    for (const result of adapter.resultsOf(message)) {
      if (!open.has(String(result.id))) {
        problems.push({
          index,
          message: `No tool call found for function call output with call_id ${result.id}.`,
        });
      }
      open.delete(String(result.id));
    }
  });
  for (const id of open) {
    problems.push({
      index: callAt.get(id) ?? 0,
      message: `No tool output found for function call ${id}.`,
    });
  }
}

function validateToolMessages(
  adapter: Adapter,
  list: readonly Message[],
  problems: ConversationProblem[],
): void {
  let expected = pendingCalls([], idOnly);
  let expectedFrom = -1;
  const close = (index: number): void => {
    const remaining = expected.remaining();
    if (remaining.length > 0) {
      problems.push({
        index: expectedFrom,
        message: `An assistant message with tool calls must be followed by tool messages responding to each call. These ids had none: ${remaining.map((call) => call.id).join(', ')}.`,
      });
    }
    expected = pendingCalls([], idOnly);
    void index;
  };
  list.forEach((message, index) => {
    if (adapter.isOnlyResults(message)) {
      for (const result of adapter.resultsOf(message)) {
        if (!expected.take(idOnly(result))) {
          problems.push({
            index,
            message: `A tool result for ${result.id} does not follow an assistant message with that call.`,
          });
        }
      }
      return;
    }
    close(index);
    expected = pendingCalls(adapter.callsOf(message), idOnly);
    expectedFrom = index;
  });
  close(list.length);
}

/**
 * True when two messages hold the same values, lists compared item by item: what reordering a
 * message's parts changes, compared without writing the parts out (they may nest too deep).
 */
function isSameMessage(a: Message, b: Message): boolean {
  const keys = Object.keys(a);
  if (keys.length !== Object.keys(b).length) return false;
  return keys.every((key) => {
    const left = a[key];
    const right = b[key];
    if (left === right) return true;
    return (
      Array.isArray(left) &&
      Array.isArray(right) &&
      left.length === right.length &&
      left.every((item, index) => item === right[index])
    );
  });
}

function validateNextTurn(
  adapter: Adapter,
  list: readonly Message[],
  problems: ConversationProblem[],
): void {
  list.forEach((message, index) => {
    const calls = adapter.callsOf(message);
    const previous = index > 0 ? adapter.callsOf(list[index - 1] as Message) : [];
    const results = adapter.resultsOf(message);
    // Results answer only the calls of the turn right before them.
    const pending = pendingCalls(previous, idOrName);
    for (const result of results) {
      if (!pending.take(idOrName(result))) {
        problems.push({
          index,
          message: `A tool result for ${result.id ?? result.name} does not answer a call of the turn before it.`,
        });
      }
    }
    const remaining = pending.remaining();
    if (previous.length > 0 && remaining.length > 0) {
      problems.push({
        index: index - 1,
        message: `Tool call ids were found without results immediately after: ${remaining.map((call) => call.id ?? call.name).join(', ')}. Each call must have its result in the next message.`,
      });
    }
    if (results.length > 0) {
      const parts = adapter.resultParts(message);
      if (!isSameMessage(adapter.withResultsFirst(message, parts), message)) {
        problems.push({
          index,
          message: 'Tool results must come first in their message, before any other content.',
        });
      }
    }
    if (calls.length > 0 && index === list.length - 1) {
      problems.push({
        index,
        message: `Tool call ids were found without results immediately after: ${calls.map((call) => call.id ?? call.name).join(', ')}.`,
      });
    }
  });
}
