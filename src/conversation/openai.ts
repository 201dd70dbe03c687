// The OpenAI formats: Chat Completions messages and Responses items.
import { type Adapter, arrayOf, type Call, isObject, type Message } from './format-adapter.js';

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
