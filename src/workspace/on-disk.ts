// What is on disk at a path of a workspace now, as a restore needs to know it.
import { lstatSync } from 'node:fs';
import { isSystemError } from '../errors.js';
import { diskPath, type WorkspaceDirectories } from '../lib/index.js';

/** What is at a path of the workspace now (`other`: a socket, a FIFO, a device). */
export type Current = 'file' | 'directory' | 'symlink' | 'other' | undefined;

/** What is at `absolute` now, without following a link; undefined for nothing. */
export function currentType(absolute: string): Current {
  try {
    const stats = lstatSync(diskPath(absolute));
    if (stats.isFile()) return 'file';
    if (stats.isDirectory()) return 'directory';
    if (stats.isSymbolicLink()) return 'symlink';
    return 'other';
  } catch (error) {
    // Under a file (a directory that became one): nothing is there.
    if (isSystemError(error, 'ENOENT') || isSystemError(error, 'ENOTDIR')) return undefined;
    throw error;
  }
}

/** The permission bits of the directory at `path`, or undefined when it cannot be seen. */
export function modeOf(directories: WorkspaceDirectories, path: string): number | undefined {
  try {
    const stats = lstatSync(diskPath(directories.locate(path)));
    return stats.isDirectory() ? stats.mode & 0o7777 : undefined;
  } catch {
    return undefined;
  }
}

/** True when a socket, a FIFO or a device is at `absolute`. */
export function isSpecialSync(absolute: string): boolean {
  try {
    return currentType(absolute) === 'other';
  } catch {
    return false;
  }
}

/**
 * True when a socket, a FIFO or a device is at `path` of the workspace at `root`, or at a folder
 * above it: left out of snapshots, so a restore leaves it, and all under it, alone.
 */
export function isAtSpecialSync(root: string, path: string): boolean {
  const names = path.split('/');
  for (let index = 1; index <= names.length; index++) {
    if (isSpecialSync(`${root}/${names.slice(0, index).join('/')}`)) return true;
  }
  return false;
}
