// Read-only folders a restore must write in: opened for the time of the restore, then closed again.
import { chmodSync, lstatSync } from 'node:fs';
import { posix } from 'node:path';
import { diskPath } from '../lib/index.js';
import type { TreeChange } from './tree-diff.js';

/**
 * The directories that hold a changed path and that this process may not write in but owns, made
 * writable (with their modes before), so that a read-only folder does not block a restore.
 */
export function unlockParents(root: string, changes: readonly TreeChange[]): Map<string, number> {
  const unlocked = new Map<string, number>();
  if (process.getuid?.() === 0) return unlocked; // root writes anywhere
  const parents = new Set(changes.map((change) => posix.dirname(change.path)));
  for (const parent of parents) {
    const absolute = parent === '.' ? root : `${root}/${parent}`;
    try {
      const stats = lstatSync(diskPath(absolute));
      if (!stats.isDirectory() || stats.uid !== process.getuid?.()) continue;
      if ((stats.mode & 0o300) === 0o300) continue;
      chmodSync(diskPath(absolute), (stats.mode & 0o7777) | 0o300);
      unlocked.set(parent, stats.mode & 0o7777);
    } catch {
      // Absent, or not ours: the restore reports what it cannot do.
    }
  }
  return unlocked;
}

/** Gives the directories {@link unlockParents} opened their modes back, unless the restore set one. */
export function relock(
  root: string,
  unlocked: Map<string, number>,
  changes: readonly TreeChange[],
): void {
  for (const [parent, mode] of unlocked) {
    const change = changes.find((candidate) => candidate.path === parent);
    if (change?.after?.type === 'directory') continue;
    try {
      chmodSync(diskPath(parent === '.' ? root : `${root}/${parent}`), mode);
    } catch {}
  }
}
