import { mkdir, readdir, readFile, symlink, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import fc from 'fast-check';
import { expect } from 'vitest';
import { ERROR_CODES, isRewindError } from '../../src/errors.js';
import { init, note, openSession } from '../../src/index.js';
import { ENTRY_KINDS } from '../../src/ledger/index.js';
import { createObjectStore, decodeTree } from '../../src/store/index.js';
import { ROOT } from './processes.js';

/** The golden store of SPEC.md's version 1: real bytes Rewind wrote, as seeds for mutations. */
export const FIXTURE_STORE = join(ROOT, 'test', 'fixtures', 'v1-workspace', '.rewind');

/** Every file of the golden store, by its path under the store. */
export async function readFixtureFiles(): Promise<Map<string, Buffer>> {
  const files = new Map<string, Buffer>();
  const visit = async (relative: string): Promise<void> => {
    for (const entry of await readdir(join(FIXTURE_STORE, relative), { withFileTypes: true })) {
      const path = relative === '' ? entry.name : `${relative}/${entry.name}`;
      if (entry.isDirectory()) await visit(path);
      else files.set(path, await readFile(join(FIXTURE_STORE, path)));
    }
  };
  await visit('');
  return files;
}

/** How long one call of a parser may take before it counts as hung. */
export const CALL_BOUND_MS = 2_000;

/**
 * Runs `work` and fails if it has not settled within `boundMs`: a parser that hangs on some input
 * fails the property on that input instead of stalling the suite.
 */
export async function withinBound<T>(
  work: () => Promise<T> | T,
  boundMs = CALL_BOUND_MS,
): Promise<T> {
  let timer: NodeJS.Timeout | undefined;
  const hung = new Promise<never>((_resolve, reject) => {
    timer = setTimeout(() => reject(new Error(`hung: no answer within ${boundMs} ms`)), boundMs);
  });
  const started = performance.now();
  try {
    const result = await Promise.race([Promise.resolve().then(work), hung]);
    // A synchronous call cannot be interrupted: it is checked once it returns.
    const elapsed = performance.now() - started;
    if (elapsed > boundMs) throw new Error(`hung: answered after ${Math.round(elapsed)} ms`);
    return result;
  } finally {
    clearTimeout(timer);
  }
}

/** What a call did: returned a value or threw an error. */
export type Outcome<T> = { isThrown: false; value: T } | { isThrown: true; error: unknown };

/** Runs `work` within `boundMs` and says whether it returned or threw. */
export async function outcomeOf<T>(
  work: () => Promise<T> | T,
  boundMs = CALL_BOUND_MS,
): Promise<Outcome<T>> {
  try {
    return { isThrown: false, value: await withinBound(work, boundMs) };
  } catch (error) {
    if (error instanceof Error && error.message.startsWith('hung:')) throw error;
    return { isThrown: true, error };
  }
}

/**
 * Fails unless `error` is a documented failure: a `RewindError` whose code is one of
 * `ERROR_CODES` (and of `codes`, when given). A TypeError, a RangeError or a stack overflow is a
 * crash, and the assertion shows its stack.
 */
export function expectDocumentedFailure(error: unknown, codes?: readonly string[]): void {
  if (!isRewindError(error)) {
    const detail = error instanceof Error ? (error.stack ?? error.message) : String(error);
    expect.fail(`a crash, not a documented failure: ${detail}`);
  }
  expect(ERROR_CODES).toContain(error.code);
  if (codes) expect(codes).toContain(error.code);
  expect(error.message.length).toBeGreaterThan(0);
}

/** Keys that reach the prototype of a plain object, or that `String()` and templates call. */
export const PROTOTYPE_KEYS = [
  '__proto__',
  'constructor',
  'prototype',
  'toString',
  'valueOf',
  'hasOwnProperty',
  'toJSON',
  'then',
] as const;

/** The field names of every entry kind's body, as SPEC.md's table (and ENTRY_KINDS) name them. */
export const BODY_FIELDS = [
  ...new Set(
    Object.values(ENTRY_KINDS).flatMap((text) =>
      [...text.matchAll(/`(\w+)`/g)].map((match) => match[1] as string),
    ),
  ),
];

/** Single characters that break parsers: NUL, newlines, quotes, lone surrogates, a BOM. */
const trickyCharacter = fc.oneof(
  fc.constantFrom('\0', '\n', '\r', '"', '\\', '/', '.', ' ', '\u2028', '\ufeff', '{', '[', ':'),
  fc.integer({ min: 0xd800, max: 0xdfff }).map((code) => String.fromCharCode(code)),
  fc.string({ unit: 'binary', minLength: 1, maxLength: 1 }),
  fc.constantFrom('a', 'z', 'é', '😀'),
);

/** Strings a parser may meet: short tricky ones, names it knows, and now and then a very long one. */
export function trickyString(words: readonly string[] = []): fc.Arbitrary<string> {
  return fc.oneof(
    { weight: 8, arbitrary: shortTrickyString(words) },
    { weight: 1, arbitrary: longString },
  );
}

function shortTrickyString(words: readonly string[]): fc.Arbitrary<string> {
  return fc.oneof(
    { weight: 2, arbitrary: fc.string({ unit: trickyCharacter, maxLength: 24 }) },
    { weight: 1, arbitrary: fc.constantFrom('', ...words, ...PROTOTYPE_KEYS) },
  );
}

/** A string of tens of thousands of one tricky character. */
const longString = fc
  .tuple(fc.integer({ min: 1_000, max: 50_000 }), trickyCharacter)
  .map(([length, unit]) => unit.repeat(length));

/** Number literals as JSON text, those JavaScript cannot hold exactly included. */
const numberText = fc.oneof(
  fc.constantFrom(
    '0',
    '-0',
    '1',
    '-1',
    '0.5',
    '1e400',
    '-1e400',
    '1e-400',
    '9007199254740993',
    '123456789012345678901234567890',
    '4294967296',
    '2147483648',
    '1E2',
    '1.0',
  ),
  fc.integer().map(String),
  fc.double({ noNaN: true, noDefaultInfinity: true }).map((value) => JSON.stringify(value)),
);

type JsonTree =
  | { type: 'text'; text: string }
  | { type: 'array'; items: JsonTree[] }
  | { type: 'object'; members: [string, JsonTree][] };

function jsonTextOf(tree: JsonTree): string {
  if (tree.type === 'text') return tree.text;
  if (tree.type === 'array') return `[${tree.items.map(jsonTextOf).join(',')}]`;
  return `{${tree.members.map(([key, value]) => `${JSON.stringify(key)}:${jsonTextOf(value)}`).join(',')}}`;
}

/**
 * JSON text of every shape: huge and negative-zero numbers, lone surrogates, NUL, very long
 * strings, repeated keys, `__proto__` and `constructor` keys (as own keys, the way `JSON.parse`
 * makes them), the field names a parser looks for in `words`, and now and then nesting thousands
 * of levels deep.
 */
export function adversarialJsonText(words: readonly string[] = []): fc.Arbitrary<string> {
  const key = fc.oneof(
    { weight: 3, arbitrary: fc.constantFrom(...words, ...PROTOTYPE_KEYS) },
    { weight: 1, arbitrary: shortTrickyString([]) },
  );
  const leaf: fc.Arbitrary<JsonTree> = fc
    .oneof(
      fc.constantFrom('true', 'false', 'null'),
      numberText,
      shortTrickyString(words).map((text) => JSON.stringify(text)),
    )
    .map((text) => ({ type: 'text', text }));
  const { tree } = fc.letrec<{ tree: JsonTree }>((tie) => ({
    tree: fc.oneof(
      { depthSize: 'small', withCrossShrink: true },
      leaf,
      fc.array(tie('tree'), { maxLength: 5 }).map((items): JsonTree => ({ type: 'array', items })),
      fc
        .array(fc.tuple(key, tie('tree')), { maxLength: 6 })
        .map((members): JsonTree => ({ type: 'object', members })),
    ),
  }));
  return fc.oneof(
    { weight: 20, arbitrary: tree.map(jsonTextOf) },
    { weight: 1, arbitrary: longString.map((text) => JSON.stringify(text)) },
    { weight: 1, arbitrary: deepJsonText() },
  );
}

/** JSON nested `depth` levels deep: deeper than any recursive walk of it can go. */
export function deepJsonText(): fc.Arbitrary<string> {
  return fc
    .record({
      depth: fc.integer({ min: 2_000, max: 20_000 }),
      open: fc.constantFrom('[', '{"a":', '{"__proto__":', '{"content":'),
    })
    .map(({ depth, open }) => {
      const close = open === '[' ? ']' : '}';
      return `${open.repeat(depth)}0${close.repeat(depth)}`;
    });
}

/** Any JSON value as `JSON.parse` gives it, from {@link adversarialJsonText}. */
export function adversarialJson(words: readonly string[] = []): fc.Arbitrary<unknown> {
  return adversarialJsonText(words).map((text) => JSON.parse(text) as unknown);
}

/** The JSON text of an object (never an array or a scalar) of every shape. */
export function adversarialObjectText(words: readonly string[] = []): fc.Arbitrary<string> {
  const member = fc.tuple(
    fc.oneof(
      { weight: 3, arbitrary: fc.constantFrom(...words, ...PROTOTYPE_KEYS) },
      { weight: 1, arbitrary: shortTrickyString([]) },
    ),
    adversarialJsonText(words),
  );
  return fc
    .array(member, { maxLength: 8 })
    .map(
      (members) =>
        `{${members.map(([key, value]) => `${JSON.stringify(key)}:${value}`).join(',')}}`,
    );
}

/** A JSON object of every shape, as `JSON.parse` gives it. */
export function adversarialObject(
  words: readonly string[] = [],
): fc.Arbitrary<Record<string, unknown>> {
  return adversarialObjectText(words).map((text) => JSON.parse(text) as Record<string, unknown>);
}

/**
 * Values of the wrong type for any field, as JSON text: objects that `String()` and templates
 * cannot convert (`{"toString":1}`), `__proto__` members, a number beyond a double's range,
 * arrays where objects belong, deep nesting, lone surrogates.
 */
export const hostileValueText: fc.Arbitrary<string> = fc.oneof(
  fc.constantFrom(
    '{"toString":1}',
    '{"toString":{},"valueOf":{}}',
    '{"valueOf":null,"toString":"x"}',
    '{"__proto__":{"toString":1}}',
    '{"constructor":{"prototype":{}}}',
    '[{"toString":1}]',
    '[]',
    '{}',
    'null',
    'true',
    '-0',
    '1e400',
    '-1e400',
    '"\\ud800"',
    '"\\u0000"',
    '"__proto__"',
    '"constructor"',
    '"toString"',
  ),
  adversarialJsonText(),
);

/** The JSON text of an object holding some of `fields`, each with a value of the wrong type. */
export function hostileObjectText(fields: readonly string[]): fc.Arbitrary<string> {
  return fc
    .array(fc.tuple(fc.constantFrom(...fields), hostileValueText), { maxLength: 12 })
    .map(
      (members) =>
        `{${members.map(([key, value]) => `${JSON.stringify(key)}:${value}`).join(',')}}`,
    );
}

/** One change to a file's bytes: what damage, a crash or a careless edit does. */
type Mutation =
  | { type: 'flip'; at: number; bit: number }
  | { type: 'set'; at: number; byte: number }
  | { type: 'truncate'; at: number }
  | { type: 'delete'; at: number; length: number }
  | { type: 'insert'; at: number; bytes: Uint8Array }
  | { type: 'splice'; at: number; donor: number; start: number; length: number }
  | { type: 'duplicate'; at: number; length: number };

const mutation: fc.Arbitrary<Mutation> = fc.oneof(
  {
    weight: 4,
    arbitrary: fc.record({
      type: fc.constant('flip' as const),
      at: fc.nat(),
      bit: fc.integer({ min: 0, max: 7 }),
    }),
  },
  {
    weight: 2,
    arbitrary: fc.record({
      type: fc.constant('set' as const),
      at: fc.nat(),
      // NUL, newline, quote, backslash, braces, a lone UTF-8 lead and continuation byte, 0xff.
      byte: fc.constantFrom(0x00, 0x0a, 0x22, 0x5c, 0x7b, 0x7d, 0x5b, 0x30, 0x39, 0xc3, 0x80, 0xff),
    }),
  },
  { weight: 2, arbitrary: fc.record({ type: fc.constant('truncate' as const), at: fc.nat() }) },
  {
    weight: 1,
    arbitrary: fc.record({
      type: fc.constant('delete' as const),
      at: fc.nat(),
      length: fc.integer({ min: 1, max: 64 }),
    }),
  },
  {
    weight: 1,
    arbitrary: fc.record({
      type: fc.constant('insert' as const),
      at: fc.nat(),
      bytes: fc.uint8Array({ minLength: 1, maxLength: 16 }),
    }),
  },
  {
    weight: 2,
    arbitrary: fc.record({
      type: fc.constant('splice' as const),
      at: fc.nat(),
      donor: fc.nat(),
      start: fc.nat(),
      length: fc.integer({ min: 1, max: 400 }),
    }),
  },
  {
    weight: 1,
    arbitrary: fc.record({
      type: fc.constant('duplicate' as const),
      at: fc.nat(),
      length: fc.integer({ min: 1, max: 400 }),
    }),
  },
);

function applyMutation(bytes: Buffer, change: Mutation, donors: readonly Buffer[]): Buffer {
  const at = bytes.length === 0 ? 0 : change.at % (bytes.length + 1);
  switch (change.type) {
    case 'flip': {
      if (bytes.length === 0) return bytes;
      const copy = Buffer.from(bytes);
      const index = change.at % bytes.length;
      copy[index] = (copy[index] as number) ^ (1 << change.bit);
      return copy;
    }
    case 'set': {
      if (bytes.length === 0) return Buffer.from([change.byte]);
      const copy = Buffer.from(bytes);
      copy[change.at % bytes.length] = change.byte;
      return copy;
    }
    case 'truncate':
      return bytes.subarray(0, at);
    case 'delete':
      return Buffer.concat([bytes.subarray(0, at), bytes.subarray(at + change.length)]);
    case 'insert':
      return Buffer.concat([bytes.subarray(0, at), change.bytes, bytes.subarray(at)]);
    case 'splice': {
      const donor = donors[change.donor % Math.max(1, donors.length)] ?? bytes;
      const start = donor.length === 0 ? 0 : change.start % donor.length;
      return Buffer.concat([
        bytes.subarray(0, at),
        donor.subarray(start, start + change.length),
        bytes.subarray(at),
      ]);
    }
    case 'duplicate':
      return Buffer.concat([
        bytes.subarray(0, at),
        bytes.subarray(at, at + change.length),
        bytes.subarray(at),
      ]);
  }
}

/**
 * Valid bytes damaged: one of `seeds` after one to four mutations (bit flips, bytes set to NUL or
 * a newline or a quote, truncations, deletions, insertions of random bytes, splices of another
 * seed, duplicated runs), shrinking towards a single small change.
 */
export function mutated(seeds: readonly Buffer[]): fc.Arbitrary<Buffer> {
  return fc
    .record({
      seed: fc.integer({ min: 0, max: seeds.length - 1 }),
      changes: fc.array(mutation, { minLength: 1, maxLength: 4 }),
    })
    .map(({ seed, changes }) =>
      changes.reduce((bytes, change) => applyMutation(bytes, change, seeds), seeds[seed] as Buffer),
    );
}

/** Random bytes, and random text made of the characters parsers trip on. */
export function randomBytes(maxLength = 2_000): fc.Arbitrary<Buffer> {
  return fc.oneof(
    fc.uint8Array({ maxLength }).map((bytes) => Buffer.from(bytes)),
    fc.string({ unit: trickyCharacter, maxLength }).map((text) => Buffer.from(text)),
  );
}

/**
 * How many times more inputs each property tries than by default: `REWIND_FUZZ_RUNS=50 npx vitest
 * run test/fuzz` fuzzes for longer (the test timeout grows with it, see vitest.config.ts).
 */
export const FUZZ_SCALE = Math.max(1, Number(process.env.REWIND_FUZZ_RUNS) || 1);

// `REWIND_FUZZ_SEED=<seed>` replays the inputs of a failure, as fast-check printed its seed.
if (process.env.REWIND_FUZZ_SEED)
  fc.configureGlobal({ seed: Number(process.env.REWIND_FUZZ_SEED) });

/**
 * How many inputs each property tries: by default enough to find the bugs above within a few
 * seconds per file on a shared machine; {@link FUZZ_SCALE} times as many when asked.
 */
export const RUNS = {
  quick: 300 * FUZZ_SCALE,
  normal: 120 * FUZZ_SCALE,
  slow: 30 * FUZZ_SCALE,
} as const;

/** What {@link makeRealStore} leaves: a workspace whose store holds every kind of thing Rewind writes. */
export interface RealStore {
  workspace: string;
  storeDirectory: string;
  /** The session's ledger, hash-chained, as Rewind wrote it. */
  ledger: Buffer;
  /** Every object of the store that is a tree. */
  trees: Buffer[];
  /** The stat cache and the change record of the last snapshot, as Rewind wrote them. */
  statCache: Buffer;
  changeRecord: Buffer;
}

/**
 * Drives a real, hash-chained session through writes, a command, checkpoints with a conversation,
 * a rollback, undos, a refused undo, external actions, a draft, a verification and a note, so its
 * ledger and objects are valid outputs of the real code of nearly every kind.
 */
export async function makeRealStore(workspace: string): Promise<RealStore> {
  await mkdir(join(workspace, 'src'), { recursive: true });
  await writeFile(join(workspace, 'src', 'main.ts'), 'export const main = 1;\n');
  await writeFile(join(workspace, 'README.md'), '# fuzz\n');
  await symlink('src/main.ts', join(workspace, 'latest'));
  await init({ workspace, hashChain: true, sandbox: 'none' });
  const session = await openSession({ workspace, now: () => new Date(Date.now() + 60_000) });
  try {
    const messages = [
      { role: 'user', content: [{ type: 'text', text: 'fix it' }] },
      {
        role: 'assistant',
        content: [
          { type: 'thinking', thinking: 'hmm', signature: 'sig' },
          { type: 'tool_use', id: 'toolu_1', name: 'write', input: { path: 'a' } },
        ],
      },
    ];
    await session.checkpoint('start', { messages, format: 'anthropic' });
    const written = await session.write('src/extra.ts', 'export const extra = 2;\n');
    await session.mkdir('docs');
    await session.move('README.md', 'docs/README.md');
    await session.exec('echo ran > out.txt && rm src/main.ts');
    await session.syncConversation([
      ...messages,
      { role: 'user', content: [{ type: 'tool_result', tool_use_id: 'toolu_1', content: 'ok' }] },
    ]);
    await session.checkpoint('after');
    await session.rollback('start');
    await session.undo('last');
    await writeFile(join(workspace, 'src', 'extra.ts'), 'edited by a person\n');
    await session.undo(written.id).catch(() => undefined);
    const deleted = await session.delete('out.txt');
    await session.undo(deleted.id);
    const recorded = await session.record('deploy', { compensation: { command: 'true' } });
    await session.report(recorded.id, { ok: true, detail: 'deployed' });
    const drafted = await session.exec('echo draft', { draft: true });
    await session.discard(drafted.id);
    await session.test({ verifier: { command: 'echo \'{"status":"fail","errors":["x"]}\'' } });
    await session.test({ verifier: { command: 'echo no verdict' } });
  } finally {
    await session.close();
  }
  await note({ workspace, text: 'a note' });
  const storeDirectory = join(workspace, '.rewind');
  const [ledgerName] = (await readdir(join(storeDirectory, 'sessions'))).filter((name) =>
    name.endsWith('.jsonl'),
  );
  const trees: Buffer[] = [];
  const store = createObjectStore(storeDirectory);
  for await (const { digest } of store.list()) {
    const bytes = await store.get(digest);
    try {
      decodeTree(bytes);
      trees.push(bytes);
    } catch {}
  }
  return {
    workspace,
    storeDirectory,
    ledger: await readFile(join(storeDirectory, 'sessions', ledgerName as string)),
    trees,
    statCache: await readFile(join(storeDirectory, 'cache', 'snapshot-v1')),
    changeRecord: await readFile(join(storeDirectory, 'cache', 'changes-v3.json')),
  };
}
