// The Gemini format (Google GenAI contents).
import {
  type Adapter,
  arrayOf,
  type Call,
  isObject,
  type Message,
  textOf,
} from './format-adapter.js';

const geminiParts = (message: Message): Record<string, unknown>[] =>
  arrayOf(message.parts).filter(isObject);

/** The id (absent in some calls and results) and name of a `functionCall` or `functionResponse`. */
const identityOf = (value: Record<string, unknown>): Call => ({
  id: typeof value.id === 'string' ? value.id : undefined,
  name: textOf(value.name),
});

/** Gemini contents. */
export const gemini: Adapter = {
  format: 'gemini',
  placement: 'next-user-turn',
  roles: ['user', 'model'],
  isMessage: (value) =>
    isObject(value) &&
    (value.role === 'user' || value.role === 'model' || value.role === undefined) &&
    Array.isArray(value.parts) &&
    value.parts.every(isObject),
  roleOf: (message) => textOf(message.role ?? 'user'),
  callsOf: (message) =>
    message.role === 'model'
      ? geminiParts(message)
          .filter((part) => isObject(part.functionCall))
          .map((part) => identityOf(part.functionCall as Record<string, unknown>))
      : [],
  resultsOf: (message) =>
    message.role !== 'model'
      ? geminiParts(message)
          .filter((part) => isObject(part.functionResponse))
          .map((part) => identityOf(part.functionResponse as Record<string, unknown>))
      : [],
  isRequest: (message) =>
    message.role !== 'model' &&
    !geminiParts(message).some((part) => isObject(part.functionResponse)),
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
      return !drop(identityOf(part.functionResponse), index);
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
      return !drop(identityOf(part.functionCall));
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
