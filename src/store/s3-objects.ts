// Objects in S3-compatible storage: one key per object under `PREFIX/objects/`, content-addressed
// like the local store, read through a local cache of verified objects (SPEC.md §3b).
import { isRewindError, RewindError } from '../errors.js';
import { createLimiter, DIGEST_PREFIX, type Digest, digestBytes, isDigest } from '../lib/index.js';
import type {
  ObjectBatch,
  ObjectInfo,
  ObjectSource,
  ObjectStore,
  StoredObject,
} from './object-store.js';
import {
  bucketMissing,
  checkBucket,
  clientConfig,
  hashOnly,
  isBucketMissing,
  isMissing,
  loadSdk,
  readBody,
  requestFailed,
  type S3Module,
} from './s3-client.js';

/** Objects larger than this are uploaded in parts, this size each (S3's minimum is 5 MiB). */
export const MULTIPART_PART_BYTES = 8 * 1024 * 1024;
/** Uploads of objects in flight at once, and of the parts of one large object (read as sent). */
const UPLOADS_IN_FLIGHT = 32;
const PARTS_IN_FLIGHT = 4;
/** Objects up to this size are uploaded without looking first whether the bucket has them. */
const SMALL_OBJECT_BYTES = 1024 * 1024;
/** S3 deletes at most this many keys per request. */
const DELETES_PER_REQUEST = 1000;

/** Where an S3 object store keeps its objects: `s3://BUCKET/PREFIX`. */
export interface S3Location {
  bucket: string;
  /** Without a trailing slash; may be empty. */
  prefix: string;
}

/** Options of {@link createS3ObjectStore}. */
export interface S3ObjectStoreOptions extends S3Location {
  /**
   * The local store that caches what was read or written (verified objects, by digest): a read
   * of a cached object costs no request.
   */
  cache: ObjectStore;
  /**
   * The client's configuration, for tests and unusual setups. Default: the AWS SDK's own
   * (credentials, region and endpoint from the environment and shared config files, including
   * `AWS_ENDPOINT_URL_S3` and `AWS_ENDPOINT_URL`), with path-style addressing when the endpoint is
   * an IP address or `localhost`.
   */
  client?: Record<string, unknown>;
}

/** How many objects, and bytes, went up or came down. */
export interface Transfer {
  objects: number;
  bytes: number;
}

/** An object store in a bucket, which also copies objects between the bucket and its cache. */
export interface BucketObjectStore extends ObjectStore {
  /**
   * Uploads these objects from the cache, in parallel: a small one whatever the bucket holds,
   * a large one when the bucket lacks it with its size. Throws `OBJECT_NOT_FOUND` for one the
   * cache lacks.
   */
  upload(digests: Iterable<Digest>): Promise<Transfer>;
  /**
   * Downloads into the cache, verified and in parallel, those of these objects it lacks, made
   * durable together before this resolves.
   */
  download(digests: Iterable<Digest>): Promise<Transfer>;
}

/** Parses `s3://BUCKET/PREFIX`. Throws `INVALID_ARGUMENT` for anything else. */
export function parseS3Url(url: string): S3Location {
  const match = /^s3:\/\/([a-z0-9][a-z0-9.-]{1,61}[a-z0-9])(?:\/(.*))?$/.exec(url);
  if (!match) {
    throw new RewindError(
      'INVALID_ARGUMENT',
      `${JSON.stringify(url)} is not an S3 location: give s3://BUCKET or s3://BUCKET/PREFIX (a bucket name is 3 to 63 lowercase letters, digits, dots and hyphens).`,
      { data: { url } },
    );
  }
  return { bucket: match[1] as string, prefix: (match[2] ?? '').replace(/\/+$/, '') };
}

/** The key of an object: `PREFIX/objects/ab/cdef...` (the local store's loose layout). */
export function objectKeyOf(location: S3Location, digest: Digest): string {
  const hex = digest.slice(DIGEST_PREFIX.length);
  const base = location.prefix === '' ? '' : `${location.prefix}/`;
  return `${base}objects/${hex.slice(0, 2)}/${hex.slice(2)}`;
}

/** The digest a key names, or undefined for a key that is not an object's. */
function digestOfKey(location: S3Location, key: string): Digest | undefined {
  const base = location.prefix === '' ? 'objects/' : `${location.prefix}/objects/`;
  if (!key.startsWith(base)) return undefined;
  const [fan, rest, extra] = key.slice(base.length).split('/');
  if (extra !== undefined || fan === undefined || rest === undefined) return undefined;
  const digest = `${DIGEST_PREFIX}${fan}${rest}`;
  return isDigest(digest) ? digest : undefined;
}

/**
 * Throws `INVALID_ARGUMENT` when the bucket of `url` does not exist (the storage answers 404 to a
 * look at it): what `rewind init --objects` checks before it records the location. Any other
 * answer (a storage not reachable now, credentials that may only lack this right) is left to the
 * first request that needs the bucket.
 */
export async function checkBucketExists(
  url: string,
  client?: Record<string, unknown>,
): Promise<void> {
  return checkBucket(parseS3Url(url).bucket, url, client);
}

/**
 * An object store in an S3-compatible bucket (AWS S3, MinIO, Ceph, R2...). Objects are stored
 * whole and uncompressed under `PREFIX/objects/<2 hex>/<62 hex>`, uploaded with their SHA-256 as
 * the request's checksum (the service refuses a body that does not match), read back verified
 * against their digest, and kept in the local `cache` store by digest. Writes are idempotent (a
 * small object is simply sent again; a large one present with its size is not) and a batch
 * uploads in parallel; objects over {@link MULTIPART_PART_BYTES} go up in parts. A missing or corrupt object is named in the
 * error (`OBJECT_NOT_FOUND`, `OBJECT_CORRUPT`), a failed request says what to check
 * (`IO_FAILED`). Nothing refers to an object before the put or batch that wrote it resolved.
 */
export function createS3ObjectStore(options: S3ObjectStoreOptions): BucketObjectStore {
  const location: S3Location = { bucket: options.bucket, prefix: options.prefix };
  const { cache } = options;
  const urlOf = (digest: Digest) => `s3://${location.bucket}/${objectKeyOf(location, digest)}`;
  let client: Promise<InstanceType<S3Module['S3Client']>> | undefined;
  const clientOf = () => {
    client ??= loadSdk().then(({ S3Client }) => new S3Client(clientConfig(options.client)));
    return client;
  };
  const send = async <T>(
    command: (module: S3Module) => unknown,
    url: string,
    doing: string,
  ): Promise<T> => {
    const [module, s3] = await Promise.all([loadSdk(), clientOf()]);
    try {
      return (await s3.send(command(module) as never)) as T;
    } catch (error) {
      // A 404 whose body says the bucket is missing is not a missing object.
      if (isMissing(error) && (error as { name?: string }).name !== 'NoSuchBucket') {
        throw notFound(url);
      }
      throw requestFailed(error, url, doing);
    }
  };
  const notFound = (url: string) =>
    new RewindError(
      'OBJECT_NOT_FOUND',
      `Object ${url} is not in the bucket. It was removed, or never uploaded: run \`rewind verify\` to list what refers to it.`,
      { data: { url } },
    );
  const limit = createLimiter(UPLOADS_IN_FLIGHT);
  // Parts have their own gate: an upload holding a place of `limit` waits for its parts.
  const partLimit = createLimiter(PARTS_IN_FLIGHT);

  /** The bucket was seen to exist: a HEAD's 404 is then a missing object. */
  let isBucketSeen = false;
  async function remoteStat(digest: Digest): Promise<ObjectInfo | undefined> {
    try {
      const head = await send<{ ContentLength?: number }>(
        ({ HeadObjectCommand }) =>
          new HeadObjectCommand({ Bucket: location.bucket, Key: objectKeyOf(location, digest) }),
        urlOf(digest),
        'Looking up',
      );
      return { digest, sizeBytes: head.ContentLength ?? 0 };
    } catch (error) {
      if (!isRewindError(error, 'OBJECT_NOT_FOUND')) throw error;
      // The 404 may be the bucket's: look at it, until it is seen once.
      if (
        !isBucketSeen &&
        (await isBucketMissing(await clientOf(), await loadSdk(), location.bucket))
      )
        throw bucketMissing(urlOf(digest), 'Looking up');
      isBucketSeen = true;
      return undefined;
    }
  }

  /** The checksum S3 checks the body against: the digest's bytes, in base64. */
  const checksumOf = (digest: Digest) =>
    Buffer.from(digest.slice(DIGEST_PREFIX.length), 'hex').toString('base64');

  /**
   * Uploads an object the cache holds. A small one is sent again whatever the bucket holds (the
   * same bytes under the same name: one request instead of a lookup and a write); a large one
   * only when the bucket lacks it with its size (or `always`, to replace a damaged copy).
   */
  async function upload(info: ObjectInfo, always = false): Promise<void> {
    const key = objectKeyOf(location, info.digest);
    if (info.sizeBytes > SMALL_OBJECT_BYTES && !always) {
      const present = await remoteStat(info.digest);
      if (present?.sizeBytes === info.sizeBytes) return;
    }
    if (info.sizeBytes <= MULTIPART_PART_BYTES) {
      const body = await cache.get(info.digest);
      await send(
        ({ PutObjectCommand }) =>
          new PutObjectCommand({
            Bucket: location.bucket,
            Key: key,
            Body: body,
            ChecksumSHA256: checksumOf(info.digest),
          }),
        urlOf(info.digest),
        'Uploading',
      );
      return;
    }
    await uploadInParts(info, key);
  }

  /** A large object in parts read from the cache, each checked by S3; aborted if one fails. */
  async function uploadInParts(info: ObjectInfo, key: string): Promise<void> {
    const url = urlOf(info.digest);
    const { UploadId } = await send<{ UploadId?: string }>(
      ({ CreateMultipartUploadCommand }) =>
        new CreateMultipartUploadCommand({
          Bucket: location.bucket,
          Key: key,
          ChecksumAlgorithm: 'SHA256',
        }),
      url,
      'Starting the upload of',
    );
    try {
      const parts: { PartNumber: number; ETag?: string; ChecksumSHA256?: string }[] = [];
      const chunks: Buffer[] = [];
      let pending = 0;
      const partUploads: Promise<void>[] = [];
      // The first part that failed: reading stops; thrown once every part settled (not unhandled).
      let failure: { error: unknown } | undefined;
      const sendPart = (body: Buffer, number: number) =>
        partLimit(async () => {
          if (failure) return;
          const checksum = checksumOf(digestBytes(body));
          const sent = await send<{ ETag?: string }>(
            ({ UploadPartCommand }) =>
              new UploadPartCommand({
                Bucket: location.bucket,
                Key: key,
                UploadId,
                PartNumber: number,
                Body: body,
                ChecksumSHA256: checksum,
              }),
            url,
            `Uploading part ${number} of`,
          );
          parts.push({ PartNumber: number, ETag: sent.ETag, ChecksumSHA256: checksum });
        }).catch((error) => {
          failure ??= { error };
        });
      const inFlight = new Set<Promise<void>>(); // parts sent: the reading waits on them
      const queuePart = async (body: Buffer): Promise<void> => {
        while (inFlight.size >= PARTS_IN_FLIGHT) await Promise.race(inFlight);
        const sent = sendPart(body, partUploads.length + 1);
        partUploads.push(sent);
        const settled: Promise<void> = sent.then(() => void inFlight.delete(settled));
        inFlight.add(settled);
      };
      for await (const chunk of cache.read(info.digest)) {
        if (failure) break;
        chunks.push(chunk);
        pending += chunk.length;
        while (pending >= MULTIPART_PART_BYTES) {
          const all = Buffer.concat(chunks);
          chunks.splice(0, chunks.length, all.subarray(MULTIPART_PART_BYTES));
          pending -= MULTIPART_PART_BYTES;
          await queuePart(all.subarray(0, MULTIPART_PART_BYTES));
        }
      }
      if (pending > 0 && !failure) await queuePart(Buffer.concat(chunks));
      await Promise.all(partUploads);
      if (failure) throw failure.error;
      parts.sort((a, b) => a.PartNumber - b.PartNumber);
      await send(
        ({ CompleteMultipartUploadCommand }) =>
          new CompleteMultipartUploadCommand({
            Bucket: location.bucket,
            Key: key,
            UploadId,
            MultipartUpload: { Parts: parts },
          }),
        url,
        'Completing the upload of',
      );
    } catch (error) {
      await send(
        ({ AbortMultipartUploadCommand }) =>
          new AbortMultipartUploadCommand({ Bucket: location.bucket, Key: key, UploadId }),
        url,
        'Aborting the upload of',
      ).catch(() => {});
      throw error;
    }
  }

  /**
   * Downloads an object into the cache, streamed (the cache hashes what it stores): content that
   * hashes to another digest than its key's is damage in the bucket, refused as corrupt.
   */
  async function fetchIntoCache(
    digest: Digest,
    into: Pick<ObjectStore, 'put'> = cache,
  ): Promise<ObjectInfo> {
    const url = urlOf(digest);
    const stored = await readBody(
      async () =>
        (
          await send<{ Body?: AsyncIterable<Uint8Array> }>(
            ({ GetObjectCommand }) =>
              new GetObjectCommand({ Bucket: location.bucket, Key: objectKeyOf(location, digest) }),
            url,
            'Downloading',
          )
        ).Body,
      (body) => into.put(body ? { stream: body } : new Uint8Array()),
      url,
    );
    const actual = stored.digest;
    if (actual !== digest) {
      const damage = `holds other bytes than its name says (they hash to ${actual})`;
      throw new RewindError(
        'OBJECT_CORRUPT',
        `Object ${url} ${damage}: it was changed or damaged in the bucket. Run \`rewind verify\` to list what refers to it.`,
        { data: { url, digest, actual, file: url, damage } },
      );
    }
    return stored;
  }

  /** The cache's copy when it is there and sound (re-hashed), else undefined. */
  async function soundCached(digest: Digest): Promise<ObjectInfo | undefined> {
    try {
      return await cache.verify(digest);
    } catch (error) {
      if (isRewindError(error, 'OBJECT_NOT_FOUND') || isRewindError(error, 'OBJECT_CORRUPT')) {
        return undefined;
      }
      throw error;
    }
  }

  async function ensureCached(digest: Digest): Promise<void> {
    if (!(await cache.has(digest))) await fetchIntoCache(digest);
  }

  const unique = (digests: Iterable<Digest>) => [...new Set(digests)];

  return {
    async put(source: ObjectSource): Promise<ObjectInfo> {
      // The cache takes a stable, verified copy first (a file or stream may change meanwhile).
      const info = await cache.put(source);
      await limit(() => upload(info));
      return info;
    },

    batch(): ObjectBatch {
      const local = cache.batch();
      const written: ObjectInfo[] = [];
      return {
        async put(source) {
          const info = await local.put(source);
          written.push(info);
          return info;
        },
        async commit() {
          await local.commit();
          const unique = new Map(written.map((info) => [info.digest, info]));
          written.length = 0;
          await Promise.all([...unique.values()].map((info) => limit(() => upload(info))));
        },
      };
    },

    async get(digest) {
      await ensureCached(digest);
      return cache.get(digest);
    },

    async *read(digest) {
      await ensureCached(digest);
      yield* cache.read(digest);
    },

    async has(digest) {
      return (await cache.has(digest)) || (await remoteStat(digest)) !== undefined;
    },

    async stat(digest) {
      return (await cache.stat(digest)) ?? remoteStat(digest);
    },

    async verify(digest) {
      // What the bucket holds, not only the cache. A sound cached copy is never dropped: a
      // missing or damaged copy in the bucket is uploaded again from it.
      const cached = await soundCached(digest);
      if (!cached) {
        try {
          // Stores the bucket's content, which also rewrites a damaged cached copy.
          await fetchIntoCache(digest);
        } catch (error) {
          if (!isRewindError(error, 'OBJECT_NOT_FOUND')) throw error;
          throw new RewindError(
            'OBJECT_NOT_FOUND',
            `Object ${urlOf(digest)} is neither in the bucket nor in the local cache: it was removed, or never uploaded.`,
            { data: { url: urlOf(digest), digest } },
          );
        }
        return cache.verify(digest);
      }
      let problem: string;
      try {
        await fetchIntoCache(digest, hashOnly);
        return cached;
      } catch (error) {
        if (isRewindError(error, 'OBJECT_CORRUPT')) {
          problem = `held other bytes than its name says (they hash to ${(error.data as { actual: string }).actual})`;
        } else if (isRewindError(error, 'OBJECT_NOT_FOUND')) {
          problem = 'was missing';
        } else throw error;
      }
      await limit(() => upload(cached, true));
      return {
        ...cached,
        repaired: `Object ${urlOf(digest)} ${problem}: it was uploaded again from the local cache, which holds it sound.`,
      };
    },

    async damage() {
      return [];
    },

    async upload(digests) {
      const sent = { objects: 0, bytes: 0 };
      await Promise.all(
        unique(digests).map((digest) =>
          limit(async () => {
            const info = await cache.stat(digest);
            if (!info) {
              throw new RewindError(
                'OBJECT_NOT_FOUND',
                `Object ${digest} is not in the local store, so it cannot be uploaded. Run \`rewind verify\` to list what refers to it.`,
                { data: { digest } },
              );
            }
            await upload(info);
            sent.objects += 1;
            sent.bytes += info.sizeBytes;
          }),
        ),
      );
      return sent;
    },

    async download(digests) {
      const wanted: Digest[] = [];
      for (const digest of unique(digests)) if (!(await cache.has(digest))) wanted.push(digest);
      const received = { objects: 0, bytes: 0 };
      const batch = cache.batch();
      await Promise.all(
        wanted.map((digest) =>
          limit(async () => {
            const { sizeBytes } = await fetchIntoCache(digest, batch);
            received.objects += 1;
            received.bytes += sizeBytes;
          }),
        ),
      );
      await batch.commit();
      return received;
    },

    async *list(): AsyncIterable<StoredObject> {
      let token: string | undefined;
      const base = location.prefix === '' ? 'objects/' : `${location.prefix}/objects/`;
      do {
        const page = await send<{
          Contents?: { Key?: string; Size?: number; LastModified?: Date }[];
          NextContinuationToken?: string;
        }>(
          ({ ListObjectsV2Command }) =>
            new ListObjectsV2Command({
              Bucket: location.bucket,
              Prefix: base,
              ...(token && { ContinuationToken: token }),
            }),
          `s3://${location.bucket}/${base}`,
          'Listing',
        );
        for (const item of page.Contents ?? []) {
          const digest = item.Key ? digestOfKey(location, item.Key) : undefined;
          if (!digest) continue;
          yield {
            digest,
            sizeBytes: item.Size ?? 0,
            file: `s3://${location.bucket}/${item.Key}`,
            modifiedAtMs: item.LastModified?.getTime() ?? 0,
          };
        }
        token = page.NextContinuationToken;
      } while (token);
    },

    async usage() {
      // The bucket has no count of its own: a listing, page by page.
      const usage = { count: 0, sizeBytes: 0 };
      for await (const { sizeBytes } of this.list()) {
        usage.count += 1;
        usage.sizeBytes += sizeBytes;
      }
      return usage;
    },

    async listAbandoned(olderThanMs) {
      const page = await send<{
        Uploads?: { Key?: string; UploadId?: string; Initiated?: Date }[];
      }>(
        ({ ListMultipartUploadsCommand }) =>
          new ListMultipartUploadsCommand({
            Bucket: location.bucket,
            Prefix: location.prefix === '' ? 'objects/' : `${location.prefix}/objects/`,
          }),
        `s3://${location.bucket}/${location.prefix}`,
        'Listing the unfinished uploads of',
      ).catch(() => ({ Uploads: [] }));
      const before = Date.now() - olderThanMs;
      return (page.Uploads ?? [])
        .filter((upload) => (upload.Initiated?.getTime() ?? 0) < before)
        .map((upload) => ({
          file: `s3://${location.bucket}/${upload.Key}?uploadId=${upload.UploadId}`,
          sizeBytes: 0,
        }));
    },

    async removeAbandoned(file) {
      const match = /^s3:\/\/[^/]+\/(.+)\?uploadId=(.+)$/.exec(file);
      if (!match) return;
      await send(
        ({ AbortMultipartUploadCommand }) =>
          new AbortMultipartUploadCommand({
            Bucket: location.bucket,
            Key: match[1],
            UploadId: match[2],
          }),
        file,
        'Aborting',
      );
    },

    async remove(digests) {
      const all = [...new Set(digests)];
      for (let start = 0; start < all.length; start += DELETES_PER_REQUEST) {
        const chunk = all.slice(start, start + DELETES_PER_REQUEST);
        await send(
          ({ DeleteObjectsCommand }) =>
            new DeleteObjectsCommand({
              Bucket: location.bucket,
              Delete: {
                Objects: chunk.map((digest) => ({ Key: objectKeyOf(location, digest) })),
                Quiet: true,
              },
            }),
          `s3://${location.bucket}/${location.prefix}`,
          'Removing objects from',
        );
      }
      await cache.remove(all);
    },
  };
}
