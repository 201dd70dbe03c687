import { execFileSync } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import {
  chmod,
  open,
  readdir,
  readFile,
  rm,
  stat,
  symlink,
  truncate,
  utimes,
  writeFile,
} from 'node:fs/promises';
import { basename, join } from 'node:path';
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { type Digest, digestBytes } from '../../src/lib/index.js';
import { verify } from '../../src/session/index.js';
import { createObjectStore, initStore, type ObjectStore } from '../../src/store/index.js';
import { geometricMerge } from '../../src/store/packs.js';
import { sessionOn } from '../helpers/session.js';
import { makeTempDirectory } from '../helpers/temp.js';

async function newStore() {
  const workspace = await makeTempDirectory();
  const { directory } = await initStore(workspace);
  return { directory, store: createObjectStore(directory) };
}

const contents = (count: number, tag = 'object') =>
  Array.from({ length: count }, (_, index) => Buffer.from(`${tag} ${index}\n`.repeat(index + 1)));

async function putInBatch(store: ObjectStore, all: Buffer[]): Promise<Digest[]> {
  const batch = store.batch();
  const digests: Digest[] = [];
  for (const bytes of all) digests.push((await batch.put(bytes)).digest);
  await batch.commit();
  return digests;
}

async function packFiles(directory: string): Promise<string[]> {
  return (await readdir(join(directory, 'objects', 'pack')).catch(() => [])).sort();
}

async function packCount(directory: string): Promise<number> {
  return (await packFiles(directory)).filter((name) => name.endsWith('.pack')).length;
}

/** How many objects the indexes list together (SPEC.md §3a: 12 bytes, 56 a record, 32). */
async function recordCount(directory: string): Promise<number> {
  let count = 0;
  for (const name of await packFiles(directory)) {
    if (name.endsWith('.idx'))
      count += ((await stat(join(directory, 'objects', 'pack', name))).size - 44) / 56;
  }
  return count;
}

/** Batches too large to be folded into the next (over 1,024 objects): a pack each. */
const LARGE_BATCH = 1025;
const tiny = (count: number, tag: string) =>
  Array.from({ length: count }, (_, index) => Buffer.from(`${tag} ${index}`));

async function looseCount(directory: string): Promise<number> {
  let count = 0;
  for (const name of await readdir(join(directory, 'objects'))) {
    if (/^[0-9a-f]{2}$/.test(name))
      count += (await readdir(join(directory, 'objects', name))).length;
  }
  return count;
}

/** The offset, bytes stored and size an index gives an object (SPEC.md §3a). */
async function recordOf(index: string, digest: Digest) {
  const bytes = await readFile(index);
  const key = Buffer.from(digest.slice('sha256:'.length), 'hex');
  for (let at = 12; at < bytes.length - 32; at += 56) {
    if (bytes.subarray(at, at + 32).equals(key)) {
      return {
        offset: Number(bytes.readBigUInt64BE(at + 32)),
        stored: Number(bytes.readBigUInt64BE(at + 40)),
        size: Number(bytes.readBigUInt64BE(at + 48)),
      };
    }
  }
  throw new Error(`${digest} is not in ${index}`);
}

async function listed(store: ObjectStore): Promise<Digest[]> {
  const digests: Digest[] = [];
  for await (const object of store.list()) digests.push(object.digest);
  return digests.sort();
}

describe('packs', () => {
  it('writes a batch of many small objects as one pack and index, each object readable', async () => {
    const { directory, store } = await newStore();
    const all = contents(40);
    const digests = await putInBatch(store, all);
    const files = await packFiles(directory);
    expect(files).toHaveLength(2);
    expect(files[0]).toMatch(/^pack-[0-9a-f]{64}\.idx$/);
    expect(files[1]).toBe(files[0]?.replace(/\.idx$/, '.pack'));
    expect(await looseCount(directory)).toBe(0);
    // The index is named by the SHA-256 of what precedes its last 32 bytes, which are that hash.
    const index = await readFile(join(directory, 'objects', 'pack', files[0] as string));
    expect(index.subarray(0, 8).toString('latin1')).toBe('RWINDEX\x01');
    expect(index.readUInt32BE(8)).toBe(40);
    expect(index.length).toBe(12 + 40 * 56 + 32);
    // Compressed where that pays (this text repeats), stored as it is where not (the shortest).
    const packFile = join(directory, 'objects', 'pack', files[1] as string);
    const indexFile = join(directory, 'objects', 'pack', files[0] as string);
    const longest = await recordOf(indexFile, digestBytes(all[39] as Buffer));
    expect(longest.size).toBe((all[39] as Buffer).length);
    expect(longest.stored).toBeLessThan(longest.size / 4);
    const shortest = await recordOf(indexFile, digestBytes(all[0] as Buffer));
    expect(shortest.stored).toBe(shortest.size);
    const raw = await readFile(packFile);
    expect(raw.subarray(shortest.offset, shortest.offset + shortest.size)).toEqual(all[0]);
    expect(digestBytes(index.subarray(0, -32))).toBe(
      `sha256:${index.subarray(-32).toString('hex')}`,
    );
    for (const [position, digest] of digests.entries()) {
      const bytes = all[position] as Buffer;
      expect(digest).toBe(digestBytes(bytes));
      expect(await store.get(digest)).toEqual(bytes);
      expect(await store.has(digest)).toBe(true);
      expect(await store.stat(digest)).toEqual({ digest, sizeBytes: bytes.length });
      expect(await store.verify(digest)).toEqual({ digest, sizeBytes: bytes.length });
      const read: Buffer[] = [];
      for await (const chunk of store.read(digest)) read.push(chunk);
      expect(Buffer.concat(read)).toEqual(bytes);
    }
    expect(await listed(store)).toEqual([...digests].sort());
    // Storing them again writes nothing new.
    await putInBatch(store, all);
    expect(await packFiles(directory)).toEqual(files);
  });

  it('packs a large batch as it goes, compressing on another thread, every object readable throughout', async () => {
    const { directory, store } = await newStore();
    // 100 objects of 555 kB: past 32 MiB the waiting ones are packed while the batch goes on.
    const all = Array.from({ length: 100 }, (_, index) =>
      Buffer.from(`line ${index} of a large generated file\n`.repeat(15_000)),
    );
    const batch = store.batch();
    const digests: Digest[] = [];
    for (const bytes of all) {
      digests.push((await batch.put(bytes)).digest);
      // Readable before the batch commits, whether waiting, being packed, or packed.
      expect((await store.get(digests.at(-1) as Digest)).equals(bytes)).toBe(true);
    }
    expect((await store.get(digests[0] as Digest)).equals(all[0] as Buffer)).toBe(true);
    await batch.commit();
    const packs = (await packFiles(directory)).filter((name) => name.endsWith('.pack'));
    expect(packs).toHaveLength(2);
    expect(await looseCount(directory)).toBe(0);
    const reopened = createObjectStore(directory);
    for (const [index, digest] of digests.entries()) {
      expect((await reopened.get(digest)).equals(all[index] as Buffer)).toBe(true);
    }
    // Compressed: these lines repeat.
    let packBytes = 0;
    for (const pack of packs)
      packBytes += (await stat(join(directory, 'objects', 'pack', pack))).size;
    expect(packBytes).toBeLessThan(all.length * 555_000 * 0.2);
  }, 60_000);

  it('compresses objects of every size with a window that holds them, here and on another thread', async () => {
    const { directory, store } = await newStore();
    // Each object repeats its first half, so that its matches reach as far back as it is long.
    const sizes = [256, 300, 511, 512, 513, 4_096, 4_097, 20_000, 32_000, 32_768];
    const objectOf = (size: number) => {
      const half = randomBytes(Math.ceil(size / 2));
      return Buffer.concat([half, half]).subarray(0, size);
    };
    // Enough of them (over 256 kB) that some are compressed on the worker, the rest here.
    const all = Array.from({ length: 8 }, () => sizes.map((size) => objectOf(size))).flat();
    const digests = await putInBatch(store, all);
    const reopened = createObjectStore(directory);
    for (const [index, digest] of digests.entries()) {
      expect((await reopened.get(digest)).equals(all[index] as Buffer)).toBe(true);
    }
    let packBytes = 0;
    for (const pack of (await packFiles(directory)).filter((name) => name.endsWith('.pack')))
      packBytes += (await stat(join(directory, 'objects', 'pack', pack))).size;
    const total = all.reduce((sum, bytes) => sum + bytes.length, 0);
    // The second half of each found in its first: a little over half the bytes are stored.
    expect(packBytes).toBeLessThan(total * 0.6);
  });

  it('packs a few objects too, and never stores one twice', async () => {
    const { directory, store } = await newStore();
    const few = contents(5, 'few');
    await putInBatch(store, few);
    expect(await looseCount(directory)).toBe(0);
    expect(await packCount(directory)).toBe(1);
    // A larger batch with those five again packs only the new ones.
    await putInBatch(store, [...few, ...contents(20, 'more')]);
    expect(await looseCount(directory)).toBe(0);
    expect(await recordCount(directory)).toBe(25);
    expect(await listed(store)).toHaveLength(25);
  });

  it('folds small packs into the next batch pack, so that they stay about log2 of the batches', async () => {
    const { directory, store } = await newStore();
    const expected: Digest[] = [];
    for (let round = 0; round < 40; round++) {
      expected.push(...(await putInBatch(store, contents(3, `round ${round}`))));
      // Each pack at least twice the objects of all smaller ones together.
      expect(await packCount(directory)).toBeLessThanOrEqual(Math.log2(round + 1) + 2);
      expect(await recordCount(directory)).toBe(expected.length);
    }
    // A folded pack is gone with its index; another process finds every object.
    const names = await packFiles(directory);
    expect(names.filter((name) => name.endsWith('.idx'))).toHaveLength(await packCount(directory));
    const other = createObjectStore(directory);
    expect(await listed(other)).toEqual([...expected].sort());
    for (const digest of expected) await other.verify(digest);
  });

  it('folds small packs into batches of a few dozen objects too (a checkpoint of 10 files)', async () => {
    const { directory, store } = await newStore();
    const expected: Digest[] = [];
    for (let round = 0; round < 40; round++) {
      expected.push(...(await putInBatch(store, contents(30, `round ${round}`))));
      // Packs of up to 64 objects are folded; the larger ones folds make pile up slowly.
      expect(await packCount(directory)).toBeLessThanOrEqual(round / 3 + 3);
    }
    expect(await listed(createObjectStore(directory))).toEqual([...expected].sort());
  });

  it('finds a pack another process wrote after this one had read the indexes', async () => {
    const { directory, store } = await newStore();
    await putInBatch(store, contents(20, 'first'));
    const other = createObjectStore(directory);
    const later = contents(20, 'second');
    const [digest] = await putInBatch(other, later);
    expect(await store.get(digest as Digest)).toEqual(later[0]);
  });

  it('reports a damaged packed object, and storing its content again repairs it', async () => {
    const { directory, store } = await newStore();
    const all = contents(40);
    const digests = await putInBatch(store, all);
    const pack = (await packFiles(directory)).find((name) => name.endsWith('.pack')) as string;
    const file = join(directory, 'objects', 'pack', pack);
    // Flip one byte of the 31st object's bytes in the pack (compressed: it repeats a line).
    const target = all[30] as Buffer;
    const digest = digests[30] as Digest;
    const { offset, stored } = await recordOf(file.replace(/\.pack$/, '.idx'), digest);
    expect(stored).toBeLessThan(target.length);
    await chmod(file, 0o644);
    const handle = await open(file, 'r+');
    const byte = Buffer.alloc(1);
    await handle.read(byte, 0, 1, offset + 1);
    await handle.write(Buffer.from([byte[0] === 0x41 ? 0x42 : 0x41]), 0, 1, offset + 1);
    await handle.close();
    await expect(store.get(digest)).rejects.toMatchObject({
      code: 'OBJECT_CORRUPT',
      data: { digest, file },
    });
    await expect(store.verify(digest)).rejects.toMatchObject({ code: 'OBJECT_CORRUPT' });
    // The others are untouched.
    expect(await store.get(digests[31] as Digest)).toEqual(all[31]);
    // A checkpoint that reads the file again stores it again: whole from then on.
    await putInBatch(store, [target]);
    expect(await store.get(digest)).toEqual(target);
    expect(await createObjectStore(directory).get(digest)).toEqual(target);
  });

  it('treats a torn index as listing nothing: its objects are missing, and are stored again', async () => {
    const { directory, store } = await newStore();
    const all = contents(20);
    const digests = await putInBatch(store, all);
    const index = (await packFiles(directory)).find((name) => name.endsWith('.idx')) as string;
    await truncate(join(directory, 'objects', 'pack', index), 100);
    const reopened = createObjectStore(directory);
    await expect(reopened.get(digests[0] as Digest)).rejects.toMatchObject({
      code: 'OBJECT_NOT_FOUND',
    });
    expect(await reopened.has(digests[0] as Digest)).toBe(false);
    await putInBatch(reopened, all);
    expect(await reopened.get(digests[0] as Digest)).toEqual(all[0]);
  });

  it('never waits on a named pipe or follows a link at a pack file name', async () => {
    const { directory, store } = await newStore();
    const all = contents(20);
    const digests = await putInBatch(store, all);
    const [index, pack] = (await packFiles(directory)).map((name) =>
      join(directory, 'objects', 'pack', name),
    ) as [string, string];
    await rm(pack);
    execFileSync('mkfifo', [pack]);
    const reopened = createObjectStore(directory);
    await expect(reopened.get(digests[0] as Digest)).rejects.toMatchObject({
      code: 'OBJECT_CORRUPT',
    });
    await rm(pack);
    await rm(index);
    execFileSync('mkfifo', [index]);
    await symlink('/etc/passwd', pack);
    const again = createObjectStore(directory);
    await expect(again.get(digests[0] as Digest)).rejects.toMatchObject({
      code: 'OBJECT_NOT_FOUND',
    });
    expect((await again.damage()).map(({ file }) => file)).toEqual([index]);
  });

  it('has verify name a damaged index, and the checkpoint files it leaves missing', async () => {
    const files = Object.fromEntries(
      Array.from({ length: 30 }, (_, index) => [`src/f${index}.txt`, `file ${index}\n`]),
    );
    const { workspace, session } = await sessionOn(files);
    await session.checkpoint('base');
    const directory = join(workspace, '.rewind');
    const index = (await packFiles(directory)).find((name) => name.endsWith('.idx')) as string;
    await truncate(join(directory, 'objects', 'pack', index), 40);
    const report = await verify({ workspace });
    expect(report.isOk).toBe(false);
    const types = report.problems.map((problem) => problem.type);
    expect(types).toContain('pack-index-damaged');
    expect(types).toContain('object-missing');
    expect(
      report.problems.find((problem) => problem.type === 'pack-index-damaged')?.message,
    ).toContain(index);
  });

  it('removes packed objects by writing the pack again without them, readers with an old index included', async () => {
    const { directory, store } = await newStore();
    const all = contents(30);
    const digests = await putInBatch(store, all);
    const reader = createObjectStore(directory);
    expect(await reader.get(digests[0] as Digest)).toEqual(all[0]);
    const asker = createObjectStore(directory);
    expect(await asker.has(digests[1] as Digest)).toBe(true);
    const before = await packFiles(directory);
    const gone = digests.slice(0, 10);
    await store.remove(gone);
    const after = await packFiles(directory);
    expect(after).toHaveLength(2);
    expect(after).not.toEqual(before);
    for (const digest of gone) expect(await store.has(digest)).toBe(false);
    // The reader had read the old index; the pack it names is gone, and the new one is found.
    expect(await reader.get(digests[15] as Digest)).toEqual(all[15]);
    await expect(reader.get(gone[0] as Digest)).rejects.toMatchObject({
      code: 'OBJECT_NOT_FOUND',
    });
    // One that had read the old index only asks: the pack it names is gone, so it reads again.
    expect(await asker.has(gone[1] as Digest)).toBe(false);
    expect(await reader.stat(digests[20] as Digest)).toEqual({
      digest: digests[20],
      sizeBytes: (all[20] as Buffer).length,
    });
    expect(await listed(store)).toEqual(digests.slice(10).sort());
    // Removing every object leaves no pack at all.
    await store.remove(digests.slice(10));
    expect(await packFiles(directory)).toEqual([]);
  });

  it('stores again an object whose pack lost its index since this process read it (gc killed between the two removals)', async () => {
    const { directory, store } = await newStore();
    const all = contents(5);
    const digests = await putInBatch(store, all);
    // Processes that read the index earlier (a live session).
    const [live, asker] = [createObjectStore(directory), createObjectStore(directory)];
    for (const reader of [live, asker]) expect(await reader.has(digests[0] as Digest)).toBe(true);
    // gc removes a pack index first, then the pack: killed in between, the pack stays unlisted.
    const [index] = (await packFiles(directory)).filter((name) => name.endsWith('.idx'));
    await rm(join(directory, 'objects/pack', index as string));
    expect(await asker.has(digests[0] as Digest)).toBe(false);
    // Stored again by the live process, the object is listed for every reader.
    await putInBatch(live, [all[0] as Buffer]);
    expect(await createObjectStore(directory).get(digests[0] as Digest)).toEqual(all[0]);
  });

  it('merges many packs into one when garbage is collected', async () => {
    const { directory, store } = await newStore();
    const expected: Digest[] = [];
    for (let round = 0; round < 6; round++) {
      expected.push(...(await putInBatch(store, tiny(LARGE_BATCH, `round ${round}`))));
    }
    expect(await packCount(directory)).toBe(6);
    await store.remove([]);
    expect(await packCount(directory)).toBe(1);
    expect(await listed(store)).toEqual([...expected].sort());
    for (const digest of expected.slice(0, 40)) await store.verify(digest);
  });

  it('chooses the smallest packs to merge until each holds twice the objects of the smaller ones', () => {
    const counts = (packs: number[]) =>
      geometricMerge(packs.map((count) => ({ count }))).map(({ count }) => count);
    expect(counts(Array.from({ length: 20 }, () => 16))).toHaveLength(20);
    expect(counts([16, 320])).toEqual([]);
    expect(counts([16, 16, 320])).toEqual([16, 16]);
    expect(counts([16, 16, 32, 320])).toEqual([16, 16, 32]);
    expect(counts([16, 32, 320])).toEqual([]);
    // A large first snapshot is merged too once the packs after it add up to half of it.
    expect(counts([1100, 8800, 10_000])).toEqual([1100, 8800, 10_000]);
    expect(counts([10_000])).toEqual([]);
  });

  it('merges packs as a checkpoint leaves more than 50 of them, so lookups stay cheap', async () => {
    const { directory, store } = await newStore();
    const expected: Digest[] = [];
    // Each batch adds one pack (too large to fold), and nothing is merged up to 50.
    for (let round = 0; round < 51; round++) {
      expected.push(...(await putInBatch(store, tiny(LARGE_BATCH, `round ${round}`))));
      if (round === 49) expect(await packCount(directory)).toBe(50);
    }
    // The smaller half (26 of 51) became one: a cost bounded by the small packs.
    expect(await packCount(directory)).toBe(26);
    // gc merges the rest geometrically (all the same size here: into one).
    await store.remove([]);
    expect(await packCount(directory)).toBe(1);
    expect(await listed(createObjectStore(directory))).toEqual([...expected].sort());
  }, 60_000);

  it("merges its own packs unchecked past 50, moving their damage with them, and another process's only when sound", async () => {
    const { directory, store } = await newStore();
    const other = createObjectStore(directory);
    const packOf = async (written: Digest[]) => {
      for (const name of await packFiles(directory)) {
        if (!name.endsWith('.idx')) continue;
        const index = join(directory, 'objects', 'pack', name);
        const record = await recordOf(index, written[0] as Digest).catch(() => undefined);
        if (record) return { pack: index.replace(/\.idx$/, '.pack'), offset: record.offset };
      }
      throw new Error('not packed');
    };
    const damage = async ({ pack, offset }: { pack: string; offset: number }) => {
      await chmod(pack, 0o644);
      const handle = await open(pack, 'r+');
      await handle.write(Buffer.from('X'), 0, 1, offset);
      await handle.close();
    };
    // Two smaller batches (too large to fold), among the half merged first: one by another
    // process, one by this one, each with an object damaged.
    const foreign = await putInBatch(other, tiny(100, 'foreign'));
    const own = await putInBatch(store, tiny(100, 'own'));
    const foreignPack = await packOf(foreign);
    const ownPack = await packOf(own);
    await damage(foreignPack);
    await damage(ownPack);
    for (let round = 0; round < 49; round++)
      await putInBatch(store, tiny(LARGE_BATCH, `r${round}`));
    const files = await packFiles(directory);
    // Its own pack went into the merge as stored; the other process's stays as it is.
    expect(files).toContain(basename(foreignPack.pack));
    expect(files).not.toContain(basename(ownPack.pack));
    expect(await packCount(directory)).toBe(51 - 25 + 1);
    const fresh = createObjectStore(directory);
    for (const digest of [foreign[0], own[0]] as Digest[]) {
      await expect(fresh.get(digest)).rejects.toMatchObject({ code: 'OBJECT_CORRUPT' });
    }
    for (const digest of [...foreign.slice(1), ...own.slice(1)]) await fresh.verify(digest);
  }, 60_000);

  it('folds no pack of another process with a damaged object, and keeps damage found, never hidden', async () => {
    const { directory, store } = await newStore();
    const first = contents(3, 'first');
    const [damaged, ...sound] = await putInBatch(store, first);
    const [pack] = (await packFiles(directory)).filter((name) => name.endsWith('.pack'));
    const file = join(directory, 'objects', 'pack', pack as string);
    // One byte of the first object's stored bytes flipped (they follow the 8-byte magic).
    const record = await recordOf(
      join(directory, 'objects', 'pack', (pack as string).replace(/\.pack$/, '.idx')),
      damaged as Digest,
    );
    await chmod(file, 0o644);
    const bytes = await readFile(file);
    bytes[record.offset] = (bytes[record.offset] as number) ^ 0xff;
    await writeFile(file, bytes);
    // Another process (a store of its own) checks what it folds: this pack stays as it is.
    const other = createObjectStore(directory);
    const later = await putInBatch(other, contents(3, 'later'));
    expect(await packFiles(directory)).toContain(pack);
    await expect(other.get(damaged as Digest)).rejects.toMatchObject({ code: 'OBJECT_CORRUPT' });
    for (const digest of [...sound, ...later]) await other.verify(digest);
    // The process that wrote it copies its own packs as stored: the damage moves with the bytes
    // and is found as before, and every sound object stays.
    await putInBatch(store, contents(3, 'third'));
    expect(await packFiles(directory)).not.toContain(pack);
    await expect(createObjectStore(directory).get(damaged as Digest)).rejects.toMatchObject({
      code: 'OBJECT_CORRUPT',
    });
    for (const digest of [...sound, ...later]) await createObjectStore(directory).verify(digest);
  });

  it('leaves a pack with a damaged object as it is when merging, so nothing sound is lost', async () => {
    const { directory, store } = await newStore();
    for (let round = 0; round < 17; round++) await putInBatch(store, contents(16, `r${round}`));
    const packs = (await packFiles(directory)).filter((name) => name.endsWith('.pack'));
    const damaged = join(directory, 'objects', 'pack', packs[0] as string);
    await chmod(damaged, 0o644);
    const handle = await open(damaged, 'r+');
    await handle.write(Buffer.from('X'), 0, 1, 8);
    await handle.close();
    await store.remove([]);
    const after = (await packFiles(directory)).filter((name) => name.endsWith('.pack'));
    expect(after).toHaveLength(2);
    expect(after).toContain(packs[0]);
  });

  it('lists what a crashed pack write left, and removes it when asked', async () => {
    const { directory, store } = await newStore();
    await putInBatch(store, contents(16));
    const packDirectory = join(directory, 'objects', 'pack');
    const temporary = join(packDirectory, '.tmp-1-0011223344556677.pack');
    const orphan = join(packDirectory, `pack-${'ab'.repeat(32)}.pack`);
    await writeFile(temporary, 'half a pack');
    await writeFile(orphan, 'a pack whose index was never renamed');
    const past = new Date(Date.now() - 2 * 3_600_000);
    await utimes(temporary, past, past);
    await utimes(orphan, past, past);
    const abandoned = (await store.listAbandoned(3_600_000)).map(({ file }) => file).sort();
    expect(abandoned).toEqual([orphan, temporary].sort());
    for (const file of abandoned) await store.removeAbandoned(file);
    expect(await packFiles(directory)).toHaveLength(2);
    await expect(
      store.removeAbandoned(join(packDirectory, (await packFiles(directory))[0] as string)),
    ).rejects.toMatchObject({ code: 'INVALID_ARGUMENT' });
  });

  // The fast path (packs, their in-memory indexes, merges) against the obvious one: a map.
  it('counts each object once in its usage, as its listing does, when packs and loose files hold copies', async () => {
    // Copies come from other stores' packs and files, as a merge or a crash leaves them.
    // Each batch makes a pack (folding in the small ones there).
    const items = fc.uniqueArray(fc.integer({ min: 0, max: 80 }), { maxLength: 40, size: 'max' });
    await fc.assert(
      fc.asyncProperty(fc.array(items, { minLength: 1, maxLength: 4 }), async (sets) => {
        const target = await newStore();
        const all = new Map<Digest, number>();
        for (const set of sets) {
          const other = await newStore();
          const bytes = set.map((item) => Buffer.from(`object ${item} `.repeat(item + 1)));
          await putInBatch(other.store, bytes);
          for (const one of bytes) all.set(digestBytes(one), one.length);
          execFileSync('cp', [
            '-a',
            `${other.directory}/objects/.`,
            `${target.directory}/objects/`,
          ]);
        }
        let count = 0;
        let sizeBytes = 0;
        for await (const object of target.store.list()) {
          count += 1;
          sizeBytes += object.sizeBytes;
        }
        const expected = {
          count: all.size,
          sizeBytes: [...all.values()].reduce((a, b) => a + b, 0),
        };
        expect({ count, sizeBytes }).toEqual(expected);
        expect(await target.store.usage()).toEqual(expected);
      }),
      { numRuns: 30 },
    );
  }, 120_000);

  it('holds exactly what was stored and not removed, through batches, merges and other readers', async () => {
    const operation = fc.oneof(
      fc.record({
        op: fc.constant('batch' as const),
        items: fc.array(fc.integer({ min: 0, max: 60 }), { minLength: 0, maxLength: 40 }),
      }),
      fc.record({ op: fc.constant('put' as const), item: fc.integer({ min: 0, max: 60 }) }),
      fc.record({
        op: fc.constant('remove' as const),
        items: fc.array(fc.integer({ min: 0, max: 60 }), { maxLength: 20 }),
      }),
      fc.record({ op: fc.constant('reopen' as const) }),
      // Two batches at once, from two stores (two processes): each may fold the same small packs.
      fc.record({
        op: fc.constant('two batches' as const),
        items: fc.array(fc.integer({ min: 0, max: 60 }), { minLength: 1, maxLength: 20 }),
      }),
    );
    await fc.assert(
      fc.asyncProperty(fc.array(operation, { minLength: 1, maxLength: 25 }), async (operations) => {
        const { directory } = await newStore();
        let store = createObjectStore(directory);
        const reader = createObjectStore(directory);
        // Some small (stored as they are), some large enough to be compressed.
        const bytesOf = (item: number) =>
          Buffer.from(`item ${item} `.repeat(item % 2 ? item % 7 || 1 : 60));
        const model = new Map<Digest, Buffer>();
        for (const step of operations) {
          if (step.op === 'batch') {
            const batch = store.batch();
            for (const item of step.items) {
              const bytes = bytesOf(item);
              await batch.put(bytes);
              model.set(digestBytes(bytes), bytes);
            }
            await batch.commit();
          } else if (step.op === 'put') {
            const bytes = bytesOf(step.item);
            await store.put(bytes);
            model.set(digestBytes(bytes), bytes);
          } else if (step.op === 'two batches') {
            const batches = [store.batch(), createObjectStore(directory).batch()];
            for (const [place, item] of step.items.entries()) {
              const bytes = bytesOf(item);
              await batches[place % 2]?.put(bytes);
              model.set(digestBytes(bytes), bytes);
            }
            for (const batch of batches) await batch.commit();
          } else if (step.op === 'remove') {
            const digests = step.items.map((item) => digestBytes(bytesOf(item)));
            await store.remove(digests);
            for (const digest of digests) model.delete(digest);
          } else {
            store = createObjectStore(directory);
          }
          expect(await listed(store)).toEqual([...model.keys()].sort());
          expect(await store.usage()).toEqual({
            count: model.size,
            sizeBytes: [...model.values()].reduce((sum, bytes) => sum + bytes.length, 0),
          });
          for (const [digest, bytes] of model) {
            expect(await store.get(digest)).toEqual(bytes);
            expect(await reader.get(digest)).toEqual(bytes);
          }
          // Packs fold and merge geometrically: about log2 of what they hold.
          expect(await packCount(directory)).toBeLessThanOrEqual(
            Math.log2((await recordCount(directory)) + 1) + 2,
          );
        }
      }),
      { numRuns: 40 },
    );
  }, 120_000);
});
