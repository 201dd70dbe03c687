// What a stored tree's own rules leave out: the other side of a rollback, an undo or a commit.
import { posix } from 'node:path';
import type { Digest } from '../lib/index.js';
import { type ObjectStore, readTree, type TreeEntry } from '../store/index.js';
import { IGNORE_FILES, IgnoreRules, type OutsideRules } from './ignore-rules.js';

/** Tells, path by path, whether a set of rules leaves a path out (or anything above it). */
export type LeftOutCheck = (path: string, isDirectory: boolean) => Promise<boolean>;

interface DirectoryRules {
  rules: IgnoreRules;
  /** The directory's entries in the tree; empty for a directory the tree does not have. */
  entries: ReadonlyMap<string, TreeEntry>;
}

/**
 * What the rules of a stored tree leave out: the ignore files the tree holds (read from the
 * store) and `outside`, the rules that applied from outside the workspace when it was recorded.
 * A path under a directory the tree does not have is judged by the rules above it.
 */
/**
 * The check, except that it never leaves out the paths `except`: what
 * a rollback created though the rules left it out, which its undo removes again.
 */
export function exceptFor(
  check: LeftOutCheck,
  except: readonly string[] | undefined,
): LeftOutCheck {
  if (except === undefined || except.length === 0) return check;
  const exempt = new Set(except);
  return async (path, isDirectory) => !exempt.has(path) && check(path, isDirectory);
}

export function treeRules(store: ObjectStore, tree: Digest, outside: OutsideRules): LeftOutCheck {
  const byDirectory = new Map<string, Promise<DirectoryRules>>();
  const entriesOf = async (digest: Digest): Promise<Map<string, TreeEntry>> =>
    new Map((await readTree(store, digest)).entries.map((entry) => [entry.name, entry]));
  const within = async (
    base: IgnoreRules,
    relative: string,
    entries: ReadonlyMap<string, TreeEntry>,
  ): Promise<IgnoreRules> => {
    const texts: string[] = [];
    for (const name of IGNORE_FILES) {
      const entry = entries.get(name);
      if (entry?.type === 'file') texts.push((await store.get(entry.digest)).toString('utf8'));
    }
    return base.within(relative, texts);
  };
  const rulesFor = (directory: string): Promise<DirectoryRules> => {
    let known = byDirectory.get(directory);
    if (!known) {
      known = (async () => {
        if (directory === '') {
          const entries = await entriesOf(tree);
          return { rules: await within(IgnoreRules.outside(outside), '', entries), entries };
        }
        const parentPath = posix.dirname(directory);
        const parent = await rulesFor(parentPath === '.' ? '' : parentPath);
        const entry = parent.entries.get(posix.basename(directory));
        if (entry?.type !== 'directory') return { rules: parent.rules, entries: new Map() };
        const entries = await entriesOf(entry.digest);
        return { rules: await within(parent.rules, directory, entries), entries };
      })();
      byDirectory.set(directory, known);
    }
    return known;
  };
  return async (path, isDirectory) => {
    const parts = path.split('/');
    let directory = '';
    for (let index = 0; index < parts.length; index++) {
      const name = parts[index] as string;
      const relative = directory === '' ? name : `${directory}/${name}`;
      const isLast = index === parts.length - 1;
      const { rules } = await rulesFor(directory);
      if (rules.isIgnored(relative, name, isLast ? isDirectory : true)) return true;
      directory = relative;
    }
    return false;
  };
}
