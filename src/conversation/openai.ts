// The OpenAI formats: Chat Completions messages and Responses items.
import {
  type Adapter,
  arrayOf,
  type Call,
  isObject,
  type Message,
  textOf,
} from './format-adapter.js';

/** OpenAI Chat Completions messages. */
export const openaiChat: Adapter = {
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
          ['text', 'image_url', 'input_audio', 'file', 'refusal'].includes(textOf(part.type)),
      )),
  roleOf: (message) => textOf(message.role),
  callsOf: (message) =>
    message.role === 'assistant'
      ? arrayOf(message.tool_calls)
          .filter(isObject)
          .map((call) => ({
            id: textOf(call.id),
            name: textOf(
              (call.function as Record<string, unknown> | undefined)?.name ??
                (call.custom as Record<string, unknown> | undefined)?.name ??
                '',
            ),
          }))
      : [],
  resultsOf: (message) =>
    message.role === 'tool' ? [{ id: textOf(message.tool_call_id), name: undefined }] : [],
  isRequest: (message) => message.role === 'user',
  isOnlyResults: (message) => message.role === 'tool',
  withoutResults: (message, drop) =>
    message.role === 'tool' && drop({ id: textOf(message.tool_call_id), name: undefined }, 0)
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

/** The item types an OpenAI Responses input holds; detection takes each as that format's marker. */
export const RESPONSES_TYPES = new Set([
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

/** OpenAI Responses input items. */
export const openaiResponses: Adapter = {
  format: 'openai-responses',
  placement: 'items',
  roles: ['system', 'developer', 'user', 'assistant', 'item'],
  isMessage: (value) =>
    isObject(value) &&
    (RESPONSES_TYPES.has(textOf(value.type)) ||
      (value.type === undefined &&
        typeof value.role === 'string' &&
        ['system', 'developer', 'user', 'assistant'].includes(value.role) &&
        (typeof value.content === 'string' ||
          arrayOf(value.content).every(
            (part) => isObject(part) && /^(input|output)_/.test(textOf(part.type)),
          )))),
  roleOf: (message) => (typeof message.role === 'string' ? message.role : 'item'),
  callsOf: (message) =>
    isResponsesCall(message) ? [{ id: textOf(message.call_id), name: textOf(message.name) }] : [],
  resultsOf: (message) =>
    isResponsesOutput(message) ? [{ id: textOf(message.call_id), name: undefined }] : [],
  isRequest: (message) => message.role === 'user',
  isOnlyResults: isResponsesOutput,
  withoutResults: (message, drop) =>
    isResponsesOutput(message) && drop({ id: textOf(message.call_id), name: undefined }, 0)
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
    isResponsesCall(message) && drop({ id: textOf(message.call_id), name: textOf(message.name) })
      ? undefined
      : message,
  hasSignedReasoning: (message) => message.type === 'reasoning',
  note: (text) => ({ type: 'message', role: 'developer', content: text }),
  canHoldNote: () => false,
  withNote: (message) => message,
};
