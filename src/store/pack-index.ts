import { DIGEST_PREFIX, type Digest, nodeCrypto } from '../lib/index.js';

/**
 * A pack's index, as SPEC.md §3a and src/store/packs.ts give its format: made, read and searched
 * in memory.
 */
const INDEX_MAGIC = Buffer.from('RWINDEX\x01', 'latin1');
export const RECORD_BYTES = 56;
const HEADER_BYTES = INDEX_MAGIC.length + 4;
const TRAILER_BYTES = 32;

/** An index read and checked: its records, and where each first digest byte's records start. */
export interface LoadedIndex {
  /** `pack-<H>`: the file names without their extension. */
  name: string;
  records: Buffer;
  count: number;
  /** For each first byte of a digest, where its records start (as git's index fan-out). */
  fanout: Uint32Array;
  /**
   * Each record's first four digest bytes, in record order: searched without reading the records,
   * which a lookup of an object no pack holds (most objects a checkpoint stores) does in every pack.
   */
  prefixes: Uint32Array;
  /**
   * One bit per value of a digest's first `32 - filterShift` bits, set where a record's digest
   * starts so: most digests a pack does not list are turned away by one bit, without a search
   * (a snapshot or a rollback looks each object up in every pack: past 30 packs, the searches
   * took ~25 ms of a rollback of 1,000 files at L in a CPU profile). At least 8 bits per
   * record, up to 2 MiB.
   */
  filter: Uint8Array;
  filterShift: number;
  modifiedAtMs: number;
}

/** A digest's 32 bytes, as an index holds them. */
export function digestKey(digest: Digest): Buffer {
  return Buffer.from(digest.slice(DIGEST_PREFIX.length), 'hex');
}

/**
 * Where `index` lists the object whose digest is the 32 bytes of `key` at `keyAt`: the byte
 * offset of its record, or -1.
 */
export function recordOf(index: LoadedIndex, key: Buffer, keyAt = 0): number {
  const first = key[keyAt] as number;
  const prefix = key.readUInt32BE(keyAt);
  const bit = prefix >>> index.filterShift;
  if (((index.filter[bit >>> 3] as number) & (1 << (bit & 7))) === 0) return -1;
  const { prefixes, records } = index;
  const end = index.fanout[first + 1] as number;
  // The first record of the digest's first byte whose first four bytes are not below the key's.
  let low = index.fanout[first] as number;
  let high = end;
  while (low < high) {
    const middle = (low + high) >>> 1;
    if ((prefixes[middle] as number) < prefix) low = middle + 1;
    else high = middle;
  }
  // Compared whole only where the first four bytes are equal.
  for (let place = low; place < end && prefixes[place] === prefix; place++) {
    const at = place * RECORD_BYTES;
    if (records.compare(key, keyAt, keyAt + 32, at, at + 32) === 0) return at;
  }
  return -1;
}

/** The size of the object whose record starts at `at` of an index's `records`. */
export function sizeAt(records: Buffer, at: number): number {
  return records.readUInt32BE(at + 48) * 2 ** 32 + records.readUInt32BE(at + 52);
}

/** Parses an index, or undefined when it is damaged (torn, changed, not ours). */
export function parseIndex(
  name: string,
  bytes: Buffer,
  modifiedAtMs: number,
): LoadedIndex | undefined {
  if (bytes.length < HEADER_BYTES + TRAILER_BYTES) return undefined;
  if (!bytes.subarray(0, INDEX_MAGIC.length).equals(INDEX_MAGIC)) return undefined;
  const count = bytes.readUInt32BE(INDEX_MAGIC.length);
  if (bytes.length !== HEADER_BYTES + count * RECORD_BYTES + TRAILER_BYTES) return undefined;
  const body = bytes.subarray(0, bytes.length - TRAILER_BYTES);
  const sum = nodeCrypto().createHash('sha256').update(body).digest();
  if (!sum.equals(bytes.subarray(body.length)) || `pack-${sum.toString('hex')}` !== name) {
    return undefined;
  }
  const records = bytes.subarray(HEADER_BYTES, body.length);
  const fanout = new Uint32Array(257);
  const prefixes = new Uint32Array(count);
  let filterBits = 6;
  while (2 ** filterBits < count * 8 && filterBits < 24) filterBits++;
  const filter = new Uint8Array(2 ** (filterBits - 3));
  const filterShift = 32 - filterBits;
  for (let record = 0; record < count; record++) {
    fanout[(records[record * RECORD_BYTES] as number) + 1] = record + 1;
    const prefix = records.readUInt32BE(record * RECORD_BYTES);
    prefixes[record] = prefix;
    const bit = prefix >>> filterShift;
    filter[bit >>> 3] = (filter[bit >>> 3] as number) | (1 << (bit & 7));
  }
  for (let byte = 1; byte <= 256; byte++) {
    fanout[byte] = Math.max(fanout[byte] as number, fanout[byte - 1] as number);
  }
  return { name, records, count, fanout, prefixes, filter, filterShift, modifiedAtMs };
}

/** A new index for `count` records, to fill with {@link setRecord} and seal with {@link sealIndex}. */
export function newIndex(count: number): Buffer {
  const index = Buffer.alloc(HEADER_BYTES + count * RECORD_BYTES + TRAILER_BYTES);
  INDEX_MAGIC.copy(index, 0);
  index.writeUInt32BE(count, INDEX_MAGIC.length);
  return index;
}

/** Sets the record at `place` (records go in digest order). */
export function setRecord(
  index: Buffer,
  place: number,
  digest: Digest,
  offset: number,
  storedBytes: number,
  sizeBytes: number,
): void {
  const at = HEADER_BYTES + place * RECORD_BYTES;
  digestKey(digest).copy(index, at);
  index.writeBigUInt64BE(BigInt(offset), at + 32);
  index.writeBigUInt64BE(BigInt(storedBytes), at + 40);
  index.writeBigUInt64BE(BigInt(sizeBytes), at + 48);
}

/** Writes the index's trailer (the SHA-256 of the rest) and returns the pack's name, `pack-<H>`. */
export function sealIndex(index: Buffer): string {
  const body = index.subarray(0, index.length - TRAILER_BYTES);
  const sum = nodeCrypto().createHash('sha256').update(body).digest();
  sum.copy(index, body.length);
  return `pack-${sum.toString('hex')}`;
}
