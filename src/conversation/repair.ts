import type { Adapter, Call, Format, Message, Result } from './format-adapter.js';
import { adapterOf, checkFormat } from './formats.js';
import type { NoteOf, SyntheticResultOf } from './types.js';

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

/** What {@link repair} does with a tool call that has no result. */
export type RepairStrategy =
  /** Answer it with a synthetic error result: keeps signed reasoning exactly as it was (default). */
  | 'answer'
  /** Remove it; a turn whose signed reasoning went with it is removed whole. */
  | 'drop';

/** Options of {@link repair}. */
export interface RepairOptions {
  strategy?: RepairStrategy;
  /** The text of synthetic results. Default: the call was rolled back and did not take effect. */
  resultText?: string;
}

/** What {@link repair} returned and changed. */
export interface RepairResult {
  messages: Message[];
  /** Calls answered with a synthetic error result (`answer`). */
  answered: Call[];
  /** Calls removed (`drop`), with those that went with a removed turn. */
  dropped: Call[];
  /** Results removed because no call before them has their id. */
  droppedResults: Result[];
  /** Results moved to where the provider requires them (next to their call). */
  movedResults: number;
}

/** The text of a synthetic result unless the caller gives one. */
export const DEFAULT_RESULT_TEXT =
  'Rewind: this tool call was rolled back with the workspace before it completed, so it had no effect. Call it again if it is still needed.';

interface Located<T> {
  message: number;
  /** Its position among the calls (or results) of its message. */
  position: number;
  item: T;
}

function enumerate<T>(
  messages: readonly Message[],
  of: (message: Message, index: number) => T[],
): Located<T>[] {
  const found: Located<T>[] = [];
  messages.forEach((message, index) => {
    of(message, index).forEach((item, position) => {
      found.push({ message: index, position, item });
    });
  });
  return found;
}

const keyOf = (located: Located<unknown>): string => `${located.message}:${located.position}`;

/**
 * Pairs each call with the first result after it that answers it: by id, or, for a Gemini call
 * without an id, by name in the very next turn.
 */
function matchResults(
  adapter: Adapter,
  calls: readonly Located<Call>[],
  results: readonly Located<Result>[],
): Map<string, Located<Result>> {
  const claimed = new Set<string>();
  const matches = new Map<string, Located<Result>>();
  for (const call of calls) {
    const found = results.find((result) => {
      if (claimed.has(keyOf(result)) || result.message <= call.message) return false;
      if (call.item.id !== undefined) return result.item.id === call.item.id;
      return (
        result.item.id === undefined &&
        result.item.name === call.item.name &&
        result.message === call.message + 1 &&
        adapter.placement === 'next-user-turn'
      );
    });
    if (found) {
      claimed.add(keyOf(found));
      matches.set(keyOf(call), found);
    }
  }
  return matches;
}

/**
 * Makes a history valid for its provider: every tool call has its result and every result its
 * call (matched by id; parallel calls included), results sit where the provider requires them
 * (the tool messages right after the call, or the start of the next user turn), and results
 * whose call is not in the history are removed. A call without a result is answered with a
 * synthetic error result (`answer`, the default, which keeps signed reasoning exactly as it was)
 * or removed (`drop`). Never invents an id; never changes a complete call/result pair (a result
 * may move, unchanged, next to its call). A valid history comes back as it was.
 *
 * Throws `CONVERSATION_FORMAT_MISMATCH` when the messages are not in `format`.
 */
export function repair(
  messages: readonly unknown[],
  format: Format,
  options: RepairOptions = {},
): RepairResult {
  const adapter = adapterOf(format);
  const list = checkFormat(messages, format);
  const report: RepairResult = {
    messages: [...list],
    answered: [],
    dropped: [],
    droppedResults: [],
    movedResults: 0,
  };
  if (validate(list, format).isValid) return report;
  const text = options.resultText ?? DEFAULT_RESULT_TEXT;
  const calls = enumerate(list, (message) => adapter.callsOf(message));
  const results = enumerate(list, (message) => adapter.resultsOf(message));
  let matches = matchResults(adapter, calls, results);
  if (adapter.placement === 'items')
    return repairItems(
      adapter,
      list,
      calls,
      matches,
      results,
      text,
      options.strategy ?? 'answer',
      report,
    );

  // With `drop`, remove the unanswered calls first; a turn that goes whole takes its answered
  // calls with it, and their results become orphans.
  let working = list;
  if (options.strategy === 'drop') {
    const unanswered = new Set(calls.filter((call) => !matches.has(keyOf(call))).map(keyOf));
    working = [];
    list.forEach((message, index) => {
      let position = -1;
      const kept = adapter.withoutCalls(message, () => {
        position += 1;
        return unanswered.has(`${index}:${position}`);
      });
      const before = adapter.callsOf(message);
      if (kept === undefined) {
        report.dropped.push(...before);
        working.push({ __removed: true });
      } else {
        const after = adapter.callsOf(kept);
        report.dropped.push(
          ...before.filter(
            (call) => !after.some((other) => other.id === call.id && other.name === call.name),
          ),
        );
        working.push(kept);
      }
    });
    const live = (index: number): boolean => working[index]?.__removed !== true;
    const remaining = enumerate(working, (message, index) =>
      live(index) ? adapter.callsOf(message) : [],
    );
    const remainingResults = enumerate(working, (message, index) =>
      live(index) ? adapter.resultsOf(message) : [],
    );
    matches = matchResults(adapter, remaining, remainingResults);
    return assemble(adapter, working, remaining, remainingResults, matches, text, report, false);
  }
  return assemble(adapter, working, calls, results, matches, text, report, true);
}

function assemble(
  adapter: Adapter,
  list: readonly Message[],
  calls: readonly Located<Call>[],
  results: readonly Located<Result>[],
  matches: Map<string, Located<Result>>,
  text: string,
  report: RepairResult,
  isAnswering: boolean,
): RepairResult {
  const matchedResults = new Set([...matches.values()].map(keyOf));
  for (const result of results) {
    if (!matchedResults.has(keyOf(result))) report.droppedResults.push(result.item);
  }
  // Every result leaves its message; the matched ones are put back next to their calls.
  const partsByKey = new Map<string, unknown>();
  const stripped: (Message | undefined)[] = list.map((message, index) => {
    if (message.__removed === true) return undefined;
    const parts = adapter.resultParts(message);
    parts.forEach((part, position) => {
      partsByKey.set(`${index}:${position}`, part);
    });
    return parts.length > 0 ? adapter.withoutResults(message, () => true) : message;
  });
  const out: Message[] = [];
  const consumed = new Set<number>();
  for (let index = 0; index < list.length; index++) {
    if (consumed.has(index)) continue;
    const message = stripped[index];
    if (message === undefined) continue;
    out.push(message);
    const own = calls.filter((call) => call.message === index);
    if (own.length === 0) continue;
    const answered = own
      .map((call) => ({ call, result: matches.get(keyOf(call)) }))
      .filter(
        (pair): pair is { call: Located<Call>; result: Located<Result> } =>
          pair.result !== undefined,
      )
      .sort((a, b) => a.result.message - b.result.message || a.result.position - b.result.position);
    const parts: unknown[] = answered.map(({ result }) => {
      const isInPlace =
        result.message === index + 1 ||
        (adapter.placement !== 'next-user-turn' &&
          isRightAfter(list, index, result.message, adapter));
      if (!isInPlace) report.movedResults += 1;
      return partsByKey.get(keyOf(result));
    });
    if (isAnswering) {
      for (const call of own) {
        if (matches.has(keyOf(call))) continue;
        report.answered.push(call.item);
        parts.push(adapter.syntheticResult(call.item, text, list[index]));
      }
    }
    if (parts.length === 0) continue;
    if (adapter.placement === 'next-user-turn') {
      const next = stripped[index + 1];
      const nextOriginal = list[index + 1];
      if (
        next !== undefined &&
        nextOriginal !== undefined &&
        adapter.roleOf(next) !== adapter.roleOf(list[index] as Message) &&
        adapter.callsOf(next).length === 0
      ) {
        out.push(adapter.withResultsFirst(next, parts));
        consumed.add(index + 1);
      } else if (
        next === undefined &&
        nextOriginal !== undefined &&
        adapter.resultParts(nextOriginal).length > 0
      ) {
        out.push(...adapter.resultsMessage(parts, nextOriginal));
        consumed.add(index + 1);
      } else {
        out.push(...adapter.resultsMessage(parts, undefined));
      }
    } else {
      const like = answered
        .map(({ result }) => list[result.message])
        .find((candidate) => candidate !== undefined);
      out.push(...adapter.resultsMessage(parts, like));
    }
  }
  report.messages = out;
  return report;
}

/**
 * Items (OpenAI Responses): outputs may sit anywhere after their call, so matched outputs stay
 * where they are; orphan outputs go; a call without an output is answered right after the run
 * of calls it belongs to (or removed, with `drop`).
 */
function repairItems(
  adapter: Adapter,
  list: readonly Message[],
  calls: readonly Located<Call>[],
  matches: Map<string, Located<Result>>,
  results: readonly Located<Result>[],
  text: string,
  strategy: RepairStrategy,
  report: RepairResult,
): RepairResult {
  const matched = new Set([...matches.values()].map((result) => result.message));
  const unanswered = new Map(
    calls.filter((call) => !matches.has(keyOf(call))).map((call) => [call.message, call]),
  );
  for (const result of results) {
    if (!matched.has(result.message)) report.droppedResults.push(result.item);
  }
  const out: Message[] = [];
  let pending: Message[] = [];
  list.forEach((item, index) => {
    const isCall = adapter.callsOf(item).length > 0;
    if (!isCall && pending.length > 0) {
      out.push(...pending);
      pending = [];
    }
    if (adapter.resultsOf(item).length > 0 && !matched.has(index)) return;
    const call = unanswered.get(index);
    if (call && strategy === 'drop') {
      report.dropped.push(call.item);
      return;
    }
    out.push(item);
    if (call) {
      report.answered.push(call.item);
      pending.push(adapter.syntheticResult(call.item, text, item) as Message);
    }
  });
  out.push(...pending);
  report.messages = out;
  return report;
}

/** True when message `at` is among the result messages that directly follow message `call`. */
function isRightAfter(
  list: readonly Message[],
  call: number,
  at: number,
  adapter: Adapter,
): boolean {
  for (let index = call + 1; index < at; index++) {
    if (!adapter.isOnlyResults(list[index] as Message)) return false;
  }
  return at > call;
}

/**
 * Checks a history against its provider's rules: only roles the provider accepts; every tool
 * call answered, where the provider requires (the tool messages right after it for OpenAI Chat,
 * the AI SDK and LangChain; the start of the very next user turn for Anthropic and Gemini,
 * with as many Gemini responses as calls; any later item for OpenAI Responses); no result
 * without its call; no call id used twice.
 */
export function validate(messages: readonly unknown[], format: Format): ValidationReport {
  const adapter = adapterOf(format);
  const problems: ConversationProblem[] = [];
  const list = messages as Message[];
  const seenIds = new Set<string>();
  list.forEach((message, index) => {
    if (!adapter.isMessage(message)) {
      problems.push({ index, message: `message ${index} is not a ${format} message` });
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
  let expected: Call[] = [];
  let expectedFrom = -1;
  const close = (index: number): void => {
    if (expected.length > 0) {
      problems.push({
        index: expectedFrom,
        message: `An assistant message with tool calls must be followed by tool messages responding to each call. These ids had none: ${expected.map((call) => call.id).join(', ')}.`,
      });
    }
    expected = [];
    void index;
  };
  list.forEach((message, index) => {
    if (adapter.isOnlyResults(message)) {
      for (const result of adapter.resultsOf(message)) {
        const position = expected.findIndex((call) => call.id === result.id);
        if (position < 0) {
          problems.push({
            index,
            message: `A tool result for ${result.id} does not follow an assistant message with that call.`,
          });
        } else {
          expected.splice(position, 1);
        }
      }
      return;
    }
    close(index);
    expected = [...adapter.callsOf(message)];
    expectedFrom = index;
  });
  close(list.length);
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
    const remaining = [...previous];
    for (const result of results) {
      const position = remaining.findIndex((call) =>
        call.id !== undefined
          ? call.id === result.id
          : result.id === undefined && call.name === result.name,
      );
      if (position < 0) {
        problems.push({
          index,
          message: `A tool result for ${result.id ?? result.name} does not answer a call of the turn before it.`,
        });
      } else {
        remaining.splice(position, 1);
      }
    }
    if (previous.length > 0 && remaining.length > 0) {
      problems.push({
        index: index - 1,
        message: `Tool call ids were found without results immediately after: ${remaining.map((call) => call.id ?? call.name).join(', ')}. Each call must have its result in the next message.`,
      });
    }
    if (results.length > 0) {
      const parts = adapter.resultParts(message);
      const firstOther = adapter.withResultsFirst(message, parts);
      if (JSON.stringify(firstOther) !== JSON.stringify(message)) {
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

/** Options of {@link resumeNote} and {@link withResumeNote}. */
export interface NoteOptions {
  /** What changed since the checkpoint, for the model (the first seed's `patch_notes`). */
  patchNote?: string;
}

function noteText(text: string, options: NoteOptions): string {
  return options.patchNote ? `${text} Patch applied since: ${options.patchNote}` : text;
}

/**
 * The note that tells the model it was rolled back, as a message its provider accepts after any
 * history: a system message (OpenAI Chat), a developer message (OpenAI Responses), or a user turn
 * (Anthropic, Gemini, the AI SDK and LangChain, whose providers reject a system message
 * mid-list). Use {@link withResumeNote} to add it to a history, merging it into a trailing user
 * turn where roles must alternate.
 */
export function resumeNote<F extends Format>(
  format: F,
  text: string,
  options: NoteOptions = {},
): NoteOf[F] {
  return adapterOf(format).note(noteText(text, options), undefined) as unknown as NoteOf[F];
}

/**
 * The result Rewind gives a call left without one: an error that says why (by default, that the
 * call was rolled back), with the call's own id (none if it had none), as its provider wants it.
 */
export function syntheticResult<F extends Format>(
  format: F,
  call: Call,
  text: string = DEFAULT_RESULT_TEXT,
): SyntheticResultOf[F] {
  return adapterOf(format).syntheticResult(call, text, undefined) as SyntheticResultOf[F];
}

/** The history with the resume note at its end: merged into a trailing user turn where possible. */
export function withResumeNote(
  messages: readonly Message[],
  format: Format,
  text: string,
  options: NoteOptions = {},
): Message[] {
  const adapter = adapterOf(format);
  const full = noteText(text, options);
  const last = messages.at(-1);
  if (last !== undefined && adapter.canHoldNote(last)) {
    return [...messages.slice(0, -1), adapter.withNote(last, full)];
  }
  return [...messages, adapter.note(full, messages[0])];
}
