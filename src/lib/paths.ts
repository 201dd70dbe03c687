import { lstat } from 'node:fs/promises';
import { isAbsolute, join, posix } from 'node:path';
import { isSystemError, RewindError } from '../errors.js';

/**
 * Normalizes a workspace-relative path to its canonical form (`a/b/c`, forward slashes, no `.`
 * segments). Throws `PATH_INVALID` for an empty path, an absolute path, a NUL byte, or a path
 * that climbs out of the workspace with `..`.
 */
export function normalizeWorkspacePath(path: string): string {
  const fail = (why: string): never => {
    throw new RewindError(
      'PATH_INVALID',
      `The path ${JSON.stringify(path)} ${why}. Give a path relative to the workspace root, such as "src/index.ts".`,
      { data: { path } },
    );
  };
  if (path.includes('\0')) fail('contains a NUL byte');
  if (path.trim() === '') fail('is empty');
  if (isAbsolute(path) || posix.isAbsolute(path)) fail('is absolute');
  const normalized = posix.normalize(path).replace(/\/+$/, '');
  if (normalized === '..' || normalized.startsWith('../')) fail('leads out of the workspace');
  if (normalized === '.' || normalized === '') fail('names the workspace root itself');
  return normalized;
}

/**
 * Resolves a workspace-relative path to an absolute path inside `root`, refusing to go through a
 * symbolic link at any component, the last one included, before anything follows it. Components
 * that do not exist yet are fine (the path may be about to be created). `root` must be an
 * absolute, already-resolved directory.
 *
 * Throws `PATH_INVALID` as {@link normalizeWorkspacePath} does, and `SYMLINK_REFUSED` naming the
 * first component that is a link.
 */
export async function resolveWorkspacePath(root: string, path: string): Promise<string> {
  const normalized = normalizeWorkspacePath(path);
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
  return join(root, normalized);
}
