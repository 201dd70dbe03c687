// The adapter of each format, detecting a list's format, and checking a list against one.
import { RewindError } from '../errors.js';
import { aiSdk } from './ai-sdk.js';
import { anthropic } from './anthropic.js';
import { type Adapter, FORMATS, type Format, isObject, type Message } from './format-adapter.js';
import { gemini } from './gemini.js';
import { langchain } from './langchain.js';
import { openaiChat, openaiResponses, RESPONSES_TYPES } from './openai.js';

const ADAPTERS: Record<Format, Adapter> = {
  'openai-chat': openaiChat,
  'openai-responses': openaiResponses,
  anthropic,
  gemini,
  'ai-sdk': aiSdk,
  langchain,
};

/** The adapter of a format. Throws `INVALID_ARGUMENT` for a name that is not a format. */
export function adapterOf(format: string): Adapter {
  const adapter = ADAPTERS[format as Format];
  if (adapter) return adapter;
  throw new RewindError(
    'INVALID_ARGUMENT',
    `"${format}" is not a message format Rewind knows. Use one of: ${FORMATS.join(', ')}.`,
    { data: { format } },
  );
}

/** Markers that only one format has, checked before the shapes several formats share. */
function specificFormat(messages: readonly unknown[]): Format | undefined {
  for (const value of messages) {
    if (!isObject(value)) continue;
    if (value.lc === 1 || (isObject(value.data) && typeof value.type === 'string'))
      return 'langchain';
    if (Array.isArray(value.parts)) return 'gemini';
    if (typeof value.type === 'string' && RESPONSES_TYPES.has(value.type))
      return 'openai-responses';
    if (value.role === 'model') return 'gemini';
    if (value.role === 'tool' && typeof value.tool_call_id === 'string') return 'openai-chat';
    if (value.role === 'tool' && Array.isArray(value.content)) return 'ai-sdk';
    if (Array.isArray(value.tool_calls)) return 'openai-chat';
    if (Array.isArray(value.content)) {
      for (const part of value.content) {
        if (!isObject(part)) continue;
        if (['tool-call', 'tool-result', 'reasoning'].includes(String(part.type))) return 'ai-sdk';
        if (
          ['tool_use', 'tool_result', 'thinking', 'redacted_thinking'].includes(String(part.type))
        )
          return 'anthropic';
        if (/^(input|output)_/.test(String(part.type))) return 'openai-responses';
        if (part.type === 'image_url') return 'openai-chat';
      }
    }
    if (value.role === 'developer') return 'openai-chat';
  }
  return undefined;
}

/**
 * Recognizes the format of a message list from markers only one format has (tool calls, parts,
 * item types, serialized classes). A list of plain `{role, content}` text messages fits several
 * formats and is reported as `openai-chat`; pass the format explicitly when it matters (it does
 * for where a note may go). Throws `CONVERSATION_FORMAT_UNKNOWN` when no format fits every
 * message, naming the first that does not.
 */
export function detectFormat(messages: readonly unknown[]): Format {
  if (!Array.isArray(messages)) {
    throw new RewindError(
      'CONVERSATION_FORMAT_UNKNOWN',
      'A conversation is a JSON array of messages; this is not an array.',
    );
  }
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
      `(${JSON.stringify(messages[bad])?.slice(0, 120)}) does not fit ${candidate}, the closest. Check the list, or pass its format.`,
    { data: { index: bad } },
  );
}

/**
 * Checks that every message has the shape of `format`. Throws `CONVERSATION_FORMAT_MISMATCH`
 * naming the first that does not (and the format it looks like, if any).
 */
export function checkFormat(messages: readonly unknown[], format: Format): Message[] {
  const adapter = adapterOf(format);
  if (!Array.isArray(messages)) {
    throw new RewindError(
      'CONVERSATION_FORMAT_MISMATCH',
      'A conversation is a JSON array of messages.',
    );
  }
  const bad = messages.findIndex((message) => !adapter.isMessage(message));
  if (bad >= 0) {
    let detected: string | undefined;
    try {
      detected = detectFormat(messages);
    } catch {}
    throw new RewindError(
      'CONVERSATION_FORMAT_MISMATCH',
      `Message ${bad} is not a ${format} message${detected ? `: the list looks like ${detected}` : ''}. ` +
        `Pass the format the messages are in (${FORMATS.join(', ')}).`,
      { data: { index: bad, format, ...(detected && { detected }) } },
    );
  }
  return messages as Message[];
}
