import { constants } from 'node:fs';
import { open, rename, unlink } from 'node:fs/promises';
import { basename, dirname, join } from 'node:path';
import { nodeCrypto } from './builtins.js';
import { forEachConcurrently } from './concurrency.js';
import { diskPath } from './names.js';
import { runProgram } from './programs.js';

/**
 * fsyncs a file or a directory (for a directory: makes its entries, such as a create, a rename or
 * an unlink, survive a crash). Best effort on platforms that cannot open a directory (Windows).
 * With `noFollow`, a symbolic link at `path` is not followed (ELOOP): a link has nothing of its
 * own to sync, its parent holds it.
 */
export async function syncPath(path: string, options: { noFollow?: boolean } = {}): Promise<void> {
  let handle: Awaited<ReturnType<typeof open>> | undefined;
  try {
    handle = await open(
      diskPath(path),
      options.noFollow
        ? constants.O_RDONLY | constants.O_NOFOLLOW | constants.O_NONBLOCK
        : constants.O_RDONLY,
    );
    await handle.sync();
  } catch (error) {
    if (process.platform !== 'win32') throw error;
  } finally {
    await handle?.close();
  }
}

/** The name of a temporary file beside `target`, unique to this call. */
export function temporaryPathBeside(target: string): string {
  return join(
    dirname(target),
    `.${basename(target)}.${process.pid}.${nodeCrypto().randomBytes(6).toString('hex')}.tmp`,
  );
}

/**
 * Replaces `target` with `content` so that a crash leaves either the old file or the new one,
 * never a torn one: writes a temporary file beside it, fsyncs it, renames it over the target, and
 * fsyncs the directory. The parent directory must exist. `isDurable: false` skips both fsyncs,
 * for files that may be lost in a crash but must never be torn (caches).
 */
export async function writeFileAtomic(
  target: string,
  content: string | Uint8Array,
  options: { mode?: number; isDurable?: boolean } = {},
): Promise<void> {
  const isDurable = options.isDurable ?? true;
  const temporary = temporaryPathBeside(target);
  const handle = await open(temporary, 'wx', options.mode ?? 0o644);
  try {
    try {
      await handle.writeFile(content);
      if (isDurable) await handle.sync();
    } finally {
      await handle.close();
    }
    await rename(temporary, target);
  } catch (error) {
    await unlink(temporary).catch(() => {});
    throw error;
  }
  if (isDurable) await syncPath(dirname(target));
}

/**
 * Flushes everything written to the filesystem that holds `path` in one call (`sync -f`, that is
 * syncfs(2)): for many new files, far cheaper than one fsync each. Returns false where that is
 * not available (no coreutils `sync -f`); the caller then fsyncs file by file.
 */
async function syncFileSystem(path: string): Promise<boolean> {
  const { isStarted, status } = await runProgram('sync', ['-f', path]);
  return isStarted && status === 0;
}

/**
 * Beyond this many paths, one filesystem-wide sync beats fsyncing each (measured: 700 fsyncs
 * take over a second here, one syncfs a few milliseconds). Not lower: syncfs(2) also flushes
 * other processes' dirty data on that filesystem, which on a busy machine can take longer than
 * a few fsyncs.
 */
const SYNC_ALL_THRESHOLD = 256;

/** fsyncs in flight at once: enough to keep the thread pool and the device queue busy. */
const SYNC_CONCURRENCY = 16;

/**
 * Makes files and directories durable together: fsyncs in parallel, or for a very large set one
 * {@link syncFileSystem} of the filesystem holding `fileSystemPath`. Paths that no longer exist
 * are skipped (nothing left to make durable), and so are paths that have become symbolic links
 * (a directory a restore replaced by a link): none is followed.
 */
export async function syncPaths(paths: Iterable<string>, fileSystemPath: string): Promise<void> {
  const unique = [...new Set(paths)];
  if (unique.length === 0) return;
  if (unique.length > SYNC_ALL_THRESHOLD && (await syncFileSystem(fileSystemPath))) return;
  await forEachConcurrently(unique, SYNC_CONCURRENCY, (path) =>
    syncPath(path, { noFollow: true }).catch((error: unknown) => {
      // Gone since (removed, or a directory above it became a file), or a link now: nothing left
      // to sync.
      const code = (error as NodeJS.ErrnoException).code;
      if (code !== 'ENOENT' && code !== 'ENOTDIR' && code !== 'ELOOP') throw error;
    }),
  );
}
