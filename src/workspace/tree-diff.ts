import { compareNames, createLimiter, type Digest, type Limiter } from '../lib/index.js';
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

/**
 * Trees read at once by one comparison: sibling directories are compared side by side, since each
 * read waits on the disk (or a remote store) far longer than it takes to decode.
 */
const TREE_READS_IN_FLIGHT = 16;

/** One comparison: its gate for tree reads. */
interface Comparison {
  readonly store: ObjectStore;
  readonly gate: Limiter;
}

const entriesOf = async (comparison: Comparison, digest: Digest | undefined) =>
  digest === undefined
    ? []
    : (await comparison.gate(() => readTree(comparison.store, digest))).entries;

/** Runs `each` on every item side by side; the results, flattened, in the items' order. */
async function inOrder<T>(
  items: readonly T[],
  each: (item: T) => Promise<TreeChange[]>,
): Promise<TreeChange[]> {
  return (await Promise.all(items.map(each))).flat();
}

async function listAll(
  comparison: Comparison,
  prefix: string,
  digest: Digest,
  side: 'before' | 'after',
): Promise<TreeChange[]> {
  return inOrder(await entriesOf(comparison, digest), async (entry) => {
    const path = `${prefix}${entry.name}`;
    const change: TreeChange = {
      path,
      before: side === 'before' ? entry : undefined,
      after: side === 'after' ? entry : undefined,
    };
    if (entry.type !== 'directory') return [change];
    return [change, ...(await listAll(comparison, `${path}/`, entry.digest, side))];
  });
}

async function diffPair(
  comparison: Comparison,
  path: string,
  a: TreeEntry | undefined,
  b: TreeEntry | undefined,
): Promise<TreeChange[]> {
  if (a && b && isSameEntry(a, b)) return [];
  if (a?.type === 'directory' && b?.type === 'directory') {
    const inside = await diffInto(comparison, `${path}/`, a.digest, b.digest);
    return a.mode !== b.mode ? [{ path, before: a, after: b }, ...inside] : inside;
  }
  const [removed, added] = await Promise.all([
    a?.type === 'directory' ? listAll(comparison, `${path}/`, a.digest, 'before') : [],
    b?.type === 'directory' ? listAll(comparison, `${path}/`, b.digest, 'after') : [],
  ]);
  return [{ path, before: a, after: b }, ...removed, ...added];
}

async function diffInto(
  comparison: Comparison,
  prefix: string,
  from: Digest | undefined,
  to: Digest | undefined,
): Promise<TreeChange[]> {
  if (from === to) return [];
  const [fromEntries, toEntries] = await Promise.all([
    entriesOf(comparison, from),
    entriesOf(comparison, to),
  ]);
  const before = new Map(fromEntries.map((entry) => [entry.name, entry]));
  const after = new Map(toEntries.map((entry) => [entry.name, entry]));
  const names = [...new Set([...before.keys(), ...after.keys()])].sort(compareNames);
  // The same entry on both sides, most of a directory with a change in it, is skipped here: a
  // promise for each would cost more than the comparison.
  const differing = names.filter((name) => {
    const [a, b] = [before.get(name), after.get(name)];
    return !(a && b && isSameEntry(a, b));
  });
  return inOrder(differing, (name) =>
    diffPair(comparison, `${prefix}${name}`, before.get(name), after.get(name)),
  );
}

const comparisonOf = (store: ObjectStore): Comparison => ({
  store,
  gate: createLimiter(TREE_READS_IN_FLIGHT),
});

/**
 * Every path whose state differs from tree `from` to tree `to` (either may be undefined: an
 * empty directory), in path order. Sub-trees with equal digests are skipped without being read,
 * so the cost follows what changed, not the size of the trees.
 */
export function diffTrees(
  store: ObjectStore,
  from: Digest | undefined,
  to: Digest | undefined,
): Promise<TreeChange[]> {
  return diffInto(comparisonOf(store), '', from, to);
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
  return diffPair(comparisonOf(store), path, before, after);
}
