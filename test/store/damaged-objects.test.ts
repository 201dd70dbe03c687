import { randomBytes } from 'node:crypto';
import {
  chmod,
  lstat,
  mkdir,
  readdir,
  readFile,
  rm,
  stat,
  symlink,
  truncate,
  utimes,
  writeFile,
} from 'node:fs/promises';
import { join } from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { describe, expect, it } from 'vitest';
import { type Digest, digestBytes } from '../../src/lib/index.js';
import { verify } from '../../src/session/index.js';
import {
  createObjectStore,
  initStore,
  type ObjectInfo,
  type ObjectSource,
} from '../../src/store/index.js';
import { sessionOn } from '../helpers/session.js';
import { makeTempDirectory } from '../helpers/temp.js';

async function newStore() {
  const workspace = await makeTempDirectory();
  const { directory } = await initStore(workspace);
  return { directory, store: createObjectStore(directory) };
}

function objectFile(directory: string, digest: Digest): string {
  const hex = digest.slice('sha256:'.length);
  return join(directory, 'objects', hex.slice(0, 2), hex.slice(2));
}

/** The ways an object file is found damaged: cut short, emptied, one byte flipped, grown. */
const DAMAGES: Record<string, (file: string, sizeBytes: number) => Promise<void>> = {
  truncated: (file, sizeBytes) => truncate(file, Math.floor(sizeBytes / 2)),
  emptied: (file) => truncate(file, 0),
  'one byte flipped': async (file, sizeBytes) => {
    const bytes = await readFile(file);
    const at = Math.floor(sizeBytes / 2);
    bytes[at] = (bytes[at] as number) ^ 0xff;
    await writeFile(file, bytes);
  },
  'grown by a byte': async (file) => {
    await writeFile(file, Buffer.concat([await readFile(file), Buffer.from('x')]));
  },
};

async function damage(file: string, sizeBytes: number, how: string): Promise<void> {
  await chmod(file, 0o644);
  await (DAMAGES[how] as (file: string, sizeBytes: number) => Promise<void>)(file, sizeBytes);
}

/**
 * Damages an object where a checkpoint stored it: its file, else its packed copy (one byte of
 * what the pack stores for it flipped).
 */
async function damageStored(directory: string, digest: Digest): Promise<void> {
  const file = objectFile(directory, digest);
  const isFile = await stat(file).then(
    () => true,
    () => false,
  );
  if (isFile) {
    await damage(file, (await stat(file)).size, 'one byte flipped');
    return;
  }
  const packDirectory = join(directory, 'objects', 'pack');
  const key = Buffer.from(digest.slice('sha256:'.length), 'hex');
  for (const name of await readdir(packDirectory)) {
    if (!name.endsWith('.idx')) continue;
    const index = await readFile(join(packDirectory, name));
    for (let at = 12; at < index.length - 32; at += 56) {
      if (!index.subarray(at, at + 32).equals(key)) continue;
      const pack = join(packDirectory, name.replace(/\.idx$/, '.pack'));
      const offset = Number(index.readBigUInt64BE(at + 32));
      const storedBytes = Number(index.readBigUInt64BE(at + 40));
      const bytes = await readFile(pack);
      const middle = offset + Math.floor(storedBytes / 2);
      bytes[middle] = (bytes[middle] as number) ^ 0xff;
      await chmod(pack, 0o644);
      await writeFile(pack, bytes);
      return;
    }
  }
  throw new Error(`${digest} is stored nowhere`);
}

async function* chunksOf(bytes: Buffer): AsyncIterable<Uint8Array> {
  for (let offset = 0; offset < bytes.length; offset += 100_000) {
    yield bytes.subarray(offset, offset + 100_000);
  }
}

/** Every form a put takes, for content of a given size. */
const FORMS: Record<string, (bytes: Buffer) => Promise<ObjectSource>> = {
  bytes: async (bytes) => bytes,
  stream: async (bytes) => ({ stream: chunksOf(bytes) }),
  file: async (bytes) => {
    const file = join(await makeTempDirectory(), 'source');
    await writeFile(file, bytes);
    return { file };
  },
};

const SIZES = { small: 4096, large: 3 * 1024 * 1024 + 17 };

async function expectSound(directory: string, info: ObjectInfo, bytes: Buffer): Promise<void> {
  const file = objectFile(directory, info.digest);
  // Compared as bytes: a deep equality of megabytes takes seconds.
  expect((await readFile(file)).equals(bytes)).toBe(true);
  expect((await stat(file)).mode & 0o777).toBe(0o444);
  expect(
    (await readdir(join(directory, 'objects'))).filter((name) => name.startsWith('.')),
  ).toEqual([]);
}

describe('putting content whose object is damaged', () => {
  for (const [sizeName, sizeBytes] of Object.entries(SIZES)) {
    for (const form of Object.keys(FORMS)) {
      for (const how of Object.keys(DAMAGES)) {
        it(`rewrites a ${how} object with the bytes put (${sizeName}, ${form})`, async () => {
          const { directory, store } = await newStore();
          const bytes = randomBytes(sizeBytes);
          const stored = await store.put(bytes);
          await damage(objectFile(directory, stored.digest), sizeBytes, how);
          await expect(store.verify(stored.digest)).rejects.toMatchObject({
            code: 'OBJECT_CORRUPT',
          });
          const put = (FORMS[form] as (bytes: Buffer) => Promise<ObjectSource>)(bytes);
          expect(await store.put(await put)).toEqual(stored);
          await expectSound(directory, stored, bytes);
          expect(await store.verify(stored.digest)).toEqual(stored);
        });
      }
      it(`rewrites a damaged object in a batch, durable on commit (${sizeName}, ${form})`, async () => {
        const { directory, store } = await newStore();
        const bytes = randomBytes(sizeBytes);
        const stored = await store.put(bytes);
        await damage(objectFile(directory, stored.digest), sizeBytes, 'one byte flipped');
        const batch = store.batch();
        const put = (FORMS[form] as (bytes: Buffer) => Promise<ObjectSource>)(bytes);
        expect(await batch.put(await put)).toEqual(stored);
        await batch.commit();
        await expectSound(directory, stored, bytes);
      });
      it(`leaves a sound object as it is, only marking it used (${sizeName}, ${form})`, async () => {
        const { directory, store } = await newStore();
        const bytes = randomBytes(sizeBytes);
        const stored = await store.put(bytes);
        const file = objectFile(directory, stored.digest);
        const before = await stat(file);
        // A stream is read once: each put gets a source of its own.
        const source = () => (FORMS[form] as (bytes: Buffer) => Promise<ObjectSource>)(bytes);
        const batch = store.batch();
        expect(await batch.put(await source())).toEqual(stored);
        await batch.commit();
        expect(await store.put(await source())).toEqual(stored);
        expect((await stat(file)).ino).toBe(before.ino);
        await expectSound(directory, stored, bytes);
      });
    }
  }

  it('rewrites an object whose name holds a symbolic link, never writing through it', async () => {
    const { directory, store } = await newStore();
    const bytes = Buffer.from('the real content');
    const digest = digestBytes(bytes);
    const elsewhere = join(await makeTempDirectory(), 'elsewhere');
    await writeFile(elsewhere, 'not the content');
    await mkdir(join(objectFile(directory, digest), '..'), { recursive: true });
    await symlink(elsewhere, objectFile(directory, digest));
    await store.put(bytes);
    expect((await lstat(objectFile(directory, digest))).isFile()).toBe(true);
    expect((await readFile(objectFile(directory, digest))).equals(bytes)).toBe(true);
    expect(await readFile(elsewhere, 'utf8')).toBe('not the content');
  });
});

describe('a checkpoint over a damaged object (issue 14, finding 15)', () => {
  it('rewrites the object when a file holding its content is read, so the checkpoint is whole and rolls back', async () => {
    const content = 'the content both files hold\n';
    const { workspace, session } = await sessionOn({ 'a.txt': content, 'b.txt': 'other' });
    await session.checkpoint('one');
    const directory = join(workspace, '.rewind');
    await damageStored(directory, digestBytes(content));
    expect((await verify({ workspace })).problems).toEqual([
      expect.objectContaining({ type: 'object-corrupt' }),
    ]);
    // A new file with that content: the checkpoint reads it and stores it again.
    await writeFile(join(workspace, 'c.txt'), content);
    await session.checkpoint('two');
    const store = createObjectStore(directory);
    expect((await store.get(digestBytes(content))).toString()).toBe(content);
    expect(await verify({ workspace })).toMatchObject({ isOk: true, problems: [] });
    await rm(join(workspace, 'a.txt'));
    await session.rollback('one');
    expect(await readFile(join(workspace, 'a.txt'), 'utf8')).toBe(content);
  });

  it('repairs the object of an unchanged file once the file is touched, as verify advises', async () => {
    const { workspace, session } = await sessionOn({ 'a.txt': 'unchanged\n' });
    // Older than the racy window, so the snapshots trust what they know of it.
    const earlier = new Date(Date.now() - 3_600_000);
    await utimes(join(workspace, 'a.txt'), earlier, earlier);
    await sleep(250);
    await session.checkpoint('one');
    await damageStored(join(workspace, '.rewind'), digestBytes('unchanged\n'));
    // The snapshot trusts what it knows of a file that did not change: it is not read again.
    await session.checkpoint('two');
    expect((await verify({ workspace })).isOk).toBe(false);
    const later = new Date(Date.now() + 5_000);
    await utimes(join(workspace, 'a.txt'), later, later);
    await session.checkpoint('three');
    expect(await verify({ workspace })).toMatchObject({ isOk: true, problems: [] });
  });

  it('verify reports a damaged object whose content no file holds any more, and says what can and cannot bring it back', async () => {
    const { workspace, session } = await sessionOn({ 'a.txt': 'gone soon\n' });
    await session.checkpoint('one');
    await damageStored(join(workspace, '.rewind'), digestBytes('gone soon\n'));
    await rm(join(workspace, 'a.txt'));
    await session.checkpoint('two');
    const report = await verify({ workspace });
    expect(report.isOk).toBe(false);
    expect(report.problems).toEqual([
      expect.objectContaining({
        type: 'object-corrupt',
        message: expect.stringMatching(
          /is damaged: .*touch` that file and run `rewind checkpoint`.*Otherwise it cannot be repaired .*backup/,
        ),
      }),
    ]);
  });
});
