// What a checkpoint could not read is not in its tree, yet was there: a rollback to it leaves it
// as it is now, rather than deleting it as if the checkpoint had found it absent.
import type { Digest } from '../../lib/index.js';
import {
  findEntryAt,
  type ObjectStore,
  putTree,
  readTree,
  type TreeEntry,
} from '../../store/index.js';
import { isAtOrUnder } from '../../workspace/index.js';
import type { PathChange } from '../journal/action-records.js';

/**
 * `tree` with `path` holding `entry` (removed when `entry` is undefined). Unchanged when a
 * directory above `path` is missing from `tree`: the checkpoint that could not read `path` had
 * read its parent, so this is a tree that never held it.
 */
async function withEntryAt(
  store: ObjectStore,
  tree: Digest,
  path: string,
  entry: TreeEntry | undefined,
): Promise<Digest> {
  const [name, ...rest] = path.split('/') as [string, ...string[]];
  const entries = [...(await readTree(store, tree)).entries];
  const index = entries.findIndex((existing) => existing.name === name);
  if (rest.length > 0) {
    const directory = entries[index];
    if (directory?.type !== 'directory') return tree;
    const digest = await withEntryAt(store, directory.digest, rest.join('/'), entry);
    if (digest === directory.digest) return tree;
    entries[index] = { ...directory, digest };
  } else if (entry) {
    if (index >= 0) entries[index] = { ...entry, name };
    else entries.push({ ...entry, name });
  } else if (index >= 0) {
    entries.splice(index, 1);
  } else {
    return tree;
  }
  return putTree(store, entries);
}

/**
 * The tree a rollback to a checkpoint gives the workspace: the checkpoint's, with each path it
 * could not read (`unread`) as it is now in `current` (present or absent).
 */
export async function keepUnread(
  store: ObjectStore,
  target: Digest,
  current: Digest,
  unread: readonly string[],
): Promise<Digest> {
  const trees = new Map<Digest, Promise<readonly TreeEntry[]>>();
  let tree = target;
  for (const path of unread) {
    tree = await withEntryAt(store, tree, path, await findEntryAt(store, current, path, trees));
  }
  return tree;
}

/**
 * A rollback of some paths: `changes` without what the checkpoint could not read, a directory's
 * new state keeping each such path inside it as it is now in `current`.
 */
export async function pathChangesKeepingUnread(
  store: ObjectStore,
  changes: readonly PathChange[],
  current: Digest,
  unread: readonly string[],
): Promise<PathChange[]> {
  if (unread.length === 0) return [...changes];
  const trees = new Map<Digest, Promise<readonly TreeEntry[]>>();
  const kept: PathChange[] = [];
  for (const change of changes) {
    if (isAtOrUnder(change.path, unread)) continue;
    const inside = unread.filter((path) => path.startsWith(`${change.path}/`));
    if (inside.length === 0 || change.after?.type !== 'directory') {
      kept.push(change);
      continue;
    }
    let digest = change.after.digest;
    for (const path of inside) {
      const now = await findEntryAt(store, current, path, trees);
      digest = await withEntryAt(store, digest, path.slice(change.path.length + 1), now);
    }
    kept.push({ ...change, after: { ...change.after, digest } });
  }
  return kept;
}
