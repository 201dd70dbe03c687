// Where a watcher works: the workspace it watches, the store directory its sentinels go in.
import {
  accessSync,
  type BigIntStats,
  constants,
  lstatSync,
  mkdirSync,
  realpathSync,
} from 'node:fs';
import { join } from 'node:path';
import { diskPath, listNames } from '../lib/index.js';
import {
  holdsIgnoreFile,
  IGNORE_FILES,
  IgnoreRules,
  isAlwaysExcluded,
  type OutsideRules,
} from './ignore-rules.js';

/** Paths the snapshot never holds, wherever they are (as find prunes them). */
export function isLeftOut(relative: string): boolean {
  return relative.split('/').some(isAlwaysExcluded);
}

/** Whether the path is that of an ignore file (`.gitignore`, `.rewindignore`), at any depth. */
export function isIgnoreFile(relative: string): boolean {
  const name = relative.slice(relative.lastIndexOf('/') + 1);
  return (IGNORE_FILES as readonly string[]).includes(name);
}

export function parentOf(relative: string): string {
  const slash = relative.lastIndexOf('/');
  return slash === -1 ? '' : relative.slice(0, slash);
}

/** The lstat of `relative` under `root`; null when nothing is there, undefined when it cannot be taken. */
export function lstatIn(root: string, relative: string): BigIntStats | null | undefined {
  try {
    return lstatSync(diskPath(join(root, relative)), { bigint: true });
  } catch (error) {
    const code = (error as NodeJS.ErrnoException).code;
    return code === 'ENOENT' || code === 'ENOTDIR' ? null : undefined;
  }
}

/** The ctime of `relative` under `root` when it is there and not a directory. */
export function ctimeIn(root: string, relative: string): bigint | undefined {
  const stats = lstatIn(root, relative);
  return stats && !stats.isDirectory() ? stats.ctimeNs : undefined;
}

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

/**
 * Whether this process may list the directory at `absolute` and reach what is in it (read and
 * search permission: inotify needs the first to watch it, and inotifywait the second to watch
 * what is in it); true when it vanished (nothing to watch).
 */
export function canEnter(absolute: string): boolean {
  try {
    accessSync(diskPath(absolute), constants.R_OK | constants.X_OK);
    return true;
  } catch (error) {
    const code = (error as NodeJS.ErrnoException).code;
    return code !== 'EACCES' && code !== 'EPERM';
  }
}

/**
 * The directories under `root` the ignore rules leave out, wherever they are (a `node_modules`
 * in `packages/*`, a sub-project's `dist`), and those this process cannot enter (see
 * {@link canEnter}; also added to `unreadable`), as relative paths, sorted: not watched (they
 * churn, and each directory costs a watch and time at the start; inotifywait fails on one it
 * cannot read). A walk of the directories that are kept, entering each one's ignore files.
 */
export function ignoredDirectories(
  root: string,
  outside: OutsideRules,
  unreadable?: Set<string>,
): string[] {
  const ignored: string[] = [];
  const pending: [string, IgnoreRules][] = [['', IgnoreRules.outside(outside)]];
  for (let next = pending.pop(); next !== undefined; next = pending.pop()) {
    const [relative, above] = next;
    const absolute = relative === '' ? root : join(root, relative);
    if (relative !== '' && !canEnter(absolute)) {
      ignored.push(relative);
      unreadable?.add(relative);
      continue;
    }
    let names: { name: string; isDirectory: boolean }[];
    try {
      names = listNames(diskPath(absolute));
    } catch {
      continue;
    }
    const isRuled = holdsIgnoreFile(names.map(({ name }) => name));
    const rules = isRuled ? above.enter(absolute, relative) : above;
    for (const { name, isDirectory } of names) {
      if (!isDirectory) continue;
      const inner = relative === '' ? name : `${relative}/${name}`;
      // `.git` and `.rewind` too (the rules always leave them out): a store's objects and views,
      // a repository's objects, would cost a watch per directory and an event per write.
      if (rules.isIgnored(inner, name, true)) ignored.push(inner);
      else pending.push([inner, rules]);
    }
  }
  return ignored.sort();
}

/** The rules in force inside a directory: `left out` when it or one above it is left out. */
type RulesInside = IgnoreRules | 'left out' | undefined;

/**
 * The ignore rules in force in the directories of a watched workspace (outside rules, then the
 * ignore files of every directory from the root down), read from disk as
 * {@link ignoredDirectories} reads them, and kept: a burst of directories made (a `cp -r`) asks
 * for the same ones over and over. {@link clear} forgets them, when an ignore file changed.
 */
export class WatchedRules {
  readonly #root: string;
  readonly #outside: OutsideRules;
  readonly #inside = new Map<string, RulesInside>();

  constructor(root: string, outside: OutsideRules) {
    this.#root = root;
    this.#outside = outside;
  }

  clear(): void {
    this.#inside.clear();
  }

  /**
   * The rules in force in the directory above `relative`: `left out` when a directory on the way
   * is itself left out; undefined when they cannot be read.
   */
  above(relative: string): RulesInside {
    return this.#rulesInside(parentOf(relative));
  }

  /** Whether the rules leave out the directory at `relative`, or one above it; false when unknown. */
  isIgnoredDirectory(relative: string): boolean {
    const rules = this.above(relative);
    if (rules === undefined || rules === 'left out') return rules === 'left out';
    return rules.isIgnored(relative, relative.slice(relative.lastIndexOf('/') + 1), true);
  }

  #rulesInside(directory: string): RulesInside {
    if (this.#inside.has(directory)) return this.#inside.get(directory);
    let rules: RulesInside;
    try {
      if (directory === '') rules = IgnoreRules.root(this.#root, this.#outside);
      else {
        const up = this.#rulesInside(parentOf(directory));
        const name = directory.slice(directory.lastIndexOf('/') + 1);
        if (up === undefined || up === 'left out') rules = up;
        else if (up.isIgnored(directory, name, true)) rules = 'left out';
        else rules = up.enter(join(this.#root, directory), directory);
      }
    } catch {
      rules = undefined;
    }
    this.#inside.set(directory, rules);
    return rules;
  }
}
