import { RewindError } from '../errors.js';

/** The message formats Rewind reads and repairs. */
export const FORMATS = [
  'openai-chat',
  'openai-responses',
  'anthropic',
  'gemini',
  'ai-sdk',
  'langchain',
] as const;

/** A message format: see {@link FORMATS}. */
export type Format = (typeof FORMATS)[number];

/** A message as JSON: Rewind never needs more than its JSON form. */
export type Message = Record<string, unknown>;

/** A tool call as a format states it: its id (absent for some Gemini calls) and name. */
export interface Call {
  id: string | undefined;
  name: string;
}

/** A tool result: the id of the call it answers (absent for some Gemini results) and its name. */
export interface Result {
  id: string | undefined;
  name: string | undefined;
}

/**
 * What differs between formats, for pairing calls with results. Results are either separate
 * messages right after the call (`tool-messages`: OpenAI Chat, AI SDK, LangChain), parts at the
 * start of the next user turn (`next-user-turn`: Anthropic, Gemini), or items anywhere after the
 * call (`items`: OpenAI Responses).
 */
export interface Adapter {
  format: Format;
  placement: 'tool-messages' | 'next-user-turn' | 'items';
  /** True when `value` has this format's shape. */
  isMessage(value: unknown): boolean;
  /** The role as the provider names it, for validation (`user`, `assistant`, `model`, `tool`...). */
  roleOf(message: Message): string;
  /** Roles the provider accepts in the list. */
  roles: readonly string[];
  /** The tool calls a message makes that a client must answer. */
  callsOf(message: Message): Call[];
  /** The tool results a message carries. */
  resultsOf(message: Message): Result[];
  /** True when the message holds only results (a tool message, a user turn of results only). */
  isOnlyResults(message: Message): boolean;
  /** The message without the results `drop` selects; undefined when nothing else remains. */
  withoutResults(
    message: Message,
    drop: (result: Result, index: number) => boolean,
  ): Message | undefined;
  /** The result parts of a message (for moving them), in order. */
  resultParts(message: Message): unknown[];
  /** The message with `parts` (result parts) put first. */
  withResultsFirst(message: Message, parts: unknown[]): Message;
  /** A message holding only these result parts (the user turn or tool message that carries them). */
  resultsMessage(parts: unknown[], like: Message | undefined): Message[];
  /** A result part answering `call` with an error saying why. */
  syntheticResult(call: Call, text: string, like: Message | undefined): unknown;
  /** The message without the calls `drop` selects; undefined when nothing else remains. */
  withoutCalls(message: Message, drop: (call: Call) => boolean): Message | undefined;
  /** True when the message holds signed reasoning that must never be edited. */
  hasSignedReasoning(message: Message): boolean;
  /** A note to the model, as the provider accepts it after this history. */
  note(text: string, like: Message | undefined): Message;
  /** True when a note may be merged into `message` (a user turn) rather than added after it. */
  canHoldNote(message: Message): boolean;
  /** `message` with the note text added at its end. */
  withNote(message: Message, text: string): Message;
}

const isObject = (value: unknown): value is Record<string, unknown> =>
  typeof value === 'object' && value !== null && !Array.isArray(value);

const arrayOf = (value: unknown): unknown[] => (Array.isArray(value) ? value : []);

// ---------------------------------------------------------------- OpenAI Chat Completions

const openaiChat: Adapter = {
  format: 'openai-chat',
  placement: 'tool-messages',
  roles: ['system', 'developer', 'user', 'assistant', 'tool', 'function'],
  isMessage: (value) =>
    isObject(value) &&
    typeof value.role === 'string' &&
    ['system', 'developer', 'user', 'assistant', 'tool', 'function'].includes(value.role) &&
    (value.role !== 'tool' || typeof value.tool_call_id === 'string') &&
    (value.content === undefined ||
      value.content === null ||
      typeof value.content === 'string' ||
      arrayOf(value.content).every(
        (part) =>
          isObject(part) &&
          ['text', 'image_url', 'input_audio', 'file', 'refusal'].includes(String(part.type)),
      )),
  roleOf: (message) => String(message.role),
  callsOf: (message) =>
    message.role === 'assistant'
      ? arrayOf(message.tool_calls)
          .filter(isObject)
          .map((call) => ({
            id: String(call.id),
            name: String(
              (call.function as Record<string, unknown> | undefined)?.name ??
                (call.custom as Record<string, unknown> | undefined)?.name ??
                '',
            ),
          }))
      : [],
  resultsOf: (message) =>
    message.role === 'tool' ? [{ id: String(message.tool_call_id), name: undefined }] : [],
  isOnlyResults: (message) => message.role === 'tool',
  withoutResults: (message, drop) =>
    message.role === 'tool' && drop({ id: String(message.tool_call_id), name: undefined }, 0)
      ? undefined
      : message,
  resultParts: (message) => (message.role === 'tool' ? [message] : []),
  withResultsFirst: (message) => message,
  resultsMessage: (parts) => parts as Message[],
  syntheticResult: (call, text) => ({ role: 'tool', tool_call_id: call.id, content: text }),
  withoutCalls: (message, drop) => {
    const calls = arrayOf(message.tool_calls).filter(isObject);
    const kept = calls.filter(
      (call) => !drop(openaiChat.callsOf({ role: 'assistant', tool_calls: [call] })[0] as Call),
    );
    if (kept.length === calls.length) return message;
    const { tool_calls: _dropped, ...rest } = message;
    const next: Message = kept.length > 0 ? { ...rest, tool_calls: kept } : rest;
    const hasContent =
      (typeof next.content === 'string' && next.content !== '') || arrayOf(next.content).length > 0;
    return kept.length > 0 || hasContent ? next : undefined;
  },
  hasSignedReasoning: () => false,
  note: (text) => ({ role: 'system', content: text }),
  canHoldNote: () => false,
  withNote: (message) => message,
};

// ---------------------------------------------------------------- OpenAI Responses

const RESPONSES_TYPES = new Set([
  'message',
  'function_call',
  'function_call_output',
  'reasoning',
  'custom_tool_call',
  'custom_tool_call_output',
  'file_search_call',
  'web_search_call',
  'computer_call',
  'computer_call_output',
  'image_generation_call',
  'code_interpreter_call',
  'local_shell_call',
  'local_shell_call_output',
  'mcp_call',
  'mcp_list_tools',
  'mcp_approval_request',
  'mcp_approval_response',
  'item_reference',
]);

const isResponsesCall = (message: Message): boolean =>
  message.type === 'function_call' || message.type === 'custom_tool_call';
const isResponsesOutput = (message: Message): boolean =>
  message.type === 'function_call_output' || message.type === 'custom_tool_call_output';

const openaiResponses: Adapter = {
  format: 'openai-responses',
  placement: 'items',
  roles: ['system', 'developer', 'user', 'assistant', 'item'],
  isMessage: (value) =>
    isObject(value) &&
    (RESPONSES_TYPES.has(String(value.type)) ||
      (value.type === undefined &&
        typeof value.role === 'string' &&
        ['system', 'developer', 'user', 'assistant'].includes(value.role) &&
        (typeof value.content === 'string' ||
          arrayOf(value.content).every(
            (part) => isObject(part) && /^(input|output)_/.test(String(part.type)),
          )))),
  roleOf: (message) => (typeof message.role === 'string' ? message.role : 'item'),
  callsOf: (message) =>
    isResponsesCall(message) ? [{ id: String(message.call_id), name: String(message.name) }] : [],
  resultsOf: (message) =>
    isResponsesOutput(message) ? [{ id: String(message.call_id), name: undefined }] : [],
  isOnlyResults: isResponsesOutput,
  withoutResults: (message, drop) =>
    isResponsesOutput(message) && drop({ id: String(message.call_id), name: undefined }, 0)
      ? undefined
      : message,
  resultParts: (message) => (isResponsesOutput(message) ? [message] : []),
  withResultsFirst: (message) => message,
  resultsMessage: (parts) => parts as Message[],
  syntheticResult: (call, text) => ({
    type: 'function_call_output',
    call_id: call.id,
    output: text,
  }),
  withoutCalls: (message, drop) =>
    isResponsesCall(message) && drop({ id: String(message.call_id), name: String(message.name) })
      ? undefined
      : message,
  hasSignedReasoning: (message) => message.type === 'reasoning',
  note: (text) => ({ type: 'message', role: 'developer', content: text }),
  canHoldNote: () => false,
  withNote: (message) => message,
};

// ---------------------------------------------------------------- Anthropic Messages

const ANTHROPIC_BLOCKS = new Set([
  'text',
  'image',
  'document',
  'search_result',
  'thinking',
  'redacted_thinking',
  'tool_use',
  'tool_result',
  'server_tool_use',
  'web_search_tool_result',
  'web_fetch_tool_result',
  'code_execution_tool_result',
  'bash_code_execution_tool_result',
  'text_editor_code_execution_tool_result',
  'mcp_tool_use',
  'mcp_tool_result',
  'container_upload',
]);

const anthropicBlocks = (message: Message): Record<string, unknown>[] =>
  typeof message.content === 'string'
    ? [{ type: 'text', text: message.content }]
    : arrayOf(message.content).filter(isObject);

const anthropic: Adapter = {
  format: 'anthropic',
  placement: 'next-user-turn',
  roles: ['user', 'assistant'],
  isMessage: (value) =>
    isObject(value) &&
    (value.role === 'user' || value.role === 'assistant') &&
    (typeof value.content === 'string' ||
      (Array.isArray(value.content) &&
        value.content.every(
          (block) => isObject(block) && ANTHROPIC_BLOCKS.has(String(block.type)),
        ))),
  roleOf: (message) => String(message.role),
  callsOf: (message) =>
    message.role === 'assistant'
      ? anthropicBlocks(message)
          .filter((block) => block.type === 'tool_use')
          .map((block) => ({ id: String(block.id), name: String(block.name) }))
      : [],
  resultsOf: (message) =>
    message.role === 'user'
      ? anthropicBlocks(message)
          .filter((block) => block.type === 'tool_result')
          .map((block) => ({ id: String(block.tool_use_id), name: undefined }))
      : [],
  isOnlyResults: (message) =>
    message.role === 'user' &&
    anthropicBlocks(message).length > 0 &&
    anthropicBlocks(message).every((block) => block.type === 'tool_result'),
  withoutResults: (message, drop) => {
    if (message.role !== 'user' || typeof message.content === 'string') return message;
    let index = -1;
    const kept = anthropicBlocks(message).filter((block) => {
      if (block.type !== 'tool_result') return true;
      index += 1;
      return !drop({ id: String(block.tool_use_id), name: undefined }, index);
    });
    if (kept.length === arrayOf(message.content).length) return message;
    return kept.length > 0 ? { ...message, content: kept } : undefined;
  },
  resultParts: (message) =>
    message.role === 'user'
      ? anthropicBlocks(message).filter((block) => block.type === 'tool_result')
      : [],
  withResultsFirst: (message, parts) => ({
    ...message,
    content: [
      ...parts,
      ...anthropicBlocks(message).filter((block) => block.type !== 'tool_result'),
    ],
  }),
  resultsMessage: (parts) => [{ role: 'user', content: parts }],
  syntheticResult: (call, text) => ({
    type: 'tool_result',
    tool_use_id: call.id,
    content: text,
    is_error: true,
  }),
  withoutCalls: (message, drop) => {
    if (message.role !== 'assistant' || typeof message.content === 'string') return message;
    const blocks = anthropicBlocks(message);
    const kept = blocks.filter(
      (block) =>
        block.type !== 'tool_use' || !drop({ id: String(block.id), name: String(block.name) }),
    );
    if (kept.length === blocks.length) return message;
    // Signed thinking belongs to the turn that made the call: never edited, so the turn goes whole.
    if (anthropic.hasSignedReasoning(message)) return undefined;
    return kept.length > 0 ? { ...message, content: kept } : undefined;
  },
  hasSignedReasoning: (message) =>
    anthropicBlocks(message).some(
      (block) => block.type === 'thinking' || block.type === 'redacted_thinking',
    ),
  note: (text) => ({ role: 'user', content: [{ type: 'text', text }] }),
  canHoldNote: (message) => message.role === 'user',
  withNote: (message, text) => ({
    ...message,
    content: [...anthropicBlocks(message), { type: 'text', text }],
  }),
};

// ---------------------------------------------------------------- Gemini

const geminiParts = (message: Message): Record<string, unknown>[] =>
  arrayOf(message.parts).filter(isObject);

const gemini: Adapter = {
  format: 'gemini',
  placement: 'next-user-turn',
  roles: ['user', 'model'],
  isMessage: (value) =>
    isObject(value) &&
    (value.role === 'user' || value.role === 'model' || value.role === undefined) &&
    Array.isArray(value.parts) &&
    value.parts.every(isObject),
  roleOf: (message) => String(message.role ?? 'user'),
  callsOf: (message) =>
    message.role === 'model'
      ? geminiParts(message)
          .filter((part) => isObject(part.functionCall))
          .map((part) => {
            const call = part.functionCall as Record<string, unknown>;
            return {
              id: typeof call.id === 'string' ? call.id : undefined,
              name: String(call.name),
            };
          })
      : [],
  resultsOf: (message) =>
    message.role !== 'model'
      ? geminiParts(message)
          .filter((part) => isObject(part.functionResponse))
          .map((part) => {
            const response = part.functionResponse as Record<string, unknown>;
            return {
              id: typeof response.id === 'string' ? response.id : undefined,
              name: String(response.name),
            };
          })
      : [],
  isOnlyResults: (message) =>
    message.role !== 'model' &&
    geminiParts(message).length > 0 &&
    geminiParts(message).every((part) => isObject(part.functionResponse)),
  withoutResults: (message, drop) => {
    if (message.role === 'model') return message;
    let index = -1;
    const kept = geminiParts(message).filter((part) => {
      if (!isObject(part.functionResponse)) return true;
      index += 1;
      const response = part.functionResponse;
      return !drop(
        {
          id: typeof response.id === 'string' ? response.id : undefined,
          name: String(response.name),
        },
        index,
      );
    });
    if (kept.length === geminiParts(message).length) return message;
    return kept.length > 0 ? { ...message, parts: kept } : undefined;
  },
  resultParts: (message) =>
    message.role !== 'model'
      ? geminiParts(message).filter((part) => isObject(part.functionResponse))
      : [],
  withResultsFirst: (message, parts) => ({
    ...message,
    parts: [...parts, ...geminiParts(message).filter((part) => !isObject(part.functionResponse))],
  }),
  resultsMessage: (parts) => [{ role: 'user', parts }],
  syntheticResult: (call, text) => ({
    functionResponse: {
      ...(call.id !== undefined && { id: call.id }),
      name: call.name,
      response: { error: text },
    },
  }),
  withoutCalls: (message, drop) => {
    if (message.role !== 'model') return message;
    const parts = geminiParts(message);
    const kept = parts.filter((part) => {
      if (!isObject(part.functionCall)) return true;
      const call = part.functionCall;
      return !drop({
        id: typeof call.id === 'string' ? call.id : undefined,
        name: String(call.name),
      });
    });
    if (kept.length === parts.length) return message;
    if (gemini.hasSignedReasoning(message)) return undefined;
    return kept.length > 0 ? { ...message, parts: kept } : undefined;
  },
  hasSignedReasoning: (message) =>
    geminiParts(message).some(
      (part) => typeof part.thoughtSignature === 'string' || part.thought === true,
    ),
  note: (text) => ({ role: 'user', parts: [{ text }] }),
  canHoldNote: (message) => message.role !== 'model',
  withNote: (message, text) => ({ ...message, parts: [...geminiParts(message), { text }] }),
};

// ---------------------------------------------------------------- Vercel AI SDK ModelMessage

const AI_SDK_PARTS = new Set([
  'text',
  'image',
  'file',
  'reasoning',
  'tool-call',
  'tool-result',
  'tool-approval-request',
  'tool-approval-response',
]);

const aiSdkParts = (message: Message): Record<string, unknown>[] =>
  typeof message.content === 'string'
    ? [{ type: 'text', text: message.content }]
    : arrayOf(message.content).filter(isObject);

const aiSdk: Adapter = {
  format: 'ai-sdk',
  placement: 'tool-messages',
  roles: ['system', 'user', 'assistant', 'tool'],
  isMessage: (value) =>
    isObject(value) &&
    typeof value.role === 'string' &&
    ['system', 'user', 'assistant', 'tool'].includes(value.role) &&
    (typeof value.content === 'string'
      ? value.role !== 'tool'
      : Array.isArray(value.content) &&
        value.content.every((part) => isObject(part) && AI_SDK_PARTS.has(String(part.type)))),
  roleOf: (message) => String(message.role),
  callsOf: (message) =>
    message.role === 'assistant'
      ? aiSdkParts(message)
          .filter((part) => part.type === 'tool-call' && part.providerExecuted !== true)
          .map((part) => ({ id: String(part.toolCallId), name: String(part.toolName) }))
      : [],
  resultsOf: (message) =>
    message.role === 'tool'
      ? aiSdkParts(message)
          .filter((part) => part.type === 'tool-result')
          .map((part) => ({ id: String(part.toolCallId), name: String(part.toolName) }))
      : [],
  isOnlyResults: (message) => message.role === 'tool',
  withoutResults: (message, drop) => {
    if (message.role !== 'tool') return message;
    let index = -1;
    const kept = aiSdkParts(message).filter((part) => {
      if (part.type !== 'tool-result') return true;
      index += 1;
      return !drop({ id: String(part.toolCallId), name: String(part.toolName) }, index);
    });
    if (kept.length === aiSdkParts(message).length) return message;
    return kept.some((part) => part.type === 'tool-result')
      ? { ...message, content: kept }
      : undefined;
  },
  resultParts: (message) =>
    message.role === 'tool'
      ? aiSdkParts(message).filter((part) => part.type === 'tool-result')
      : [],
  withResultsFirst: (message) => message,
  resultsMessage: (parts) => [{ role: 'tool', content: parts }],
  syntheticResult: (call, text) => ({
    type: 'tool-result',
    toolCallId: call.id,
    toolName: call.name,
    output: { type: 'error-text', value: text },
  }),
  withoutCalls: (message, drop) => {
    if (message.role !== 'assistant' || typeof message.content === 'string') return message;
    const parts = aiSdkParts(message);
    const kept = parts.filter(
      (part) =>
        part.type !== 'tool-call' ||
        part.providerExecuted === true ||
        !drop({ id: String(part.toolCallId), name: String(part.toolName) }),
    );
    if (kept.length === parts.length) return message;
    if (aiSdk.hasSignedReasoning(message)) return undefined;
    return kept.length > 0 ? { ...message, content: kept } : undefined;
  },
  hasSignedReasoning: (message) =>
    aiSdkParts(message).some(
      (part) => part.type === 'reasoning' && part.providerOptions !== undefined,
    ),
  note: (text) => ({ role: 'user', content: [{ type: 'text', text }] }),
  canHoldNote: (message) => message.role === 'user',
  withNote: (message, text) => ({
    ...message,
    content: [...aiSdkParts(message), { type: 'text', text }],
  }),
};

// ---------------------------------------------------------------- LangChain (serialized)

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

/** The kind (`human`, `ai`, `system`, `tool`...) and fields of a serialized LangChain message. */
function langchainView(message: Message): { kind: string; fields: Record<string, unknown> } {
  if (message.lc === 1 && message.type === 'constructor' && Array.isArray(message.id)) {
    const kind = LANGCHAIN_KINDS[String(message.id.at(-1))] ?? 'unknown';
    return { kind, fields: isObject(message.kwargs) ? message.kwargs : {} };
  }
  return { kind: String(message.type), fields: isObject(message.data) ? message.data : {} };
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

const langchain: Adapter = {
  format: 'langchain',
  placement: 'tool-messages',
  roles: ['human', 'ai', 'system', 'tool', 'generic', 'function'],
  isMessage: (value) => {
    if (!isObject(value)) return false;
    if (value.lc === 1) {
      return (
        value.type === 'constructor' &&
        Array.isArray(value.id) &&
        LANGCHAIN_KINDS[String(value.id.at(-1))] !== undefined &&
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
      .map((call) => ({ id: String(call.id), name: String(call.name) }));
  },
  resultsOf: (message) => {
    const { kind, fields } = langchainView(message);
    return kind === 'tool' ? [{ id: String(fields.tool_call_id), name: undefined }] : [];
  },
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
    const kept = calls.filter((call) => !drop({ id: String(call.id), name: String(call.name) }));
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
