// Type-level tests: what Rewind creates in a conversation satisfies each provider's official
// TypeScript types (type-only dev dependencies; `npm run typecheck` is the real test here).

import type {
  ContentBlockParam,
  MessageParam,
  ToolResultBlockParam,
} from '@anthropic-ai/sdk/resources/messages';
import type { Content, Part } from '@google/genai';
import type { AgentInputItem } from '@openai/agents';
import type {
  ChatCompletionMessageParam,
  ChatCompletionToolMessageParam,
} from 'openai/resources/chat/completions';
import type { ResponseInputItem } from 'openai/resources/responses/responses';
import { describe, expect, it } from 'vitest';
import { type Message, repair, resumeNote, syntheticResult } from '../../src/conversation/index.js';

const call = { id: 'call_1', name: 'exec' };

describe('provider types', () => {
  it('OpenAI Chat Completions: the note is a message, the synthetic result a tool message', () => {
    const note: ChatCompletionMessageParam = resumeNote('openai-chat', 'rolled back');
    const result: ChatCompletionToolMessageParam = syntheticResult('openai-chat', call);
    const history: ChatCompletionMessageParam[] = [
      { role: 'user', content: 'go' },
      {
        role: 'assistant',
        content: null,
        tool_calls: [
          { id: 'call_1', type: 'function', function: { name: 'exec', arguments: '{}' } },
        ],
      },
    ];
    const repaired = repair(history as unknown as Message[], 'openai-chat').messages;
    expect(repaired[2]).toEqual(result);
    expect(note.role).toBe('system');
  });

  it('OpenAI Responses: both are input items', () => {
    const note: ResponseInputItem = resumeNote('openai-responses', 'rolled back');
    const output: ResponseInputItem = syntheticResult('openai-responses', call);
    expect([note, output]).toHaveLength(2);
  });

  it('OpenAI Agents SDK: both are AgentInputItems, and a history of them is repaired by callId', () => {
    const note: AgentInputItem = resumeNote('openai-agents', 'rolled back');
    const result: AgentInputItem = syntheticResult('openai-agents', call);
    const history: AgentInputItem[] = [
      { role: 'user', content: 'go' },
      {
        type: 'function_call',
        callId: 'call_1',
        name: 'exec',
        arguments: '{}',
        status: 'completed',
      },
    ];
    const repaired = repair(history as unknown as Message[], 'openai-agents').messages;
    expect(repaired[2]).toEqual(result);
    expect(note).toMatchObject({ role: 'user' });
  });

  it('Anthropic Messages: the note is a user message, the synthetic result a tool_result block', () => {
    const note: MessageParam = resumeNote('anthropic', 'rolled back');
    const result: ToolResultBlockParam = syntheticResult('anthropic', call);
    const block: ContentBlockParam = result;
    expect(block.type).toBe('tool_result');
    expect(note.role).toBe('user');
  });

  it('Gemini: the note is a user Content, the synthetic result a functionResponse Part', () => {
    const note: Content = resumeNote('gemini', 'rolled back');
    const part: Part = syntheticResult('gemini', { id: undefined, name: 'exec' });
    expect(part.functionResponse?.id).toBeUndefined();
    expect(note.role).toBe('user');
  });

  it('the types are checked, not any', () => {
    // @ts-expect-error a Gemini note is not an OpenAI Chat message
    const wrong: ChatCompletionMessageParam = resumeNote('gemini', 'x');
    // @ts-expect-error an Anthropic tool_result is not a Gemini part... it has no functionResponse
    const part: Part & { functionResponse: object } = syntheticResult('anthropic', call);
    expect([wrong, part]).toHaveLength(2);
  });
});
