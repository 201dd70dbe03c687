import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { canonicalJson, compareNames, digestBytes } from '../../src/lib/index.js';
import {
  createObjectStore,
  decodeTree,
  encodeTree,
  initStore,
  putTree,
  putTreeIn,
  readTree,
  type TreeEntry,
  walkReferences,
} from '../../src/store/index.js';
import { FUZZ_SCALE } from '../helpers/fuzz.js';
import { makeTempDirectory } from '../helpers/temp.js';

const file = (name: string, content: string, mode = 0o644): TreeEntry => ({
  name,
  type: 'file',
  mode,
  sizeBytes: Buffer.byteLength(content),
  digest: digestBytes(content),
});

describe('trees', () => {
  it('encodes a listing canonically: sorted by UTF-8 bytes, fixed fields, whatever the input order', () => {
    const entries: TreeEntry[] = [
      file('b.txt', 'b'),
      { name: 'link', type: 'symlink', target: '../elsewhere' },
      file('a.sh', '#!/bin/sh', 0o755),
      { name: 'Z', type: 'directory', mode: 0o755, digest: digestBytes('sub') },
      file('é', 'accent'),
    ];
    const encoded = encodeTree(entries).toString();
    expect(encodeTree([...entries].reverse()).toString()).toBe(encoded);
    expect(JSON.parse(encoded).entries.map((entry: TreeEntry) => entry.name)).toEqual([
      'Z',
      'a.sh',
      'b.txt',
      'link',
      'é',
    ]);
    expect(encoded.startsWith('{"entries":[{"digest":"sha256:')).toBe(true);
    expect(encoded).toContain('{"name":"link","target":"../elsewhere","type":"symlink"}');
    expect(encoded.endsWith('],"type":"tree","v":1}')).toBe(true);
  });

  it('gives a different digest when any mode, size, name, or content changes', () => {
    const base = encodeTree([file('a', 'x')]);
    const variants = [
      encodeTree([file('a', 'x', 0o755)]),
      encodeTree([file('a', 'y')]),
      encodeTree([file('b', 'x')]),
      encodeTree([{ name: 'a', type: 'symlink', target: 'x' }]),
    ];
    for (const variant of variants) expect(digestBytes(variant)).not.toBe(digestBytes(base));
  });

  it.each([
    ['a name with a slash', [file('a/b', 'x')]],
    ['the name ..', [file('..', 'x')]],
    ['an empty name', [file('', 'x')]],
    ['a duplicate name', [file('a', 'x'), file('a', 'y')]],
    ['a bad mode', [{ ...file('a', 'x'), mode: 0o17777 }]],
    ['a bad digest', [{ ...file('a', 'x'), digest: 'sha256:nothex' } as TreeEntry]],
  ])('refuses %s with TREE_INVALID', (_why, entries) => {
    expect(() => encodeTree(entries as TreeEntry[])).toThrow(
      expect.objectContaining({ code: 'TREE_INVALID' }),
    );
  });

  it('round-trips through the store, and refuses a non-canonical encoding', async () => {
    const { directory } = await initStore(await makeTempDirectory());
    const store = createObjectStore(directory);
    const entries = [file('a', 'x'), { name: 'l', type: 'symlink', target: 'a' } as TreeEntry];
    const digest = await putTree(store, entries);
    expect((await readTree(store, digest)).entries).toEqual(entries);
    const spaced = Buffer.from(JSON.stringify(JSON.parse(encodeTree(entries).toString()), null, 1));
    expect(() => decodeTree(spaced)).toThrow(expect.objectContaining({ code: 'TREE_INVALID' }));
    expect(() => decodeTree(Buffer.from('hello'))).toThrow(
      expect.objectContaining({ code: 'TREE_INVALID' }),
    );
  });

  it('keeps the trees a store read, frozen, so that reading one again costs nothing', async () => {
    const { directory } = await initStore(await makeTempDirectory());
    const store = createObjectStore(directory);
    const digest = await putTree(store, [file('a.txt', 'a'), file('b.txt', 'b')]);
    const first = await readTree(store, digest);
    expect(await readTree(store, digest)).toBe(first);
    expect(Object.isFrozen(first.entries)).toBe(true);
    expect(() => (first.entries as TreeEntry[]).push(file('c.txt', 'c'))).toThrow(TypeError);
    expect(() => {
      (first.entries[0] as { mode: number }).mode = 0o777;
    }).toThrow(TypeError);
    // Another store (another process) reads the object again.
    const other = createObjectStore(directory);
    expect(await readTree(other, digest)).not.toBe(first);
    expect(await readTree(other, digest)).toEqual(first);
    // The trees kept are bounded (200,000 entries): past it the oldest go, but one read again
    // since it came is kept once more; after many others, the first is read again.
    const batch = store.batch();
    let stored = 0;
    const storeOthers = async (count: number): Promise<void> => {
      for (const end = stored + count; stored < end; stored++) {
        const entries = Array.from({ length: 99 }, (_, entry) => file(`f${entry}`, `${stored}`));
        await putTreeIn(store, batch, entries);
      }
    };
    await storeOthers(2_050);
    expect(await readTree(store, digest)).toBe(first);
    await storeOthers(4_100);
    await batch.commit();
    expect(await readTree(store, digest)).not.toBe(first);
  });

  it('keeps a tree it stores in a batch as it would read it back: checked, sorted, frozen', async () => {
    const { directory } = await initStore(await makeTempDirectory());
    const store = createObjectStore(directory);
    const batch = store.batch();
    const given = [file('b.txt', 'b'), file('a.txt', 'a')];
    const digest = await putTreeIn(store, batch, given);
    await batch.commit();
    const kept = await readTree(store, digest);
    expect(Object.isFrozen(kept.entries[0])).toBe(true);
    expect(kept.entries.map((entry) => entry.name)).toEqual(['a.txt', 'b.txt']);
    // Copies of the entries given, which the caller may go on changing.
    expect(kept.entries[1]).not.toBe(given[0]);
    (given[0] as { mode: number }).mode = 0o600;
    expect((kept.entries[1] as { mode: number }).mode).toBe(0o644);
    // What another store (another process) reads from the disk is the same.
    expect(await readTree(createObjectStore(directory), digest)).toEqual(kept);
    expect(digest).toBe(digestBytes(encodeTree([file('a.txt', 'a'), file('b.txt', 'b')])));
    // A bad listing is refused before anything is stored.
    await expect(
      putTreeIn(store, store.batch(), [given[1], given[1]] as TreeEntry[]),
    ).rejects.toThrow(/twice/);
    // A listing from outside is checked whole, even an entry frozen as those kept are.
    expect(() => encodeTree([Object.freeze({ ...file('c.txt', 'c'), mode: 0o10000 })])).toThrow(
      /invalid mode/,
    );
  });

  it('walks every object under a root tree once, even when shared', async () => {
    const { directory } = await initStore(await makeTempDirectory());
    const store = createObjectStore(directory);
    const blob = await store.put(Buffer.from('shared'));
    const fileEntry: TreeEntry = {
      name: 'f',
      type: 'file',
      mode: 0o644,
      sizeBytes: 6,
      digest: blob.digest,
    };
    const sub = await putTree(store, [fileEntry]);
    const root = await putTree(store, [
      fileEntry,
      { name: 'one', type: 'directory', mode: 0o755, digest: sub },
      { name: 'two', type: 'directory', mode: 0o755, digest: sub },
    ]);
    const visited: string[] = [];
    await walkReferences(
      store,
      [{ type: 'tree', digest: root }],
      (reference) => {
        visited.push(reference.digest);
      },
      () => {},
    );
    expect(visited.sort()).toEqual([root, sub, blob.digest].sort());
  });

  it('walks many objects at once when asked, each once, with a tree it cannot read reported as one at a time does', async () => {
    const { directory } = await initStore(await makeTempDirectory());
    const store = createObjectStore(directory);
    const leaves = await Promise.all(
      Array.from({ length: 40 }, async (_, index) => {
        const { digest } = await store.put(Buffer.from(`content ${index % 30}`));
        return { ...file(`f${index}`, `content ${index % 30}`), digest };
      }),
    );
    const missing = digestBytes('a tree nobody stored');
    const subs = await Promise.all(
      [0, 1, 2, 3].map((part) => putTree(store, leaves.slice(part * 10, part * 10 + 12))),
    );
    const root = await putTree(store, [
      ...subs.map((digest, index) => ({
        name: `d${index}`,
        type: 'directory' as const,
        mode: 0o755,
        digest,
      })),
      { name: 'gone', type: 'directory', mode: 0o755, digest: missing },
    ]);
    const walk = async (concurrency: number) => {
      const visited: string[] = [];
      const unreadable: string[] = [];
      let inFlight = 0;
      let most = 0;
      await walkReferences(
        store,
        [{ type: 'tree', digest: root }],
        async (reference) => {
          inFlight += 1;
          most = Math.max(most, inFlight);
          await new Promise((resolve) => setTimeout(resolve, 1));
          visited.push(reference.digest);
          inFlight -= 1;
        },
        (reference) => unreadable.push(reference.digest),
        concurrency,
      );
      return { visited: visited.sort(), unreadable, most };
    };
    const one = await walk(1);
    const many = await walk(16);
    expect(one.most).toBe(1);
    expect(many.most).toBe(16);
    expect(many.visited).toEqual(one.visited);
    expect(new Set(many.visited).size).toBe(many.visited.length);
    expect(one.visited).toHaveLength(1 + 4 + 30 + 1);
    expect(many.unreadable).toEqual([missing]);
    expect(one.unreadable).toEqual([missing]);
  });

  it('writes exactly the bytes canonical JSON gives, and reads back only those (random listings)', () => {
    // Names as they come from disks: any text, quotes, backslashes, controls, lone surrogates.
    const name = fc
      .string({
        unit: fc.oneof(
          fc.constantFrom('"', '\\', '\u0001', '\ud800', '\udfff', 'é', '€'),
          fc.integer({ min: 1, max: 0xffff }).map((code) => String.fromCharCode(code)),
          fc.integer({ min: 0x10000, max: 0x10ffff }).map((code) => String.fromCodePoint(code)),
        ),
        minLength: 1,
        maxLength: 12,
      })
      .filter(
        (text) => text !== '.' && text !== '..' && !text.includes('/') && !text.includes('\0'),
      );
    const digest = fc.string({ minLength: 1, maxLength: 8 }).map((text) => digestBytes(text));
    const entry = fc.oneof(
      fc.record({
        name,
        type: fc.constant('file' as const),
        mode: fc.integer({ min: 0, max: 0o7777 }),
        sizeBytes: fc.oneof(fc.nat(), fc.constant(Number.MAX_SAFE_INTEGER)),
        digest,
      }),
      fc.record({
        name,
        type: fc.constant('directory' as const),
        mode: fc.integer({ min: 0, max: 0o7777 }),
        digest,
      }),
      fc.record({ name, type: fc.constant('symlink' as const), target: name }),
    );
    fc.assert(
      fc.property(
        fc.uniqueArray(entry, { selector: (value) => value.name, maxLength: 20 }),
        (entries) => {
          const sorted = [...entries].sort((a, b) => compareNames(a.name, b.name));
          const expected = canonicalJson({ type: 'tree', v: 1, entries: sorted });
          const encoded = encodeTree(entries);
          expect(encoded.toString('utf8')).toBe(expected);
          expect(decodeTree(Buffer.from(expected)).entries).toEqual(sorted);
          // Another order is not canonical (names that encode alike, lone surrogates, keep theirs).
          if (sorted.length > 1 && compareNames(sorted[0]?.name ?? '', sorted[1]?.name ?? '') < 0) {
            const swapped = [sorted[1], sorted[0], ...sorted.slice(2)];
            const text = canonicalJson({ type: 'tree', v: 1, entries: swapped });
            expect(() => decodeTree(Buffer.from(text))).toThrow(/canonical/);
          }
        },
      ),
      { numRuns: 300 * FUZZ_SCALE },
    );
  });
});
