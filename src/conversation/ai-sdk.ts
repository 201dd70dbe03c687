// The Vercel AI SDK format (ModelMessage).
import { type Adapter, contentPartsOf, isObject, textOf } from './format-adapter.js';

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

/** Vercel AI SDK ModelMessages. */
export const aiSdk: Adapter = {
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
        value.content.every((part) => isObject(part) && AI_SDK_PARTS.has(textOf(part.type)))),
  roleOf: (message) => textOf(message.role),
  callsOf: (message) =>
    message.role === 'assistant'
      ? contentPartsOf(message)
          .filter((part) => part.type === 'tool-call' && part.providerExecuted !== true)
          .map((part) => ({ id: textOf(part.toolCallId), name: textOf(part.toolName) }))
      : [],
  resultsOf: (message) =>
    message.role === 'tool'
      ? contentPartsOf(message)
          .filter((part) => part.type === 'tool-result')
          .map((part) => ({ id: textOf(part.toolCallId), name: textOf(part.toolName) }))
      : [],
  isRequest: (message) => message.role === 'user',
  isOnlyResults: (message) => message.role === 'tool',
  withoutResults: (message, drop) => {
    if (message.role !== 'tool') return message;
    let index = -1;
    const kept = contentPartsOf(message).filter((part) => {
      if (part.type !== 'tool-result') return true;
      index += 1;
      return !drop({ id: textOf(part.toolCallId), name: textOf(part.toolName) }, index);
    });
    if (kept.length === contentPartsOf(message).length) return message;
    return kept.some((part) => part.type === 'tool-result')
      ? { ...message, content: kept }
      : undefined;
  },
  resultParts: (message) =>
    message.role === 'tool'
      ? contentPartsOf(message).filter((part) => part.type === 'tool-result')
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
    const parts = contentPartsOf(message);
    const kept = parts.filter(
      (part) =>
        part.type !== 'tool-call' ||
        part.providerExecuted === true ||
        !drop({ id: textOf(part.toolCallId), name: textOf(part.toolName) }),
    );
    if (kept.length === parts.length) return message;
    if (aiSdk.hasSignedReasoning(message)) return undefined;
    return kept.length > 0 ? { ...message, content: kept } : undefined;
  },
  hasSignedReasoning: (message) =>
    contentPartsOf(message).some(
      (part) => part.type === 'reasoning' && part.providerOptions !== undefined,
    ),
  note: (text) => ({ role: 'user', content: [{ type: 'text', text }] }),
  canHoldNote: (message) => message.role === 'user',
  withNote: (message, text) => ({
    ...message,
    content: [...contentPartsOf(message), { type: 'text', text }],
  }),
};
