import { appendFile, readFile, stat, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { RewindError } from '../../src/errors.js';
import {
  checkLedger,
  digestEntry,
  fileLedgers,
  Ledger,
  type LedgerEntry,
  readLedgerFile,
  sessionFileOf,
} from '../../src/ledger/index.js';
import { initStore } from '../../src/store/index.js';
import { ROOT, runNode } from '../helpers/processes.js';
import { makeTempDirectory } from '../helpers/temp.js';

function fixedClock(start = Date.UTC(2026, 10, 29, 12, 0, 0)) {
  let tick = 0;
  return () => new Date(start + tick++ * 1000);
}

async function newLedger(options: { hashChain?: boolean } = {}) {
  const { directory } = await initStore(await makeTempDirectory());
  const ledger = await Ledger.create(directory, {
    ...options,
    now: fixedClock(),
    generateId: () => 'abc123',
  });
  return { directory, ledger };
}

describe('ledger', () => {
  it('creates sessions/<UTC date>_<id>.jsonl starting with session-started', async () => {
    const { directory, ledger } = await newLedger();
    expect(ledger.session).toEqual({
      id: 'abc123',
      stem: '2026-11-29_abc123',
      file: join(directory, 'sessions', '2026-11-29_abc123.jsonl'),
    });
    await ledger.close();
    expect(await readFile(ledger.session.file, 'utf8')).toBe(
      '{"at":"2026-11-29T12:00:01.000Z","body":{"hashChain":false},"kind":"session-started","seq":1,"v":1}\n',
    );
  });

  it('appends canonical lines with seq 1, 2, 3 and millisecond UTC times, in call order', async () => {
    const { ledger } = await newLedger();
    const appended = await Promise.all(
      Array.from({ length: 50 }, (_, index) => ledger.append('note-added', { text: `n${index}` })),
    );
    expect(appended.map((entry) => entry.seq)).toEqual(
      Array.from({ length: 50 }, (_, index) => index + 2),
    );
    await ledger.close();
    const reading = await readLedgerFile(ledger.session.file);
    expect(reading.entries.map((entry) => entry.seq)).toEqual(
      Array.from({ length: 51 }, (_, index) => index + 1),
    );
    expect(reading.entries[1]).toEqual({
      v: 1,
      seq: 2,
      at: '2026-11-29T12:00:02.000Z',
      kind: 'note-added',
      body: { text: 'n0' },
    });
  });

  it('records the objects an entry references in refs', async () => {
    const { ledger } = await newLedger();
    const digest = `sha256:${'a'.repeat(64)}` as const;
    const entry = await ledger.append('note-added', { text: 'x' }, [{ type: 'blob', digest }]);
    expect(entry.refs).toEqual([{ type: 'blob', digest }]);
    await ledger.close();
  });

  it('chains every entry to the previous one when the session is hash-chained', async () => {
    const { ledger } = await newLedger({ hashChain: true });
    await ledger.append('note-added', { text: 'one' });
    await ledger.append('note-added', { text: 'two' });
    await ledger.close();
    const reading = await readLedgerFile(ledger.session.file);
    const { entries } = reading;
    expect(entries[0]?.prev).toBeUndefined();
    expect(entries[1]?.prev).toBe(digestEntry(entries[0] as LedgerEntry));
    expect(entries[2]?.prev).toBe(digestEntry(entries[1] as LedgerEntry));
    expect(checkLedger(reading, true)).toEqual([]);
  });

  it('detects an edited entry at the first broken link of the chain', async () => {
    const { ledger } = await newLedger({ hashChain: true });
    for (const text of ['a', 'b', 'c', 'd']) await ledger.append('note-added', { text });
    await ledger.close();
    const content = await readFile(ledger.session.file, 'utf8');
    await writeFile(ledger.session.file, content.replace('"text":"b"', '"text":"B"'));
    const problems = checkLedger(await readLedgerFile(ledger.session.file), true);
    expect(problems).toEqual([expect.objectContaining({ type: 'chain-broken', seq: 4 })]);
  });

  it('detects a deleted entry as a seq gap', async () => {
    const { ledger } = await newLedger();
    for (const text of ['a', 'b', 'c']) await ledger.append('note-added', { text });
    await ledger.close();
    const lines = (await readFile(ledger.session.file, 'utf8')).split('\n');
    lines.splice(2, 1);
    await writeFile(ledger.session.file, lines.join('\n'));
    expect(checkLedger(await readLedgerFile(ledger.session.file), false)).toEqual([
      expect.objectContaining({ type: 'seq-broken', seq: 4 }),
    ]);
  });

  it('ignores and reports a torn final line, and starts the next entry on a fresh line', async () => {
    const { ledger } = await newLedger({ hashChain: true });
    await ledger.append('note-added', { text: 'kept' });
    await ledger.close();
    await appendFile(ledger.session.file, '{"at":"2026-11-29T12:00:09.000Z","body":{"te');
    const torn = await readLedgerFile(ledger.session.file);
    expect(torn.entries).toHaveLength(2);
    expect(torn.unreadable).toEqual([expect.objectContaining({ line: 3, isTorn: true })]);

    const reopened = await Ledger.open(ledger.session, {
      now: fixedClock(Date.UTC(2026, 10, 29, 13)),
    });
    const entry = await reopened.append('note-added', { text: 'after the crash' });
    await reopened.close();
    expect(entry.seq).toBe(3);
    const reading = await readLedgerFile(ledger.session.file);
    expect(reading.entries.map((each) => each.seq)).toEqual([1, 2, 3]);
    expect(reading.unreadable).toEqual([expect.objectContaining({ line: 3, isTorn: false })]);
    expect(checkLedger(reading, true)).toEqual([]);
  });

  it('refuses to append after a complete last line that is not an entry, and writes nothing', async () => {
    const { ledger } = await newLedger();
    await ledger.append('note-added', { text: 'fine' });
    await ledger.close();
    await appendFile(ledger.session.file, '{"garbled": tru}\n');
    const before = await readFile(ledger.session.file, 'utf8');
    const reading = await readLedgerFile(ledger.session.file);
    expect(checkLedger(reading, false)).toEqual([
      expect.objectContaining({ type: 'line-unreadable', line: 3 }),
    ]);
    const reopened = await Ledger.open(ledger.session);
    await expect(reopened.append('note-added', { text: 'x' })).rejects.toMatchObject({
      code: 'LEDGER_CORRUPT',
    });
    await reopened.close();
    expect(await readFile(ledger.session.file, 'utf8')).toBe(before);
  });

  it("runs an append's check on the file as it is under the lock: of writers checking one label, one appends", async () => {
    const { ledger } = await newLedger();
    const writers = await Promise.all(
      [1, 2, 3, 4].map(() => Ledger.open(ledger.session, { now: fixedClock() })),
    );
    const labelFree = async (entries: readonly LedgerEntry[]) => {
      await new Promise((resolve) => setTimeout(resolve, 20));
      if (entries.some((entry) => entry.body.label === 'once')) {
        throw new RewindError('CHECKPOINT_EXISTS', 'taken');
      }
    };
    const outcomes = await Promise.allSettled(
      writers.map((writer) =>
        writer.append('checkpoint-created', { label: 'once' }, [], labelFree),
      ),
    );
    expect(outcomes.filter((outcome) => outcome.status === 'fulfilled')).toHaveLength(1);
    const { entries } = await readLedgerFile(ledger.session.file);
    expect(entries.map((entry) => entry.kind)).toEqual(['session-started', 'checkpoint-created']);
    await Promise.all([ledger, ...writers].map((each) => each.close()));
  });

  it('refuses an unknown kind or a body JSON cannot hold, and writes nothing', async () => {
    const { ledger } = await newLedger();
    const before = (await stat(ledger.session.file)).size;
    await expect(ledger.append('made-up' as never, {})).rejects.toMatchObject({
      code: 'INVALID_ARGUMENT',
    });
    await expect(ledger.append('note-added', { text: Number.NaN })).rejects.toMatchObject({
      code: 'INVALID_ARGUMENT',
    });
    expect((await ledger.append('note-added', { text: 'still works' })).seq).toBe(2);
    await ledger.close();
    expect((await stat(ledger.session.file)).size).toBeGreaterThan(before);
  });

  it.each([
    [
      'an entry of a kind this version does not know',
      { kind: 'checkpoint-teleported', v: 1 },
      'ENTRY_KIND_UNKNOWN',
    ],
    [
      'an entry in a newer ledger format',
      { kind: 'note-added', v: 2 },
      'LEDGER_VERSION_UNSUPPORTED',
    ],
  ])('refuses to open a session holding %s, and changes nothing', async (_why, fields, code) => {
    const { ledger } = await newLedger();
    await ledger.close();
    const line = JSON.stringify({ at: '2026-11-29T12:00:05.000Z', body: {}, seq: 2, ...fields });
    await appendFile(ledger.session.file, `${line}\n`);
    const before = await readFile(ledger.session.file, 'utf8');
    const error = await Ledger.open(ledger.session).catch((caught: unknown) => caught);
    expect(error).toMatchObject({ code, data: { seq: 2 } });
    expect(String(error)).toContain('Upgrade Rewind');
    expect(await readFile(ledger.session.file, 'utf8')).toBe(before);
  });

  it('refuses to open a file that does not start with session-started', async () => {
    const { directory, ledger } = await newLedger();
    await ledger.close();
    const session = sessionFileOf(directory, '2026-11-29_zzzz');
    if (!session) throw new Error('bad name');
    await writeFile(session.file, '{"hello":"world"}\n');
    await expect(Ledger.open(session)).rejects.toMatchObject({ code: 'LEDGER_CORRUPT' });
  });

  it('serializes 4 processes appending 500 entries each: every seq once, no torn or lost line', async () => {
    const { directory, ledger } = await newLedger({ hashChain: true });
    await ledger.close();
    const child = join(ROOT, 'test/helpers/ledger-child.mjs');
    const runs = await Promise.all(
      ['w0', 'w1', 'w2', 'w3'].map((writer) =>
        runNode([child, directory, ledger.session.stem, writer, '500']),
      ),
    );
    for (const run of runs) expect(run).toMatchObject({ code: 0, stderr: '' });

    const content = await readFile(ledger.session.file, 'utf8');
    const lines = content.split('\n');
    expect(lines.pop()).toBe('');
    expect(lines).toHaveLength(2001);
    const reading = await readLedgerFile(ledger.session.file);
    expect(reading.unreadable).toEqual([]);
    const appended = reading.entries.slice(1);
    expect(appended.map((entry) => entry.seq)).toEqual(
      Array.from({ length: 2000 }, (_, index) => index + 2),
    );
    for (const writer of ['w0', 'w1', 'w2', 'w3']) {
      const texts = appended
        .map((entry) => String(entry.body.text))
        .filter((text) => text.startsWith(`${writer}:`));
      expect(texts).toEqual(Array.from({ length: 500 }, (_, index) => `${writer}:${index}`));
    }
    expect(checkLedger(reading, true)).toEqual([]);
  }, 120_000);
});

describe('copying a session into a store (push, pull)', () => {
  /** A hash-chained session of a few entries in a store of its own, and its lines. */
  async function source() {
    const { ledger } = await newLedger({ hashChain: true });
    await ledger.append('note-added', { text: 'one' });
    await ledger.append('note-added', { text: 'two' });
    await ledger.close();
    const text = await readFile(ledger.session.file, 'utf8');
    return { entries: (await readLedgerFile(ledger.session.file)).entries, text };
  }

  it('writes a missing session whole, then only the entries it lacks, byte for byte', async () => {
    const { entries, text } = await source();
    const { directory } = await initStore(await makeTempDirectory());
    const ledgers = fileLedgers(directory);
    const first = await ledgers.copyIn('abc123', entries.slice(0, 2));
    expect(first).toMatchObject({ appended: 2, ahead: 0 });
    expect(first.session.file).toBe(join(directory, 'sessions', '2026-11-29_abc123.jsonl'));
    // A crash had torn the last line: the copy starts on a fresh line after it.
    await appendFile(first.session.file, '{"v":1,"seq":3,"ki');
    expect(await ledgers.copyIn('abc123', entries)).toMatchObject({ appended: 1, ahead: 0 });
    const reading = await readLedgerFile(first.session.file);
    expect(reading.entries.map((entry) => entry.seq)).toEqual([1, 2, 3]);
    expect(checkLedger(reading, true)).toEqual([]);
    const lines = (await readFile(first.session.file, 'utf8')).split('\n');
    expect(lines.filter((line) => line !== '{"v":1,"seq":3,"ki').join('\n')).toBe(text);
    // A copy that has them all, or more: nothing written.
    expect(await ledgers.copyIn('abc123', entries)).toMatchObject({ appended: 0, ahead: 0 });
    expect(await ledgers.copyIn('abc123', entries.slice(0, 1))).toMatchObject({
      appended: 0,
      ahead: 2,
    });
    // The same session opened for appending goes on from the copied entries.
    const session = sessionFileOf(directory, '2026-11-29_abc123');
    const opened = await Ledger.open(session as NonNullable<typeof session>);
    expect((await opened.append('note-added', { text: 'three' })).seq).toBe(4);
    await opened.close();
    expect(checkLedger(await readLedgerFile(first.session.file), true)).toEqual([]);
  });

  it('completes a copy cut short right after its file was made', async () => {
    const { entries, text } = await source();
    const { directory } = await initStore(await makeTempDirectory());
    const file = join(directory, 'sessions', '2026-11-29_abc123.jsonl');
    await writeFile(file, '');
    expect(await fileLedgers(directory).copyIn('abc123', entries)).toMatchObject({
      appended: 3,
      ahead: 0,
    });
    expect(await readFile(file, 'utf8')).toBe(text);
  });

  it('refuses copies that went apart, and entries that are not a whole ledger, writing nothing', async () => {
    const { entries } = await source();
    const { directory } = await initStore(await makeTempDirectory());
    const ledgers = fileLedgers(directory);
    const { session } = await ledgers.copyIn('abc123', entries.slice(0, 2));
    const before = await readFile(session.file, 'utf8');
    const other = { ...(entries[1] as LedgerEntry), body: { text: 'not the same' } };
    await expect(
      ledgers.copyIn('abc123', [entries[0] as LedgerEntry, other]),
    ).rejects.toMatchObject({ code: 'SESSION_DIVERGED', data: { seq: 2 } });
    await expect(
      ledgers.copyIn('abc123', [entries[0] as LedgerEntry, entries[2] as LedgerEntry]),
    ).rejects.toMatchObject({ code: 'LEDGER_CORRUPT' });
    // The third entry's hash of the second replaced: the chain is broken.
    const unchained = {
      ...(entries[2] as LedgerEntry),
      prev: digestEntry(entries[0] as LedgerEntry),
    };
    await expect(
      ledgers.copyIn('abc123', [...entries.slice(0, 2), unchained]),
    ).rejects.toMatchObject({ code: 'LEDGER_CORRUPT', message: expect.stringContaining('#3') });
    expect(await readFile(session.file, 'utf8')).toBe(before);
  });
});
