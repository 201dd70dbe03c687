import { type Dirent, readdirSync, readFileSync, statfsSync, statSync } from 'node:fs';
import { lstat, mkdir, rm } from 'node:fs/promises';
import { availableParallelism } from 'node:os';
import { join } from 'node:path';
import { isSystemError } from '../errors.js';
import {
  type Digest,
  decodeName,
  digestBytes,
  isDigest,
  readPlainFileSync,
  runProgram,
  writeFileAtomic,
} from '../lib/index.js';
import { isAlwaysExcluded } from './ignore-rules.js';

const RECORD_FILE = join('cache', 'changes-v3.json');
/** Where earlier versions kept it (its digest over canonical JSON): removed with the current one. */
const OLD_RECORD_FILE = join('cache', 'changes-v2.json');

/** A wall clock step back larger than this between two snapshots disables the shortcut once. */
const STEP_TOLERANCE_NS = 1_000_000_000n;

/**
 * Filesystems that update a file's ctime on every change to it, including a rename (POSIX leaves
 * the rename case open), and whose ctime comes from this machine's clock. On others the
 * snapshot looks at every file.
 */
const TRUSTED_FILESYSTEMS = new Map<number, string>([
  [0xef53, 'ext4'], // ext2, ext3 and ext4 share the magic; find names them by the mount
  [0x58465342, 'xfs'],
  [0x9123683e, 'btrfs'],
  [0x01021994, 'tmpfs'],
]);
const TRUSTED_FIND_TYPES = ['ext2', 'ext3', 'ext4', 'xfs', 'btrfs', 'tmpfs'];

/** The counts a snapshot reports, kept with the record so a shortcut can report them too. */
export interface TreeTotals {
  fileCount: number;
  directoryCount: number;
  sizeBytes: number;
}

/** When a snapshot started, in terms that tell whether the clock was stepped since. */
export interface SnapshotClock {
  bootId: string;
  /** Wall clock time, ns since the epoch. */
  wallNs: bigint;
  /** Wall clock minus the monotonic clock: constant unless the wall clock is stepped. */
  offsetNs: bigint;
}

/**
 * What the last snapshot of a workspace was, so the next one can look only at what changed
 * since (`.rewind/cache/changes-v3.json`). Like the stat cache it is only a cache: missing or
 * doubtful, the next snapshot looks at every file.
 */
export interface ChangeRecord {
  root: string;
  clock: SnapshotClock;
  tree: Digest;
  totals: TreeTotals;
  /** Directories (relative; '' for the root) that hold an ignore file. */
  ignoreDirectories: string[];
  /** The digest of the rules from outside the workspace it was taken with; undefined for none. */
  outsideRules: Digest | undefined;
  /**
   * The identity (inode and birth time) of every directory of the snapshot, by path ('' for the
   * root): a directory moved in, or swapped with another, is read again whole, since the children
   * a rename carries along keep their old timestamps.
   */
  directories: ReadonlyMap<string, string>;
  /**
   * The record's file as this process wrote it (see {@link markSaved}), for a record kept in
   * memory: {@link isStillSaved} tells whether the file is still that one.
   */
  savedAs?: string;
}

/** Reads the clocks at the start of a snapshot; undefined where the shortcut is not supported. */
export function readSnapshotClock(): SnapshotClock | undefined {
  if (process.platform !== 'linux') return undefined;
  let bootId: string;
  try {
    bootId = readFileSync('/proc/sys/kernel/random/boot_id', 'utf8').trim();
  } catch {
    return undefined;
  }
  const monotonicNs = process.hrtime.bigint();
  const wallNs = BigInt(Date.now()) * 1_000_000n;
  return { bootId, wallNs, offsetNs: wallNs - monotonicNs };
}

/** The change record as its file holds it (clock values as decimal strings). */
interface RecordFile {
  v: number;
  root: string;
  clock: { bootId: string; wallNs: string; offsetNs: string };
  tree: string;
  totals: TreeTotals;
  ignoreDirectories: string[];
  outsideRules?: string;
  directories: Record<string, string>;
}

/**
 * The members of the change record file, when the digest on its first line (of the bytes of the
 * JSON that follows) vouches for them; undefined when it is absent, not JSON, damaged, or
 * written by an older Rewind. A damaged record is never used: a later `wallNs` or another `tree`
 * would make the next snapshot miss changes. Throws what reading the file throws, but ENOENT.
 */
function readRecord(storeDirectory: string): RecordFile | undefined {
  let bytes: Buffer;
  try {
    // Never through a link or a pipe: what is not a plain file there is no record.
    const read = readPlainFileSync(join(storeDirectory, RECORD_FILE));
    if (!read.isFile) return undefined;
    bytes = read.value;
  } catch (error) {
    // ENOTDIR: `cache` is not a directory, so there is no record in it.
    if (isSystemError(error, 'ENOENT') || isSystemError(error, 'ENOTDIR')) return undefined;
    throw error;
  }
  const newline = bytes.indexOf(0x0a);
  const json = bytes.subarray(newline + 1);
  if (newline === -1 || bytes.subarray(0, newline).toString('latin1') !== digestBytes(json)) {
    return undefined;
  }
  try {
    const raw: unknown = JSON.parse(json.toString('utf8'));
    if (typeof raw !== 'object' || raw === null || Array.isArray(raw)) return undefined;
    return raw as RecordFile;
  } catch {
    return undefined;
  }
}

/** Loads the change record of a store; undefined when absent, unreadable or for another root. */
export function loadChangeRecord(storeDirectory: string, root: string): ChangeRecord | undefined {
  try {
    const raw = readRecord(storeDirectory);
    if (raw?.v !== 3 || raw.root !== root || !isDigest(raw.tree)) return undefined;
    return {
      root,
      clock: {
        bootId: String(raw.clock.bootId),
        wallNs: BigInt(raw.clock.wallNs),
        offsetNs: BigInt(raw.clock.offsetNs),
      },
      tree: raw.tree,
      totals: {
        fileCount: Number(raw.totals.fileCount),
        directoryCount: Number(raw.totals.directoryCount),
        sizeBytes: Number(raw.totals.sizeBytes),
      },
      ignoreDirectories: raw.ignoreDirectories.map(String),
      outsideRules: isDigest(raw.outsideRules) ? raw.outsideRules : undefined,
      directories: new Map(
        Object.entries(raw.directories).map(([path, identity]) => [path, String(identity)]),
      ),
    };
  } catch {
    return undefined;
  }
}

/**
 * Makes the store's `cache` directory. Something else at its name (a file, a link) is damage in
 * a directory Rewind owns and may delete at any time: it is removed (a link itself, never what
 * it points to) rather than fail every snapshot.
 */
export async function makeCacheDirectory(storeDirectory: string): Promise<void> {
  const directory = join(storeDirectory, 'cache');
  const stats = await lstat(directory).catch(() => undefined);
  if (stats !== undefined && !stats.isDirectory()) await rm(directory, { force: true });
  await mkdir(directory, { recursive: true });
}

/**
 * The JSON of the directory identities of records saved, by map: a snapshot that changed no
 * directory hands the previous record's map on, and its JSON (half a megabyte, 3 ms, at 100,000
 * files) is not made again. The maps are never changed once in a record.
 */
const directoriesJson = new WeakMap<ReadonlyMap<string, string>, string>();

/** Writes the change record of a store (not durably: it is a cache). */
export async function saveChangeRecord(
  storeDirectory: string,
  record: ChangeRecord,
): Promise<void> {
  await makeCacheDirectory(storeDirectory);
  const members = {
    v: 3,
    root: record.root,
    clock: {
      bootId: record.clock.bootId,
      wallNs: String(record.clock.wallNs),
      offsetNs: String(record.clock.offsetNs),
    },
    tree: record.tree,
    totals: record.totals,
    ignoreDirectories: record.ignoreDirectories,
    ...(record.outsideRules !== undefined && { outsideRules: record.outsideRules }),
  };
  let directories = directoriesJson.get(record.directories);
  if (directories === undefined) {
    directories = JSON.stringify(Object.fromEntries(record.directories));
    directoriesJson.set(record.directories, directories);
  }
  // The digest of the JSON as written, not of a canonical form: the record is read back only
  // by this code, and a canonical encoding of a large workspace's record costs milliseconds.
  const json = `${JSON.stringify(members).slice(0, -1)},"directories":${directories}}`;
  const text = `${digestBytes(json)}\n${json}`;
  await writeFileAtomic(join(storeDirectory, RECORD_FILE), text, { isDurable: false });
  // Once per store and process, not at every snapshot.
  if (!oldRecordGone.has(storeDirectory)) {
    await rm(join(storeDirectory, OLD_RECORD_FILE), { force: true });
    oldRecordGone.add(storeDirectory);
  }
}

/** The record file's inode, size and times; undefined where there is none. */
function recordFileIdentity(storeDirectory: string): string | undefined {
  const stats = statSync(join(storeDirectory, RECORD_FILE), {
    bigint: true,
    throwIfNoEntry: false,
  });
  return stats && `${stats.ino}:${stats.size}:${stats.mtimeNs}:${stats.ctimeNs}`;
}

/**
 * Marks `record`, just saved by {@link saveChangeRecord}, with what its file is now, for a record
 * kept in memory (a watcher's base): see {@link isStillSaved}.
 */
export function markSaved(storeDirectory: string, record: ChangeRecord): void {
  record.savedAs = recordFileIdentity(storeDirectory);
}

/**
 * Whether the store's record file is still the one `record` was saved as. A record kept in
 * memory (a watcher's base) is only as good as the objects its tree refers to: gc forgets the
 * record on disk when nothing else keeps its tree, and may then remove what only that tree held
 * (its own nodes, if recent, are spared and would still be found); another process's snapshot
 * writes a record of its own. Either way the file changed, and the next snapshot looks again
 * (find from the record on disk, or a walk where gc removed it).
 */
export function isStillSaved(storeDirectory: string, record: ChangeRecord): boolean {
  return record.savedAs !== undefined && recordFileIdentity(storeDirectory) === record.savedAs;
}

/** Stores whose record of an earlier version this process has removed. */
const oldRecordGone = new Set<string>();

/** Deletes the change record: the next snapshot looks at every file. */
export async function clearChangeRecord(storeDirectory: string): Promise<void> {
  await rm(join(storeDirectory, RECORD_FILE), { force: true });
  await rm(join(storeDirectory, OLD_RECORD_FILE), { force: true });
}

/** The tree the change record names, for garbage collection to keep. */
export function recordedTree(storeDirectory: string): Digest | undefined {
  const tree = readRecord(storeDirectory)?.tree;
  return isDigest(tree) ? tree : undefined;
}

/** True when `root` is on a filesystem whose ctime (and inotify events) can be trusted. */
export function isOnTrustedFilesystem(root: string): boolean {
  try {
    return TRUSTED_FILESYSTEMS.has(Number(statfsSync(root).type));
  } catch {
    return false;
  }
}

let isFindUsable = true;

/**
 * Trees of more entries than this are walked by several finds side by side, one per group of
 * top directories (a find is one thread, and `lstat` of every entry is what costs): measured on
 * 2 CPUs, 100,000 files take 280 ms for one find and 153 ms for two; 10,000 take 30 ms either way.
 */
const ENTRIES_FOR_SIDE_BY_SIDE = 20_000;

/** At most this many finds at once (and never more than the CPUs). */
const FINDS_AT_MOST = 4;

/**
 * The paths (relative to `root`, '' for the root itself) whose inode changed after `since` less
 * `windowNs` (the kernel stamps ctime from a clock that ticks every few milliseconds, some
 * filesystems in whole seconds, so a change just before `since` may bear an earlier time), by
 * GNU find, which looks at every entry at the speed of the stat walk. A created, modified,
 * renamed or re-moded entry has a later ctime, and so has the directory an entry was created in,
 * deleted from or renamed into or out of. Entries on a filesystem not known to keep ctime that
 * way are all listed. A tree of more than {@link ENTRIES_FOR_SIDE_BY_SIDE} entries (`entryCount`,
 * the previous snapshot's) is walked by several finds at once: one for the root and what is in
 * it, one per group of top directories below them.
 *
 * Returns undefined when the answer cannot be trusted: not Linux, the root on an untrusted
 * filesystem, the wall clock stepped back since `since` was read, or find missing, failing or
 * unable to read a directory (a top directory gone before its find reached it among them). The
 * caller then looks at every file itself.
 */
export async function listChangedSince(
  root: string,
  since: SnapshotClock,
  now: SnapshotClock,
  windowNs: bigint,
  entryCount = 0,
): Promise<string[] | undefined> {
  if (!isFindUsable || now.bootId !== since.bootId) return undefined;
  if (now.wallNs < since.wallNs || now.offsetNs < since.offsetNs - STEP_TOLERANCE_NS) {
    return undefined;
  }
  if (!isOnTrustedFilesystem(root)) return undefined;
  const threshold = since.wallNs - windowNs;
  const at = `@${threshold / 1_000_000_000n}.${String(threshold % 1_000_000_000n).padStart(9, '0')}`;
  const trusted = TRUSTED_FIND_TYPES.flatMap((type, index) =>
    index === 0 ? ['-fstype', type] : ['-o', '-fstype', type],
  );
  // biome-ignore format: the find expression reads best on one line
  const test = ['(', '-name', '.git', '-o', '-name', '.rewind', ')', '-prune', '-o', '(', '-newerct', at, '-o', '!', '(', ...trusted, ')', ')'];
  const finds = Math.min(FINDS_AT_MOST, availableParallelism());
  const tops = entryCount > ENTRIES_FOR_SIDE_BY_SIDE && finds > 1 ? topDirectories(root) : [];
  if (tops.length < 2) return runFind([root, ...test, '-printf', '%P\\0']);
  const groups = Array.from({ length: Math.min(finds, tops.length) }, (_, group) =>
    tops.filter((_, index) => index % finds === group).map((name) => join(root, name)),
  );
  // What find prints before each path under a top directory: the root, as join writes it.
  const prefix = Buffer.from(join(root, '/'));
  const found = await Promise.all([
    runFind([root, '-maxdepth', '1', ...test, '-printf', '%P\\0']),
    ...groups.map((group) =>
      runFind([...group, '-mindepth', '1', ...test, '-printf', '%p\\0'], prefix),
    ),
  ]);
  return found.some((paths) => paths === undefined) ? undefined : (found.flat() as string[]);
}

/**
 * The directories directly in `root` (not `.git` or `.rewind`), for side-by-side finds; none when
 * a name is not valid UTF-8 (it could not be passed to find as it is) or the root cannot be read.
 */
function topDirectories(root: string): string[] {
  let entries: Dirent<Buffer>[];
  try {
    entries = readdirSync(root, { withFileTypes: true, encoding: 'buffer' });
  } catch {
    return [];
  }
  const names: string[] = [];
  for (const entry of entries) {
    if (!entry.isDirectory()) continue;
    const name = entry.name.toString('utf8');
    if (!Buffer.from(name).equals(entry.name)) return [];
    if (!isAlwaysExcluded(name)) names.push(name);
  }
  return names;
}

/**
 * Runs GNU find with `args`, its `-printf` ending each record with a NUL, and returns the records;
 * undefined when find is missing or fails.
 */
export async function findRecords(args: string[]): Promise<Buffer[] | undefined> {
  const { isStarted, status, stdout } = await runProgram('find', args);
  if (!isStarted) isFindUsable = false;
  if (!isStarted || status !== 0) return undefined;
  const records: Buffer[] = [];
  for (let start = 0; start < stdout.length; ) {
    const end = stdout.indexOf(0, start);
    records.push(stdout.subarray(start, end === -1 ? stdout.length : end));
    start = end === -1 ? stdout.length : end + 1;
  }
  return records;
}

/**
 * Runs find with `args`, its `-printf` ending each path with a NUL, and returns the paths, each
 * less `prefix` (the bytes of a start point's parent, for `%p`); undefined when find is missing
 * or fails.
 */
async function runFind(args: string[], prefix?: Buffer): Promise<string[] | undefined> {
  // Names are bytes: each is decoded as the walk decodes it (see decodeName).
  const records = await findRecords(args);
  return records?.map((path) => decodeName(prefix ? path.subarray(prefix.length) : path));
}
