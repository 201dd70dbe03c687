import { constants, existsSync } from 'node:fs';
import { chmod, copyFile, mkdir, open, rename, stat, unlink, utimes } from 'node:fs/promises';
import { basename, join } from 'node:path';
import { isSystemError, RewindError } from '../errors.js';
import {
  createDigester,
  DIGEST_PREFIX,
  type Digest,
  digestBytes,
  digestFile,
  diskPath,
  isDigest,
  nodeCrypto,
  syncPath,
  syncPaths,
  writeAllTo,
} from '../lib/index.js';
import { compressedElsewhere, compressWaitingHere } from './compress.js';
import {
  checkExisting,
  checkExistingSync,
  checkFanout,
  chunksOfObject,
  corrupt,
  listLooseTemporaries,
  listObjects,
  looseObjectCheckSync,
  objectUsage,
  readObjectFile,
  renameOverDamaged,
  writeObjectFileSync,
} from './object-files.js';
import type { ObjectInfo, ObjectSource, ObjectStore } from './object-store.js';
import { readPackedElsewhere } from './pack-reads.js';
import { type PackedRead, type PackInput, PackSet } from './packs.js';

interface BatchState {
  directories: Set<string>;
  /** The object files written, made durable together on commit. */
  files: string[];
  /** Small objects not written yet: packed together when there are enough of them. */
  pending: Map<Digest, Uint8Array>;
  pendingBytes: number;
  /** Pending objects not yet sent to be compressed on another thread, and their size. */
  unsent: Digest[];
  unsentBytes: number;
  /** What came back compressed, and the compressions under way. */
  stored: Map<Digest, Uint8Array>;
  compressions: Promise<void>[];
  /** Objects of a pack being written while the batch goes on (see `flushInBackground`). */
  writing: Map<Digest, Uint8Array>;
  flushes: Promise<void>[];
  /** Indexes of packs that hold objects put again: marked used on commit. */
  touched: Set<string>;
  /** Small packs taken into the batch's last pack: removed once it is durable. */
  folded: string[];
}

/** A batch writes a pack whenever this many bytes of small objects are waiting. */
const PACK_MAX_PENDING_BYTES = 32 * 1024 * 1024;

/** A batch has its waiting objects compressed on another thread this many bytes at a time. */
const COMPRESS_ELSEWHERE_BYTES = 256 * 1024;

/**
 * A batch that leaves more packs than this merges the smaller half of them (as `git gc --auto`
 * repacks past 50 packs): lookups search every pack. gc merges them geometrically.
 */
const AUTO_MERGE_PACKS = 50;

/** Files up to this size are read whole and hashed before anything is written. */
const SMALL_FILE_BYTES = 1024 * 1024;

type FileHandle = Awaited<ReturnType<typeof open>>;

function objectPath(objectsDirectory: string, digest: Digest): string {
  if (!isDigest(digest)) {
    throw new RewindError('INVALID_ARGUMENT', `"${String(digest)}" is not a sha256 digest.`, {
      data: { digest },
    });
  }
  const hex = digest.slice(DIGEST_PREFIX.length);
  return join(objectsDirectory, hex.slice(0, 2), hex.slice(2));
}

/**
 * The local object store: each object is a read-only file `objects/<2 hex>/<62 hex>` under the
 * store directory, written to a temporary file in the same directory, fsynced, renamed into
 * place, and its directory fsynced.
 */
export function createObjectStore(storeDirectory: string): ObjectStore {
  const objectsDirectory = join(storeDirectory, 'objects');
  const packs = new PackSet(objectsDirectory);
  /** Batches not committed yet: what they hold is readable before it is written. */
  const openBatches = new Set<BatchState>();

  function pendingOf(digest: Digest): Uint8Array | undefined {
    for (const batch of openBatches) {
      const bytes = batch.pending.get(digest) ?? batch.writing.get(digest);
      if (bytes) return bytes;
    }
    return undefined;
  }

  /** An object's bytes from a batch not committed yet or a pack; see {@link PackSet.readObject}. */
  function packedBytes(digest: Digest): PackedRead {
    const pending = pendingOf(digest);
    if (pending) return { bytes: Buffer.from(pending) };
    return packs.readObject(digest);
  }

  /** The batch path for small objects: packed with the others, unless already stored soundly. */
  function putInBatch(bytes: Uint8Array, digest: Digest, batch: BatchState): void {
    openBatches.add(batch);
    if (batch.pending.has(digest) || batch.writing.has(digest)) return;
    for (const location of packs.find(digest)) {
      if (packs.holds(location, bytes)) {
        batch.touched.add(location.index);
        return;
      }
    }
    batch.pending.set(digest, bytes);
    batch.pendingBytes += bytes.byteLength;
    batch.unsent.push(digest);
    batch.unsentBytes += bytes.byteLength;
    if (batch.unsentBytes >= COMPRESS_ELSEWHERE_BYTES) compressInBackground(batch);
    if (batch.pendingBytes >= PACK_MAX_PENDING_BYTES) flushInBackground(batch);
  }

  /**
   * A large batch (a first snapshot) has what waits compressed on another thread, a few
   * megabytes at a time, while this one goes on reading and hashing.
   */
  function compressInBackground(batch: BatchState): void {
    const digests = batch.unsent.splice(0);
    batch.unsentBytes = 0;
    const bytes = digests.map((digest) => batch.pending.get(digest) as Uint8Array);
    const compression = compressedElsewhere(bytes).then((stored) => {
      for (const [index, digest] of digests.entries()) {
        batch.stored.set(digest, stored[index] as Uint8Array);
      }
    });
    // Awaited by the flush or the commit; never an unhandled rejection meanwhile.
    compression.catch(() => {});
    batch.compressions.push(compression);
  }

  /**
   * Packs what a large batch has waiting while it goes on, once what is being compressed comes
   * back; `commit` waits for it. The objects stay readable meanwhile.
   */
  function flushInBackground(batch: BatchState): void {
    const objects = [...batch.pending].map(([digest, bytes]) => ({ digest, bytes }));
    for (const { digest, bytes } of objects) batch.writing.set(digest, bytes);
    batch.pending.clear();
    batch.pendingBytes = 0;
    batch.unsent.length = 0;
    batch.unsentBytes = 0;
    const compressions = batch.compressions.splice(0);
    const flush = (async () => {
      await Promise.all(compressions);
      writePack(
        batch,
        objects.map((object) => {
          const stored = batch.stored.get(object.digest);
          batch.stored.delete(object.digest);
          return stored ? { ...object, stored } : object;
        }),
      );
      for (const { digest } of objects) batch.writing.delete(digest);
    })();
    // Its failure is the commit's: not an unhandled rejection meanwhile.
    flush.catch(() => {});
    batch.flushes.push(flush);
  }

  /**
   * Writes a batch's pending objects as one pack, a small batch's with the small packs that
   * `PackSet.foldable` names taken into it. A batch of a few objects writes a pack too: a file
   * each would cost the store their size uncompressed, a fan-out directory each, and a sync each.
   */
  function writePending(batch: BatchState): void {
    if (batch.pending.size === 0) return;
    writePack(
      batch,
      [...batch.pending].map(([digest, bytes]) => {
        const stored = batch.stored.get(digest);
        return stored ? { digest, bytes, stored } : { digest, bytes };
      }),
      true,
    );
    batch.pending.clear();
    batch.pendingBytes = 0;
    batch.unsent.length = 0;
    batch.unsentBytes = 0;
    batch.stored.clear();
  }

  /**
   * Writes objects as one pack, but those stored as files already (written so by an older
   * version, or too large once), with the small packs there are folded into it when `fold` says.
   */
  function writePack(
    batch: BatchState,
    objects: (PackInput & { bytes: Uint8Array })[],
    fold = false,
  ): void {
    const packed: PackInput[] = [];
    const mayBeFile = looseObjectCheckSync(objectsDirectory);
    for (const object of objects) {
      const file = objectPath(objectsDirectory, object.digest);
      let existing: ReturnType<typeof checkExistingSync> = 'absent';
      try {
        if (mayBeFile(file)) existing = checkExistingSync(file, object.bytes);
      } catch {
        // A damaged fan-out directory: the pack holds it instead.
      }
      // Kept there, and marked used; a damaged file is written again in its place.
      if (existing === 'sound') batch.files.push(file);
      else if (existing === 'damaged') putBytesNow(object.bytes, object.digest, batch);
      else packed.push(object);
    }
    if (packed.length === 0) return;
    const folded = fold ? packs.foldable(packed.length) : { names: [], objects: [] };
    const written = packs.write([...folded.objects, ...packed], { sync: false });
    batch.files.push(...written.files);
    for (const directory of written.directories) batch.directories.add(directory);
    batch.folded.push(...folded.names.filter((name) => name !== written.name));
  }

  async function ensureFanout(file: string): Promise<string> {
    const directory = join(file, '..');
    try {
      await mkdir(directory);
      await syncPath(objectsDirectory);
    } catch (error) {
      if (!isSystemError(error, 'EEXIST')) throw error;
    }
    return directory;
  }

  function temporaryPath(): string {
    return join(
      objectsDirectory,
      `.put-${process.pid}-${nodeCrypto().randomBytes(8).toString('hex')}.tmp`,
    );
  }

  /**
   * Moves a fully written, fsynced temporary file to its object name: over a damaged object
   * there, and not at all over a sound one (the temporary file is dropped).
   */
  async function commitTemporary(
    temporary: string,
    info: ObjectInfo,
    batch?: BatchState,
  ): Promise<void> {
    const { digest } = info;
    const file = objectPath(objectsDirectory, digest);
    const existing = await checkExisting(file, digest, info.sizeBytes);
    if (existing === 'sound') {
      await unlink(temporary);
      // It may come from a batch whose commit never ran: made durable now, or with the batch.
      if (batch) batch.files.push(file);
      else await syncPath(file);
      return;
    }
    checkFanout(file);
    const directory = existing === 'absent' ? await ensureFanout(file) : join(file, '..');
    if (existing === 'damaged') await renameOverDamaged(temporary, file, digest);
    else await rename(temporary, file);
    if (batch) {
      batch.directories.add(directory);
      batch.files.push(file);
    } else {
      await syncPath(directory);
    }
  }

  async function writeTemporary(
    write: (handle: FileHandle) => Promise<void>,
    batch: BatchState | undefined,
  ): Promise<{ temporary: string }> {
    const temporary = temporaryPath();
    const handle = await open(temporary, 'wx', 0o444).catch(async (error: unknown) => {
      if (!isSystemError(error, 'ENOENT')) throw error;
      await mkdir(objectsDirectory, { recursive: true });
      return open(temporary, 'wx', 0o444);
    });
    try {
      try {
        await write(handle);
        // A batch makes its objects durable together when it commits.
        if (!batch) await handle.sync();
      } finally {
        await handle.close();
      }
    } catch (error) {
      await unlink(temporary).catch(() => {});
      throw error;
    }
    return { temporary };
  }

  /**
   * A batch's object written as a file now: content over 1 MiB given as bytes, or an object
   * whose file is there damaged (rewritten in its place).
   */
  function putBytesNow(bytes: Uint8Array, digest: Digest, batch: BatchState): void {
    const file = objectPath(objectsDirectory, digest);
    const { directories } = writeObjectFileSync(file, bytes, digest, temporaryPath());
    for (const directory of directories) batch.directories.add(directory);
    // Written or not (a sound one from a batch whose commit never ran), durable with this batch.
    batch.files.push(file);
  }

  async function putBytes(bytes: Uint8Array, batch?: BatchState): Promise<ObjectInfo> {
    // Hashed first, so content already stored costs no write at all.
    const digest = digestBytes(bytes);
    const info = { digest, sizeBytes: bytes.byteLength };
    if (batch) {
      if (bytes.byteLength > SMALL_FILE_BYTES) putBytesNow(bytes, digest, batch);
      else putInBatch(bytes, digest, batch);
      return info;
    }
    const existing = objectPath(objectsDirectory, digest);
    if (checkExistingSync(existing, bytes) === 'sound') {
      // It may come from a batch whose commit never ran: a put returns only what is durable.
      await syncPath(existing);
      return info;
    }
    const { temporary } = await writeTemporary(async (handle) => {
      await handle.writeFile(bytes);
    }, undefined);
    await commitTemporary(temporary, info).catch(async (error: unknown) => {
      await unlink(temporary).catch(() => {});
      throw error;
    });
    return info;
  }

  async function putChunks(
    chunks: AsyncIterable<Uint8Array>,
    batch?: BatchState,
  ): Promise<ObjectInfo> {
    const digester = createDigester();
    let sizeBytes = 0;
    const { temporary } = await writeTemporary(async (handle) => {
      for await (const chunk of chunks) {
        digester.update(chunk);
        sizeBytes += chunk.byteLength;
        await writeAllTo(handle, chunk);
      }
    }, batch);
    const info = { digest: digester.digest(), sizeBytes };
    await commitTemporary(temporary, info, batch).catch(async (error: unknown) => {
      await unlink(temporary).catch(() => {});
      throw error;
    });
    return info;
  }

  async function putFile(path: string, batch?: BatchState): Promise<ObjectInfo> {
    const handle = await open(diskPath(path), 'r');
    let bytes: Buffer | undefined;
    try {
      if ((await handle.stat()).size <= SMALL_FILE_BYTES) bytes = await handle.readFile();
    } finally {
      await handle.close();
    }
    return bytes ? putBytes(bytes, batch) : putLargeFile(path, batch);
  }

  /**
   * Copies a large file in the kernel (a reflink where the filesystem has them), then hashes the
   * copy: the digest is always that of the bytes stored, even if the source changes meanwhile.
   */
  async function putLargeFile(path: string, batch?: BatchState): Promise<ObjectInfo> {
    const temporary = temporaryPath();
    try {
      await copyFile(
        diskPath(path),
        temporary,
        constants.COPYFILE_EXCL | constants.COPYFILE_FICLONE,
      );
      const info = await digestFile(temporary);
      if (!batch) await syncPath(temporary);
      await chmod(temporary, 0o444);
      await commitTemporary(temporary, info, batch);
      return info;
    } catch (error) {
      await unlink(temporary).catch(() => {});
      throw error;
    }
  }

  async function verifyFile(digest: Digest, file: string): Promise<ObjectInfo> {
    const digester = createDigester();
    let sizeBytes = 0;
    for await (const chunk of chunksOfObject(digest, file)) {
      digester.update(chunk);
      sizeBytes += chunk.byteLength;
    }
    const actual = digester.digest();
    if (actual !== digest) throw corrupt(digest, file, actual);
    return { digest, sizeBytes };
  }

  function putSource(source: ObjectSource, batch?: BatchState): Promise<ObjectInfo> {
    if (source instanceof Uint8Array) return putBytes(source, batch);
    return 'stream' in source ? putChunks(source.stream, batch) : putFile(source.file, batch);
  }

  async function statObject(digest: Digest): Promise<ObjectInfo | undefined> {
    const pending = pendingOf(digest);
    if (pending) return { digest, sizeBytes: pending.byteLength };
    // A pack named by an index read earlier must still be listed (gc may have merged it since,
    // and removes its index first: a gc killed then leaves the pack without it).
    const packed = () =>
      packs
        .find(digest)
        .find((location) => existsSync(location.index) && existsSync(location.pack));
    const location = packed();
    if (location) return { digest, sizeBytes: location.sizeBytes };
    try {
      const stats = await stat(objectPath(objectsDirectory, digest));
      return { digest, sizeBytes: stats.size };
    } catch (error) {
      if (!isSystemError(error, 'ENOENT')) throw error;
    }
    packs.refresh();
    const fresh = packed();
    return fresh && { digest, sizeBytes: fresh.sizeBytes };
  }

  return {
    put: (source) => putSource(source),

    batch() {
      // What another process removed since (gc, under the lock this batch's writer holds now) is
      // not taken as stored: the indexes are listed again.
      packs.refresh();
      const state: BatchState = {
        directories: new Set(),
        files: [],
        pending: new Map(),
        pendingBytes: 0,
        unsent: [],
        unsentBytes: 0,
        stored: new Map(),
        compressions: [],
        writing: new Map(),
        flushes: [],
        touched: new Set(),
        folded: [],
      };
      return {
        put: (source) => putSource(source, state),
        async commit() {
          try {
            // What the worker has not begun is compressed here meanwhile, not waited for.
            if (state.compressions.length > 0) await compressWaitingHere();
            await Promise.all([...state.flushes.splice(0), ...state.compressions.splice(0)]);
            writePending(state);
            // Made durable first: a merge removes packs only once its own pack is durable.
            if (packs.count > AUTO_MERGE_PACKS) {
              await syncPaths([...state.files, ...state.directories], objectsDirectory);
              try {
                packs.mergeSmallest();
              } catch {
                // Only housekeeping: the batch's objects are durable; the next merge tries again.
              }
            }
            const now = new Date();
            for (const index of state.touched) await utimes(index, now, now).catch(() => {});
            await syncPaths([...state.files, ...state.directories], objectsDirectory);
            // Their objects are in the batch's pack, durable now. Not made durable: a removal
            // undone by a crash leaves a copy in two packs, which readers take either of.
            for (const name of state.folded) {
              try {
                packs.remove(name);
              } catch {}
            }
          } finally {
            openBatches.delete(state);
          }
          state.directories.clear();
          state.files.length = 0;
          state.touched.clear();
          state.folded.length = 0;
        },
      };
    },

    async get(digest, options) {
      const [location] = !options?.ahead || pendingOf(digest) ? [] : packs.find(digest);
      const elsewhere = location && (await readPackedElsewhere(location));
      if (elsewhere) return elsewhere;
      const packed = packedBytes(digest);
      if (packed && 'bytes' in packed) return packed.bytes;
      try {
        return await readObjectFile(digest, objectPath(objectsDirectory, digest));
      } catch (error) {
        return packs.afterLooseMissing(digest, error, packed);
      }
    },

    async *read(digest) {
      const packed = packedBytes(digest);
      if (packed && 'bytes' in packed) {
        yield packed.bytes;
        return;
      }
      const file = objectPath(objectsDirectory, digest);
      let chunks: AsyncIterator<Buffer>;
      let first: IteratorResult<Buffer>;
      try {
        chunks = chunksOfObject(digest, file)[Symbol.asyncIterator]();
        first = await chunks.next();
      } catch (error) {
        yield packs.afterLooseMissing(digest, error, packed);
        return;
      }
      const digester = createDigester();
      for (let next = first; !next.done; next = await chunks.next()) {
        digester.update(next.value);
        yield next.value;
      }
      const actual = digester.digest();
      if (actual !== digest) throw corrupt(digest, file, actual);
    },

    async has(digest) {
      return (await statObject(digest)) !== undefined;
    },

    stat: statObject,

    async verify(digest) {
      const packed = packedBytes(digest);
      if (packed && 'bytes' in packed) return { digest, sizeBytes: packed.bytes.length };
      try {
        return await verifyFile(digest, objectPath(objectsDirectory, digest));
      } catch (error) {
        return { digest, sizeBytes: packs.afterLooseMissing(digest, error, packed).length };
      }
    },

    async damage() {
      packs.refresh();
      return [...packs.damaged].sort().map((name) => ({
        file: join(packs.directory, name),
        damage: 'is not a sound pack index (cut short, changed, or not a file)',
      }));
    },

    list: () => listObjects(packs, objectsDirectory),

    usage: () => objectUsage(packs, objectsDirectory),

    async listAbandoned(olderThanMs) {
      const now = Date.now();
      return [...(await listLooseTemporaries(objectsDirectory)), ...packs.leftovers()]
        .filter(({ modifiedAtMs }) => now - modifiedAtMs > olderThanMs)
        .map(({ file, sizeBytes }) => ({ file, sizeBytes }));
    },

    async removeAbandoned(file) {
      const isLooseTemporary =
        join(file, '..') === objectsDirectory && /^\.put-.*\.tmp$/.test(basename(file));
      if (!isLooseTemporary && !packs.leftovers().some((leftover) => leftover.file === file)) {
        throw new RewindError(
          'INVALID_ARGUMENT',
          `${file} is not a temporary file of this object store.`,
          {
            data: { file },
          },
        );
      }
      await unlink(file).catch((error: unknown) => {
        if (!isSystemError(error, 'ENOENT')) throw error;
      });
    },

    async remove(digests) {
      const removed = new Set<Digest>();
      for (const digest of digests) {
        removed.add(digest);
        try {
          await unlink(objectPath(objectsDirectory, digest));
        } catch (error) {
          if (!isSystemError(error, 'ENOENT')) throw error;
        }
      }
      packs.rewrite(removed);
    },
  };
}
