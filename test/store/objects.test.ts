import { chmod, open, readdir, readFile, stat, utimes, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { digestBytes } from '../../src/lib/index.js';
import { createObjectStore, initStore } from '../../src/store/index.js';
import { makeTempDirectory } from '../helpers/temp.js';

async function newStore() {
  const workspace = await makeTempDirectory();
  const { directory } = await initStore(workspace);
  return { directory, store: createObjectStore(directory) };
}

function objectFile(directory: string, digest: string): string {
  const hex = digest.slice('sha256:'.length);
  return join(directory, 'objects', hex.slice(0, 2), hex.slice(2));
}

async function* chunks(...parts: string[]): AsyncIterable<Uint8Array> {
  for (const part of parts) yield Buffer.from(part);
}

describe('object store', () => {
  it('stores bytes under their SHA-256 with two-character fan-out, read-only', async () => {
    const { directory, store } = await newStore();
    const info = await store.put(Buffer.from('hello'));
    expect(info).toEqual({ digest: digestBytes('hello'), sizeBytes: 5 });
    const file = objectFile(directory, info.digest);
    expect(await readFile(file, 'utf8')).toBe('hello');
    expect((await stat(file)).mode & 0o222).toBe(0);
    expect(await store.get(info.digest)).toEqual(Buffer.from('hello'));
    expect(await store.has(info.digest)).toBe(true);
    expect(await store.stat(info.digest)).toEqual(info);
  });

  it('stores a stream and a file under the same digest as the same bytes', async () => {
    const { store } = await newStore();
    const fromStream = await store.put({ stream: chunks('hel', 'lo') });
    const source = join(await makeTempDirectory(), 'f');
    await writeFile(source, 'hello');
    const fromFile = await store.put({ file: source });
    expect(fromStream).toEqual({ digest: digestBytes('hello'), sizeBytes: 5 });
    expect(fromFile).toEqual(fromStream);
  });

  it('is idempotent: putting existing content writes nothing and leaves no temporary file', async () => {
    const { directory, store } = await newStore();
    const first = await store.put(Buffer.from('same'));
    const file = objectFile(directory, first.digest);
    const { ino } = await stat(file);
    await store.put(Buffer.from('same'));
    await store.put({ stream: chunks('sa', 'me') });
    expect((await stat(file)).ino).toBe(ino);
    expect(
      (await readdir(join(directory, 'objects'))).filter((name) => name.startsWith('.')),
    ).toEqual([]);
  });

  it('marks an object put again as recently used, so garbage collection spares it', async () => {
    const { directory, store } = await newStore();
    const { digest } = await store.put(Buffer.from('old'));
    const file = objectFile(directory, digest);
    const longAgo = new Date(Date.now() - 86_400_000);
    await utimes(file, longAgo, longAgo);
    await store.put(Buffer.from('old'));
    expect(Date.now() - (await stat(file)).mtimeMs).toBeLessThan(60_000);
  });

  it('fails with OBJECT_CORRUPT, naming the object and its file, when the bytes changed', async () => {
    const { directory, store } = await newStore();
    const { digest } = await store.put(Buffer.from('original'));
    const file = objectFile(directory, digest);
    await chmod(file, 0o644);
    await writeFile(file, 'tampered');
    const expected = { code: 'OBJECT_CORRUPT', data: expect.objectContaining({ digest, file }) };
    await expect(store.get(digest)).rejects.toMatchObject(expected);
    await expect(store.verify(digest)).rejects.toMatchObject(expected);
    const read = async () => {
      for await (const _ of store.read(digest)) {
        // consume
      }
    };
    await expect(read()).rejects.toMatchObject(expected);
    expect(String(await store.get(digest).catch((error: unknown) => error))).toContain(file);
  });

  it('fails with OBJECT_NOT_FOUND for a missing object, and reports it absent', async () => {
    const { store } = await newStore();
    const digest = digestBytes('never stored');
    await expect(store.get(digest)).rejects.toMatchObject({ code: 'OBJECT_NOT_FOUND' });
    expect(await store.has(digest)).toBe(false);
    expect(await store.stat(digest)).toBeUndefined();
  });

  it('refuses a malformed digest instead of touching the filesystem', async () => {
    const { store } = await newStore();
    await expect(store.get('sha256:../../etc/passwd' as never)).rejects.toMatchObject({
      code: 'INVALID_ARGUMENT',
    });
  });

  it('streams a large object back in chunks, verified', async () => {
    const { store } = await newStore();
    const source = join(await makeTempDirectory(), 'large');
    const handle = await open(source, 'w');
    await handle.truncate(5 * 1024 * 1024 + 3);
    await handle.close();
    const { digest, sizeBytes } = await store.put({ file: source });
    let total = 0;
    let largestChunk = 0;
    for await (const chunk of store.read(digest)) {
      total += chunk.length;
      largestChunk = Math.max(largestChunk, chunk.length);
    }
    expect(total).toBe(sizeBytes);
    expect(largestChunk).toBeLessThanOrEqual(1024 * 1024);
  });

  it('lists every object with its size, and removes one on request', async () => {
    const { store } = await newStore();
    const a = await store.put(Buffer.from('a'));
    const b = await store.put(Buffer.from('bb'));
    const listed = [];
    for await (const object of store.list())
      listed.push({ digest: object.digest, sizeBytes: object.sizeBytes });
    expect(listed.sort((x, y) => x.digest.localeCompare(y.digest))).toEqual(
      [a, b].sort((x, y) => x.digest.localeCompare(y.digest)),
    );
    await store.remove([a.digest]);
    await store.remove([a.digest]);
    expect(await store.has(a.digest)).toBe(false);
  });

  it('leaves no object behind when the source fails midway, only nothing', async () => {
    const { directory, store } = await newStore();
    async function* failing(): AsyncIterable<Uint8Array> {
      yield Buffer.from('partial');
      throw new Error('source broke');
    }
    await expect(store.put({ stream: failing() })).rejects.toThrow('source broke');
    const names = await readdir(join(directory, 'objects'));
    expect(names).toEqual([]);
  });

  it('stores many objects in a batch, durable together on commit, with no temporary file left', async () => {
    const { directory, store } = await newStore();
    const batch = store.batch();
    const infos = [];
    for (let index = 0; index < 100; index++)
      infos.push(await batch.put(Buffer.from(`object ${index}`)));
    infos.push(await batch.put(Buffer.from('object 7')));
    await batch.commit();
    expect(new Set(infos.map((info) => info.digest)).size).toBe(100);
    for (const info of infos)
      expect((await store.get(info.digest)).toString()).toMatch(/^object \d+$/);
    expect(
      (await readdir(join(directory, 'objects'))).filter((name) => name.startsWith('.')),
    ).toEqual([]);
  });
});
