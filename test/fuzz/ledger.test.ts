import { appendFile, mkdir, mkdtemp, readFile, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import fc from 'fast-check';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import {
  checkEnvelope,
  checkLedger,
  describeEntry,
  ENTRY_KINDS,
  Ledger,
  type LedgerEntry,
  type LedgerReading,
  readLedgerFile,
  type SessionFile,
  sessionFileOf,
} from '../../src/ledger/index.js';
import { LedgerReader } from '../../src/ledger/reader.js';
import { digestBytes, parseJsonLines } from '../../src/lib/index.js';
import {
  adversarialJson,
  adversarialObjectText,
  BODY_FIELDS,
  expectDocumentedFailure,
  hostileObjectText,
  makeRealStore,
  mutated,
  outcomeOf,
  RUNS,
  randomBytes,
  readFixtureFiles,
  withinBound,
} from '../helpers/fuzz.js';
import { makeTempDirectory } from '../helpers/temp.js';

const KINDS = Object.keys(ENTRY_KINDS);
const ENVELOPE_FIELDS = ['v', 'seq', 'at', 'kind', 'body', 'refs', 'prev', 'type', 'digest'];

/** Ledger bytes Rewind wrote: the golden sessions and a real hash-chained session of every kind. */
let seeds: Buffer[] = [];
let directory = '';

beforeAll(async () => {
  // Kept for the whole file: makeTempDirectory's are removed after each test.
  directory = await mkdtemp(join(tmpdir(), 'rewind-fuzz-ledger-'));
  const fixtures = await readFixtureFiles();
  const real = await makeRealStore(await makeTempDirectory('rewind-fuzz-real-'));
  seeds = [
    real.ledger,
    ...[...fixtures].filter(([path]) => path.endsWith('.jsonl')).map(([, bytes]) => bytes),
  ];
}, 30_000);

afterAll(async () => {
  await rm(directory, { recursive: true, force: true });
});

/** A line of an entry of a known kind, whatever its body holds (numbers too large, deep nesting). */
const entryLine = fc
  .record({
    seq: fc.oneof(fc.integer({ min: 1, max: 5 }), fc.constantFrom(2 ** 53 - 1, 2 ** 53)),
    kind: fc.constantFrom(...KINDS),
    body: fc.oneof(adversarialObjectText(BODY_FIELDS), hostileObjectText(BODY_FIELDS)),
    hasPrev: fc.boolean(),
  })
  .map(
    ({ seq, kind, body, hasPrev }) =>
      `{"v":1,"seq":${seq},"at":"2026-11-29T09:00:03.702Z","kind":${JSON.stringify(kind)},"body":${body}${
        hasPrev ? `,"prev":"sha256:${'0'.repeat(64)}"` : ''
      }}`,
  );

/** A ledger's bytes: damaged real ledgers, random bytes, and lines of entries with wild bodies. */
const ledgerBytes = fc.oneof(
  { weight: 4, arbitrary: fc.constant(null).chain(() => mutated(seeds)) },
  { weight: 1, arbitrary: randomBytes() },
  {
    weight: 2,
    arbitrary: fc
      .tuple(fc.array(entryLine, { minLength: 1, maxLength: 4 }), fc.boolean())
      .map(([lines, isTorn]) => Buffer.from(`${lines.join('\n')}${isTorn ? '' : '\n'}`)),
  },
);

/**
 * A reading without the entries' bodies, which may nest deeper than a recursive comparison can go:
 * both readers parse the same line text, so equal envelopes at equal places are equal entries.
 */
function outlineOf(reading: LedgerReading) {
  return {
    ...reading,
    entries: reading.entries.map(({ v, seq, at, kind, prev }) => ({ v, seq, at, kind, prev })),
  };
}

let fileCount = 0;
async function ledgerFile(bytes: Uint8Array): Promise<string> {
  fileCount += 1;
  const file = join(directory, `ledger-${fileCount}.jsonl`);
  await writeFile(file, bytes);
  return file;
}

describe('fuzzing the ledger readers', () => {
  it('parseJsonLines reports every line of any bytes as a record or unreadable, never throwing', async () => {
    await fc.assert(
      fc.asyncProperty(ledgerBytes, async (bytes) => {
        const parsed = await withinBound(() => parseJsonLines(bytes));
        const lineCount = bytes.length === 0 ? 0 : bytes.toString('latin1').split('\n').length;
        expect(parsed.records.length + parsed.unreadable.length).toBeLessThanOrEqual(lineCount);
        expect(parsed.endsMidLine).toBe(bytes.length > 0 && bytes[bytes.length - 1] !== 0x0a);
        for (const line of parsed.unreadable) {
          expect(line.text.length).toBeLessThanOrEqual(200);
          expect(line.isTorn).toBe(line.line === lineCount && parsed.endsMidLine);
        }
      }),
      { numRuns: RUNS.quick },
    );
  });

  it('readLedgerFile and LedgerReader read any damaged ledger alike, keeping only well-formed entries', async () => {
    await fc.assert(
      fc.asyncProperty(ledgerBytes, async (bytes) => {
        const file = await ledgerFile(bytes);
        const full = await withinBound(() => readLedgerFile(file));
        const incremental = await withinBound(() => new LedgerReader(file).read());
        expect(outlineOf(incremental)).toEqual(outlineOf(full));
        for (const entry of full.entries) expect(checkEnvelope(entry)).toBeUndefined();
        expect(full.endsMidLine).toBe(bytes.length > 0 && bytes[bytes.length - 1] !== 0x0a);
        if (full.damagedLastLine) expect(full.damagedLastLine.isTorn).toBe(false);
      }),
      { numRuns: RUNS.normal },
    );
  });

  it('LedgerReader reads a ledger written in pieces cut anywhere (mid-line, mid-character) as a full read does', async () => {
    await fc.assert(
      fc.asyncProperty(
        ledgerBytes,
        fc.array(fc.nat(), { minLength: 1, maxLength: 6 }),
        async (bytes, cuts) => {
          const file = await ledgerFile(new Uint8Array());
          const reader = new LedgerReader(file);
          const ends = [...new Set(cuts.map((cut) => cut % (bytes.length + 1)))].sort(
            (a, b) => a - b,
          );
          let written = 0;
          for (const end of [...ends, bytes.length]) {
            await appendFile(file, bytes.subarray(written, end));
            written = Math.max(written, end);
            const reading = await withinBound(() => reader.read());
            expect(outlineOf(reading)).toEqual(outlineOf(await readLedgerFile(file)));
          }
        },
      ),
      { numRuns: RUNS.normal },
    );
  });

  it('checkEnvelope answers a reason or undefined for any JSON value', async () => {
    await fc.assert(
      fc.asyncProperty(adversarialJson(ENVELOPE_FIELDS), async (value) => {
        const reason = await withinBound(() => checkEnvelope(value));
        if (reason !== undefined) expect(typeof reason).toBe('string');
      }),
      { numRuns: RUNS.quick },
    );
  });

  it('checkLedger reports the problems of any damaged ledger, chained or not, never throwing', async () => {
    await fc.assert(
      fc.asyncProperty(ledgerBytes, fc.boolean(), async (bytes, isHashChained) => {
        const reading = await readLedgerFile(await ledgerFile(bytes));
        const problems = await withinBound(() => checkLedger(reading, isHashChained));
        for (const problem of problems) {
          expect(['seq-broken', 'chain-broken', 'line-unreadable']).toContain(problem.type);
          expect(typeof problem.message).toBe('string');
        }
      }),
      { numRuns: RUNS.normal },
    );
  });

  it('checkLedger finds no problem in the ledgers Rewind wrote', async () => {
    for (const [index, seed] of seeds.entries()) {
      const reading = await readLedgerFile(await ledgerFile(seed));
      // The second golden session ends with a torn write: reported by the reader, not a problem.
      expect(
        checkLedger(reading, reading.entries[0]?.body.hashChain === true),
        `seed ${index}`,
      ).toEqual([]);
    }
  });

  it('describeEntry counts one file, one path, as one (not "1 files")', () => {
    const entry = (kind: string, body: Record<string, unknown>) =>
      ({ v: 1, seq: 3, at: '2026-12-04T00:00:00.000Z', kind, body }) as LedgerEntry;
    const one = { label: 'x', fileCount: 1, added: 1, modified: 0, deleted: 0, changeCount: 1 };
    expect(describeEntry(entry('checkpoint-created', one))).toMatch(/: 1 file, /);
    expect(describeEntry(entry('rollback-started', one))).toMatch(/: 1 path to restore/);
    expect(describeEntry(entry('view-created', one))).toMatch(/: 1 file copied/);
    expect(describeEntry(entry('checkpoint-created', { ...one, fileCount: 2 }))).toMatch(
      /: 2 files, /,
    );
  });

  it('describeEntry says something about an entry of every kind, whatever its body holds', async () => {
    await fc.assert(
      fc.asyncProperty(ledgerBytes, async (bytes) => {
        const { entries } = await readLedgerFile(await ledgerFile(bytes));
        for (const entry of entries) {
          expect(typeof (await withinBound(() => describeEntry(entry)))).toBe('string');
        }
      }),
      { numRuns: RUNS.quick },
    );
  });

  it('describeEntry says something about an entry of every kind whose body fields have the wrong types', async () => {
    await fc.assert(
      fc.asyncProperty(
        fc.constantFrom(...KINDS),
        hostileObjectText(BODY_FIELDS),
        fc.integer({ min: 1, max: 2 }),
        async (kind, body, v) => {
          const entry = { v, seq: 1, at: '2026-11-29T09:00:03.702Z', kind, body: JSON.parse(body) };
          expect(checkEnvelope(entry)).toBeUndefined();
          expect(typeof (await withinBound(() => describeEntry(entry)))).toBe('string');
        },
      ),
      { numRuns: RUNS.quick },
    );
  });

  it('a damaged ledger is appended to or refused with a documented error, never crashing', async () => {
    const store = join(directory, 'store');
    await mkdir(join(store, 'sessions'), { recursive: true });
    let round = 0;
    await fc.assert(
      fc.asyncProperty(ledgerBytes, async (bytes) => {
        round += 1;
        const session = sessionFileOf(store, `2026-11-29_fuzz${round}`) as SessionFile;
        await writeFile(session.file, bytes);
        const opened = await outcomeOf(() => Ledger.open(session, { lockTimeoutMs: 1_000 }));
        if (opened.isThrown) {
          expectDocumentedFailure(opened.error, [
            'LEDGER_CORRUPT',
            'LEDGER_VERSION_UNSUPPORTED',
            'ENTRY_KIND_UNKNOWN',
          ]);
          return;
        }
        const ledger = opened.value;
        try {
          const appended = await outcomeOf(() => ledger.append('note-added', { text: 'fuzz' }));
          if (appended.isThrown) {
            expectDocumentedFailure(appended.error, ['LEDGER_CORRUPT']);
            return;
          }
          const reading = await readLedgerFile(session.file);
          expect(outlineOf(reading).entries.at(-1)).toEqual(
            outlineOf({ ...reading, entries: [appended.value] }).entries[0],
          );
        } finally {
          await ledger.close();
        }
      }),
      { numRuns: RUNS.normal },
    );
  });
});

describe('what fuzzing the ledger found', () => {
  const started =
    '{"at":"2026-11-29T09:00:03.702Z","body":{"hashChain":true},"kind":"session-started","seq":1,"v":1}';
  // Lines no Rewind writes: a number beyond a double's range (parsed as Infinity), and nesting
  // deeper than the canonical encoder recurses. Both are well-formed envelopes.
  const unhashable = [
    `{"at":"2026-11-29T09:00:04.000Z","body":{"text":"n","sizeBytes":1e400},"kind":"note-added","prev":"${digestBytes(started)}","seq":2,"v":1}`,
    `{"at":"2026-11-29T09:00:04.000Z","body":{"hashChain":${'['.repeat(20_000)}0${']'.repeat(20_000)}},"kind":"note-added","prev":"${digestBytes(started)}","seq":2,"v":1}`,
  ];
  const next = `{"at":"2026-11-29T09:00:05.000Z","body":{"text":"after"},"kind":"note-added","prev":"sha256:${'0'.repeat(64)}","seq":3,"v":1}`;

  it('checkLedger reports an entry whose content cannot be hashed as where the chain breaks', async () => {
    for (const line of unhashable) {
      const reading = await readLedgerFile(
        await ledgerFile(Buffer.from(`${started}\n${line}\n${next}\n`)),
      );
      expect(reading.entries).toHaveLength(3);
      const problems = checkLedger(reading, true);
      expect(problems).toEqual([
        expect.objectContaining({
          type: 'chain-broken',
          seq: 3,
          message: expect.stringContaining('entry #2 was damaged'),
        }),
      ]);
    }
  });

  it('appending after an entry whose content cannot be hashed is refused as LEDGER_CORRUPT', async () => {
    const store = join(directory, 'store-unhashable');
    await mkdir(join(store, 'sessions'), { recursive: true });
    for (const [index, line] of unhashable.entries()) {
      const session = sessionFileOf(store, `2026-11-29_unhashable${index}`) as SessionFile;
      await writeFile(session.file, `${started}\n${line}\n`);
      const ledger = await Ledger.open(session);
      try {
        await expect(ledger.append('note-added', { text: 'x' })).rejects.toMatchObject({
          code: 'LEDGER_CORRUPT',
        });
      } finally {
        await ledger.close();
      }
    }
  });

  it('appending after an entry whose seq is 2^53 - 1 is refused as LEDGER_CORRUPT, not written where no reader finds it', async () => {
    const store = join(directory, 'store-last-seq');
    await mkdir(join(store, 'sessions'), { recursive: true });
    const session = sessionFileOf(store, '2026-11-29_lastseq') as SessionFile;
    const last = `{"at":"2026-11-29T09:00:03.702Z","body":{},"kind":"session-started","seq":${2 ** 53 - 1},"v":1}\n`;
    await writeFile(session.file, last);
    const ledger = await Ledger.open(session);
    try {
      await expect(ledger.append('note-added', { text: 'x' })).rejects.toMatchObject({
        code: 'LEDGER_CORRUPT',
        message: expect.stringContaining('too large'),
      });
    } finally {
      await ledger.close();
    }
    expect((await readFile(session.file)).toString()).toBe(last);
  });
});

describe('what fuzzing describeEntry found', () => {
  const entryOf = (kind: string, body: string): LedgerEntry => ({
    v: 1,
    seq: 4,
    at: '2026-11-29T09:00:03.702Z',
    kind,
    body: JSON.parse(body),
  });

  it('describes a body field holding an object that String() cannot convert', () => {
    expect(describeEntry(entryOf('note-added', '{"text":{"toString":1}}'))).toBe(
      'note: (an object)',
    );
    expect(
      describeEntry(
        entryOf('action-completed', '{"startedSeq":3,"counts":{"created":{"toString":1}}}'),
      ),
    ).toBe('#3 done: exit undefined, (an object) created, undefined modified, undefined deleted');
  });

  it('shows a pruning reason named like an Object.prototype member as it is', () => {
    expect(
      describeEntry(entryOf('checkpoint-pruned', '{"label":"a","reason":"constructor"}')),
    ).toBe('checkpoint a pruned (constructor)');
  });
});
