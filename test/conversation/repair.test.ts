import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import {
  detectFormat,
  FORMATS,
  type Format,
  type Message,
  repair,
  resumeNote,
  validate,
  withResumeNote,
} from '../../src/conversation/index.js';

/** A history in no particular format: what the generators produce and each format renders. */
type Event =
  | { kind: 'user'; text: string }
  | { kind: 'assistant'; text?: string; thinking?: string; calls: { id: string; name: string }[] }
  | { kind: 'results'; results: { id: string; name: string; output: string }[] };

/** Random valid histories: user turns, then chains of assistant steps whose calls are answered. */
const histories = fc
  .array(
    fc.record({
      user: fc.string({ minLength: 1, maxLength: 8 }),
      steps: fc.array(
        fc.record({
          text: fc.option(fc.string({ minLength: 1, maxLength: 8 }), { nil: undefined }),
          thinking: fc.option(fc.string({ minLength: 1, maxLength: 8 }), { nil: undefined }),
          calls: fc.array(fc.constantFrom('read', 'write', 'exec', 'search'), { maxLength: 3 }),
          order: fc.array(fc.nat(), { minLength: 3, maxLength: 3 }),
        }),
        { minLength: 1, maxLength: 3 },
      ),
    }),
    { minLength: 1, maxLength: 4 },
  )
  .map((exchanges) => {
    let next = 0;
    const events: Event[] = [];
    for (const exchange of exchanges) {
      events.push({ kind: 'user', text: exchange.user });
      for (const step of exchange.steps) {
        const calls = step.calls.map((name) => ({ id: `call_${next++}`, name }));
        events.push({
          kind: 'assistant',
          ...(step.text !== undefined && { text: step.text }),
          ...(step.thinking !== undefined && { thinking: step.thinking }),
          calls: calls.length > 0 || step.text !== undefined ? calls : [],
          ...(calls.length === 0 && step.text === undefined && { text: 'ok' }),
        });
        if (calls.length > 0) {
          // Parallel results may come back in any order.
          const results = calls.map((call, index) => ({
            ...call,
            output: `out ${call.id}`,
            rank: step.order[index] ?? 0,
          }));
          results.sort((a, b) => a.rank - b.rank);
          events.push({
            kind: 'results',
            results: results.map(({ rank: _rank, ...result }) => result),
          });
        }
      }
    }
    return events;
  });

function render(events: readonly Event[], format: Format): Message[] {
  const out: Message[] = [];
  for (const event of events) {
    if (event.kind === 'user') {
      if (format === 'gemini') out.push({ role: 'user', parts: [{ text: event.text }] });
      else if (format === 'langchain') out.push(lc('HumanMessage', { content: event.text }));
      else out.push({ role: 'user', content: event.text });
      continue;
    }
    if (event.kind === 'assistant') {
      switch (format) {
        case 'openai-chat':
          out.push({
            role: 'assistant',
            content: event.text ?? null,
            ...(event.calls.length > 0 && {
              tool_calls: event.calls.map((call) => ({
                id: call.id,
                type: 'function',
                function: { name: call.name, arguments: '{}' },
              })),
            }),
          });
          break;
        case 'openai-responses':
          if (event.thinking)
            out.push({
              type: 'reasoning',
              id: `rs_${out.length}`,
              summary: [],
              encrypted_content: event.thinking,
            });
          if (event.text)
            out.push({
              type: 'message',
              role: 'assistant',
              content: [{ type: 'output_text', text: event.text }],
            });
          for (const call of event.calls) {
            out.push({ type: 'function_call', call_id: call.id, name: call.name, arguments: '{}' });
          }
          break;
        case 'anthropic':
          out.push({
            role: 'assistant',
            content: [
              ...(event.thinking
                ? [
                    {
                      type: 'thinking',
                      thinking: event.thinking,
                      signature: `sig-${event.thinking}`,
                    },
                  ]
                : []),
              ...(event.text ? [{ type: 'text', text: event.text }] : []),
              ...event.calls.map((call) => ({
                type: 'tool_use',
                id: call.id,
                name: call.name,
                input: {},
              })),
            ],
          });
          break;
        case 'gemini':
          out.push({
            role: 'model',
            parts: [
              ...(event.text ? [{ text: event.text }] : []),
              ...event.calls.map((call, index) => ({
                functionCall: { id: call.id, name: call.name, args: {} },
                ...(index === 0 && event.thinking && { thoughtSignature: `sig-${event.thinking}` }),
              })),
            ],
          });
          break;
        case 'ai-sdk':
          out.push({
            role: 'assistant',
            content: [
              ...(event.thinking
                ? [
                    {
                      type: 'reasoning',
                      text: event.thinking,
                      providerOptions: { anthropic: { signature: 's' } },
                    },
                  ]
                : []),
              ...(event.text ? [{ type: 'text', text: event.text }] : []),
              ...event.calls.map((call) => ({
                type: 'tool-call',
                toolCallId: call.id,
                toolName: call.name,
                input: {},
              })),
            ],
          });
          break;
        case 'openai-agents':
          if (event.thinking)
            out.push({
              type: 'reasoning',
              id: `rs_${out.length}`,
              content: [],
              providerData: { encrypted: event.thinking },
            });
          if (event.text)
            out.push({
              type: 'message',
              role: 'assistant',
              status: 'completed',
              content: [{ type: 'output_text', text: event.text }],
            });
          for (const call of event.calls) {
            out.push({ type: 'function_call', callId: call.id, name: call.name, arguments: '{}' });
          }
          break;
        case 'langchain':
          out.push(
            lc('AIMessage', {
              content: event.text ?? '',
              tool_calls: event.calls.map((call) => ({
                id: call.id,
                name: call.name,
                args: {},
                type: 'tool_call',
              })),
            }),
          );
          break;
      }
      continue;
    }
    switch (format) {
      case 'openai-chat':
        for (const result of event.results)
          out.push({ role: 'tool', tool_call_id: result.id, content: result.output });
        break;
      case 'openai-responses':
        for (const result of event.results)
          out.push({ type: 'function_call_output', call_id: result.id, output: result.output });
        break;
      case 'anthropic':
        out.push({
          role: 'user',
          content: event.results.map((result) => ({
            type: 'tool_result',
            tool_use_id: result.id,
            content: result.output,
          })),
        });
        break;
      case 'gemini':
        out.push({
          role: 'user',
          parts: event.results.map((result) => ({
            functionResponse: {
              id: result.id,
              name: result.name,
              response: { output: result.output },
            },
          })),
        });
        break;
      case 'ai-sdk':
        out.push({
          role: 'tool',
          content: event.results.map((result) => ({
            type: 'tool-result',
            toolCallId: result.id,
            toolName: result.name,
            output: { type: 'text', value: result.output },
          })),
        });
        break;
      case 'langchain':
        for (const result of event.results)
          out.push(lc('ToolMessage', { content: result.output, tool_call_id: result.id }));
        break;
      case 'openai-agents':
        for (const result of event.results)
          out.push({
            type: 'function_call_result',
            callId: result.id,
            name: result.name,
            status: 'completed',
            output: { type: 'text', text: result.output },
          });
        break;
    }
  }
  return out;
}

function lc(name: string, kwargs: Record<string, unknown>): Message {
  return { lc: 1, type: 'constructor', id: ['langchain_core', 'messages', name], kwargs };
}

/** Every result of a history, serialized, keyed by the id it answers. */
function resultsById(messages: readonly Message[]): Map<string, string> {
  const found = new Map<string, string>();
  const visit = (value: unknown): void => {
    if (Array.isArray(value)) {
      value.forEach(visit);
      return;
    }
    if (typeof value !== 'object' || value === null) return;
    const record = value as Record<string, unknown>;
    const id =
      (record.role === 'tool' && typeof record.tool_call_id === 'string' && record.tool_call_id) ||
      (record.type === 'function_call_output' && record.call_id) ||
      (record.type === 'function_call_result' && record.callId) ||
      (record.type === 'tool_result' && record.tool_use_id) ||
      (record.type === 'tool-result' && record.toolCallId) ||
      (typeof record.functionResponse === 'object' &&
        (record.functionResponse as { id?: string }).id) ||
      (Array.isArray(record.id) &&
        String(record.id.at(-1)) === 'ToolMessage' &&
        (record.kwargs as { tool_call_id: string }).tool_call_id);
    if (typeof id === 'string') {
      found.set(id, JSON.stringify(value));
      return;
    }
    Object.values(record).forEach(visit);
  };
  visit(messages);
  return found;
}

/** The ids of the calls of a history. */
function callIds(messages: readonly Message[]): Set<string> {
  const text = JSON.stringify(messages);
  return new Set([...text.matchAll(/call_\d+/g)].map((match) => match[0]));
}

const signed = (messages: readonly Message[]): string[] =>
  [...JSON.stringify(messages).matchAll(/sig-[^"]*|"encrypted_content":"[^"]*"/g)].map(
    (match) => match[0],
  );

describe.each(FORMATS)('conversation repair: %s', (format) => {
  it('renders valid histories that validate, and recognizes their format', () => {
    fc.assert(
      fc.property(histories, (events) => {
        const messages = render(events, format);
        expect(validate(messages, format).problems).toEqual([]);
        if (JSON.stringify(messages).includes('call_')) expect(detectFormat(messages)).toBe(format);
        expect(repair(messages, format).messages).toEqual(messages);
      }),
      { numRuns: 100 },
    );
  });

  it('after a rollback to any point, the repaired history is valid and keeps every complete pair and all signed reasoning', () => {
    fc.assert(
      fc.property(
        histories,
        fc.nat(),
        fc.constantFrom('answer' as const, 'drop' as const),
        (events, cut, strategy) => {
          const full = render(events, format);
          const prefix = full.slice(0, cut % (full.length + 1));
          const { messages } = repair(prefix, format, { strategy });
          expect(validate(messages, format).problems).toEqual([]);
          const before = resultsById(prefix);
          const after = resultsById(messages);
          const calls = callIds(prefix);
          for (const [id, result] of before) {
            if (calls.has(id) && callIds(messages).has(id)) expect(after.get(id)).toBe(result);
          }
          if (strategy === 'answer') {
            expect(signed(messages)).toEqual(signed(prefix));
            // Nothing before the cut is lost: every call is still there, answered.
            for (const id of calls) expect(after.has(id)).toBe(true);
          }
        },
      ),
      { numRuns: 200 },
    );
  });

  it('puts misplaced results back next to their calls and removes results without a call', () => {
    fc.assert(
      fc.property(histories, fc.nat(), (events, pick) => {
        const full = render(events, format);
        const withOrphan = [...full];
        // An orphan result, and a history whose last results were moved to the very end.
        const orphanEvents: Event[] = [
          { kind: 'results', results: [{ id: 'call_999', name: 'read', output: 'x' }] },
        ];
        const orphan = render(orphanEvents, format);
        withOrphan.splice(pick % (full.length + 1), 0, ...orphan);
        const repaired = repair(withOrphan, format);
        expect(validate(repaired.messages, format).problems).toEqual([]);
        expect(JSON.stringify(repaired.messages)).not.toContain('call_999');
      }),
      { numRuns: 100 },
    );
  });
});

describe('conversation repair specifics', () => {
  it('answers a dangling Anthropic call with an error result in the next user turn, keeping the thinking block', () => {
    const messages: Message[] = [
      { role: 'user', content: 'fix the bug' },
      {
        role: 'assistant',
        content: [
          { type: 'thinking', thinking: 'I should run the tests', signature: 'SIG' },
          { type: 'tool_use', id: 'toolu_1', name: 'exec', input: { cmd: 'npm test' } },
          { type: 'tool_use', id: 'toolu_2', name: 'read', input: { path: 'a.ts' } },
        ],
      },
      {
        role: 'user',
        content: [{ type: 'tool_result', tool_use_id: 'toolu_2', content: 'source' }],
      },
    ];
    expect(validate(messages, 'anthropic').isValid).toBe(false);
    const repaired = repair(messages, 'anthropic');
    expect(repaired.answered).toEqual([{ id: 'toolu_1', name: 'exec' }]);
    expect(repaired.messages[1]).toEqual(messages[1]);
    expect(repaired.messages[2]).toEqual({
      role: 'user',
      content: [
        { type: 'tool_result', tool_use_id: 'toolu_2', content: 'source' },
        {
          type: 'tool_result',
          tool_use_id: 'toolu_1',
          content: expect.stringContaining('rolled back'),
          is_error: true,
        },
      ],
    });
    const dropped = repair(messages, 'anthropic', { strategy: 'drop' });
    // The signed turn cannot be edited, so it goes whole, and the result it had goes with it.
    expect(dropped.messages).toEqual([{ role: 'user', content: 'fix the bug' }]);
  });

  it('moves a late result to the start of the next user turn, before its text', () => {
    const messages: Message[] = [
      { role: 'user', content: 'go' },
      { role: 'assistant', content: [{ type: 'tool_use', id: 't1', name: 'x', input: {} }] },
      { role: 'user', content: [{ type: 'text', text: 'hm?' }] },
      { role: 'assistant', content: 'waiting' },
      { role: 'user', content: [{ type: 'tool_result', tool_use_id: 't1', content: 'late' }] },
    ];
    const repaired = repair(messages, 'anthropic');
    expect(repaired.movedResults).toBe(1);
    expect(repaired.messages).toEqual([
      messages[0],
      messages[1],
      {
        role: 'user',
        content: [
          { type: 'tool_result', tool_use_id: 't1', content: 'late' },
          { type: 'text', text: 'hm?' },
        ],
      },
      messages[3],
    ]);
    expect(validate(messages, 'anthropic').problems.map((problem) => problem.index)).toEqual([
      1, 4,
    ]);
  });

  it('never invents an id for a Gemini call that has none', () => {
    const messages: Message[] = [
      { role: 'user', parts: [{ text: 'weather?' }] },
      {
        role: 'model',
        parts: [
          { functionCall: { name: 'weather', args: { city: 'Oslo' } }, thoughtSignature: 'S' },
        ],
      },
    ];
    const repaired = repair(messages, 'gemini');
    expect(repaired.messages[2]).toEqual({
      role: 'user',
      parts: [
        {
          functionResponse: {
            name: 'weather',
            response: { error: expect.stringContaining('rolled back') },
          },
        },
      ],
    });
    expect(validate(repaired.messages, 'gemini').isValid).toBe(true);
  });

  it('builds the resume note where each provider accepts it', () => {
    expect(resumeNote('openai-chat', 'Rolled back.')).toEqual({
      role: 'system',
      content: 'Rolled back.',
    });
    expect(
      resumeNote('openai-responses', 'Rolled back.', { patchNote: 'fixed the import' }),
    ).toEqual({
      type: 'message',
      role: 'developer',
      content: 'Rolled back. Patch applied since: fixed the import',
    });
    const anthropicHistory: Message[] = [
      { role: 'user', content: 'go' },
      { role: 'assistant', content: [{ type: 'tool_use', id: 't1', name: 'x', input: {} }] },
      { role: 'user', content: [{ type: 'tool_result', tool_use_id: 't1', content: 'done' }] },
    ];
    const noted = withResumeNote(anthropicHistory, 'anthropic', 'Rolled back.');
    expect(noted).toHaveLength(3);
    expect(noted[2]).toEqual({
      role: 'user',
      content: [
        { type: 'tool_result', tool_use_id: 't1', content: 'done' },
        { type: 'text', text: 'Rolled back.' },
      ],
    });
    expect(validate(noted, 'anthropic').isValid).toBe(true);
    const afterAssistant = withResumeNote(
      [
        { role: 'user', content: 'a' },
        { role: 'assistant', content: 'b' },
      ],
      'anthropic',
      'N',
    );
    expect(afterAssistant.at(-1)).toEqual({ role: 'user', content: [{ type: 'text', text: 'N' }] });
    for (const format of FORMATS) {
      expect(JSON.stringify(resumeNote(format, 'N'))).not.toContain(
        '"system"' + (format === 'openai-chat' ? 'x' : ''),
      );
    }
  });

  it('refuses what is not a known format, and a format that does not match', async () => {
    expect(() => detectFormat([{ hello: 'world' }])).toThrow(
      expect.objectContaining({ code: 'CONVERSATION_FORMAT_UNKNOWN' }),
    );
    expect(() => detectFormat('nope' as never)).toThrow(
      expect.objectContaining({ code: 'CONVERSATION_FORMAT_UNKNOWN' }),
    );
    expect(() => repair([{ role: 'model', parts: [{ text: 'x' }] }], 'anthropic')).toThrow(
      expect.objectContaining({
        code: 'CONVERSATION_FORMAT_MISMATCH',
        data: expect.objectContaining({ detected: 'gemini' }),
        message: expect.stringContaining('is not an anthropic message'),
      }),
    );
  });

  it('handles a history of several megabytes', () => {
    const big = 'x'.repeat(1024 * 1024);
    const messages: Message[] = Array.from({ length: 8 }, (_, index) =>
      index % 2 === 0 ? { role: 'user', content: big } : { role: 'assistant', content: big },
    );
    messages.push({
      role: 'assistant',
      content: null,
      tool_calls: [{ id: 'c1', type: 'function', function: { name: 'f', arguments: '{}' } }],
    });
    const repaired = repair(messages, 'openai-chat');
    expect(repaired.messages).toHaveLength(10);
    expect(validate(repaired.messages, 'openai-chat').isValid).toBe(true);
  });
});
