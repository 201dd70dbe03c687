// Reading the store's own files: only plain files, never through a symbolic link, never waiting
// on a named pipe. What else is at such a path (a directory, a link to /dev/zero, a pipe) is
// damage, which the caller names; reading it would fail with a system error, or never end.
import {
  closeSync,
  constants,
  fstatSync,
  lstatSync,
  openSync,
  readFileSync,
  type Stats,
} from 'node:fs';
import { type FileHandle, open } from 'node:fs/promises';
import { isSystemError } from '../errors.js';

/** Opens for reading without following a link at the name, and without blocking on a pipe. */
const READ_FLAGS = constants.O_RDONLY | constants.O_NOFOLLOW | constants.O_NONBLOCK;

/** Opens for appending, and creates, the same way. */
const APPEND_FLAGS =
  constants.O_RDWR | constants.O_APPEND | constants.O_NOFOLLOW | constants.O_NONBLOCK;

/** What is at a path, in words: `a file`, `a directory`, `a named pipe`... */
export function kindOf(stats: Stats): string {
  if (stats.isFile()) return 'a file';
  if (stats.isDirectory()) return 'a directory';
  if (stats.isSymbolicLink()) return 'a symbolic link';
  if (stats.isFIFO()) return 'a named pipe';
  if (stats.isSocket()) return 'a socket';
  if (stats.isCharacterDevice() || stats.isBlockDevice()) return 'a device';
  return 'not a plain file';
}

/** A plain file opened, or what is there instead. */
export type Opened<T> = { isFile: true; value: T } | { isFile: false; kind: string };

/**
 * Opens `path` to read it (or, with `append`, to append to it) if it is a plain file; otherwise
 * says what it is. Throws what opening throws otherwise (ENOENT for nothing there).
 */
export async function openPlainFile(
  path: string,
  options: { append?: boolean } = {},
): Promise<Opened<FileHandle>> {
  let handle: FileHandle;
  try {
    handle = await open(path, options.append ? APPEND_FLAGS : READ_FLAGS);
  } catch (error) {
    if (isSystemError(error, 'ELOOP')) return { isFile: false, kind: 'a symbolic link' };
    if (isSystemError(error, 'EISDIR')) return { isFile: false, kind: 'a directory' };
    throw error;
  }
  const stats = await handle.stat().catch(async (error: unknown) => {
    await handle.close();
    throw error;
  });
  if (stats.isFile()) return { isFile: true, value: handle };
  await handle.close();
  return { isFile: false, kind: kindOf(stats) };
}

/** The bytes of `path` if it is a plain file; otherwise what it is. Throws as {@link openPlainFile}. */
export async function readPlainFile(path: string): Promise<Opened<Buffer>> {
  const opened = await openPlainFile(path);
  if (!opened.isFile) return opened;
  try {
    return { isFile: true, value: await opened.value.readFile() };
  } finally {
    await opened.value.close();
  }
}

/** {@link readPlainFile}, synchronously: for small files read on hot paths (locks, caches). */
export function readPlainFileSync(path: string | Buffer): Opened<Buffer> {
  let descriptor: number;
  try {
    descriptor = openSync(path, READ_FLAGS);
  } catch (error) {
    if (isSystemError(error, 'ELOOP')) return { isFile: false, kind: 'a symbolic link' };
    if (isSystemError(error, 'EISDIR')) return { isFile: false, kind: 'a directory' };
    throw error;
  }
  try {
    const stats = fstatSync(descriptor);
    if (!stats.isFile()) return { isFile: false, kind: kindOf(stats) };
    return { isFile: true, value: readFileSync(descriptor) };
  } finally {
    closeSync(descriptor);
  }
}

/**
 * True when nothing is at `path`, asked without an exception: where most names asked about hold
 * nothing (objects not stored yet, ignore files), since a thrown ENOENT costs five times the call.
 * False for anything else, for the caller's own call to tell what.
 */
export function isAbsentSync(path: string | Buffer): boolean {
  try {
    return lstatSync(path, { throwIfNoEntry: false }) === undefined;
  } catch {
    return false;
  }
}
