import { existsSync } from 'node:fs';
import { rm } from 'node:fs/promises';
import { join } from 'node:path';
import { isSystemError } from '../errors.js';
import {
  DIGEST_LENGTH,
  type Digest,
  digestBytes,
  isDigest,
  readPlainFileSync,
  writeFileAtomic,
} from '../lib/index.js';
import type { ObjectReference } from '../store/index.js';
import { clearChangeRecord, makeCacheDirectory, recordedTree } from './changes.js';

const CACHE_FILE = join('cache', 'snapshot-v1');
const HEADER = 'rewind-snapshot-cache 1';
const RECORD_SEPARATOR = '\0\n';
/** The last record: `end`, NUL, and the digest of every byte before it. */
const END = 'end\0';
const END_BYTES = END.length + DIGEST_LENGTH;

/** The cache file's text: the header, the records, and the digest that vouches for them. */
function encodeCache(header: string, records: Iterable<string>): string {
  const body = `${[header, ...records].join(RECORD_SEPARATOR)}${RECORD_SEPARATOR}`;
  return `${body}${END}${digestBytes(body)}`;
}

/**
 * The header and records of a cache file, or undefined when its digest does not vouch for them:
 * damaged (a flipped bit, a block of zeros left by a crash, since the cache is not written
 * durably) or written by an older Rewind. A record is never read from such a file: a damaged
 * payload would put a wrong digest in a snapshot.
 */
function decodeCache(bytes: Buffer): string[] | undefined {
  const bodyBytes = bytes.length - END_BYTES;
  if (bodyBytes < RECORD_SEPARATOR.length) return undefined;
  if (bytes.toString('latin1', bodyBytes, bodyBytes + END.length) !== END) return undefined;
  const digest = bytes.toString('latin1', bodyBytes + END.length);
  if (digest !== digestBytes(bytes.subarray(0, bodyBytes))) return undefined;
  return bytes.toString('utf8', 0, bodyBytes - RECORD_SEPARATOR.length).split(RECORD_SEPARATOR);
}

/**
 * A file whose timestamps fall this close to when the cache was recorded may have changed again
 * within the filesystem's timestamp granularity, so its entry is not trusted (git's "racily
 * clean" problem). Filesystems with whole-second timestamps (FAT, HFS+) get two seconds; those
 * with finer ones (ext4, btrfs, xfs, apfs: the kernel's coarse clock ticks every few
 * milliseconds) get 100 ms. A timestamp with nanoseconds tells which kind the file lives on.
 */
const COARSE_WINDOW_NS = 2_000_000_000n;
const FINE_WINDOW_NS = 100_000_000n;

/** What a snapshot remembers about one path: its stat fingerprint and what it held. */
export interface CachedEntry {
  fingerprint: string;
  /** The content digest of a file, the target of a symbolic link, the tree digest of a directory. */
  payload: string;
}

/** True when a store holds a stat cache: a snapshot was taken with it, so the next one reuses it. */
export function hasStatCache(storeDirectory: string): boolean {
  return existsSync(join(storeDirectory, CACHE_FILE));
}

/**
 * The stat cache of the last snapshot (`.rewind/cache/snapshot-v1`): for each path, the
 * fingerprint (size, mtime and ctime in ns, inode, mode) it had and its digest, so unchanged files
 * are not read again. It is a cache: losing it costs one full re-read, never a wrong snapshot,
 * and entries recorded too close to their file's last change are never trusted.
 */
export class StatCache {
  readonly #entries: Map<string, string>;
  readonly #recordedAtNs: bigint;
  readonly #keys: string[] = [];
  readonly #changes = new Map<string, string>();
  #hasRacyEntries = false;

  private constructor(entries: Map<string, string>, recordedAtNs: bigint) {
    this.#entries = entries;
    this.#recordedAtNs = recordedAtNs;
  }

  /** A cache that knows nothing: every file is read. */
  static empty(): StatCache {
    return new StatCache(new Map(), 0n);
  }

  /**
   * Loads the cache of a store; an absent cache, or one whose digest does not vouch for it
   * (damaged, or written by an older Rewind), is an empty one.
   */
  static async load(storeDirectory: string): Promise<StatCache> {
    let bytes: Buffer;
    try {
      // One native read and decode: the asynchronous read decodes chunk by chunk, much slower here.
      // Never through a link or a pipe: what is not a plain file there is no cache.
      const read = readPlainFileSync(join(storeDirectory, CACHE_FILE));
      if (!read.isFile) return new StatCache(new Map(), 0n);
      bytes = read.value;
    } catch (error) {
      // ENOTDIR: `cache` is not a directory, so there is no cache in it.
      if (isSystemError(error, 'ENOENT') || isSystemError(error, 'ENOTDIR'))
        return new StatCache(new Map(), 0n);
      throw error;
    }
    const records = decodeCache(bytes);
    const [header, recordedAt] = (records?.[0] ?? '').split('\0');
    if (!records || header !== HEADER || !/^\d+$/.test(recordedAt ?? '')) {
      return new StatCache(new Map(), 0n);
    }
    const entries = new Map<string, string>();
    for (let index = 1; index < records.length; index++) {
      const record = records[index] as string;
      const separator = record.indexOf('\0');
      entries.set(record.slice(0, separator), record.slice(separator + 1));
    }
    return new StatCache(entries, BigInt(recordedAt as string));
  }

  /**
   * Every object the cache names: file contents and directory trees of the last snapshot. A
   * snapshot reuses them without reading them, so they must outlive garbage collection even when
   * no ledger entry refers to them (a snapshot taken only to diff the working tree).
   */
  references(): ObjectReference[] {
    const references: ObjectReference[] = [];
    for (const [key, value] of this.#entries) {
      const payload = value.slice(value.indexOf('\0') + 1);
      if (!isDigest(payload)) continue;
      references.push({ type: key.endsWith('/') ? 'tree' : 'blob', digest: payload });
    }
    return references;
  }

  /** True when the cache holds nothing: the next snapshot reads every file. */
  get isEmpty(): boolean {
    return this.#entries.size === 0;
  }

  /**
   * What was cached for `key` if its fingerprint is still `fingerprint` and the entry can be
   * trusted (its file's timestamps are older than the racy window); undefined otherwise.
   */
  lookup(key: string, fingerprint: string, changedAtNs: bigint): string | undefined {
    const value = this.#entries.get(key);
    if (
      value === undefined ||
      !value.startsWith(fingerprint) ||
      value.charCodeAt(fingerprint.length) !== 0
    ) {
      return undefined;
    }
    const window = changedAtNs % 1_000_000_000n === 0n ? COARSE_WINDOW_NS : FINE_WINDOW_NS;
    if (changedAtNs >= this.#recordedAtNs - window) {
      // Saved again with a later time, so the entry is trusted next time.
      this.#hasRacyEntries = true;
      return undefined;
    }
    return value.slice(fingerprint.length + 1);
  }

  /** Records what `key` holds now, for the next snapshot. */
  record(key: string, fingerprint: string, payload: string): void {
    this.#keys.push(key);
    // Compared in place: building the record string for 100,000 unchanged files costs more.
    const value = this.#entries.get(key);
    const isSame =
      value !== undefined &&
      value.length === fingerprint.length + 1 + payload.length &&
      value.startsWith(fingerprint) &&
      value.endsWith(payload);
    if (!isSame) this.#changes.set(key, `${fingerprint}\0${payload}`);
  }

  /** Drops the entries whose object `isKept` refuses, and writes the cache if any went. */
  async forget(storeDirectory: string, isKept: (digest: Digest) => boolean): Promise<number> {
    let forgotten = 0;
    for (const [key, value] of this.#entries) {
      const payload = value.slice(value.indexOf('\0') + 1);
      if (isDigest(payload) && !isKept(payload)) {
        this.#entries.delete(key);
        forgotten += 1;
      }
    }
    if (forgotten === 0) return 0;
    const records: string[] = [];
    for (const [key, value] of this.#entries) records.push(`${key}\0${value}`);
    const text = encodeCache(`${HEADER}\0${this.#recordedAtNs}`, records);
    await writeFileAtomic(join(storeDirectory, CACHE_FILE), text, { isDurable: false });
    return forgotten;
  }

  /** Writes the recorded entries (only those seen in this snapshot) if anything changed. */
  async save(storeDirectory: string, recordedAtNs: bigint): Promise<void> {
    const isSame = this.#changes.size === 0 && this.#keys.length === this.#entries.size;
    if (isSame && !this.#hasRacyEntries) return;
    const records: string[] = [];
    for (const key of this.#keys)
      records.push(`${key}\0${this.#changes.get(key) ?? this.#entries.get(key)}`);
    const text = encodeCache(`${HEADER}\0${recordedAtNs}`, records);
    await makeCacheDirectory(storeDirectory);
    await writeFileAtomic(join(storeDirectory, CACHE_FILE), text, { isDurable: false });
  }
}

/**
 * Makes the caches of a store forget every object `isKept` refuses: their entries go (the next
 * snapshot reads those paths again), and the record of the last snapshot goes if its tree does
 * (the next snapshot looks at every entry). Returns how many entries were forgotten.
 */
export async function forgetUnkept(
  storeDirectory: string,
  isKept: (digest: Digest) => boolean,
): Promise<number> {
  const forgotten = await (await StatCache.load(storeDirectory)).forget(storeDirectory, isKept);
  const tree = recordedTree(storeDirectory);
  if (tree !== undefined && !isKept(tree)) await clearChangeRecord(storeDirectory);
  return forgotten;
}

/**
 * The objects the caches of a store refer to: see {@link StatCache.references}, and the tree of
 * the last snapshot, which the next one updates without reading it again.
 */
export async function cachedReferences(storeDirectory: string): Promise<ObjectReference[]> {
  const references = (await StatCache.load(storeDirectory)).references();
  const tree = recordedTree(storeDirectory);
  if (tree !== undefined) references.push({ type: 'tree', digest: tree });
  return references;
}

/** Deletes the caches of a store: the next snapshot reads every file again. */
export async function clearStatCache(storeDirectory: string): Promise<void> {
  await rm(join(storeDirectory, CACHE_FILE), { force: true });
  await clearChangeRecord(storeDirectory);
}
