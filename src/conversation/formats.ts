// The adapter of each format, detecting a list's format, and checking a list against one.
import { RewindError } from '../errors.js';
import { jsonPreview } from '../lib/index.js';
import { aiSdk } from './ai-sdk.js';
import { anthropic } from './anthropic.js';
import {
  type Adapter,
  FORMATS,
  type Format,
  isObject,
  type Message,
  textOf,
} from './format-adapter.js';
import { gemini } from './gemini.js';
import { langchain } from './langchain.js';
import { openaiChat, openaiResponses, RESPONSES_TYPES } from './openai.js';
import { openaiAgents } from './openai-agents.js';

const ADAPTERS: Record<Format, Adapter> = {
  'openai-chat': openaiChat,
  'openai-responses': openaiResponses,
  anthropic,
  gemini,
  'ai-sdk': aiSdk,
  langchain,
  'openai-agents': openaiAgents,
};

/** The adapter of a format. Throws `INVALID_ARGUMENT` for a name that is not a format. */
export function adapterOf(format: string): Adapter {
  // An own key only: "constructor" or "__proto__" is no format, whatever a plain object holds.
  if (Object.hasOwn(ADAPTERS, format)) return ADAPTERS[format as Format];
  throw new RewindError(
    'INVALID_ARGUMENT',
    `"${format}" is not a message format Rewind knows. Use one of: ${FORMATS.join(', ')}.`,
    { data: { format } },
  );
}

/**
 * Throws `code` unless `messages` is a list: a conversation given as anything else (an object, a
 * string of JSON) is refused, saying what it is.
 */
export function checkIsList(
  messages: unknown,
  code: 'CONVERSATION_FORMAT_UNKNOWN' | 'CONVERSATION_FORMAT_MISMATCH',
): void {
  if (Array.isArray(messages)) return;
  const kind =
    messages === null
      ? 'null'
      : typeof messages === 'object'
        ? 'an object'
        : `a ${typeof messages}`;
  throw new RewindError(
    code,
    `A conversation is a JSON array of messages, not ${kind} (${jsonPreview(messages, 60)}). Pass the list of messages itself, such as [{"role":"user","content":"hi"}].`,
    { data: { kind } },
  );
}

/** Markers that only one format has, checked before the shapes several formats share. */
function specificFormat(messages: readonly unknown[]): Format | undefined {
  for (const value of messages) {
    if (!isObject(value)) continue;
    if (value.lc === 1 || (isObject(value.data) && typeof value.type === 'string'))
      return 'langchain';
    if (Array.isArray(value.parts)) return 'gemini';
    // The Agents SDK's items: results are items of their own, ids are `callId`.
    if (value.type === 'function_call_result' || typeof value.callId === 'string')
      return 'openai-agents';
    if (typeof value.type === 'string' && RESPONSES_TYPES.has(value.type))
      return 'openai-responses';
    if (value.role === 'model') return 'gemini';
    if (value.role === 'tool' && typeof value.tool_call_id === 'string') return 'openai-chat';
    if (value.role === 'tool' && Array.isArray(value.content)) return 'ai-sdk';
    if (Array.isArray(value.tool_calls)) return 'openai-chat';
    if (Array.isArray(value.content)) {
      for (const part of value.content) {
        if (!isObject(part)) continue;
        if (['tool-call', 'tool-result', 'reasoning'].includes(textOf(part.type))) return 'ai-sdk';
        if (
          ['tool_use', 'tool_result', 'thinking', 'redacted_thinking'].includes(textOf(part.type))
        )
          return 'anthropic';
        if (/^(input|output)_/.test(textOf(part.type))) return 'openai-responses';
        if (part.type === 'image_url') return 'openai-chat';
      }
    }
    if (value.role === 'developer') return 'openai-chat';
  }
  return undefined;
}

/**
 * The messages as JSON would write them: a live object of a class that says how (a LangChain
 * `HumanMessage`, whose `toJSON()` is its serialized form) becomes that form; plain objects stay
 * as they are. A list that is not an array is left for the checks to refuse.
 */
export function plainMessages<T>(messages: T): T {
  if (!Array.isArray(messages)) return messages;
  return messages.map((message) => {
    if (!isObject(message)) return message;
    const prototype = Object.getPrototypeOf(message);
    const toJSON = (message as { toJSON?: unknown }).toJSON;
    return prototype !== Object.prototype && prototype !== null && typeof toJSON === 'function'
      ? toJSON.call(message)
      : message;
  }) as T;
}

/**
 * Recognizes the format of a message list from markers only one format has (tool calls, parts,
 * item types, serialized classes). A list of plain `{role, content}` text messages fits several
 * formats and is reported as `openai-chat`; pass the format explicitly when it matters (it does
 * for where a note may go). Throws `CONVERSATION_FORMAT_UNKNOWN` when no format fits every
 * message, naming the first that does not.
 */
export function detectFormat(messages: readonly unknown[]): Format {
  checkIsList(messages, 'CONVERSATION_FORMAT_UNKNOWN');
  const candidate = specificFormat(messages) ?? 'openai-chat';
  const candidates: Format[] = [candidate, ...FORMATS.filter((format) => format !== candidate)];
  for (const format of candidates) {
    const adapter = ADAPTERS[format];
    if (messages.every((message) => adapter.isMessage(message))) return format;
  }
  const bad = messages.findIndex((message) => !ADAPTERS[candidate].isMessage(message));
  throw new RewindError(
    'CONVERSATION_FORMAT_UNKNOWN',
    `The messages are in no format Rewind knows (${FORMATS.join(', ')}): message ${bad} ` +
      `(${jsonPreview(messages[bad])}) does not fit ${candidate}, the closest. Check the list, or pass its format.`,
    { data: { index: bad } },
  );
}

/**
 * Checks that every message has the shape of `format`. Throws `CONVERSATION_FORMAT_MISMATCH`
 * naming the first that does not (and the format it looks like, if any).
 */
export function checkFormat(messages: readonly unknown[], format: Format): Message[] {
  const adapter = adapterOf(format);
  checkIsList(messages, 'CONVERSATION_FORMAT_MISMATCH');
  const bad = messages.findIndex((message) => !adapter.isMessage(message));
  if (bad >= 0) {
    let detected: string | undefined;
    try {
      detected = detectFormat(messages);
    } catch {}
    throw new RewindError(
      'CONVERSATION_FORMAT_MISMATCH',
      `Message ${bad} is not ${/^[aeiou]/.test(format) ? 'an' : 'a'} ${format} message${detected ? `: the list looks like ${detected}` : ''}. ` +
        `Pass the format the messages are in (${FORMATS.join(', ')}).`,
      { data: { index: bad, format, ...(detected && { detected }) } },
    );
  }
  return messages as Message[];
}
