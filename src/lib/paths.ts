import { lstat } from 'node:fs/promises';
import { isAbsolute, join, posix } from 'node:path';
import { isSystemError, RewindError } from '../errors.js';
import { jsonPreview } from './text.js';

/** The longest file name the system takes, in bytes (NAME_MAX on Linux and macOS). */
const NAME_MAX_BYTES = 255;

/** The longest path the system takes, in bytes, its terminating NUL left out (PATH_MAX - 1). */
const PATH_MAX_BYTES = 4095;

/**
 * Normalizes a workspace-relative path to its canonical form (`a/b/c`, forward slashes, no `.`
 * segments). Throws `PATH_INVALID` for an empty path, an absolute path, a NUL byte, text that is
 * not valid Unicode, a name
 * longer than the system takes (255 bytes), or a path that climbs out of the workspace with `..`.
 */
export function normalizeWorkspacePath(path: string): string {
  const fail = (why: string): never => {
    throw new RewindError(
      'PATH_INVALID',
      `The path ${jsonPreview(path, 200)} ${why}. Give a path relative to the workspace root, such as "src/index.ts".`,
      { data: { path } },
    );
  };
  if (path.includes('\0')) fail('contains a NUL byte');
  // A lone surrogate has no UTF-8: the system would get U+FFFD, another name than the one journaled.
  // In a `u` pattern a pair is one code point: the class matches only a surrogate alone.
  if (/[\uD800-\uDFFF]/u.test(path)) fail('is not valid Unicode (it holds a lone surrogate)');
  if (path.trim() === '') fail('is empty');
  if (isAbsolute(path) || posix.isAbsolute(path)) fail('is absolute');
  const normalized = posix.normalize(path).replace(/\/+$/, '');
  if (normalized === '..' || normalized.startsWith('../')) fail('leads out of the workspace');
  if (normalized === '.' || normalized === '') fail('names the workspace root itself');
  const long = normalized.split('/').find((name) => Buffer.byteLength(name) > NAME_MAX_BYTES);
  if (long !== undefined) {
    fail(
      `holds a name of ${Buffer.byteLength(long)} bytes, longer than the ${NAME_MAX_BYTES} the system takes`,
    );
  }
  return normalized;
}

/**
 * Resolves a workspace-relative path to an absolute path inside `root`, refusing to go through a
 * symbolic link at any component, the last one included, before anything follows it. Components
 * that do not exist yet are fine (the path may be about to be created). `root` must be an
 * absolute, already-resolved directory.
 *
 * Throws `PATH_INVALID` as {@link normalizeWorkspacePath} does, and for a path longer than the
 * system takes (4,095 bytes with the workspace's own), and `SYMLINK_REFUSED` naming the first
 * component that is a link.
 */
export async function resolveWorkspacePath(root: string, path: string): Promise<string> {
  const normalized = normalizeWorkspacePath(path);
  const absolute = join(root, normalized);
  if (Buffer.byteLength(absolute) > PATH_MAX_BYTES) {
    throw new RewindError(
      'PATH_INVALID',
      `The path ${jsonPreview(normalized, 80)} is ${Buffer.byteLength(absolute)} bytes long with the workspace's own, longer than the ${PATH_MAX_BYTES} the system takes. Give a shorter path.`,
      { data: { path: normalized } },
    );
  }
  let current = root;
  for (const segment of normalized.split('/')) {
    current = join(current, segment);
    let stats: Awaited<ReturnType<typeof lstat>>;
    try {
      stats = await lstat(current);
    } catch (error) {
      if (isSystemError(error, 'ENOENT') || isSystemError(error, 'ENOTDIR')) break;
      throw error;
    }
    if (stats.isSymbolicLink()) {
      const link = current.slice(root.length + 1);
      throw new RewindError(
        'SYMLINK_REFUSED',
        `The path "${normalized}" goes through the symbolic link "${link}", which Rewind never follows. ` +
          'Use the path of the real file instead.',
        { data: { path: normalized, link } },
      );
    }
  }
  return absolute;
}
