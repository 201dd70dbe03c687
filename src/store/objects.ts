import { randomBytes } from 'node:crypto';
import { constants, mkdirSync, renameSync, unlinkSync, writeFileSync } from 'node:fs';
import {
  chmod,
  copyFile,
  lstat,
  mkdir,
  open,
  readdir,
  rename,
  stat,
  unlink,
} from 'node:fs/promises';
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
  syncPath,
  syncPaths,
} from '../lib/index.js';
import {
  checkExisting,
  checkExistingSync,
  checkFanout,
  chunksOfObject,
  corrupt,
  openObject,
  renameOverDamaged,
  unrepairable,
} from './object-files.js';

/** What {@link ObjectStore.put} accepts: bytes, a stream of bytes, or a file to copy. */
export type ObjectSource = Uint8Array | { stream: AsyncIterable<Uint8Array> } | { file: string };

/** An object's name and size. */
export interface ObjectInfo {
  digest: Digest;
  sizeBytes: number;
}

/** An object as found on disk by {@link ObjectStore.list}. */
export interface StoredObject extends ObjectInfo {
  /** The object file's path. */
  file: string;
  /** Last time the object was written or put again; garbage collection spares recent objects. */
  modifiedAtMs: number;
}

interface BatchState {
  directories: Set<string>;
  /** The object files written, made durable together on commit. */
  files: string[];
}

/** See {@link ObjectStore.batch}. */
export interface ObjectBatch {
  put(source: ObjectSource): Promise<ObjectInfo>;
  commit(): Promise<void>;
}

/**
 * Immutable content addressed by its SHA-256 digest. One local implementation today
 * ({@link createObjectStore}); the interface leaves room for object storage elsewhere.
 */
export interface ObjectStore {
  /**
   * Stores content and returns its digest and size. Idempotent: storing content that exists
   * already writes nothing (it only marks the object as recently used), unless the object there
   * is damaged (another size, other bytes, not a plain file): then it is written again, so what
   * refers to it is whole. Atomic: a crash leaves either no object or the whole object, never a
   * partial one.
   */
  put(source: ObjectSource): Promise<ObjectInfo>;
  /**
   * A batch of puts for many objects at once: nothing is fsynced as it is written; `commit()`
   * makes contents and names durable together (a few objects by parallel fsyncs, many by one sync
   * of the filesystem) and must resolve before anything refers to the objects.
   */
  batch(): ObjectBatch;
  /** The object's bytes, verified against its digest. Throws `OBJECT_NOT_FOUND`, `OBJECT_CORRUPT`. */
  get(digest: Digest): Promise<Buffer>;
  /**
   * The object's bytes as a stream in 1 MiB chunks, for objects too large to hold in memory. The
   * digest is checked at the end: a mismatch throws `OBJECT_CORRUPT` from the iterator.
   */
  read(digest: Digest): AsyncIterable<Buffer>;
  /** True when the object is present (its content is not checked). */
  has(digest: Digest): Promise<boolean>;
  /** The object's size, or undefined when it is not present. */
  stat(digest: Digest): Promise<ObjectInfo | undefined>;
  /** Re-hashes the object. Throws `OBJECT_NOT_FOUND` or `OBJECT_CORRUPT`. */
  verify(digest: Digest): Promise<ObjectInfo>;
  /** Every object present, in no particular order. */
  list(): AsyncIterable<StoredObject>;
  /** Temporary files older than `olderThanMs` left by writes that crashed. */
  listAbandoned(olderThanMs: number): Promise<{ file: string; sizeBytes: number }[]>;
  /** Removes a temporary file that {@link ObjectStore.listAbandoned} returned. */
  removeAbandoned(file: string): Promise<void>;
  /** Removes an object (garbage collection only). Removing a missing object is a no-op. */
  remove(digest: Digest): Promise<void>;
}

const HEX_PATTERN = /^[0-9a-f]{64}$/;

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
    return join(objectsDirectory, `.put-${process.pid}-${randomBytes(8).toString('hex')}.tmp`);
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
   * The batch path for small content: synchronous calls, since a round trip through the thread
   * pool costs several times the system call itself and a batch may store thousands of objects.
   */
  function putBytesNow(bytes: Uint8Array, digest: Digest, batch: BatchState): void {
    const file = objectPath(objectsDirectory, digest);
    if (checkExistingSync(file, bytes) === 'sound') {
      // It may come from a batch whose commit never ran: made durable with this one.
      batch.files.push(file);
      return;
    }
    // Absent, or damaged: written as new, renamed over what is there.
    checkFanout(file);
    const temporary = temporaryPath();
    try {
      writeFileSync(temporary, bytes, { flag: 'wx', mode: 0o444 });
      const directory = join(file, '..');
      try {
        renameSync(temporary, file);
      } catch (error) {
        if (isSystemError(error, 'EISDIR') || isSystemError(error, 'ENOTEMPTY'))
          throw unrepairable(digest, file, error);
        if (!isSystemError(error, 'ENOENT')) throw error;
        mkdirSync(directory, { recursive: true });
        batch.directories.add(objectsDirectory);
        renameSync(temporary, file);
      }
      batch.directories.add(directory);
      batch.files.push(file);
    } catch (error) {
      try {
        unlinkSync(temporary);
      } catch {}
      throw error;
    }
  }

  async function putBytes(bytes: Uint8Array, batch?: BatchState): Promise<ObjectInfo> {
    // Hashed first, so content already stored costs no write at all.
    const digest = digestBytes(bytes);
    const info = { digest, sizeBytes: bytes.byteLength };
    if (batch) {
      putBytesNow(bytes, digest, batch);
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
        await handle.write(chunk);
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
    try {
      const stats = await stat(objectPath(objectsDirectory, digest));
      return { digest, sizeBytes: stats.size };
    } catch (error) {
      if (isSystemError(error, 'ENOENT')) return undefined;
      throw error;
    }
  }

  return {
    put: (source) => putSource(source),

    batch() {
      const state: BatchState = { directories: new Set(), files: [] };
      return {
        put: (source) => putSource(source, state),
        async commit() {
          await syncPaths([...state.files, ...state.directories], objectsDirectory);
          state.directories.clear();
          state.files.length = 0;
        },
      };
    },

    async get(digest) {
      const file = objectPath(objectsDirectory, digest);
      const handle = await openObject(digest, file);
      let bytes: Buffer;
      try {
        bytes = await handle.readFile();
      } finally {
        await handle.close();
      }
      const actual = digestBytes(bytes);
      if (actual !== digest) throw corrupt(digest, file, actual);
      return bytes;
    },

    async *read(digest) {
      const file = objectPath(objectsDirectory, digest);
      const digester = createDigester();
      for await (const chunk of chunksOfObject(digest, file)) {
        digester.update(chunk);
        yield chunk;
      }
      const actual = digester.digest();
      if (actual !== digest) throw corrupt(digest, file, actual);
    },

    async has(digest) {
      return (await statObject(digest)) !== undefined;
    },

    stat: statObject,

    verify(digest) {
      return verifyFile(digest, objectPath(objectsDirectory, digest));
    },

    async *list() {
      let fanouts: string[];
      try {
        fanouts = await readdir(objectsDirectory);
      } catch (error) {
        if (isSystemError(error, 'ENOENT')) return;
        throw error;
      }
      for (const fanout of fanouts.sort()) {
        if (!/^[0-9a-f]{2}$/.test(fanout)) continue;
        let names: string[];
        try {
          names = await readdir(join(objectsDirectory, fanout));
        } catch (error) {
          // A fan-out name that is not a directory (damage) holds no object; one removed meanwhile neither.
          if (isSystemError(error, 'ENOTDIR') || isSystemError(error, 'ENOENT')) continue;
          throw error;
        }
        for (const rest of names.sort()) {
          const hex = fanout + rest;
          if (!HEX_PATTERN.test(hex)) continue;
          const file = join(objectsDirectory, fanout, rest);
          // The name itself: a link there is listed as what it is, never followed.
          const stats = await lstat(file).catch((error: unknown) => {
            if (isSystemError(error, 'ENOENT')) return undefined;
            throw error;
          });
          if (stats === undefined) continue;
          yield {
            digest: `${DIGEST_PREFIX}${hex}`,
            sizeBytes: stats.size,
            file,
            modifiedAtMs: stats.mtimeMs,
          };
        }
      }
    },

    async listAbandoned(olderThanMs) {
      const abandoned: { file: string; sizeBytes: number }[] = [];
      const now = Date.now();
      let names: string[];
      try {
        names = await readdir(objectsDirectory);
      } catch (error) {
        if (isSystemError(error, 'ENOENT')) return abandoned;
        throw error;
      }
      for (const name of names) {
        if (!name.startsWith('.put-')) continue;
        const file = join(objectsDirectory, name);
        const stats = await stat(file).catch(() => undefined);
        if (stats && now - stats.mtimeMs > olderThanMs)
          abandoned.push({ file, sizeBytes: stats.size });
      }
      return abandoned;
    },

    async removeAbandoned(file) {
      if (join(file, '..') !== objectsDirectory || !/^\.put-.*\.tmp$/.test(basename(file))) {
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

    async remove(digest) {
      try {
        await unlink(objectPath(objectsDirectory, digest));
      } catch (error) {
        if (!isSystemError(error, 'ENOENT')) throw error;
      }
    },
  };
}
