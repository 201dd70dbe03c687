import { RewindError } from '../errors.js';
import { compareNames, type Digest, forEachConcurrently, isDigest } from '../lib/index.js';
import type { ObjectBatch, ObjectStore } from './object-store.js';

/** The tree encoding version this Rewind reads and writes. */
export const TREE_FORMAT_VERSION = 1;

/** One entry of a directory listing. Symbolic links are recorded, never followed. */
export type TreeEntry =
  | { name: string; type: 'file'; mode: number; sizeBytes: number; digest: Digest }
  | { name: string; type: 'directory'; mode: number; digest: Digest }
  | { name: string; type: 'symlink'; target: string };

/** A directory listing, sorted by name (UTF-8 byte order), as decoded from a tree object. */
export interface Tree {
  readonly entries: readonly TreeEntry[];
}

function invalid(message: string, data: Record<string, unknown>): RewindError {
  return new RewindError(
    'TREE_INVALID',
    `${message} The tree cannot be used; run \`rewind verify\`.`,
    {
      data,
    },
  );
}

/**
 * A value read from a damaged tree, as a message or an error's `data` shows it: scalars as they
 * are, and only the kind of a list or an object, which may nest too deep to write out.
 */
function shown(value: unknown): unknown {
  if (typeof value !== 'object' || value === null) return value;
  return Array.isArray(value) ? '(a list)' : '(an object)';
}

function checkName(name: unknown): string {
  if (
    typeof name !== 'string' ||
    name === '' ||
    name === '.' ||
    name === '..' ||
    name.includes('/') ||
    name.includes('\0')
  ) {
    throw invalid(`A tree entry has the invalid name ${JSON.stringify(shown(name))}.`, {
      name: shown(name),
    });
  }
  return name;
}

function checkMode(mode: unknown, name: string): number {
  if (typeof mode !== 'number' || !Number.isInteger(mode) || mode < 0 || mode > 0o7777) {
    throw invalid(`The tree entry "${name}" has the invalid mode ${JSON.stringify(shown(mode))}.`, {
      name,
      mode: shown(mode),
    });
  }
  return mode;
}

function checkDigest(digest: unknown, name: string): Digest {
  if (!isDigest(digest)) {
    throw invalid(
      `The tree entry "${name}" has the invalid digest ${JSON.stringify(shown(digest))}.`,
      {
        name,
      },
    );
  }
  return digest;
}

function checkEntry(value: unknown): TreeEntry {
  const raw = (typeof value === 'object' && value !== null ? value : {}) as Record<string, unknown>;
  const name = checkName(raw.name);
  switch (raw.type) {
    case 'file': {
      const sizeBytes = raw.sizeBytes;
      if (typeof sizeBytes !== 'number' || !Number.isSafeInteger(sizeBytes) || sizeBytes < 0) {
        throw invalid(`The tree entry "${name}" has an invalid size.`, { name });
      }
      return {
        name,
        type: 'file',
        mode: checkMode(raw.mode, name),
        sizeBytes,
        digest: checkDigest(raw.digest, name),
      };
    }
    case 'directory':
      return {
        name,
        type: 'directory',
        mode: checkMode(raw.mode, name),
        digest: checkDigest(raw.digest, name),
      };
    case 'symlink':
      if (typeof raw.target !== 'string' || raw.target === '' || raw.target.includes('\0')) {
        throw invalid(`The symbolic link "${name}" has an invalid target.`, { name });
      }
      return { name, type: 'symlink', target: raw.target };
    default:
      throw invalid(
        `The tree entry "${name}" has the unknown type ${JSON.stringify(shown(raw.type))}.`,
        {
          name,
        },
      );
  }
}

/**
 * Encodes a directory listing canonically: entries sorted by name in UTF-8 byte order, each with
 * exactly the fields of its type, as canonical JSON. The same listing always gives the same
 * bytes, so a tree's digest names the whole state of a directory. Throws `TREE_INVALID` on a bad
 * or duplicate name, mode, size or digest.
 */
export function encodeTree(entries: readonly TreeEntry[]): Buffer {
  return Buffer.from(treeJson(checkedEntries(entries, false)));
}

/**
 * A listing's entries checked (each a new object) and in canonical order, as decoded. With
 * `trustFrozen`, an entry already frozen is taken as it is: within Rewind, only the entries of
 * trees read or stored are frozen (see {@link remember}), each checked before; a snapshot builds
 * each changed directory's listing mostly from its previous tree's entries (at L, some 50,000 of
 * them for a checkpoint of 1,000 files). A listing from outside ({@link encodeTree}) is checked
 * whole. (A WeakSet of the checked entries, in place of this, cost more to fill than the checks
 * it saved: ~30 ms of a rollback of 1,000 files at L, in a CPU profile.)
 */
function checkedEntries(entries: readonly TreeEntry[], trustFrozen: boolean): TreeEntry[] {
  const checked = entries
    .map((entry) => (trustFrozen && Object.isFrozen(entry) ? entry : checkEntry(entry)))
    .sort((a, b) => compareNames(a.name, b.name));
  for (let index = 1; index < checked.length; index++) {
    const name = checked[index]?.name;
    if (name === checked[index - 1]?.name) {
      throw invalid(`The tree lists "${name}" twice.`, { name });
    }
  }
  return checked;
}

/**
 * Stores a directory listing as a tree object in `batch` (of `store`) and returns its digest. The
 * tree is kept decoded, as {@link readTree} keeps what it read: the snapshot that stores a tree
 * is diffed against the previous one straight after. Were the batch never committed, nothing
 * would refer to the tree, and a batch that stores it again writes it (a put looks at the store,
 * not at this). Entries already frozen are taken as checked: give only those of trees read or
 * stored, and new objects.
 */
export async function putTreeIn(
  store: ObjectStore,
  batch: ObjectBatch,
  entries: readonly TreeEntry[],
): Promise<Digest> {
  const checked = checkedEntries(entries, true);
  const { digest } = await batch.put(Buffer.from(treeJson(checked)));
  remember(store, digest, { entries: checked });
  return digest;
}

/**
 * The canonical JSON of checked entries in order: the bytes `canonicalJson` gives for
 * `{ type: 'tree', v, entries }` (keys sorted, strings as JSON.stringify writes them; a digest
 * never needs escaping and a mode or size is a safe integer), written out directly, since a
 * snapshot or a rollback encodes and decodes thousands of trees. A test holds the two equal.
 */
function treeJson(entries: readonly TreeEntry[]): string {
  const parts: string[] = [];
  for (const entry of entries) {
    const name = JSON.stringify(entry.name);
    if (entry.type === 'file') {
      parts.push(
        `{"digest":"${entry.digest}","mode":${entry.mode},"name":${name},"sizeBytes":${entry.sizeBytes},"type":"file"}`,
      );
    } else if (entry.type === 'directory') {
      parts.push(
        `{"digest":"${entry.digest}","mode":${entry.mode},"name":${name},"type":"directory"}`,
      );
    } else {
      parts.push(`{"name":${name},"target":${JSON.stringify(entry.target)},"type":"symlink"}`);
    }
  }
  return `{"entries":[${parts.join(',')}],"type":"tree","v":${TREE_FORMAT_VERSION}}`;
}

/**
 * Decodes a tree object, accepting only the exact canonical encoding (so a tree has one digest).
 * Throws `TREE_INVALID` otherwise.
 */
export function decodeTree(bytes: Uint8Array, digest?: Digest): Tree {
  let value: unknown;
  try {
    value = JSON.parse(Buffer.from(bytes).toString('utf8'));
  } catch {
    throw invalid(`Object ${digest ?? ''} is not a tree: it is not JSON.`, { digest });
  }
  const raw = (typeof value === 'object' && value !== null ? value : {}) as Record<string, unknown>;
  if (raw.type !== 'tree' || !Array.isArray(raw.entries)) {
    throw invalid(`Object ${digest ?? ''} is not a tree.`, { digest });
  }
  if (typeof raw.v !== 'number' || raw.v > TREE_FORMAT_VERSION) {
    throw invalid(
      `Tree ${digest ?? ''} has version ${String(raw.v)}, which this Rewind cannot read.`,
      {
        digest,
      },
    );
  }
  const entries = raw.entries.map((entry) => checkEntry(entry));
  // Canonical: in encodeTree's order (names that encode alike, lone surrogates, keep theirs) with
  // no name twice, and exactly the bytes the entries encode to.
  for (let index = 1; index < entries.length; index++) {
    const before = (entries[index - 1] as TreeEntry).name;
    const name = (entries[index] as TreeEntry).name;
    if (before === name || compareNames(before, name) > 0)
      throw invalid(`Tree ${digest ?? ''} is not in canonical form.`, { digest });
  }
  if (!Buffer.from(treeJson(entries)).equals(bytes)) {
    throw invalid(`Tree ${digest ?? ''} is not in canonical form.`, { digest });
  }
  return { entries };
}

/** Stores a directory listing as a tree object and returns its digest. */
export async function putTree(store: ObjectStore, entries: readonly TreeEntry[]): Promise<Digest> {
  return (await store.put(encodeTree(entries))).digest;
}

/**
 * Decoded trees, per store: a tree is immutable (its digest is its content), so one read and
 * checked once is that tree for as long as the process lives. Diffs and incremental snapshots
 * read the same trees again and again. Kept in the order they came, each marked when used again
 * (no more than that: moving a tree to the end of the Map at every use took ~8 ms of a rollback
 * of 1,000 files at L, in a CPU profile). Past the limit the oldest go, but a tree used since it
 * came or was last passed over goes to the end instead, once (a second chance, which keeps what
 * is in use).
 */
interface TreeCache {
  trees: Map<Digest, { tree: Tree; used: boolean }>;
  entryCount: number;
}
const decodedTrees = new WeakMap<ObjectStore, TreeCache>();

/**
 * How many entries the decoded trees of one store may hold in all (about 40 MB): the whole tree
 * of a workspace of 100,000 files and 8,000 directories (a first snapshot keeps what it stores),
 * and what later snapshots add. Past it, trees go until a 64th of it is free.
 */
const MAX_CACHED_ENTRIES = 200_000;

/**
 * Reads and decodes a tree object. The tree returned is frozen (it may be shared with other
 * callers). Throws `OBJECT_NOT_FOUND`, `OBJECT_CORRUPT`, `TREE_INVALID`.
 */
export async function readTree(store: ObjectStore, digest: Digest): Promise<Tree> {
  const cached = decodedTrees.get(store)?.trees.get(digest);
  if (cached) {
    cached.used = true;
    return cached.tree;
  }
  return remember(store, digest, decodeTree(await store.get(digest), digest));
}

/**
 * Keeps a decoded tree, frozen, among a store's, and returns the one kept (the one there already,
 * when another read or put got there first).
 */
function remember(store: ObjectStore, digest: Digest, tree: Tree): Tree {
  let cache = decodedTrees.get(store);
  if (!cache) {
    cache = { trees: new Map(), entryCount: 0 };
    decodedTrees.set(store, cache);
  }
  const kept = cache.trees.get(digest);
  if (kept) {
    kept.used = true;
    return kept.tree;
  }
  for (const entry of tree.entries) Object.freeze(entry);
  Object.freeze(tree.entries);
  Object.freeze(tree);
  cache.trees.set(digest, { tree, used: false });
  cache.entryCount += tree.entries.length + 1;
  if (cache.entryCount > MAX_CACHED_ENTRIES) evictTrees(cache);
  return tree;
}

/** Lets the oldest decoded trees of one store go, until a 64th of the limit is free. */
function evictTrees(cache: TreeCache): void {
  // A Map's iteration visits what is added while it runs: a tree sent to the end comes round
  // again, unmarked, once every other tree was passed, and goes then.
  for (const [digest, kept] of cache.trees) {
    if (cache.entryCount <= MAX_CACHED_ENTRIES - MAX_CACHED_ENTRIES / 64) return;
    cache.trees.delete(digest);
    if (kept.used) {
      kept.used = false;
      cache.trees.set(digest, kept);
    } else {
      cache.entryCount -= kept.tree.entries.length + 1;
    }
  }
}

/** What a ledger entry says it refers to: a blob, or a tree and everything under it. */
export interface ObjectReference {
  type: 'blob' | 'tree';
  digest: Digest;
}

/**
 * Visits every object reachable from `roots` once: each root, and for trees every sub-tree and
 * file under them. `visit` sees each object before its children; for a tree that cannot be read,
 * `onUnreadableTree` receives the error and its children are skipped. With `concurrency` above 1,
 * that many objects are visited (and trees read) at once, for a store far away (a bucket).
 */
export async function walkReferences(
  store: ObjectStore,
  roots: Iterable<ObjectReference>,
  visit: (reference: ObjectReference) => Promise<void> | void,
  onUnreadableTree: (reference: ObjectReference, error: unknown) => void,
  concurrency = 1,
): Promise<void> {
  const seen = new Set<Digest>();
  const pending: ObjectReference[] = [...roots];
  const one = async (reference: ObjectReference): Promise<void> => {
    await visit(reference);
    if (reference.type !== 'tree') return;
    let tree: Tree;
    try {
      tree = await readTree(store, reference.digest);
    } catch (error) {
      onUnreadableTree(reference, error);
      return;
    }
    for (const entry of tree.entries) {
      if (entry.type === 'file') pending.push({ type: 'blob', digest: entry.digest });
      if (entry.type === 'directory') pending.push({ type: 'tree', digest: entry.digest });
    }
  };
  while (pending.length > 0) {
    const round: ObjectReference[] = [];
    while (round.length < concurrency && pending.length > 0) {
      const reference = pending.pop() as ObjectReference;
      if (seen.has(reference.digest)) continue;
      seen.add(reference.digest);
      round.push(reference);
    }
    await forEachConcurrently(round, concurrency, one);
  }
}

/** Trees read at once by {@link reachableObjects}. */
const TREES_IN_FLIGHT = 16;

/**
 * Every object reachable from `roots` that `isKnown` does not name, each once; a known tree is
 * not read (what is under it is taken as known too). Trees are read a level at a time, up to 16
 * at once, and `beforeReading` gets each level's trees first (a bucket store downloads them
 * together). Throws what reading a tree throws.
 */
export async function reachableObjects(
  store: ObjectStore,
  roots: Iterable<ObjectReference>,
  options: {
    isKnown?: (digest: Digest) => boolean;
    beforeReading?: (trees: Digest[]) => Promise<unknown>;
  } = {},
): Promise<{ trees: Digest[]; blobs: Digest[] }> {
  const found = { trees: [] as Digest[], blobs: [] as Digest[] };
  const seen = new Set<Digest>();
  let level: Digest[] = [];
  const add = (type: ObjectReference['type'], digest: Digest) => {
    if (seen.has(digest) || options.isKnown?.(digest)) return;
    seen.add(digest);
    if (type === 'blob') {
      found.blobs.push(digest);
    } else {
      found.trees.push(digest);
      level.push(digest);
    }
  };
  for (const root of roots) add(root.type, root.digest);
  while (level.length > 0) {
    const current = level;
    level = [];
    await options.beforeReading?.(current);
    await forEachConcurrently(current, TREES_IN_FLIGHT, async (digest) => {
      for (const entry of (await readTree(store, digest)).entries) {
        if (entry.type === 'file') add('blob', entry.digest);
        if (entry.type === 'directory') add('tree', entry.digest);
      }
    });
  }
  return found;
}

/** The entry at `path` in a stored tree, reading (and caching in `trees`) each tree once. */
export async function findEntryAt(
  store: ObjectStore,
  tree: Digest,
  path: string,
  trees: Map<Digest, Promise<readonly TreeEntry[]>>,
): Promise<TreeEntry | undefined> {
  let current: Digest = tree;
  const parts = path.split('/');
  for (let index = 0; index < parts.length; index++) {
    let entries = trees.get(current);
    if (!entries) {
      entries = readTree(store, current).then((decoded) => decoded.entries);
      trees.set(current, entries);
    }
    const entry = (await entries).find((candidate) => candidate.name === parts[index]);
    if (!entry || index === parts.length - 1) return entry;
    if (entry.type !== 'directory') return undefined;
    current = entry.digest;
  }
  return undefined;
}
