// What is at an object's name, read without trust: checked against the content a put brings,
// opened only as a plain file, and the errors that say what is wrong there; and the listing of
// every object file.
import {
  closeSync,
  constants,
  fstatSync,
  futimesSync,
  lstatSync,
  mkdirSync,
  openSync,
  readdirSync,
  readSync,
  renameSync,
  unlinkSync,
  writeFileSync,
} from 'node:fs';
import { type FileHandle, open, readdir, rename, stat } from 'node:fs/promises';
import { basename, dirname, join } from 'node:path';
import { isSystemError, RewindError } from '../errors.js';
import {
  createDigester,
  DIGEST_PREFIX,
  type Digest,
  digestBytes,
  isAbsentSync,
  openPlainFile,
  STREAM_CHUNK_BYTES,
} from '../lib/index.js';
import type { ObjectStore, StoredObject } from './object-store.js';
import type { PackSet } from './packs.js';

export function notFound(digest: Digest, file: string): RewindError {
  return new RewindError(
    'OBJECT_NOT_FOUND',
    `Object ${digest} is missing from the store (expected at ${file}). ` +
      'It may have been garbage-collected or deleted by hand; run `rewind verify` to see what refers to it.',
    { data: { digest, file } },
  );
}

/**
 * The error for an object whose file is damaged: `damage` says how (`now hashes to ...`, `is a
 * directory, not a file`), and is in `data` for whoever explains it further.
 */
export function damaged(
  digest: Digest,
  file: string,
  damage: string,
  actual?: Digest,
): RewindError {
  return new RewindError(
    'OBJECT_CORRUPT',
    `Object ${digest} is corrupt: the file ${file} ${damage}. ` +
      'Nothing was read from it. Run `rewind verify` to list every damaged object; restore the file from a backup if you have one.',
    { data: { digest, file, damage, ...(actual && { actual }) } },
  );
}

export function corrupt(digest: Digest, file: string, actual: Digest): RewindError {
  return damaged(digest, file, `now hashes to ${actual}`, actual);
}

/**
 * The flags that open an object file to check it: never through a symbolic link at its name, and
 * never waiting on a named pipe there.
 */
const CHECK_FLAGS = constants.O_RDONLY | constants.O_NOFOLLOW | constants.O_NONBLOCK;

/** What a put finds at an object's name. */
export type Existing = 'absent' | 'sound' | 'damaged';

/** True for the errors of opening or reading a name that holds a link or a directory. */
const isNotAFile = (error: unknown): boolean =>
  isSystemError(error, 'ELOOP') || isSystemError(error, 'EISDIR');

/**
 * Whether an object file may be at a path under `objectsDirectory`: only in a fan-out directory
 * that exists now (a new store has none), so a batch of new objects does not look for each.
 * Every path may, when the directory cannot be listed.
 */
export function looseObjectCheckSync(objectsDirectory: string): (file: string) => boolean {
  let fanouts: Set<string>;
  try {
    fanouts = new Set(readdirSync(objectsDirectory));
  } catch {
    return () => true;
  }
  return (file) => fanouts.has(basename(dirname(file)));
}

/**
 * Checks the object file at `file` against its content (`bytes`, else `digest` and
 * `sizeBytes`), synchronously; a sound one is marked used. Another size, other bytes, a link or a
 * directory is damaged.
 */
export function checkExistingSync(file: string, bytes: Uint8Array): Existing {
  if (isAbsentSync(file)) return 'absent';
  let fd: number;
  try {
    fd = openSync(file, CHECK_FLAGS);
  } catch (error) {
    if (isSystemError(error, 'ENOENT')) return 'absent';
    if (isNotAFile(error)) return 'damaged';
    if (isSystemError(error, 'ENOTDIR')) throw blockedFanout(file, error);
    throw error;
  }
  try {
    const stats = fstatSync(fd);
    if (!stats.isFile() || stats.size !== bytes.byteLength) return 'damaged';
    // One byte more than expected is read, so a file that grows meanwhile is caught too.
    const found = Buffer.allocUnsafe(bytes.byteLength + 1);
    let length = 0;
    for (;;) {
      const read = readSync(fd, found, length, found.length - length, null);
      if (read === 0) break;
      length += read;
      if (length === found.length) break;
    }
    if (length !== bytes.byteLength || !found.subarray(0, length).equals(bytes)) return 'damaged';
    const now = new Date();
    futimesSync(fd, now, now);
    return 'sound';
  } catch (error) {
    if (isNotAFile(error)) return 'damaged';
    throw error;
  } finally {
    closeSync(fd);
  }
}

/** {@link checkExistingSync} for content known by its digest and size: the file is re-hashed. */
export async function checkExisting(
  file: string,
  digest: Digest,
  sizeBytes: number,
): Promise<Existing> {
  let handle: FileHandle;
  try {
    handle = await open(file, CHECK_FLAGS);
  } catch (error) {
    if (isSystemError(error, 'ENOENT')) return 'absent';
    if (isNotAFile(error)) return 'damaged';
    if (isSystemError(error, 'ENOTDIR')) throw blockedFanout(file, error);
    throw error;
  }
  try {
    const stats = await handle.stat();
    if (!stats.isFile() || stats.size !== sizeBytes) return 'damaged';
    const digester = createDigester();
    const buffer = Buffer.allocUnsafe(Math.min(STREAM_CHUNK_BYTES, sizeBytes + 1));
    for (;;) {
      const { bytesRead } = await handle.read(buffer, 0, buffer.length, null);
      if (bytesRead === 0) break;
      digester.update(buffer.subarray(0, bytesRead));
    }
    if (digester.digest() !== digest) return 'damaged';
    const now = new Date();
    await handle.utimes(now, now);
    return 'sound';
  } catch (error) {
    if (isNotAFile(error)) return 'damaged';
    throw error;
  } finally {
    await handle.close();
  }
}

/**
 * The error for an object that cannot be stored or read because the fan-out directory above it
 * is something else (damage in the store: a file, a symbolic link): nothing is removed to make
 * room, and nothing is written through a link.
 */
export function blockedFanout(file: string, cause: unknown): RewindError {
  const directory = dirname(file);
  return new RewindError(
    'OBJECT_CORRUPT',
    `${directory} is not a directory (a file or a symbolic link), so the objects named under it cannot be stored or read: the store is damaged. ` +
      'Move it out of the store, then retry; run `rewind verify` to list what is damaged.',
    { data: { file, directory }, ...(cause !== undefined && { cause }) },
  );
}

/**
 * Throws {@link blockedFanout} unless the fan-out directory of `file` is a directory or absent:
 * a new object is never written through a symbolic link there, nor beside a file of that name.
 */
export function checkFanout(file: string): void {
  let stats: ReturnType<typeof lstatSync>;
  try {
    stats = lstatSync(dirname(file));
  } catch (error) {
    if (isSystemError(error, 'ENOENT')) return;
    throw error;
  }
  if (!stats.isDirectory()) throw blockedFanout(file, undefined);
}

/**
 * Writes an object's file now, with synchronous calls (a batch may write thousands, and a round
 * trip through the thread pool costs several times the system call): nothing when a sound one
 * is there; else `temporary`, renamed over what is there. Returns the directories whose names
 * changed, for the caller to make durable with the file.
 */
export function writeObjectFileSync(
  file: string,
  bytes: Uint8Array,
  digest: Digest,
  temporary: string,
): { directories: string[] } {
  if (checkExistingSync(file, bytes) === 'sound') return { directories: [] };
  // Absent, or damaged: written as new, renamed over what is there.
  checkFanout(file);
  const directory = dirname(file);
  try {
    writeFileSync(temporary, bytes, { flag: 'wx', mode: 0o444 });
    try {
      renameSync(temporary, file);
      return { directories: [directory] };
    } catch (error) {
      if (isSystemError(error, 'EISDIR') || isSystemError(error, 'ENOTEMPTY'))
        throw unrepairable(digest, file, error);
      if (!isSystemError(error, 'ENOENT')) throw error;
      mkdirSync(directory, { recursive: true });
      renameSync(temporary, file);
      return { directories: [directory, dirname(directory)] };
    }
  } catch (error) {
    try {
      unlinkSync(temporary);
    } catch {}
    throw error;
  }
}

/** Why a damaged object could not be written again: its name holds what a rename cannot replace. */
function unrepairable(digest: Digest, file: string, cause: unknown): RewindError {
  return new RewindError(
    'OBJECT_CORRUPT',
    `Object ${digest} is damaged and cannot be written again: ${file} is not a file (a directory?). ` +
      'Move it out of the store, then retry; run `rewind verify` to list every damaged object.',
    { data: { digest, file }, cause },
  );
}

/** Renames a temporary file over a damaged object, or reports why it cannot. */
export function renameOverDamaged(temporary: string, file: string, digest: Digest): Promise<void> {
  return rename(temporary, file).catch((error: unknown) => {
    if (isSystemError(error, 'EISDIR') || isSystemError(error, 'ENOTEMPTY'))
      throw unrepairable(digest, file, error);
    throw error;
  });
}

/** An object file opened to read, or the error saying what is there instead of a file. */
export async function openObject(digest: Digest, file: string): Promise<FileHandle> {
  let opened: Awaited<ReturnType<typeof openPlainFile>>;
  try {
    opened = await openPlainFile(file);
  } catch (error) {
    if (isSystemError(error, 'ENOENT')) throw notFound(digest, file);
    if (isSystemError(error, 'ENOTDIR')) throw blockedFanout(file, error);
    throw error;
  }
  if (!opened.isFile) throw damaged(digest, file, `is ${opened.kind}, not a file`);
  return opened.value;
}

/** An object file's bytes, checked against its digest. */
export async function readObjectFile(digest: Digest, file: string): Promise<Buffer> {
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
}

export async function* chunksOfObject(digest: Digest, file: string): AsyncIterable<Buffer> {
  const handle = await openObject(digest, file);
  try {
    for (;;) {
      const buffer = Buffer.allocUnsafe(STREAM_CHUNK_BYTES);
      const { bytesRead } = await handle.read(buffer, 0, buffer.length, null);
      if (bytesRead === 0) return;
      yield buffer.subarray(0, bytesRead);
    }
  } finally {
    await handle.close();
  }
}

const HEX_PATTERN = /^[0-9a-f]{64}$/;

/**
 * Every object file under `objects/` (its fan-out directories), in digest order. Read with
 * synchronous calls: a store after many checkpoints holds thousands of loose objects, and a
 * round trip through the thread pool for each directory and file was most of `rewind status`.
 */
export async function* listLooseObjects(objectsDirectory: string): AsyncIterable<StoredObject> {
  let fanouts: string[];
  try {
    fanouts = readdirSync(objectsDirectory);
  } catch (error) {
    if (isSystemError(error, 'ENOENT')) return;
    throw error;
  }
  for (const fanout of fanouts.sort()) {
    if (!/^[0-9a-f]{2}$/.test(fanout)) continue;
    let names: string[];
    try {
      names = readdirSync(join(objectsDirectory, fanout));
    } catch (error) {
      // A fan-out name that is not a directory (damage) holds no object; one removed meanwhile neither.
      if (isSystemError(error, 'ENOTDIR') || isSystemError(error, 'ENOENT')) continue;
      throw error;
    }
    for (const rest of names.sort()) {
      const hex = fanout + rest;
      if (!HEX_PATTERN.test(hex)) continue;
      const file = join(objectsDirectory, fanout, rest);
      // The name itself: a link there is listed as what it is, never followed; one removed
      // meanwhile is not listed.
      const stats = lstatSync(file, { throwIfNoEntry: false });
      if (stats === undefined) continue;
      yield {
        digest: `${DIGEST_PREFIX}${hex}`,
        sizeBytes: stats.size,
        file,
        modifiedAtMs: stats.mtimeMs,
      };
    }
  }
}

/**
 * Every object of a local store once ({@link ObjectStore.list}): a packed object as recent as its
 * most recent copy, packed or loose.
 */
export async function* listObjects(
  packs: PackSet,
  objectsDirectory: string,
): AsyncIterable<StoredObject> {
  const packed = new Map<Digest, StoredObject>();
  packs.refresh();
  for (const { digest, sizeBytes, pack, modifiedAtMs } of packs.entries()) {
    const listed = packed.get(digest);
    if (!listed || listed.modifiedAtMs < modifiedAtMs) {
      packed.set(digest, { digest, sizeBytes, file: pack, modifiedAtMs });
    }
  }
  for await (const loose of listLooseObjects(objectsDirectory)) {
    const copy = packed.get(loose.digest);
    if (copy) copy.modifiedAtMs = Math.max(copy.modifiedAtMs, loose.modifiedAtMs);
    else yield loose;
  }
  yield* packed.values();
}

/**
 * How many objects a local store holds and their size ({@link ObjectStore.usage}), without a
 * string or an object per packed object as {@link listObjects} makes (`rewind status` of a store
 * of 108,000 objects in 26 packs: 20 ms, where the listing took about 500).
 */
export async function objectUsage(
  packs: PackSet,
  objectsDirectory: string,
): Promise<{ count: number; sizeBytes: number }> {
  packs.refresh();
  const usage = packs.usage();
  for await (const { digest, sizeBytes } of listLooseObjects(objectsDirectory)) {
    if (packs.find(digest).length > 0) continue;
    usage.count += 1;
    usage.sizeBytes += sizeBytes;
  }
  return usage;
}

/** The temporary files of object writes under `objects/` (in progress, or left by a crash). */
export async function listLooseTemporaries(
  objectsDirectory: string,
): Promise<{ file: string; sizeBytes: number; modifiedAtMs: number }[]> {
  let names: string[];
  try {
    names = await readdir(objectsDirectory);
  } catch (error) {
    if (isSystemError(error, 'ENOENT')) return [];
    throw error;
  }
  const found: { file: string; sizeBytes: number; modifiedAtMs: number }[] = [];
  for (const name of names) {
    if (!name.startsWith('.put-')) continue;
    const file = join(objectsDirectory, name);
    const stats = await stat(file).catch(() => undefined);
    if (stats) found.push({ file, sizeBytes: stats.size, modifiedAtMs: stats.mtimeMs });
  }
  return found;
}
