// The Anthropic Messages format.
import { type Adapter, arrayOf, contentPartsOf, isObject, textOf } from './format-adapter.js';

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

/** Anthropic Messages. */
export const anthropic: Adapter = {
  format: 'anthropic',
  placement: 'next-user-turn',
  roles: ['user', 'assistant'],
  isMessage: (value) =>
    isObject(value) &&
    (value.role === 'user' || value.role === 'assistant') &&
    (typeof value.content === 'string' ||
      (Array.isArray(value.content) &&
        value.content.every(
          (block) => isObject(block) && ANTHROPIC_BLOCKS.has(textOf(block.type)),
        ))),
  roleOf: (message) => textOf(message.role),
  callsOf: (message) =>
    message.role === 'assistant'
      ? contentPartsOf(message)
          .filter((block) => block.type === 'tool_use')
          .map((block) => ({ id: textOf(block.id), name: textOf(block.name) }))
      : [],
  resultsOf: (message) =>
    message.role === 'user'
      ? contentPartsOf(message)
          .filter((block) => block.type === 'tool_result')
          .map((block) => ({ id: textOf(block.tool_use_id), name: undefined }))
      : [],
  isRequest: (message) =>
    message.role === 'user' &&
    !contentPartsOf(message).some((block) => block.type === 'tool_result'),
  isOnlyResults: (message) =>
    message.role === 'user' &&
    contentPartsOf(message).length > 0 &&
    contentPartsOf(message).every((block) => block.type === 'tool_result'),
  withoutResults: (message, drop) => {
    if (message.role !== 'user' || typeof message.content === 'string') return message;
    let index = -1;
    const kept = contentPartsOf(message).filter((block) => {
      if (block.type !== 'tool_result') return true;
      index += 1;
      return !drop({ id: textOf(block.tool_use_id), name: undefined }, index);
    });
    if (kept.length === arrayOf(message.content).length) return message;
    return kept.length > 0 ? { ...message, content: kept } : undefined;
  },
  resultParts: (message) =>
    message.role === 'user'
      ? contentPartsOf(message).filter((block) => block.type === 'tool_result')
      : [],
  withResultsFirst: (message, parts) => ({
    ...message,
    content: [...parts, ...contentPartsOf(message).filter((block) => block.type !== 'tool_result')],
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
    const blocks = contentPartsOf(message);
    const kept = blocks.filter(
      (block) =>
        block.type !== 'tool_use' || !drop({ id: textOf(block.id), name: textOf(block.name) }),
    );
    if (kept.length === blocks.length) return message;
    // Signed thinking belongs to the turn that made the call: never edited, so the turn goes whole.
    if (anthropic.hasSignedReasoning(message)) return undefined;
    return kept.length > 0 ? { ...message, content: kept } : undefined;
  },
  hasSignedReasoning: (message) =>
    contentPartsOf(message).some(
      (block) => block.type === 'thinking' || block.type === 'redacted_thinking',
    ),
  note: (text) => ({ role: 'user', content: [{ type: 'text', text }] }),
  canHoldNote: (message) => message.role === 'user',
  withNote: (message, text) => ({
    ...message,
    content: [...contentPartsOf(message), { type: 'text', text }],
  }),
};
