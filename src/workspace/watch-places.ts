// Where a watcher works: the workspace it watches, the store directory its sentinels go in.
import { lstatSync, mkdirSync, realpathSync } from 'node:fs';
import { join } from 'node:path';

/** Where the watcher's sentinels are written: a directory of the store it watches on its own. */
const SENTINELS = join('cache', 'watch');

export function sentinelsIn(storeDirectory: string): string {
  return join(storeDirectory, SENTINELS);
}

/** The real path of a root (as a snapshot compares it), or the root as given if it has none. */
export function realRoot(root: string): string {
  try {
    return realpathSync(root);
  } catch {
    return root;
  }
}

function isDirectory(path: string): boolean {
  try {
    return lstatSync(path).isDirectory();
  } catch {
    return false;
  }
}

/**
 * Why the watcher cannot start (again) at `root` with its sentinels in `storeDirectory`, or
 * undefined when it can. Nothing is made above the store directory, and on a restart
 * (`isFirst` false) nothing at all: the store or the workspace may be being removed (a restart
 * follows the removal of either: the events of what went), and a directory made again in it
 * would make that removal fail, or bring back what was removed.
 */
export function cannotWatch(
  root: string,
  storeDirectory: string,
  isFirst: boolean,
): string | undefined {
  if (!isDirectory(root)) return `the workspace ${root} was deleted or moved away`;
  const sentinels = sentinelsIn(storeDirectory);
  if (isFirst && isDirectory(storeDirectory)) {
    for (const directory of [join(storeDirectory, 'cache'), sentinels]) {
      try {
        mkdirSync(directory);
      } catch {}
    }
  }
  if (isDirectory(sentinels)) return undefined;
  return isDirectory(storeDirectory)
    ? `its directory in the store, ${sentinels}, was removed`
    : `the store ${storeDirectory} was deleted`;
}
