// The LangChain format: messages serialized by `toJSON()` or as `{ type, data }`.
import { type Adapter, arrayOf, isObject, type Message, textOf } from './format-adapter.js';

const LANGCHAIN_KINDS: Record<string, string> = {
  HumanMessage: 'human',
  HumanMessageChunk: 'human',
  AIMessage: 'ai',
  AIMessageChunk: 'ai',
  SystemMessage: 'system',
  SystemMessageChunk: 'system',
  ToolMessage: 'tool',
  ToolMessageChunk: 'tool',
  ChatMessage: 'generic',
  FunctionMessage: 'function',
};

/** The kind of a serialized class name (`AIMessage` is `ai`); undefined for any other name. */
function kindOfClass(name: unknown): string | undefined {
  const key = textOf(name);
  // An own key only: "constructor" or "toString" names no message class.
  return Object.hasOwn(LANGCHAIN_KINDS, key) ? LANGCHAIN_KINDS[key] : undefined;
}

/** The kind (`human`, `ai`, `system`, `tool`...) and fields of a serialized LangChain message. */
function langchainView(message: Message): { kind: string; fields: Record<string, unknown> } {
  if (message.lc === 1 && message.type === 'constructor' && Array.isArray(message.id)) {
    const kind = kindOfClass(message.id.at(-1)) ?? 'unknown';
    return { kind, fields: isObject(message.kwargs) ? message.kwargs : {} };
  }
  return { kind: textOf(message.type), fields: isObject(message.data) ? message.data : {} };
}

function langchainWith(message: Message, fields: Record<string, unknown>): Message {
  if (message.lc === 1) return { ...message, kwargs: fields };
  return { ...message, data: fields };
}

/** A new serialized LangChain message of `kind`, in the same serialized form as `like`. */
function langchainMessage(
  kind: 'human' | 'tool',
  fields: Record<string, unknown>,
  like: Message | undefined,
): Message {
  if (like !== undefined && like.lc !== 1) return { type: kind, data: { ...fields } };
  return {
    lc: 1,
    type: 'constructor',
    id: ['langchain_core', 'messages', kind === 'human' ? 'HumanMessage' : 'ToolMessage'],
    kwargs: fields,
  };
}

/** LangChain messages, serialized. */
export const langchain: Adapter = {
  format: 'langchain',
  placement: 'tool-messages',
  roles: ['human', 'ai', 'system', 'tool', 'generic', 'function'],
  isMessage: (value) => {
    if (!isObject(value)) return false;
    if (value.lc === 1) {
      return (
        value.type === 'constructor' &&
        Array.isArray(value.id) &&
        kindOfClass(value.id.at(-1)) !== undefined &&
        isObject(value.kwargs)
      );
    }
    return (
      typeof value.type === 'string' &&
      ['human', 'ai', 'system', 'tool', 'generic', 'function'].includes(value.type) &&
      isObject(value.data)
    );
  },
  roleOf: (message) => langchainView(message).kind,
  callsOf: (message) => {
    const { kind, fields } = langchainView(message);
    if (kind !== 'ai') return [];
    return arrayOf(fields.tool_calls)
      .filter(isObject)
      .map((call) => ({ id: textOf(call.id), name: textOf(call.name) }));
  },
  resultsOf: (message) => {
    const { kind, fields } = langchainView(message);
    return kind === 'tool' ? [{ id: textOf(fields.tool_call_id), name: undefined }] : [];
  },
  isRequest: (message) => langchainView(message).kind === 'human',
  isOnlyResults: (message) => langchainView(message).kind === 'tool',
  withoutResults: (message, drop) =>
    langchain.resultsOf(message).some((result, index) => drop(result, index)) ? undefined : message,
  resultParts: (message) => (langchainView(message).kind === 'tool' ? [message] : []),
  withResultsFirst: (message) => message,
  resultsMessage: (parts) => parts as Message[],
  syntheticResult: (call, text, like) =>
    langchainMessage(
      'tool',
      {
        content: text,
        tool_call_id: call.id,
        name: call.name,
        status: 'error',
        additional_kwargs: {},
        response_metadata: {},
      },
      like,
    ),
  withoutCalls: (message, drop) => {
    const { kind, fields } = langchainView(message);
    if (kind !== 'ai') return message;
    const calls = arrayOf(fields.tool_calls).filter(isObject);
    const kept = calls.filter((call) => !drop({ id: textOf(call.id), name: textOf(call.name) }));
    if (kept.length === calls.length) return message;
    const hasContent =
      (typeof fields.content === 'string' && fields.content !== '') ||
      arrayOf(fields.content).length > 0;
    if (kept.length === 0 && !hasContent) return undefined;
    return langchainWith(message, { ...fields, tool_calls: kept });
  },
  hasSignedReasoning: () => false,
  note: (text, like) =>
    langchainMessage(
      'human',
      { content: text, additional_kwargs: {}, response_metadata: {} },
      like,
    ),
  canHoldNote: () => false,
  withNote: (message) => message,
};
