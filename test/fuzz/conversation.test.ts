import { rm, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import {
  checkFormat,
  detectFormat,
  FORMATS,
  type Format,
  type Message,
  readConversation,
  repair,
  storeConversation,
  validate,
  withResumeNote,
} from '../../src/conversation/index.js';
import { createObjectStore, encodeTree, initStore } from '../../src/store/index.js';
import {
  adversarialJson,
  adversarialObject,
  expectDocumentedFailure,
  hostileValueText,
  mutated,
  outcomeOf,
  PROTOTYPE_KEYS,
  RUNS,
  randomBytes,
  trickyString,
} from '../helpers/fuzz.js';
import { expectLinearGrowth } from '../helpers/growth.js';
import { makeTempDirectory } from '../helpers/temp.js';

/** A valid history in each format, with calls, results, and signed reasoning where it exists. */
const SEEDS: Record<Format, Message[]> = {
  'openai-chat': [
    { role: 'system', content: 'be brief' },
    { role: 'user', content: 'hi' },
    {
      role: 'assistant',
      content: null,
      tool_calls: [{ id: 'c1', type: 'function', function: { name: 'read', arguments: '{}' } }],
    },
    { role: 'tool', tool_call_id: 'c1', content: 'ok' },
    { role: 'assistant', content: [{ type: 'text', text: 'done' }] },
  ],
  'openai-responses': [
    { role: 'user', content: 'hi' },
    { type: 'reasoning', id: 'r1', summary: [] },
    { type: 'function_call', call_id: 'c1', name: 'read', arguments: '{}' },
    { type: 'function_call_output', call_id: 'c1', output: 'ok' },
    { type: 'message', role: 'assistant', content: [{ type: 'output_text', text: 'done' }] },
  ],
  'openai-agents': [
    { role: 'user', content: 'hi' },
    { type: 'reasoning', id: 'r1', content: [] },
    { type: 'function_call', callId: 'c1', name: 'read', arguments: '{}', status: 'completed' },
    {
      type: 'function_call_result',
      callId: 'c1',
      name: 'read',
      status: 'completed',
      output: { type: 'text', text: 'ok' },
    },
    {
      type: 'message',
      role: 'assistant',
      status: 'completed',
      content: [{ type: 'output_text', text: 'done' }],
    },
  ],
  anthropic: [
    { role: 'user', content: 'hi' },
    {
      role: 'assistant',
      content: [
        { type: 'thinking', thinking: 'hmm', signature: 'sig' },
        { type: 'tool_use', id: 't1', name: 'read', input: {} },
      ],
    },
    {
      role: 'user',
      content: [
        { type: 'tool_result', tool_use_id: 't1', content: 'ok' },
        { type: 'text', text: 'go on' },
      ],
    },
  ],
  gemini: [
    { role: 'user', parts: [{ text: 'hi' }] },
    { role: 'model', parts: [{ functionCall: { name: 'read', args: {} }, thoughtSignature: 'x' }] },
    { role: 'user', parts: [{ functionResponse: { name: 'read', response: { ok: true } } }] },
    { role: 'model', parts: [{ functionCall: { id: 'g1', name: 'write', args: {} } }] },
  ],
  'ai-sdk': [
    { role: 'user', content: 'hi' },
    {
      role: 'assistant',
      content: [
        { type: 'reasoning', text: 'r', providerOptions: { anthropic: { signature: 's' } } },
        { type: 'tool-call', toolCallId: 'a1', toolName: 'read', input: {} },
      ],
    },
    {
      role: 'tool',
      content: [
        {
          type: 'tool-result',
          toolCallId: 'a1',
          toolName: 'read',
          output: { type: 'text', value: 'ok' },
        },
      ],
    },
  ],
  langchain: [
    {
      lc: 1,
      type: 'constructor',
      id: ['langchain_core', 'messages', 'HumanMessage'],
      kwargs: { content: 'hi' },
    },
    {
      lc: 1,
      type: 'constructor',
      id: ['langchain_core', 'messages', 'AIMessage'],
      kwargs: { content: '', tool_calls: [{ id: 'l1', name: 'read', args: {} }] },
    },
    { type: 'tool', data: { content: 'ok', tool_call_id: 'l1' } },
  ],
};

/** The field names the formats look at, so generated objects hit them. */
const MESSAGE_FIELDS = [
  ...new Set([
    ...[...JSON.stringify(Object.values(SEEDS)).matchAll(/"(\w+)":/g)].map(
      (match) => match[1] as string,
    ),
    'role',
    'content',
    'type',
    'id',
    'lc',
    'kwargs',
    'data',
    'parts',
    'tool_calls',
    'tool_call_id',
    'call_id',
    'functionCall',
    'functionResponse',
    'providerExecuted',
    'thought',
  ]),
];
const VALUES = [
  'user',
  'assistant',
  'tool',
  'model',
  'system',
  'developer',
  'human',
  'ai',
  'constructor',
  'tool_use',
  'tool_result',
  'tool-call',
  'tool-result',
  'function_call',
  'function_call_output',
  'HumanMessage',
  'AIMessage',
  'ToolMessage',
  'input_text',
  'image_url',
  'thinking',
  'reasoning',
];

type Path = (string | number)[];

/** The places in a JSON value, to its twelfth level: the paths of its members and items. */
function pathsOf(value: unknown, path: Path = [], into: Path[] = []): Path[] {
  into.push(path);
  // A value put in by an earlier change may nest far deeper: its inside is left as it is.
  if (path.length >= 12) return into;
  if (Array.isArray(value)) {
    for (const [index, item] of value.entries()) pathsOf(item, [...path, index], into);
  } else if (typeof value === 'object' && value !== null) {
    for (const [key, item] of Object.entries(value)) pathsOf(item, [...path, key], into);
  }
  return into;
}

/** A copy of `value` with what is at `path` replaced (or, for `undefined`, removed). */
function replacedAt(value: unknown, path: Path, replacement: unknown): unknown {
  if (path.length === 0) return replacement;
  const [head, ...rest] = path as [string | number, ...Path];
  if (Array.isArray(value)) {
    const copy = [...value];
    if (replacement === undefined && rest.length === 0) copy.splice(head as number, 1);
    else copy[head as number] = replacedAt(copy[head as number], rest, replacement);
    return copy;
  }
  const copy: Record<string, unknown> = { ...(value as Record<string, unknown>) };
  if (replacement === undefined && rest.length === 0) delete copy[head];
  else
    Object.defineProperty(copy, head, {
      value: replacedAt(copy[head], rest, replacement),
      enumerable: true,
      configurable: true,
      writable: true,
    });
  return copy;
}

/**
 * A valid history damaged where a format looks: a value swapped for one of the wrong type, a
 * member removed, a message repeated, dropped or moved, a history cut short; a few at once.
 */
const damagedHistory: fc.Arbitrary<{ format: Format; messages: unknown }> = fc
  .record({
    format: fc.constantFrom(...FORMATS),
    changes: fc.array(
      fc.record({
        at: fc.nat(),
        kind: fc.constantFrom('replace', 'remove', 'repeat', 'cut'),
        value: fc.oneof(
          hostileValueText.map((text) => JSON.parse(text) as unknown),
          fc.constantFrom(...VALUES, ...PROTOTYPE_KEYS),
          trickyString(),
        ),
      }),
      { minLength: 1, maxLength: 4 },
    ),
  })
  .map(({ format, changes }) => {
    let messages: unknown = SEEDS[format];
    for (const change of changes) {
      const list = Array.isArray(messages) ? messages : [messages];
      if (change.kind === 'repeat' && list.length > 0) {
        const index = change.at % list.length;
        messages = [...list.slice(0, index), list[index], ...list.slice(index)];
      } else if (change.kind === 'cut') {
        messages = list.slice(0, change.at % (list.length + 1));
      } else {
        const paths = pathsOf(messages);
        const path = paths[change.at % paths.length] as Path;
        messages = replacedAt(messages, path, change.kind === 'remove' ? undefined : change.value);
      }
    }
    return { format, messages };
  });

/** Message lists of every shape: damaged histories, JSON text damaged then parsed, any JSON. */
const anyHistory: fc.Arbitrary<{ format: string; messages: unknown }> = fc.oneof(
  { weight: 5, arbitrary: damagedHistory },
  {
    weight: 2,
    arbitrary: fc
      .record({
        format: fc.constantFrom(...FORMATS),
        bytes: mutated(FORMATS.map((format) => Buffer.from(JSON.stringify(SEEDS[format])))),
      })
      .map(({ format, bytes }) => {
        try {
          return { format, messages: JSON.parse(bytes.toString()) as unknown };
        } catch {
          return { format, messages: SEEDS[format] };
        }
      }),
  },
  {
    weight: 2,
    arbitrary: fc.record({
      format: fc.oneof(fc.constantFrom(...FORMATS), trickyString()),
      messages: fc.oneof(
        fc.array(adversarialObject([...MESSAGE_FIELDS, ...VALUES]), { maxLength: 5 }),
        adversarialJson([...MESSAGE_FIELDS, ...VALUES]),
      ),
    }),
  },
);

const FORMAT_ERRORS = [
  'CONVERSATION_FORMAT_UNKNOWN',
  'CONVERSATION_FORMAT_MISMATCH',
  'INVALID_ARGUMENT',
];

describe('fuzzing the conversation formats', () => {
  it('detectFormat names a format every message fits, or refuses with CONVERSATION_FORMAT_UNKNOWN', async () => {
    await fc.assert(
      fc.asyncProperty(anyHistory, async ({ messages }) => {
        const detected = await outcomeOf(() => detectFormat(messages as unknown[]));
        if (detected.isThrown) {
          expectDocumentedFailure(detected.error, ['CONVERSATION_FORMAT_UNKNOWN']);
          return;
        }
        expect(checkFormat(messages as unknown[], detected.value)).toBe(messages);
      }),
      { numRuns: RUNS.quick },
    );
  });

  it('checkFormat and validate answer for any list and any format name, never throwing anything else', async () => {
    await fc.assert(
      fc.asyncProperty(anyHistory, async ({ format, messages }) => {
        const checked = await outcomeOf(() => checkFormat(messages as unknown[], format as Format));
        if (checked.isThrown) expectDocumentedFailure(checked.error, FORMAT_ERRORS);
        const validated = await outcomeOf(() => validate(messages as unknown[], format as Format));
        if (validated.isThrown) {
          expectDocumentedFailure(validated.error, FORMAT_ERRORS);
          return;
        }
        for (const problem of validated.value.problems) {
          expect(typeof problem.message).toBe('string');
          expect(Number.isInteger(problem.index)).toBe(true);
        }
        expect(validated.value.isValid).toBe(validated.value.problems.length === 0);
      }),
      { numRuns: RUNS.quick },
    );
  });

  it('repair answers for any list, gives back a valid history as it was, and its output repairs again', async () => {
    await fc.assert(
      fc.asyncProperty(
        anyHistory,
        fc.constantFrom('answer' as const, 'drop' as const),
        fc.option(trickyString(), { nil: undefined }),
        async ({ format, messages }, strategy, resultText) => {
          const options = { strategy, ...(resultText !== undefined && { resultText }) };
          const repaired = await outcomeOf(() =>
            repair(messages as unknown[], format as Format, options),
          );
          if (repaired.isThrown) {
            expectDocumentedFailure(repaired.error, FORMAT_ERRORS);
            return;
          }
          const result = repaired.value;
          if (validate(messages as unknown[], format as Format).isValid) {
            // The very messages, compared by identity: they may nest too deep to compare inside.
            const given = messages as unknown[];
            expect(result.messages).toHaveLength(given.length);
            expect(result.messages.every((message, index) => message === given[index])).toBe(true);
          }
          const again = await outcomeOf(() => repair(result.messages, format as Format, options));
          if (again.isThrown) expectDocumentedFailure(again.error, FORMAT_ERRORS);
        },
      ),
      { numRuns: RUNS.quick },
    );
  });

  it('withResumeNote adds the note to any list of messages, merged into the last or after it', async () => {
    await fc.assert(
      fc.asyncProperty(
        anyHistory,
        fc.constantFrom(...FORMATS),
        trickyString(),
        fc.option(trickyString(), { nil: undefined }),
        async ({ messages }, format, text, patchNote) => {
          const list = (Array.isArray(messages) ? messages : [messages]).filter(
            (message): message is Message => typeof message === 'object' && message !== null,
          );
          const noted = await outcomeOf(() =>
            withResumeNote(list, format, text, patchNote === undefined ? {} : { patchNote }),
          );
          if (noted.isThrown) throw noted.error;
          expect([list.length, list.length + 1]).toContain(noted.value.length);
        },
      ),
      { numRuns: RUNS.quick },
    );
  });

  it('readConversation reads a conversation back, or refuses a damaged one with a documented error', async () => {
    const { directory: storeDirectory } = await initStore(await makeTempDirectory());
    const store = createObjectStore(storeDirectory);
    const seeds = FORMATS.flatMap((format) =>
      SEEDS[format].map((message) => Buffer.from(JSON.stringify(message))),
    );
    await fc.assert(
      fc.asyncProperty(
        fc.constantFrom(...FORMATS),
        fc.oneof(mutated(seeds), randomBytes()),
        fc.nat(),
        fc.boolean(),
        async (format, bytes, pick, isOverwritten) => {
          const batch = store.batch();
          const stored = await storeConversation(SEEDS[format], batch);
          await batch.commit();
          const messageCount = SEEDS[format].length;
          let tree = stored.tree;
          let damaged: string | undefined;
          if (isOverwritten) {
            // A message object damaged on disk, under its own name.
            const message = Buffer.from(JSON.stringify(SEEDS[format][pick % messageCount]));
            const { digest } = await store.put(message);
            damaged = join(storeDirectory, 'objects', digest.slice(7, 9), digest.slice(9));
            await rm(damaged, { force: true });
            await writeFile(damaged, bytes);
          } else {
            // A tree that names an object holding anything as one of its messages.
            const { digest } = await store.put(bytes);
            const entries = SEEDS[format].map((_message, index) => ({
              name: `${String(index).padStart(8, '0')}.json`,
              type: 'file' as const,
              mode: 0o644,
              sizeBytes: bytes.length,
              digest,
            }));
            ({ digest: tree } = await store.put(encodeTree(entries)));
          }
          const read = await outcomeOf(() => readConversation(store, tree));
          // The next run stores the message again.
          if (damaged) await rm(damaged, { force: true });
          if (read.isThrown) {
            expectDocumentedFailure(read.error, ['OBJECT_CORRUPT', 'TREE_INVALID']);
          } else {
            expect(read.value).toHaveLength(messageCount);
          }
        },
      ),
      { numRuns: RUNS.normal },
    );
  });
});

describe('what fuzzing the conversation formats found', () => {
  const deep = JSON.parse(`${'['.repeat(20_000)}0${']'.repeat(20_000)}`) as unknown;

  it('refuses a format name that is a member of every object (__proto__, constructor) as INVALID_ARGUMENT', () => {
    for (const format of ['__proto__', 'constructor', 'valueOf']) {
      expect(() => repair([{}], format as Format)).toThrow(
        expect.objectContaining({ code: 'INVALID_ARGUMENT' }),
      );
      expect(() => validate([], format as Format)).toThrow(
        expect.objectContaining({ code: 'INVALID_ARGUMENT' }),
      );
    }
  });

  it('validate refuses what is not a list as CONVERSATION_FORMAT_MISMATCH', () => {
    expect(() => validate(true as unknown as unknown[], 'openai-chat')).toThrow(
      expect.objectContaining({ code: 'CONVERSATION_FORMAT_MISMATCH' }),
    );
  });

  it('reads a part type that String() cannot convert as no known type', () => {
    const messages = [{ role: 'assistant', content: [{ type: { toString: 1 } }] }];
    expect(() => detectFormat(messages)).toThrow(
      expect.objectContaining({ code: 'CONVERSATION_FORMAT_UNKNOWN' }),
    );
    const calls = [
      { role: 'assistant', content: null, tool_calls: [{ id: { toString: 1 }, function: {} }] },
    ];
    expect(validate(calls, 'openai-chat').problems).toEqual([
      expect.objectContaining({ message: expect.stringContaining('[object Object]') }),
    ]);
  });

  it('takes no LangChain class named like an Object.prototype member as a message', () => {
    const message = { lc: 1, type: 'constructor', id: ['constructor'], kwargs: {} };
    expect(() => checkFormat([message], 'langchain')).toThrow(
      expect.objectContaining({ code: 'CONVERSATION_FORMAT_MISMATCH' }),
    );
  });

  it('names a message nested too deep to write out, refusing the list as CONVERSATION_FORMAT_UNKNOWN', () => {
    expect(() => detectFormat([deep])).toThrow(
      expect.objectContaining({ code: 'CONVERSATION_FORMAT_UNKNOWN' }),
    );
  });

  it('validates an Anthropic result whose content nests too deep to write out', () => {
    const messages = [
      { role: 'assistant', content: [{ type: 'tool_use', id: 't1', name: 'read', input: {} }] },
      { role: 'user', content: [{ type: 'tool_result', tool_use_id: 't1', content: deep }] },
    ];
    expect(validate(messages, 'anthropic')).toEqual({ isValid: true, problems: [] });
  });

  it('validates and repairs a long history of calls, or one turn of parallel calls, in linear time', () => {
    const call = (id: string) => ({
      id,
      type: 'function',
      function: { name: 'r', arguments: '{}' },
    });
    const idsOf = (size: number) => Array.from({ length: size }, (_, index) => `c${index}`);
    // Every other call answered: each result was searched for among all of them, and each
    // answered call's place checked message by message (quadratic: minutes for 40,000 calls).
    const long = (size: number): Message[] =>
      idsOf(size).flatMap((id, index) => [
        { role: 'assistant', content: null, tool_calls: [call(id)] },
        ...(index % 2 ? [{ role: 'tool', tool_call_id: id, content: 'ok' }] : []),
      ]);
    const wide = (size: number): Message[] => {
      const ids = idsOf(size);
      return [
        { role: 'assistant', content: null, tool_calls: ids.map(call) },
        ...ids
          .slice(1)
          .reverse()
          .map((id) => ({ role: 'tool', tool_call_id: id, content: 'ok' })),
      ];
    };
    const anthropicWide = (size: number): Message[] => {
      const ids = idsOf(size);
      return [
        {
          role: 'assistant',
          content: ids.map((id) => ({ type: 'tool_use', id, name: 'r', input: {} })),
        },
        {
          role: 'user',
          content: ids
            .slice(1)
            .map((id) => ({ type: 'tool_result', tool_use_id: id, content: 'ok' })),
        },
      ];
    };
    // Times grow with the size measured in the same run, not against a clock: a loaded machine
    // slows both alike (a bound of 2 s for 40,000 calls failed at a load of 10).
    for (const [name, build, format] of [
      ['long', long, 'openai-chat'],
      ['wide', wide, 'openai-chat'],
      ['anthropicWide', anthropicWide, 'anthropic'],
    ] as const) {
      const report = expectLinearGrowth(`validate ${name}`, build, (messages) =>
        validate(messages, format),
      );
      expect(report.isValid).toBe(false);
      for (const strategy of ['answer', 'drop'] as const) {
        const repaired = expectLinearGrowth(`repair ${name} (${strategy})`, build, (messages) =>
          repair(messages, format, { strategy }),
        );
        expect(validate(repaired.messages, format).isValid).toBe(true);
      }
    }
  }, 300_000);

  it('readConversation refuses a tree whose message is not JSON as TREE_INVALID', async () => {
    const { directory: storeDirectory } = await initStore(await makeTempDirectory());
    const store = createObjectStore(storeDirectory);
    const { digest, sizeBytes } = await store.put(Buffer.from('export const a = 1;\n'));
    const { digest: tree } = await store.put(
      encodeTree([{ name: '00000000.json', type: 'file', mode: 0o644, sizeBytes, digest }]),
    );
    await expect(readConversation(store, tree)).rejects.toMatchObject({ code: 'TREE_INVALID' });
  });
});
