import { compareNames, type Digest } from '../lib/index.js';
import { type ObjectStore, readTree, type TreeEntry } from '../store/index.js';

/**
 * One path whose state differs between two trees: `before` and `after` are its entries (with
 * `name` the last component), absent where the path does not exist on that side. A directory
 * that appears or disappears is listed along with everything under it.
 */
export interface TreeChange {
  path: string;
  before: TreeEntry | undefined;
  after: TreeEntry | undefined;
}

/**
 * What a change means for files (and symbolic links), leaving directories out: `added` when a
 * file appears where there was none (or a directory), `deleted` when one goes, `modified` when
 * one is replaced, re-moded or re-linked. Undefined for a change to directories only.
 */
export function fileChangeKind(change: TreeChange): 'added' | 'deleted' | 'modified' | undefined {
  const hadFile = change.before !== undefined && change.before.type !== 'directory';
  const hasFile = change.after !== undefined && change.after.type !== 'directory';
  if (hadFile && hasFile) return 'modified';
  if (hasFile) return 'added';
  if (hadFile) return 'deleted';
  return undefined;
}

/** True when two entries hold the same state (type, content, mode, target), whatever their name. */
export function isSameEntry(a: TreeEntry, b: TreeEntry): boolean {
  if (a.type !== b.type) return false;
  if (a.type === 'symlink' && b.type === 'symlink') return a.target === b.target;
  if (a.type === 'file' && b.type === 'file') return a.digest === b.digest && a.mode === b.mode;
  return (
    a.type === 'directory' && b.type === 'directory' && a.digest === b.digest && a.mode === b.mode
  );
}

async function listAll(
  store: ObjectStore,
  prefix: string,
  digest: Digest,
  side: 'before' | 'after',
  into: TreeChange[],
): Promise<void> {
  for (const entry of (await readTree(store, digest)).entries) {
    const path = `${prefix}${entry.name}`;
    into.push({
      path,
      before: side === 'before' ? entry : undefined,
      after: side === 'after' ? entry : undefined,
    });
    if (entry.type === 'directory') await listAll(store, `${path}/`, entry.digest, side, into);
  }
}

async function diffPair(
  store: ObjectStore,
  path: string,
  a: TreeEntry | undefined,
  b: TreeEntry | undefined,
  into: TreeChange[],
): Promise<void> {
  if (a && b && isSameEntry(a, b)) return;
  if (a?.type === 'directory' && b?.type === 'directory') {
    if (a.mode !== b.mode) into.push({ path, before: a, after: b });
    await diffInto(store, `${path}/`, a.digest, b.digest, into);
    return;
  }
  into.push({ path, before: a, after: b });
  if (a?.type === 'directory') await listAll(store, `${path}/`, a.digest, 'before', into);
  if (b?.type === 'directory') await listAll(store, `${path}/`, b.digest, 'after', into);
}

async function diffInto(
  store: ObjectStore,
  prefix: string,
  from: Digest | undefined,
  to: Digest | undefined,
  into: TreeChange[],
): Promise<void> {
  if (from === to) return;
  const before = new Map(
    (from ? (await readTree(store, from)).entries : []).map((entry) => [entry.name, entry]),
  );
  const after = new Map(
    (to ? (await readTree(store, to)).entries : []).map((entry) => [entry.name, entry]),
  );
  const names = [...new Set([...before.keys(), ...after.keys()])].sort(compareNames);
  for (const name of names) {
    await diffPair(store, `${prefix}${name}`, before.get(name), after.get(name), into);
  }
}

/**
 * Every path whose state differs from tree `from` to tree `to` (either may be undefined: an
 * empty directory), in path order. Sub-trees with equal digests are skipped without being read,
 * so the cost follows what changed, not the size of the trees.
 */
export async function diffTrees(
  store: ObjectStore,
  from: Digest | undefined,
  to: Digest | undefined,
): Promise<TreeChange[]> {
  const changes: TreeChange[] = [];
  await diffInto(store, '', from, to, changes);
  return changes;
}

/**
 * Every path whose state differs between two states of one path (`before` and `after` are its
 * entries, undefined where absent), in the form of {@link diffTrees}: the path itself and, for
 * directories, what differs under it.
 */
export async function diffEntries(
  store: ObjectStore,
  path: string,
  before: TreeEntry | undefined,
  after: TreeEntry | undefined,
): Promise<TreeChange[]> {
  const changes: TreeChange[] = [];
  await diffPair(store, path, before, after, changes);
  return changes;
}
