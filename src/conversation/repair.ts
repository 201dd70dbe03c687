import {
  type Adapter,
  type Call,
  type Format,
  isObject,
  type Message,
  type Result,
} from './format-adapter.js';
import { adapterOf, checkFormat } from './formats.js';
import { storedMessageText } from './store.js';
import type { NoteOf, SyntheticResultOf } from './types.js';
import { validate } from './validate.js';

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

/** A call's id and name as one key (an absent id differs from every id). */
const identityOf = (call: Call): string => JSON.stringify([call.id ?? null, call.name]);

/**
 * Pairs each call with the first result after it that answers it: by id, or, for a Gemini call
 * without an id, by name in the very next turn. Linear in the calls and results: a long history
 * (or one a client made up, with thousands of calls sharing an id) never takes quadratic time.
 */
function matchResults(
  adapter: Adapter,
  calls: readonly Located<Call>[],
  results: readonly Located<Result>[],
): Map<string, Located<Result>> {
  // The results each call may take, in order; what a call skips no later call can take (calls
  // come in order, and each takes the first result it may), so one cursor per key suffices.
  const queues = new Map<string, { results: Located<Result>[]; next: number }>();
  const keyOfCall = (call: Located<Call>): string | undefined => {
    if (call.item.id !== undefined) return `id\0${call.item.id}`;
    if (adapter.placement !== 'next-user-turn') return undefined;
    return `name\0${call.message + 1}\0${call.item.name}`;
  };
  for (const result of results) {
    const key =
      result.item.id !== undefined
        ? `id\0${result.item.id}`
        : `name\0${result.message}\0${result.item.name}`;
    const queue = queues.get(key);
    if (queue) queue.results.push(result);
    else queues.set(key, { results: [result], next: 0 });
  }
  const matches = new Map<string, Located<Result>>();
  for (const call of calls) {
    const key = keyOfCall(call);
    const queue = key === undefined ? undefined : queues.get(key);
    if (!queue) continue;
    while (
      queue.next < queue.results.length &&
      (queue.results[queue.next] as Located<Result>).message <= call.message
    ) {
      queue.next += 1;
    }
    const found = queue.results[queue.next];
    if (found) {
      queue.next += 1;
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
        const after = new Set(adapter.callsOf(kept).map(identityOf));
        report.dropped.push(...before.filter((call) => !after.has(identityOf(call))));
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
  const callsByMessage = new Map<number, Located<Call>[]>();
  for (const call of calls) {
    const own = callsByMessage.get(call.message);
    if (own) own.push(call);
    else callsByMessage.set(call.message, [call]);
  }
  const out: Message[] = [];
  const consumed = new Set<number>();
  for (let index = 0; index < list.length; index++) {
    if (consumed.has(index)) continue;
    const message = stripped[index];
    if (message === undefined) continue;
    out.push(message);
    const own = callsByMessage.get(index) ?? [];
    if (own.length === 0) continue;
    const answered = own
      .map((call) => ({ call, result: matches.get(keyOf(call)) }))
      .filter(
        (pair): pair is { call: Located<Call>; result: Located<Result> } =>
          pair.result !== undefined,
      )
      .sort((a, b) => a.result.message - b.result.message || a.result.position - b.result.position);
    const end =
      adapter.placement === 'next-user-turn' ? index + 1 : endOfResults(list, index, adapter);
    const parts: unknown[] = answered.map(({ result }) => {
      const isInPlace =
        result.message === index + 1 || (result.message > index && result.message <= end);
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

/**
 * The index of the first message after message `call` that holds more than results (the length of
 * the list when there is none): results up to it directly follow the call.
 */
function endOfResults(list: readonly Message[], call: number, adapter: Adapter): number {
  let index = call + 1;
  while (index < list.length && adapter.isOnlyResults(list[index] as Message)) index += 1;
  return index;
}

/** How every note a rollback adds begins: what tells a note from what a person wrote. */
export const RESUME_NOTE_OPENING = 'Rewind: the workspace and this conversation were rolled back';

const isNoteText = (value: unknown): boolean =>
  typeof value === 'string' && value.startsWith(RESUME_NOTE_OPENING);

/**
 * The message without the resume notes a rollback put in it: the note parts merged into a user
 * turn are taken out; undefined when the message is a note and nothing else.
 */
function withoutNotes(message: Message): Message | undefined {
  if (!JSON.stringify(message).includes(RESUME_NOTE_OPENING)) return message;
  for (const key of ['content', 'parts']) {
    const parts = message[key];
    if (!Array.isArray(parts)) continue;
    const kept = parts.filter((part) => !(isObject(part) && isNoteText(part.text)));
    if (kept.length === parts.length) continue;
    return kept.length > 0 ? { ...message, [key]: kept } : undefined;
  }
  return undefined;
}

/**
 * The request a person made last in `current`, the conversation as it is now (the newest turn
 * they wrote, with no tool results in it, without the notes of earlier rollbacks), when
 * `restored`, an earlier state of it, does not hold it: what a rollback to that state keeps at its
 * end. Undefined when there is none, or `restored` holds it.
 */
export function requestToKeep(
  current: readonly Message[],
  restored: readonly Message[],
  format: Format,
): Message | undefined {
  const adapter = adapterOf(format);
  for (let index = current.length - 1; index >= 0; index--) {
    const message = current[index] as Message;
    if (!adapter.isRequest(message)) continue;
    const request = withoutNotes(message);
    if (!request) continue;
    const text = storedMessageText(request);
    const isHeld = restored.some((earlier) => {
      const own = withoutNotes(earlier);
      return own !== undefined && storedMessageText(own) === text;
    });
    return isHeld ? undefined : request;
  }
  return undefined;
}

/** Options of {@link resumeNote} and {@link withResumeNote}. */
export interface NoteOptions {
  /** What changed since the checkpoint, for the model (the first seed's `patch_notes`). */
  patchNote?: string;
  /** Why it was rolled back (an automatic rollback's failure: a tool's error, a verdict). */
  reason?: string;
}

/** The note's text with its reason and patch note. */
export function noteText(text: string, options: NoteOptions): string {
  const why = options.reason ? `${text} It was rolled back because: ${options.reason}` : text;
  return options.patchNote ? `${why} Patch applied since: ${options.patchNote}` : why;
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
