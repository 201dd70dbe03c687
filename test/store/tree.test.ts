import { describe, expect, it } from 'vitest';
import { digestBytes } from '../../src/lib/index.js';
import {
  createObjectStore,
  decodeTree,
  encodeTree,
  initStore,
  putTree,
  readTree,
  type TreeEntry,
  walkReferences,
} from '../../src/store/index.js';
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
});
