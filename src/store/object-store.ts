import type { Digest } from '../lib/index.js';

/** What {@link ObjectStore.put} accepts: bytes, a stream of bytes, or a file to copy. */
export type ObjectSource = Uint8Array | { stream: AsyncIterable<Uint8Array> } | { file: string };

/** An object's name and size. */
export interface ObjectInfo {
  digest: Digest;
  sizeBytes: number;
}

/** An object as found on disk by {@link ObjectStore.list}. */
export interface StoredObject extends ObjectInfo {
  /** The object file's path. */
  file: string;
  /** Last time the object was written or put again; garbage collection spares recent objects. */
  modifiedAtMs: number;
}

/** See {@link ObjectStore.batch}. */
export interface ObjectBatch {
  put(source: ObjectSource): Promise<ObjectInfo>;
  commit(): Promise<void>;
}

/**
 * Immutable content addressed by its SHA-256 digest. One local implementation today
 * (`createObjectStore`); the interface leaves room for object storage elsewhere.
 */
export interface ObjectStore {
  /**
   * Stores content and returns its digest and size. Idempotent: storing content that exists
   * already writes nothing (it only marks the object as recently used), unless the object there
   * is damaged (another size, other bytes, not a plain file): then it is written again, so what
   * refers to it is whole. Atomic: a crash leaves either no object or the whole object, never a
   * partial one.
   */
  put(source: ObjectSource): Promise<ObjectInfo>;
  /**
   * A batch of puts for many objects at once: nothing is fsynced as it is written; `commit()`
   * makes contents and names durable together (a few objects by parallel fsyncs, many by one sync
   * of the filesystem) and must resolve before anything refers to the objects. Small objects
   * wait in memory (bytes given to a batch must not change until it commits) and, when there are
   * enough of them, are written as one pack (SPEC.md §3); they are readable meanwhile.
   */
  batch(): ObjectBatch;
  /**
   * The object's bytes, verified against its digest. Throws `OBJECT_NOT_FOUND`, `OBJECT_CORRUPT`.
   * `ahead`: asked for ahead of its use, with others (a restore's reads ahead of its writes): the
   * store may read them on another thread meanwhile.
   */
  get(digest: Digest, options?: { ahead?: boolean }): Promise<Buffer>;
  /**
   * The object's bytes as a stream in 1 MiB chunks, for objects too large to hold in memory. The
   * digest is checked at the end: a mismatch throws `OBJECT_CORRUPT` from the iterator.
   */
  read(digest: Digest): AsyncIterable<Buffer>;
  /** True when the object is present (its content is not checked). */
  has(digest: Digest): Promise<boolean>;
  /** The object's size, or undefined when it is not present. */
  stat(digest: Digest): Promise<ObjectInfo | undefined>;
  /**
   * Re-hashes the object. Throws `OBJECT_NOT_FOUND` or `OBJECT_CORRUPT`. `repaired` says what
   * was put right meanwhile (a bucket's damaged copy uploaded again from a sound cached one).
   */
  verify(digest: Digest): Promise<ObjectInfo & { repaired?: string }>;
  /**
   * Damage in the store's own structure that no single object read shows: for the local store,
   * pack indexes that are torn or changed (they list nothing, so their objects look missing).
   */
  damage(): Promise<{ file: string; damage: string }[]>;
  /** Every object present, once each, in no particular order. */
  list(): AsyncIterable<StoredObject>;
  /** How many objects are present and their size: the sums over {@link list}, found quicker. */
  usage(): Promise<{ count: number; sizeBytes: number }>;
  /** Temporary files older than `olderThanMs` left by writes that crashed. */
  listAbandoned(olderThanMs: number): Promise<{ file: string; sizeBytes: number }[]>;
  /** Removes a temporary file that {@link ObjectStore.listAbandoned} returned. */
  removeAbandoned(file: string): Promise<void>;
  /**
   * Removes objects (garbage collection only): a packed object by writing its pack again without
   * it (durably, before the old pack goes); many small packs are merged on the way. Removing a
   * missing object is a no-op.
   */
  remove(digests: Iterable<Digest>): Promise<void>;
}
