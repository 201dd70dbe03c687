// The OpenAI Agents SDK's own items (`AgentInputItem`, the protocol its `Session` memory and
// `result.history` hold): Responses-like items in camelCase, whose results are their own items.
import { type Adapter, arrayOf, isObject, type Message, textOf } from './format-adapter.js';

/** The item types the Agents SDK's protocol holds; `function_call_result` and `callId` are its marks. */
export const AGENTS_TYPES = new Set([
  'message',
  'function_call',
  'function_call_result',
  'reasoning',
  'hosted_tool_call',
  'computer_call',
  'computer_call_result',
  'shell_call',
  'shell_call_output',
  'apply_patch_call',
  'apply_patch_call_output',
  'compaction',
  'unknown',
]);

const MESSAGE_ROLES = ['system', 'user', 'assistant'];

const isCall = (message: Message): boolean => message.type === 'function_call';
const isResult = (message: Message): boolean => message.type === 'function_call_result';

/** OpenAI Agents SDK items. */
export const openaiAgents: Adapter = {
  format: 'openai-agents',
  placement: 'items',
  roles: [...MESSAGE_ROLES, 'item'],
  isMessage: (value) => {
    if (!isObject(value)) return false;
    const type = value.type;
    if (type === 'function_call' || type === 'function_call_result') {
      return typeof value.callId === 'string' && typeof value.name === 'string';
    }
    if (type !== undefined && type !== 'message') return AGENTS_TYPES.has(textOf(type));
    return (
      typeof value.role === 'string' &&
      MESSAGE_ROLES.includes(value.role) &&
      (typeof value.content === 'string' ||
        arrayOf(value.content).every((part) => isObject(part) && typeof part.type === 'string'))
    );
  },
  roleOf: (message) => (typeof message.role === 'string' ? message.role : 'item'),
  callsOf: (message) =>
    isCall(message) ? [{ id: textOf(message.callId), name: textOf(message.name) }] : [],
  resultsOf: (message) =>
    isResult(message) ? [{ id: textOf(message.callId), name: textOf(message.name) }] : [],
  isRequest: (message) => message.role === 'user',
  isOnlyResults: isResult,
  withoutResults: (message, drop) =>
    isResult(message) && drop({ id: textOf(message.callId), name: textOf(message.name) }, 0)
      ? undefined
      : message,
  resultParts: (message) => (isResult(message) ? [message] : []),
  withResultsFirst: (message) => message,
  resultsMessage: (parts) => parts as Message[],
  syntheticResult: (call, text) => ({
    type: 'function_call_result',
    callId: call.id,
    name: call.name,
    status: 'incomplete',
    output: { type: 'text', text },
  }),
  withoutCalls: (message, drop) =>
    isCall(message) && drop({ id: textOf(message.callId), name: textOf(message.name) })
      ? undefined
      : message,
  hasSignedReasoning: (message) => message.type === 'reasoning',
  // A user turn: the models the SDK drives may refuse a system message in the middle.
  note: (text) => ({ type: 'message', role: 'user', content: text }),
  canHoldNote: () => false,
  withNote: (message) => message,
};
