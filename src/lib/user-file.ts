// Writing a file a person named for output (`--messages-out FILE`): what they mean is the file
// the name leads to, or the stream it names, never to have the name itself replaced.
import {
  constants,
  fstatSync,
  readdirSync,
  readFileSync,
  readlinkSync,
  type Stats,
  writeSync,
} from 'node:fs';
import { access, lstat, open, readlink, realpath, stat } from 'node:fs/promises';
import { dirname, join, resolve } from 'node:path';
import { isSystemError, RewindError } from '../errors.js';
import { writeFileAtomic } from './atomic-write.js';
import { writeAllTo } from './descriptor-io.js';

/** Links followed before giving up, as the kernel does (ELOOP). */
const MAX_LINKS = 40;

/** Where a user-named output goes: a descriptor of this process, a stream, or a file. */
type UserTarget =
  | { kind: 'descriptor'; descriptor: number }
  | { kind: 'stream'; path: string }
  | { kind: 'file'; path: string; mode: number | undefined };

/**
 * The descriptor of this process a path names (`/dev/stdout`, `/dev/stderr`, `/dev/fd/N`,
 * `/proc/self/fd/N`, `/proc/PID/fd/N` of this process), if it names one. Written through the
 * descriptor itself: opened again, a file redirected to (`> out`) would be written from its
 * start, under what the process writes to it.
 */
function descriptorNamed(path: string): number | undefined {
  if (path === '/dev/stdin') return 0;
  if (path === '/dev/stdout') return 1;
  if (path === '/dev/stderr') return 2;
  const match = /^\/(?:dev|proc\/(self|\d+))\/fd\/(\d+)$/.exec(path);
  if (!match || (match[1] !== undefined && match[1] !== 'self' && match[1] !== `${process.pid}`)) {
    return undefined;
  }
  return Number(match[2]);
}

/**
 * Whether descriptor `descriptor` of this process is open for reading only (a shell's `3< FILE`),
 * as /proc/self/fdinfo says; false where it cannot say (no /proc): the write then fails as it
 * would.
 */
function isReadOnly(descriptor: number): boolean {
  try {
    const flags = /^flags:\s*([0-7]+)$/m.exec(
      readFileSync(`/proc/self/fdinfo/${descriptor}`, 'utf8'),
    );
    // O_ACCMODE (3) masks O_RDONLY (0), O_WRONLY (1) and O_RDWR (2).
    return flags?.[1] !== undefined && (Number.parseInt(flags[1], 8) & 3) === constants.O_RDONLY;
  } catch {
    return false;
  }
}

/**
 * Whether descriptor `descriptor` is one Node opened for itself rather than one the command was
 * given (`3> FILE`): its event loop's (epoll, eventfd: `anon_inode:` in /proc/self/fd), or a pipe
 * whose reading end this process holds too (libuv's wake-ups). Written, those fail with EINVAL
 * or feed the event loop bytes it takes for its own. False where /proc cannot say.
 */
function isNodesOwn(descriptor: number): boolean {
  const linkOf = (number: number | string): string | undefined => {
    try {
      return readlinkSync(`/proc/self/fd/${number}`);
    } catch {
      return undefined;
    }
  };
  const link = linkOf(descriptor);
  if (link?.startsWith('anon_inode:')) return true;
  if (!link?.startsWith('pipe:')) return false;
  try {
    return readdirSync('/proc/self/fd').some(
      (other) =>
        Number(other) !== descriptor && linkOf(other) === link && isReadOnly(Number(other)),
    );
  } catch {
    return false;
  }
}

/** The way on for a descriptor that cannot be written: open it so, or name a file. */
const openItOrNameAFile = (descriptor: number): string =>
  `Open it for writing in the shell that runs the command (\`${descriptor}>FILE\`), or name a file.`;

function refusal(given: string, message: string): RewindError {
  return new RewindError('INVALID_ARGUMENT', `Cannot write ${given}: ${message}`, {
    data: { path: given },
  });
}

/**
 * Where writing `path` goes: the file its symbolic links lead to (written anew), a named pipe or
 * character device (written as it is), or a descriptor of this process. Throws
 * `INVALID_ARGUMENT`, saying what to do, for a directory, a block device, a socket, a loop of
 * links, a missing directory, standard input, or a descriptor not open, open for reading only, or
 * Node's own.
 */
async function userFileTarget(path: string): Promise<UserTarget> {
  let current = resolve(path);
  for (let links = 0; ; links++) {
    const descriptor = descriptorNamed(current);
    if (descriptor !== undefined) {
      // Standard input is read, even when it is open for writing too (a terminal is).
      if (descriptor === 0) {
        throw refusal(
          path,
          'it names standard input (descriptor 0), which is read from, not written to. Name a file, or /dev/stdout for standard output.',
        );
      }
      try {
        fstatSync(descriptor);
      } catch {
        throw refusal(
          path,
          `this process has no descriptor ${descriptor} open. ${openItOrNameAFile(descriptor)}`,
        );
      }
      if (isReadOnly(descriptor)) {
        throw refusal(
          path,
          `descriptor ${descriptor} is open for reading only. ${openItOrNameAFile(descriptor)}`,
        );
      }
      if (isNodesOwn(descriptor)) {
        throw refusal(
          path,
          `descriptor ${descriptor} is not one the command was given, but one Node opened for itself. ${openItOrNameAFile(descriptor)}`,
        );
      }
      return { kind: 'descriptor', descriptor };
    }
    let stats: Stats;
    try {
      stats = await lstat(current);
    } catch (error) {
      if (isSystemError(error, 'ENOENT')) {
        const directory = dirname(current);
        if (!(await stat(directory).catch(() => undefined))?.isDirectory()) {
          throw refusal(
            path,
            `there is no directory ${directory} to write it in. Create it first.`,
          );
        }
        return { kind: 'file', path: current, mode: undefined };
      }
      if (isSystemError(error, 'ENOTDIR')) {
        throw refusal(path, `a part of ${current} is not a directory. Name a file in a directory.`);
      }
      throw error;
    }
    if (stats.isSymbolicLink()) {
      if (links === MAX_LINKS) {
        throw refusal(
          path,
          `more than ${MAX_LINKS} symbolic links lead on from it (a loop?). Name the file itself.`,
        );
      }
      // Relative to where the link really is, as the kernel resolves it (`..` included).
      current = resolve(await realpath(dirname(current)), await readlink(current));
      continue;
    }
    if (stats.isFile()) return { kind: 'file', path: current, mode: stats.mode & 0o7777 };
    if (stats.isFIFO() || stats.isCharacterDevice()) return { kind: 'stream', path: current };
    if (stats.isDirectory()) {
      throw refusal(
        path,
        `it is a directory. Name a file, such as ${join(path, 'messages.json')}.`,
      );
    }
    if (stats.isBlockDevice()) {
      throw refusal(
        path,
        'it is a block device (a disk): writing there would overwrite what the disk holds. Name a file.',
      );
    }
    throw refusal(path, 'it is a socket, which cannot be written to as a file. Name a file.');
  }
}

/**
 * Why this process cannot write a file at `file`, or undefined when it can: the file is replaced
 * by one written beside it, so its directory must take a new name; and a file that is there must
 * be writable (a shell's `>` refuses a read-only file too, and it stays read-only).
 */
async function cannotWrite(file: string, exists: boolean): Promise<string | undefined> {
  const directory = dirname(file);
  for (const [path, what, remedy] of [
    [directory, `the directory ${directory}`, 'Name a file in a directory you can write'],
    ...(exists ? [[file, `the file ${file}`, 'Name another file']] : []),
  ] as const) {
    try {
      await access(path, constants.W_OK);
    } catch (error) {
      if (isSystemError(error, 'EROFS')) {
        return `${what} is on a read-only filesystem. Name a file on a writable one.`;
      }
      if (isSystemError(error, 'EACCES') || isSystemError(error, 'EPERM')) {
        return `${what} is not writable by this user (permission denied). ${remedy}, or change its permissions.`;
      }
      throw error;
    }
  }
  return undefined;
}

/**
 * Throws what {@link writeUserFile} would refuse `path` for, without writing: to check an output
 * path before doing the work whose result goes there. Also refuses a file this user cannot write
 * there (a directory or a file it has no write permission for, a read-only filesystem), which the
 * write itself would only find out once that work is done.
 */
export async function checkUserFile(path: string): Promise<void> {
  const target = await userFileTarget(path);
  const why = target.kind === 'file' && (await cannotWrite(target.path, target.mode !== undefined));
  if (why) throw refusal(path, why);
}

/** Writes all of `bytes` to a descriptor of this process, waiting while a pipe is full. */
async function writeToDescriptor(descriptor: number, bytes: Uint8Array): Promise<void> {
  let written = 0;
  while (written < bytes.byteLength) {
    try {
      written += writeSync(descriptor, bytes, written, bytes.byteLength - written);
    } catch (error) {
      // A non-blocking pipe (Node's own stdout may be one) that its reader has not emptied yet.
      if (!isSystemError(error, 'EAGAIN')) throw error;
      await new Promise((resume) => setTimeout(resume, 5));
    }
  }
}

/**
 * Writes `content` to a file a person named for output, as a shell's `>` would, except that a
 * file is never left half-written: a regular file (the one its symbolic links lead to, which
 * stay) is replaced atomically, keeping its permissions; a named pipe, a character device
 * (`/dev/null`, a terminal) and a descriptor of this process (`/dev/stdout`, `/dev/stderr`,
 * `/proc/self/fd/N`) are written as they are; a named pipe waits for its reader. Returns the path
 * written, after links. Throws `INVALID_ARGUMENT` (see {@link userFileTarget}, {@link cannotWrite})
 * for what cannot be written, before writing anything.
 */
export async function writeUserFile(path: string, content: string | Uint8Array): Promise<string> {
  const target = await userFileTarget(path);
  const why = target.kind === 'file' && (await cannotWrite(target.path, target.mode !== undefined));
  if (why) throw refusal(path, why);
  const bytes = typeof content === 'string' ? Buffer.from(content) : content;
  if (target.kind === 'descriptor') {
    await writeToDescriptor(target.descriptor, bytes);
    return path;
  }
  if (target.kind === 'stream') {
    // No O_CREAT nor O_TRUNC: the pipe or device is there, and is what receives the bytes.
    const handle = await open(target.path, constants.O_WRONLY | constants.O_NOCTTY);
    try {
      await writeAllTo(handle, bytes);
    } finally {
      await handle.close();
    }
    return target.path;
  }
  await writeFileAtomic(target.path, bytes, target.mode === undefined ? {} : { mode: target.mode });
  return target.path;
}
