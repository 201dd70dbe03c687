import { appendFile, readFile, rename, truncate, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { encodeEntry, type LedgerEntry, readLedgerFile } from '../../src/ledger/index.js';
import { LedgerReader } from '../../src/ledger/reader.js';
import { makeTempDirectory } from '../helpers/temp.js';

function entryLine(seq: number, text: string): string {
  const entry: LedgerEntry = {
    v: 1,
    seq,
    at: '2026-11-30T12:00:00.000Z',
    kind: 'note-added',
    body: { text },
  };
  return `${encodeEntry(entry)}\n`;
}

/** What users and crashes do to a ledger file, as the reader must see it. */
type Operation =
  | { type: 'append'; text: string; count: number }
  | { type: 'tear'; text: string; cut: number }
  | { type: 'complete' }
  | { type: 'junk'; text: string }
  | { type: 'bytes'; bytes: Uint8Array }
  | { type: 'blank' }
  | { type: 'not-an-entry' }
  | { type: 'rewrite-tail'; back: number }
  | { type: 'replace' }
  | { type: 'shrink'; back: number }
  | { type: 'new-reader' };

const text = fc.string({
  unit: fc.constantFrom('a', 'é', '🙂', '"', '\\', ' ', 'z'),
  maxLength: 900,
});
const operation: fc.Arbitrary<Operation> = fc.oneof(
  {
    weight: 6,
    arbitrary: fc.record({
      type: fc.constant('append' as const),
      text,
      count: fc.integer({ min: 1, max: 8 }),
    }),
  },
  { weight: 2, arbitrary: fc.record({ type: fc.constant('tear' as const), text, cut: fc.nat() }) },
  { weight: 2, arbitrary: fc.constant({ type: 'complete' as const }) },
  { weight: 1, arbitrary: fc.record({ type: fc.constant('junk' as const), text }) },
  {
    // Bytes that are not UTF-8 (a stray continuation byte, a lead byte cut short) and newlines.
    weight: 1,
    arbitrary: fc.record({
      type: fc.constant('bytes' as const),
      bytes: fc
        .uint8Array({ maxLength: 12 })
        .map((bytes) =>
          bytes.map((byte) => [0x0a, 0x41, 0x80, 0xbf, 0xc3, 0xe2, 0xf0, 0xff][byte % 8] as number),
        ),
    }),
  },
  { weight: 1, arbitrary: fc.constant({ type: 'blank' as const }) },
  { weight: 1, arbitrary: fc.constant({ type: 'not-an-entry' as const }) },
  {
    weight: 1,
    arbitrary: fc.record({
      type: fc.constant('rewrite-tail' as const),
      back: fc.integer({ min: 1, max: 3000 }),
    }),
  },
  { weight: 1, arbitrary: fc.constant({ type: 'replace' as const }) },
  {
    weight: 1,
    arbitrary: fc.record({
      type: fc.constant('shrink' as const),
      back: fc.integer({ min: 1, max: 5000 }),
    }),
  },
  { weight: 1, arbitrary: fc.constant({ type: 'new-reader' as const }) },
);

describe('the incremental ledger reader', () => {
  it('reads exactly what a full read does, through appends, torn writes, damage, rewrites, replacements and shrinks', async () => {
    const directory = await makeTempDirectory();
    let round = 0;
    await fc.assert(
      fc.asyncProperty(fc.array(operation, { minLength: 1, maxLength: 40 }), async (operations) => {
        round += 1;
        const file = join(directory, `ledger-${round}.jsonl`);
        let seq = 1;
        let pending = '';
        // Longer than the bytes the reader checks, so a change early in the file lies outside them.
        let start = entryLine(seq, 'started');
        while (seq < 12) start += entryLine(++seq, 'x'.repeat(500));
        await writeFile(file, start);
        let reader = new LedgerReader(file);
        for (const step of operations) {
          if (step.type === 'append') {
            let lines = '';
            for (let index = 0; index < step.count; index++) lines += entryLine(++seq, step.text);
            await appendFile(file, lines);
          } else if (step.type === 'tear') {
            const line = entryLine(++seq, step.text);
            const cut = Buffer.from(line).subarray(0, step.cut % line.length);
            pending = Buffer.from(line).subarray(cut.length).toString('latin1');
            await appendFile(file, cut);
          } else if (step.type === 'complete') {
            await appendFile(file, Buffer.from(pending, 'latin1'));
            pending = '';
          } else if (step.type === 'junk') {
            await appendFile(file, `{"oops": ${JSON.stringify(step.text)}\n`);
          } else if (step.type === 'bytes') {
            await appendFile(file, step.bytes);
          } else if (step.type === 'blank') {
            await appendFile(file, '\n');
          } else if (step.type === 'not-an-entry') {
            await appendFile(file, '{"v":1,"seq":0}\n');
          } else if (step.type === 'rewrite-tail') {
            // The same length, other bytes near the end: an edit in place, not an append.
            const content = await readFile(file);
            const at = Math.max(0, content.length - step.back);
            if (content.length > 0) content[at] = content[at] === 0x41 ? 0x42 : 0x41;
            await writeFile(file, content);
          } else if (step.type === 'replace') {
            // Another file renamed over it, differing only in its first line.
            const content = await readFile(file);
            if (content.length > 10) content[10] = content[10] === 0x41 ? 0x42 : 0x41;
            await writeFile(`${file}.new`, content);
            await rename(`${file}.new`, file);
          } else if (step.type === 'shrink') {
            const { length } = await readFile(file);
            await truncate(file, Math.max(0, length - step.back));
          } else {
            reader = new LedgerReader(file);
          }
          expect(await reader.read()).toEqual(await readLedgerFile(file));
        }
      }),
      { numRuns: 60 },
    );
  });

  it('parses only what was appended: earlier entries come back as the same objects', async () => {
    const file = join(await makeTempDirectory(), 'ledger.jsonl');
    await writeFile(file, entryLine(1, 'one') + entryLine(2, 'two'));
    const reader = new LedgerReader(file);
    const first = await reader.read();
    await appendFile(file, entryLine(3, 'three'));
    const second = await reader.read();
    expect(second.entries).toHaveLength(3);
    expect(second.entries[0]).toBe(first.entries[0]);
    expect(second.entries[1]).toBe(first.entries[1]);

    // Rewritten where the last read stopped: everything is parsed again.
    await writeFile(file, entryLine(1, 'one') + entryLine(2, 'TWO') + entryLine(3, 'three'));
    const third = await reader.read();
    expect(third.entries[1]?.body).toEqual({ text: 'TWO' });
    expect(third.entries[0]).not.toBe(first.entries[0]);
  });
});
