import {
  closeSync,
  constants,
  fstatSync,
  fsyncSync,
  lstatSync,
  openSync,
  readdirSync,
  unlinkSync,
} from 'node:fs';
import { join } from 'node:path';
import { isRewindError, isSystemError, type RewindError } from '../errors.js';
import {
  DIGEST_PREFIX,
  type Digest,
  digestBytes,
  isDigest,
  nodeZlib,
  readAt,
} from '../lib/index.js';
import { damaged as damagedObject } from './object-files.js';
import {
  digestKey,
  type LoadedIndex,
  parseIndex,
  RECORD_BYTES,
  recordOf,
  sizeAt,
} from './pack-index.js';
import { type PackInput, TEMPORARY_PREFIX, writePackFiles } from './pack-write.js';

export type { PackInput } from './pack-write.js';

/**
 * Packs: many small objects in one file, as git packs its objects. A batch that stores many
 * objects (a first snapshot, a checkpoint of a thousand changed files) writes them into one pack
 * file and one index, instead of a file, a rename and an inode each. SPEC.md §3a gives the format:
 *
 * - `objects/pack/pack-<H>.pack`: `RWPACK\0\x01`, then the objects' bytes, one after another.
 * - `objects/pack/pack-<H>.idx`: `RWINDEX\x01`, a 32-bit big-endian count, then one 56-byte
 *   record per object sorted by digest (the 32 digest bytes; the offset in the pack, the bytes
 *   stored there and the object's size, 64-bit big-endian each: fewer bytes stored than the size
 *   means raw DEFLATE), then the SHA-256 of everything before it, whose hex is H.
 *
 * An object is in a pack when a sound index lists it and its pack file exists; reading checks the
 * digest as for any object. A damaged index (torn, changed) lists nothing.
 */
const PACK_DIRECTORY = 'pack';

const INDEX_NAME = /^pack-[0-9a-f]{64}\.idx$/;

/**
 * Small packs: a batch of fewer new objects than this (a checkpoint of a few or a few dozen files,
 * a journaled action) takes the packs of at most this many objects into its own (see `foldable`);
 * a larger one writes its pack alone (folding into it would copy more than it saves), and larger
 * packs are left to the merge past 50 packs and to gc's. (With 16 for the batches, those of 16 to
 * 63 objects, a checkpoint of 10 files, left a pack each, and a merge of 25 of them every 25.)
 */
const SMALL_PACK_OBJECTS = 64;

/** What reading a packed object found: see {@link PackSet.readObject}. */
export type PackedRead = { bytes: Buffer } | { damaged: RewindError } | undefined;

/** Where a packed object is. */
export interface PackLocation {
  digest: Digest;
  pack: string;
  index: string;
  offset: number;
  /** The bytes the pack holds for it: fewer than `sizeBytes` when compressed. */
  storedBytes: number;
  sizeBytes: number;
}

// Never following a link, nor waiting on a named pipe, at a store file's name (SPEC §1).
const READ_FLAGS = constants.O_RDONLY | constants.O_NOFOLLOW | constants.O_NONBLOCK;

/** The packs of one object store, their indexes read once and searched in memory. */
export class PackSet {
  readonly directory: string;
  #loaded: Map<string, LoadedIndex> | undefined;
  /** Index files found damaged, by name: they list nothing. */
  readonly damaged = new Set<string>();

  /** The packs this process wrote: a fold copies their objects as stored, unchecked. */
  readonly #written = new Set<string>();

  constructor(objectsDirectory: string) {
    this.directory = join(objectsDirectory, PACK_DIRECTORY);
  }

  /** Reads the indexes that appeared since, and forgets the ones gone. */
  refresh(): void {
    let names: string[];
    try {
      names = readdirSync(this.directory);
    } catch (error) {
      if (!isSystemError(error, 'ENOENT') && !isSystemError(error, 'ENOTDIR')) throw error;
      names = [];
    }
    const present = new Set<string>();
    const loaded = this.#loaded ?? new Map<string, LoadedIndex>();
    for (const file of names) {
      if (!INDEX_NAME.test(file)) continue;
      const name = file.slice(0, -'.idx'.length);
      present.add(name);
      if (loaded.has(name) || this.damaged.has(file)) continue;
      const index = this.#read(name);
      if (index) loaded.set(name, index);
    }
    for (const name of loaded.keys()) if (!present.has(name)) loaded.delete(name);
    for (const file of this.damaged)
      if (!present.has(file.slice(0, -'.idx'.length))) this.damaged.delete(file);
    this.#loaded = loaded;
  }

  #read(name: string): LoadedIndex | undefined {
    const file = join(this.directory, `${name}.idx`);
    let descriptor: number;
    try {
      descriptor = openSync(file, READ_FLAGS);
    } catch (error) {
      if (isSystemError(error, 'ENOENT')) return undefined;
      if (isSystemError(error, 'ELOOP') || isSystemError(error, 'EISDIR')) {
        this.damaged.add(`${name}.idx`);
        return undefined;
      }
      throw error;
    }
    try {
      const stats = fstatSync(descriptor);
      const index = stats.isFile()
        ? parseIndex(name, readAt(descriptor, stats.size, 0), stats.mtimeMs)
        : undefined;
      if (!index) this.damaged.add(`${name}.idx`);
      return index;
    } finally {
      closeSync(descriptor);
    }
  }

  #indexes(): Map<string, LoadedIndex> {
    if (!this.#loaded) this.refresh();
    return this.#loaded as Map<string, LoadedIndex>;
  }

  /** Every pack that lists `digest`, from the indexes read so far (see {@link refresh}). */
  find(digest: Digest): PackLocation[] {
    // Not a digest: in no pack (the caller says what is wrong with it).
    if (!isDigest(digest)) return [];
    const key = digestKey(digest);
    const found: PackLocation[] = [];
    for (const index of this.#indexes().values()) {
      const at = recordOf(index, key);
      if (at !== -1) found.push(this.#location(index, digest, at));
    }
    return found;
  }

  /**
   * How many objects the packs hold and their size, each object once (a merge cut short leaves
   * one in two packs), without the string per object {@link entries} makes: `rewind status`.
   */
  usage(): { count: number; sizeBytes: number } {
    const indexes = [...this.#indexes().values()];
    const usage = { count: 0, sizeBytes: 0 };
    // Only an object whose digest's first four bytes are another's too can be in two packs.
    const prefixes = new Uint32Array(indexes.reduce((sum, index) => sum + index.count, 0));
    for (const { prefixes: own, records, count } of indexes) {
      prefixes.set(own, usage.count);
      usage.count += count;
      for (let at = 0; at < count * RECORD_BYTES; at += RECORD_BYTES) {
        usage.sizeBytes += sizeAt(records, at);
      }
    }
    prefixes.sort();
    const shared = new Set<number>();
    for (let place = 1; place < prefixes.length; place++) {
      if (prefixes[place] === prefixes[place - 1]) shared.add(prefixes[place] as number);
    }
    if (shared.size === 0) return usage;
    indexes.forEach(({ records, count, prefixes: own }, place) => {
      for (let record = 0; record < count; record++) {
        if (!shared.has(own[record] as number)) continue;
        const at = record * RECORD_BYTES;
        // Counted once, in the first pack that lists it.
        if (indexes.slice(0, place).some((earlier) => recordOf(earlier, records, at) !== -1)) {
          usage.count -= 1;
          usage.sizeBytes -= sizeAt(records, at);
        }
      }
    });
    return usage;
  }

  #location(index: LoadedIndex, digest: Digest, at: number): PackLocation {
    return {
      digest,
      pack: join(this.directory, `${index.name}.pack`),
      index: join(this.directory, `${index.name}.idx`),
      offset: Number(index.records.readBigUInt64BE(at + 32)),
      storedBytes: Number(index.records.readBigUInt64BE(at + 40)),
      sizeBytes: sizeAt(index.records, at),
    };
  }

  /**
   * A packed object's verified bytes, or the error of the first damaged copy when no pack holds
   * a sound one, or undefined when no pack lists it (of the indexes read so far, or `locations`).
   * A pack gone since its index was read (merged by garbage collection) sends the search to the
   * packs there now.
   */
  readObject(digest: Digest, locations = this.find(digest)): PackedRead {
    let damaged: RewindError | undefined;
    for (const location of locations) {
      let bytes: Buffer;
      try {
        bytes = this.read(location);
      } catch (error) {
        if (isSystemError(error, 'ENOENT')) {
          this.refresh();
          const tried = new Set(locations.map(({ pack }) => pack));
          const found = this.readObject(
            digest,
            this.find(digest).filter(({ pack }) => !tried.has(pack)),
          );
          if (found && 'bytes' in found) return found;
          damaged ??= found?.damaged;
          continue;
        }
        if (!isSystemError(error, 'ELOOP') && !isSystemError(error, 'EISDIR')) throw error;
        damaged ??= damagedObject(digest, location.pack, 'is not a plain file');
        continue;
      }
      const actual = digestBytes(bytes);
      if (bytes.length === location.sizeBytes && actual === digest) return { bytes };
      damaged ??= damagedObject(
        digest,
        location.pack,
        `holds it as bytes that hash to ${actual}`,
        actual,
      );
    }
    return damaged && { damaged };
  }

  /**
   * What to do when an object's loose file is missing (`error`): a pack written since by another
   * process may hold it (the indexes are read again), else the damaged packed copy found before
   * (`before`) is what to report, else the error.
   */
  afterLooseMissing(digest: Digest, error: unknown, before: PackedRead): Buffer {
    if (!isRewindError(error, 'OBJECT_NOT_FOUND')) throw error;
    if (before) throw 'damaged' in before ? before.damaged : error;
    this.refresh();
    const found = this.readObject(digest);
    if (found && 'bytes' in found) return found.bytes;
    throw found ? found.damaged : error;
  }

  /**
   * Every packed object: its size, its pack, and the time the pack's index was written (or last
   * marked used). Lean, for a listing of the whole store (`rewind status`, gc): a record is read
   * for nothing else.
   */
  *entries(): Iterable<{ digest: Digest; sizeBytes: number; pack: string; modifiedAtMs: number }> {
    for (const index of this.#indexes().values()) {
      const pack = join(this.directory, `${index.name}.pack`);
      const { records, modifiedAtMs } = index;
      for (let at = 0; at < index.count * RECORD_BYTES; at += RECORD_BYTES) {
        const digest: Digest = `${DIGEST_PREFIX}${records.toString('hex', at, at + 32)}`;
        yield { digest, sizeBytes: sizeAt(records, at), pack, modifiedAtMs };
      }
    }
  }

  /**
   * The bytes stored at a location, unchecked (the caller checks the digest). Throws ENOENT when
   * the pack is gone (removed by garbage collection meanwhile).
   */
  read(location: PackLocation): Buffer {
    return this.#inflate(location, this.#readStored(location));
  }

  /** The bytes a pack stores for an object, as stored (compressed or not). */
  #readStored(location: Pick<PackLocation, 'pack' | 'offset' | 'storedBytes'>): Buffer {
    const descriptor = openSync(location.pack, READ_FLAGS);
    try {
      // Not a plain file (damage): nothing is read from it.
      return fstatSync(descriptor).isFile()
        ? readAt(descriptor, location.storedBytes, location.offset)
        : Buffer.alloc(0);
    } finally {
      closeSync(descriptor);
    }
  }

  #inflate(location: PackLocation, stored: Buffer): Buffer {
    if (location.storedBytes >= location.sizeBytes) return stored;
    try {
      return nodeZlib().inflateRawSync(stored, { maxOutputLength: location.sizeBytes });
    } catch {
      // Damaged compressed bytes: what they hold is unknown, and hashes to nothing sound.
      return Buffer.alloc(0);
    }
  }

  /** True when the pack holds exactly `bytes` at `location` (a damaged copy does not count). */
  holds(location: PackLocation, bytes: Uint8Array): boolean {
    if (location.sizeBytes !== bytes.byteLength) return false;
    try {
      return this.read(location).equals(bytes);
    } catch (error) {
      if (isSystemError(error, 'ENOENT') || isSystemError(error, 'ELOOP')) return false;
      throw error;
    }
  }

  /**
   * Writes objects into a new pack and its index (see `writePackFiles`), which this set then
   * lists. Returns the pack's name, its two files, and the directories to sync.
   */
  write(
    objects: Iterable<PackInput>,
    options: { sync: boolean },
  ): { name: string; files: string[]; directories: string[] } {
    const { name, index, files, directories } = writePackFiles(this.directory, objects, options);
    const loaded = parseIndex(name, index, Date.now());
    if (loaded) this.#indexes().set(name, loaded);
    this.#written.add(name);
    return { name, files, directories };
  }

  /**
   * Writes again, without the `removed` objects, every pack that holds some of them, and merges
   * small packs so that each pack, smallest first, holds at least twice the objects of the one
   * before (as `git repack --geometric=2`): there are never more than about log2 of the objects
   * packs to search, and each object is copied a logarithmic number of times over its life. The
   * new pack is durable before an old one goes, so a crash at any point leaves every kept object
   * in some pack. A pack with a damaged object is left as it is (copying it would make nothing
   * sound; `rewind verify` names it).
   */
  rewrite(removed: ReadonlySet<Digest> = new Set()): void {
    this.refresh();
    const holdsRemoved = (index: LoadedIndex): boolean =>
      removed.size > 0 && [...this.#locations(index)].some(({ digest }) => removed.has(digest));
    const all = [...this.#indexes().values()];
    this.#merge([...all.filter(holdsRemoved), ...geometricMerge(all)], removed);
  }

  /**
   * Merges the smaller half of the packs into one: what a batch does past a limit on their
   * number, at a cost bounded by the small packs (a large first snapshot's pack is left to gc).
   */
  mergeSmallest(): void {
    this.refresh();
    const ascending = [...this.#indexes().values()].sort((a, b) => a.count - b.count);
    this.#merge(ascending.slice(0, Math.ceil(ascending.length / 2)), new Set(), true);
  }

  /**
   * The small packs that a batch about to write a pack of `count` objects takes into it (none
   * when `count` is SMALL_PACK_OBJECTS or more), so that the packs of small batches stay few
   * without a merge of their own: those `geometricMerge` would merge with the new one, among packs
   * of at most SMALL_PACK_OBJECTS objects, with their objects read and checked. A pack with an
   * object that does not read back sound (damaged, or gone since) is left as it is. The caller
   * removes the packs named once the new one is durable.
   */
  foldable(count: number): { names: string[]; objects: PackInput[] } {
    if (count >= SMALL_PACK_OBJECTS) return { names: [], objects: [] };
    const small = [...this.#indexes().values()].filter(
      (index) => index.count <= SMALL_PACK_OBJECTS,
    );
    const candidates: { count: number; index?: LoadedIndex }[] = [
      { count },
      ...small.map((index) => ({ count: index.count, index })),
    ];
    const chosen = geometricMerge(candidates);
    const folded = { names: [] as string[], objects: [] as PackInput[] };
    for (const { index } of chosen) {
      const objects = index && this.#soundObjects(index);
      if (!index || !objects) continue;
      folded.names.push(index.name);
      folded.objects.push(...objects);
    }
    return folded;
  }

  /**
   * Every object of a pack, the pack read whole in one call (a small one), or undefined when the
   * pack is gone or one of them is damaged. They are checked (inflated and hashed), but in a pack
   * this process wrote: those were hashed in memory as they were written, and a copy as stored
   * keeps whatever befell them since for a read or `rewind verify` to find, as before.
   */
  #soundObjects(index: LoadedIndex): PackInput[] | undefined {
    const locations = [...this.#locations(index)];
    const end = endOf(locations);
    const isOwn = this.#written.has(index.name);
    const objects: PackInput[] = [];
    try {
      const pack = join(this.directory, `${index.name}.pack`);
      const whole = this.#readStored({ pack, offset: 0, storedBytes: end });
      for (const location of locations) {
        const { digest, offset, storedBytes, sizeBytes } = location;
        const stored = whole.subarray(offset, offset + storedBytes);
        if (stored.length !== storedBytes) return undefined;
        objects.push(
          isOwn ? { digest, stored, sizeBytes } : { digest, ...this.#sound(location, stored) },
        );
      }
    } catch {
      return undefined;
    }
    return objects;
  }

  /**
   * Merges `indexes` into one pack, without `removed`. With `trustOwn` (a batch's merge, not gc's),
   * a pack this process wrote is copied unchecked, as a fold copies it (see #soundObjects): each
   * object was read, inflated and hashed twice (a merge of 26 packs of 1,025 objects took twice
   * as long).
   */
  #merge(indexes: LoadedIndex[], removed: ReadonlySet<Digest>, trustOwn = false): void {
    const isTrusted = (index: LoadedIndex): boolean => trustOwn && this.#written.has(index.name);
    const chosen = new Set(
      indexes.filter((index) => (isTrusted(index) ? this.#isThere(index) : this.#isWhole(index))),
    );
    if (chosen.size === 0 || (chosen.size === 1 && removed.size === 0)) return;
    const kept: PackInput[] = [];
    for (const index of chosen) {
      for (const location of this.#locations(index)) {
        if (removed.has(location.digest)) continue;
        const { digest, sizeBytes } = location;
        // Copied as stored (not compressed again), checked as it is read unless trusted.
        const stored = isTrusted(index)
          ? () => ({ stored: this.#readStored(location), sizeBytes })
          : () => ({ stored: this.#readSound(location).stored, sizeBytes });
        kept.push({ digest, stored });
      }
    }
    let name: string | undefined;
    if (kept.length > 0) {
      const written = this.write(kept, { sync: true });
      for (const directory of written.directories) syncDirectory(directory);
      name = written.name;
    }
    for (const index of chosen) if (index.name !== name) this.remove(index.name);
    syncDirectory(this.directory);
  }

  /** How many packs there are. */
  get count(): number {
    return this.#indexes().size;
  }

  *#locations(index: LoadedIndex): Iterable<PackLocation> {
    for (let at = 0; at < index.count * RECORD_BYTES; at += RECORD_BYTES) {
      const hex = index.records.subarray(at, at + 32).toString('hex');
      yield this.#location(index, `${DIGEST_PREFIX}${hex}`, at);
    }
  }

  /** True when the pack is there, a plain file long enough to hold every object's bytes. */
  #isThere(index: LoadedIndex): boolean {
    try {
      const stats = lstatSync(join(this.directory, `${index.name}.pack`));
      return stats.isFile() && stats.size >= endOf(this.#locations(index));
    } catch {
      return false;
    }
  }

  /** True when every object of the pack reads back sound. */
  #isWhole(index: LoadedIndex): boolean {
    for (const location of this.#locations(index)) {
      try {
        this.#readSound(location);
      } catch {
        return false;
      }
    }
    return true;
  }

  #readSound(location: PackLocation): { bytes: Buffer; stored: Buffer } {
    return this.#sound(location, this.#readStored(location));
  }

  /** The object's bytes from what its pack stores for it, checked; throws when it is damaged. */
  #sound(location: PackLocation, stored: Buffer): { bytes: Buffer; stored: Buffer } {
    const bytes = this.#inflate(location, stored);
    if (bytes.length !== location.sizeBytes || digestBytes(bytes) !== location.digest) {
      throw new Error(`${location.digest} in ${location.pack} is damaged`);
    }
    return { bytes, stored };
  }

  /** Removes a pack: its index first (then nothing lists what is in it), then the pack. */
  remove(name: string): void {
    for (const extension of ['.idx', '.pack']) {
      try {
        unlinkSync(join(this.directory, `${name}${extension}`));
      } catch (error) {
        if (!isSystemError(error, 'ENOENT')) throw error;
      }
    }
    this.#loaded?.delete(name);
  }

  /**
   * Temporary files a crashed write left, and packs without an index (a crash between the two
   * renames), with their modification times.
   */
  leftovers(): { file: string; modifiedAtMs: number; sizeBytes: number }[] {
    let names: string[];
    try {
      names = readdirSync(this.directory);
    } catch {
      return [];
    }
    const indexes = new Set(names.filter((name) => INDEX_NAME.test(name)));
    const found: { file: string; modifiedAtMs: number; sizeBytes: number }[] = [];
    for (const name of names) {
      const isOrphan =
        /^pack-[0-9a-f]{64}\.pack$/.test(name) && !indexes.has(name.replace(/\.pack$/, '.idx'));
      if (!name.startsWith(TEMPORARY_PREFIX) && !isOrphan) continue;
      const file = join(this.directory, name);
      // Looked at, never opened: nothing there is followed or waited on.
      let stats: ReturnType<typeof lstatSync>;
      try {
        stats = lstatSync(file);
      } catch {
        continue;
      }
      if (stats.isFile()) found.push({ file, modifiedAtMs: stats.mtimeMs, sizeBytes: stats.size });
    }
    return found;
  }
}

/**
 * The smallest packs to merge into one so that, smallest first, each pack holds at least twice
 * the objects of all the smaller ones together; none when they already do.
 */
export function geometricMerge<T extends { count: number }>(packs: readonly T[]): T[] {
  const ascending = [...packs].sort((a, b) => a.count - b.count);
  let split = 0;
  for (let index = 1; index < ascending.length; index++) {
    if ((ascending[index] as T).count < 2 * (ascending[index - 1] as T).count) split = index + 1;
  }
  let sum = ascending.slice(0, split).reduce((total, pack) => total + pack.count, 0);
  while (split < ascending.length && (ascending[split] as T).count < 2 * sum) {
    sum += (ascending[split] as T).count;
    split += 1;
  }
  return split >= 2 ? ascending.slice(0, split) : [];
}

/** Where the last of `locations` ends in their pack: the length the pack must have at least. */
function endOf(locations: Iterable<Pick<PackLocation, 'offset' | 'storedBytes'>>): number {
  let end = 0;
  for (const { offset, storedBytes } of locations) end = Math.max(end, offset + storedBytes);
  return end;
}

/** fsyncs a directory, so that the names in it are durable. */
function syncDirectory(directory: string): void {
  const descriptor = openSync(directory, constants.O_RDONLY | constants.O_DIRECTORY);
  try {
    fsyncSync(descriptor);
  } finally {
    closeSync(descriptor);
  }
}
