// Writing one file of a restore from the store: beside its place, then renamed over it, never
// torn; and what a restore creates belongs to the workspace's owner.
import {
  type BigIntStats,
  closeSync,
  fchmodSync,
  fchownSync,
  fstatSync,
  lstatSync,
  openSync,
  readFileSync,
  readlinkSync,
  renameSync,
} from 'node:fs';
import { type FileHandle, open, rename, unlink } from 'node:fs/promises';
import { posix } from 'node:path';
import { isSystemError } from '../errors.js';
import {
  digestFile,
  diskPath,
  nameBytes,
  nodeCrypto,
  readNamesSync,
  writeAll,
  writeAllTo,
} from '../lib/index.js';
import type { ObjectStore, TreeEntry } from '../store/index.js';
import { RESTORE_TEMPORARY } from './ignore-rules.js';
import type { TreeChange } from './tree-diff.js';

/** Ends the name of a file being restored; one left by a crash is removed on recovery. */
const TEMPORARY_SUFFIX = '.rewind-tmp';

/** The longest name a file system takes (NAME_MAX), in bytes. */
const MAX_NAME_BYTES = 255;

/** This process's temporary names: a random prefix, drawn once, and how many it has made. */
let tokenPrefix: string | undefined;
let tokenCount = 0;

function processTokenPrefix(): string {
  tokenPrefix ??= nodeCrypto().randomBytes(3).toString('hex');
  return tokenPrefix;
}

/**
 * The name of the temporary file a restore of `name` writes first: `.NAME.rewind-TOKEN` and the
 * suffix, with NAME cut short (at a character boundary) when the whole would pass NAME_MAX. TOKEN
 * is 12 hex digits: this process's random prefix (6), then a count (6). Drawing random bytes for
 * each file cost more than its rename.
 */
function temporaryName(name: string): string {
  tokenCount = (tokenCount + 1) % 2 ** 24;
  const token = `${processTokenPrefix()}${tokenCount.toString(16).padStart(6, '0')}`;
  const tail = `.rewind-${token}${TEMPORARY_SUFFIX}`;
  let kept = name;
  while (kept.length > 1 && nameBytes(`.${kept}${tail}`).length > MAX_NAME_BYTES) {
    kept = kept.slice(0, Math.max(1, kept.length - 8));
    if (/[\uD800-\uDBFF]$/.test(kept)) kept = kept.slice(0, -1);
  }
  return `.${kept}${tail}`;
}

/**
 * A POSIX extended regular expression that matches the path of every temporary file this
 * process's restores write, and nothing a person would name: what a watcher leaves out of its
 * events (a restored file is still seen, as moved into place).
 */
export function ownTemporaryFiles(): string {
  return `/\\.[^/]*\\.rewind-${processTokenPrefix()}[0-9a-f]{6}\\${TEMPORARY_SUFFIX}$`;
}

/** Files up to this size are fetched whole (see readAhead) and written in one call. */
const SMALL_FILE_BYTES = 1024 * 1024;

/** True when the file at `absolute` already has the entry's content and mode. */
export async function holdsFile(
  absolute: string,
  entry: TreeEntry & { type: 'file' },
): Promise<boolean> {
  try {
    const stats = lstatSync(diskPath(absolute));
    if (!stats.isFile() || stats.size !== entry.sizeBytes || (stats.mode & 0o7777) !== entry.mode)
      return false;
    return (await digestFile(absolute)).digest === entry.digest;
  } catch {
    return false;
  }
}

/** True when `absolute` is a symbolic link to the entry's target. */
export function holdsLink(absolute: string, entry: TreeEntry & { type: 'symlink' }): boolean {
  try {
    const target = readlinkSync(diskPath(absolute), { encoding: 'buffer' });
    return target.equals(Buffer.from(diskPath(entry.target)));
  } catch {
    return false;
  }
}

/**
 * True when what is at `absolute` changed at or after `sinceNs` (its ctime: nanoseconds since the
 * epoch, the kernel's clock) and is no longer `before`, the state the restore starts from
 * (undefined: nothing was there): edited while the restore was prepared, so it must be left as it
 * is. Nothing there now is no edit to keep (what `before` holds is in the store), nor is a new
 * directory where nothing was (the restore only adds to it).
 */
export async function isEditedSince(
  absolute: string,
  before: TreeEntry | undefined,
  sinceNs: bigint,
): Promise<boolean> {
  let stats: BigIntStats;
  try {
    stats = lstatSync(diskPath(absolute), { bigint: true });
  } catch (error) {
    if (isSystemError(error, 'ENOENT') || isSystemError(error, 'ENOTDIR')) return false;
    throw error;
  }
  if (stats.ctimeNs < sinceNs) return false;
  if (stats.isDirectory()) return before !== undefined && before.type !== 'directory';
  if (before === undefined || before.type === 'directory') return true;
  if (before.type === 'symlink') return !holdsLink(absolute, before);
  return !(await holdsFile(absolute, before));
}

const BLOCK_BYTES = 4096;
const ZERO_BLOCK = Buffer.alloc(BLOCK_BYTES);

/** Writes `chunk` at `position`, leaving out the whole blocks of it that hold only zeros. */
async function writeSkippingZeros(
  handle: FileHandle,
  chunk: Buffer,
  position: number,
): Promise<void> {
  let start = 0;
  while (start < chunk.length) {
    // Runs of data end where a whole block of zeros begins.
    let end = start;
    while (end < chunk.length) {
      const block = chunk.subarray(end, end + BLOCK_BYTES);
      if (block.length === BLOCK_BYTES && block.equals(ZERO_BLOCK)) break;
      end += block.length;
    }
    if (end > start) await writeAllTo(handle, chunk, start, end - start, position + start);
    while (end < chunk.length) {
      const block = chunk.subarray(end, end + BLOCK_BYTES);
      if (block.length !== BLOCK_BYTES || !block.equals(ZERO_BLOCK)) break;
      end += BLOCK_BYTES;
    }
    start = end;
  }
}

/** A user and group that what a restore creates is given to. */
type Owner = { uid: number; gid: number };

/**
 * Whom what a restore creates in the workspace `root` belongs to: run as root, to the owner of
 * the workspace (the user its sandboxed commands run as, who must be able to change what comes
 * back), not to root; otherwise undefined (to whoever creates it, as always).
 */
export function ownerOf(root: string): Owner | undefined {
  if (process.getuid?.() !== 0) return undefined;
  const stats = lstatSync(root);
  return stats.uid === 0 ? undefined : { uid: stats.uid, gid: stats.gid };
}

/**
 * This process's file mode creation mask, as Linux shows it (`Umask:` in /proc/self/status);
 * undefined where that cannot be read (`process.umask()` would have to change it to read it).
 * Read once per restore: a process that changes its mask while one runs (nothing in Rewind does
 * once it serves commands) could see files created with a narrower mode.
 */
export function currentUmask(): number | undefined {
  try {
    const found = /^Umask:\s*([0-7]+)$/m.exec(readFileSync('/proc/self/status', 'latin1'));
    return found ? Number.parseInt(found[1] as string, 8) : undefined;
  } catch {
    return undefined;
  }
}

/** Whom a restore's files go to (see {@link ownerOf}), and the mask they are created under. */
export interface Creation {
  owner: Owner | undefined;
  umask: number | undefined;
}

/** Placements whose small files are read ahead of their writes: see {@link readAhead}. */
const READS_AHEAD = 32;

/**
 * Reads the contents of the small files among `placements` ahead of their writes, so that the
 * reads wait on the store side by side while files are written (8 at a time), and a store that
 * can reads them on another thread meanwhile (`ahead`): `startAfter(index)` starts the reads of
 * the small files among the READS_AHEAD placements after `index` (at most ~32 MiB held), half of
 * them at a time, so that they are asked for together; `take(index)` hands one over, or undefined
 * when it was not read ahead (the first file is read as before, once its parent is checked). A
 * read not taken (its path left alone) is dropped, and its error with it.
 */
export function readAhead(store: ObjectStore, placements: readonly TreeChange[]) {
  const reads = new Map<number, Promise<Buffer>>();
  let next = 0;
  return {
    startAfter(index: number): void {
      next = Math.max(next, index + 1);
      if (next > index + READS_AHEAD / 2) return;
      for (; next < placements.length && next <= index + READS_AHEAD; next++) {
        const after = placements[next]?.after;
        if (after?.type !== 'file' || after.sizeBytes > SMALL_FILE_BYTES) continue;
        const read = store.get(after.digest, { ahead: true });
        read.catch(() => {}); // rejected where it is taken; never an unhandled rejection here
        reads.set(next, read);
      }
    },
    take(index: number): Promise<Buffer> | undefined {
      const read = reads.get(index);
      reads.delete(index);
      return read;
    },
  };
}

/**
 * Writes the entry's file at `absolute`: beside it, then renamed over what is there. Returns the
 * stat of the file as written, taken through its descriptor before the rename (for
 * `WorkspaceWatcher.wrote`).
 */
export async function writeFromStore(
  store: ObjectStore,
  absolute: string,
  entry: TreeEntry & { type: 'file' },
  { owner, umask }: Creation,
  content?: Promise<Buffer>,
): Promise<BigIntStats> {
  const temporary = `${posix.dirname(absolute)}/${temporaryName(posix.basename(absolute))}`;
  // Created exclusively (never through a link) with its mode when the mask leaves it whole (a
  // call less), else given it through the descriptor.
  const isModeWhole =
    owner === undefined &&
    umask !== undefined &&
    (entry.mode & 0o7000) === 0 &&
    (entry.mode & ~umask) === entry.mode;
  let written: BigIntStats;
  try {
    if (entry.sizeBytes <= SMALL_FILE_BYTES) {
      // A small file comes whole (read ahead, most often) and is written with synchronous calls,
      // its rename too: each costs less than a thread-pool round trip. Renames in the thread
      // pool, side by side, took the CPU from this thread (on 2 cores, a rollback of 1,000 files
      // took 10-25% longer): ext4 starts writing out a file renamed over another, a small one
      // at once.
      const bytes = await (content ?? store.get(entry.digest));
      const descriptor = openSync(diskPath(temporary), 'wx', isModeWhole ? entry.mode : 0o600);
      try {
        writeAll(descriptor, bytes);
        // Before the mode: a change of owner clears the set-user-id and set-group-id bits.
        if (owner) fchownSync(descriptor, owner.uid, owner.gid);
        if (!isModeWhole) fchmodSync(descriptor, entry.mode);
        written = fstatSync(descriptor, { bigint: true });
      } finally {
        closeSync(descriptor);
      }
      renameSync(diskPath(temporary), diskPath(absolute));
    } else {
      const handle = await open(diskPath(temporary), 'wx', isModeWhole ? entry.mode : 0o600);
      try {
        // Blocks of zeros are skipped, not written: a sparse file (a disk image, a database)
        // comes back sparse rather than at its full size on disk.
        let position = 0;
        for await (const chunk of store.read(entry.digest)) {
          await writeSkippingZeros(handle, chunk, position);
          position += chunk.length;
        }
        await handle.truncate(position);
        if (owner) await handle.chown(owner.uid, owner.gid);
        if (!isModeWhole) await handle.chmod(entry.mode);
        written = await handle.stat({ bigint: true });
      } finally {
        await handle.close();
      }
      // A large file's rename may wait while its megabytes start out to the disk: not here.
      await rename(diskPath(temporary), diskPath(absolute));
    }
    return written;
  } catch (error) {
    await unlink(diskPath(temporary)).catch(() => {});
    throw error;
  }
}

/** Removes the temporary files a killed restore may have left in these directories. */
export async function removeLeftovers(directories: Iterable<string>): Promise<void> {
  for (const directory of directories) {
    let names: string[];
    try {
      names = readNamesSync(directory);
    } catch {
      continue;
    }
    for (const name of names) {
      if (RESTORE_TEMPORARY.test(name)) {
        await unlink(diskPath(`${directory}/${name}`)).catch(() => {});
      }
    }
  }
}
