// Requests to S3-compatible storage: the SDK loaded on first use, its configuration, what a failed
// request says (what went wrong, and what to do), and downloads asked for again when they drop.
import { RewindError } from '../errors.js';
import { createDigester } from '../lib/index.js';
import type { ObjectStore } from './object-store.js';

export type S3Module = typeof import('@aws-sdk/client-s3');

/** The SDK, loaded on first use: a program that never names a bucket never loads it. */
let sdk: Promise<S3Module> | undefined;
export const loadSdk = (): Promise<S3Module> => {
  sdk ??= import('@aws-sdk/client-s3');
  return sdk;
};

/** Whether the SDK's endpoint (from options or the environment) is an address or localhost. */
function isLocalEndpoint(endpoint: unknown): boolean {
  if (typeof endpoint !== 'string') return false;
  try {
    const { hostname } = new URL(endpoint);
    return hostname === 'localhost' || /^[\d.]+$/.test(hostname) || hostname.startsWith('[');
  } catch {
    return false;
  }
}

/**
 * What a request's error says beyond its name, for one the storage did not answer (a refused or
 * dropped connection, a host not found): `connect ECONNREFUSED 127.0.0.1:9000`. Node joins the
 * addresses it tried in an `AggregateError` whose own message may be empty.
 */
function causeOf(error: unknown): string | undefined {
  const { message, errors } = error as { message?: string; errors?: unknown[] };
  const inner = (errors ?? [])
    .map((each) => (each as { message?: string }).message)
    .filter((each): each is string => Boolean(each));
  if (inner.length > 0) return [...new Set(inner)].join(', ');
  return message || (error as { code?: string }).code;
}

/** What went wrong with a request, as an error that names the object and what to do. */
export function requestFailed(error: unknown, url: string, doing: string): RewindError {
  const name = (error as { name?: string }).name ?? 'Error';
  const status = (error as { $metadata?: { httpStatusCode?: number } }).$metadata?.httpStatusCode;
  const code = (error as { code?: string }).code;
  const isUnreachable =
    status === undefined &&
    /ECONNREFUSED|ENOTFOUND|EAI_AGAIN|ECONNRESET|ETIMEDOUT|EHOSTUNREACH|ENETUNREACH|EPIPE/.test(
      `${code} ${causeOf(error)}`,
    );
  const isCredentials =
    /InvalidAccessKeyId|SignatureDoesNotMatch|AccessDenied|ExpiredToken|CredentialsProviderError|InvalidClientTokenId/.test(
      name,
    ) || status === 403;
  const advice = isCredentials
    ? 'The storage refused the credentials: set AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY (or AWS_PROFILE) to ones allowed to read and write the bucket.'
    : name === 'NoSuchBucket'
      ? `The bucket ${url.replace(/^(s3:\/\/[^/]+).*$/, '$1')} does not exist: create it, or give another in the s3:// location (\`objects\` in .rewind/config.json).`
      : isUnreachable
        ? 'The storage cannot be reached: check the endpoint (AWS_ENDPOINT_URL_S3) and the network, and that the server runs, then retry; nothing that refers to the object was recorded.'
        : 'Check the endpoint (AWS_ENDPOINT_URL_S3), the network and the bucket, then retry; nothing that refers to the object was recorded.';
  // A name the storage answered says enough; a bare `Error` is named by its cause.
  const cause =
    status === undefined && /^(Error|AggregateError)$/.test(name) ? causeOf(error) : undefined;
  return new RewindError(
    'IO_FAILED',
    `${doing} ${url} failed (${cause ?? name}${status ? `, HTTP ${status}` : ''}). ${advice}`,
    { data: { url, code: name, ...(status && { status }) }, cause: error },
  );
}

/** The error for a request on a bucket the storage says does not exist (see {@link requestFailed}). */
export function bucketMissing(url: string, doing: string): RewindError {
  return requestFailed({ name: 'NoSuchBucket', $metadata: { httpStatusCode: 404 } }, url, doing);
}

/**
 * True when the storage says `bucket` does not exist (it answers 404 to a look at it); false when
 * it answers otherwise, or not within 10 s. A HEAD request's 404 has no body, so for a HEAD of an
 * object it says the same whether the object or the whole bucket is missing: this tells them apart.
 */
export async function isBucketMissing(
  s3: { send(command: never, options?: { abortSignal?: AbortSignal }): Promise<unknown> },
  { HeadBucketCommand }: S3Module,
  bucket: string,
): Promise<boolean> {
  try {
    await s3.send(new HeadBucketCommand({ Bucket: bucket }) as never, {
      abortSignal: AbortSignal.timeout(10_000),
    });
    return false;
  } catch (error) {
    const status = (error as { $metadata?: { httpStatusCode?: number } }).$metadata?.httpStatusCode;
    return status === 404 || (error as { name?: string }).name === 'NoSuchBucket';
  }
}

export const isMissing = (error: unknown): boolean => {
  const name = (error as { name?: string }).name;
  const status = (error as { $metadata?: { httpStatusCode?: number } }).$metadata?.httpStatusCode;
  return name === 'NoSuchKey' || name === 'NotFound' || status === 404;
};

/** The SDK's configuration: `options`, with path-style addressing for a local endpoint. */
export function clientConfig(options?: Record<string, unknown>): Record<string, unknown> {
  const config: Record<string, unknown> = { ...options };
  const endpoint =
    config.endpoint ?? process.env.AWS_ENDPOINT_URL_S3 ?? process.env.AWS_ENDPOINT_URL;
  if (config.forcePathStyle === undefined && isLocalEndpoint(endpoint)) {
    config.forcePathStyle = true;
  }
  return config;
}

/** See `checkBucketExists`: throws `INVALID_ARGUMENT` when the storage says `bucket` does not exist. */
export async function checkBucket(
  bucket: string,
  url: string,
  client?: Record<string, unknown>,
): Promise<void> {
  const module = await loadSdk();
  const s3 = new module.S3Client(clientConfig(client));
  try {
    // A storage that does not answer is not waited for: the look is only a courtesy.
    if (await isBucketMissing(s3, module, bucket)) {
      throw new RewindError(
        'INVALID_ARGUMENT',
        `The bucket s3://${bucket} does not exist: create it, or give another in the s3:// location. Nothing was created.`,
        { data: { url, code: 'NoSuchBucket' } },
      );
    }
  } finally {
    s3.destroy();
  }
}

/** How many times a download is asked for in all when its connection drops midway. */
const DOWNLOAD_ATTEMPTS = 3;

/**
 * Gets a response body with `request` and hands it to `read`, asking for it again (up to
 * {@link DOWNLOAD_ATTEMPTS} times in all, after 100 ms, then 200) when the connection drops
 * midway through the body: the SDK retries a request that fails before its response, but a body
 * cut short fails as it is read. `read` must leave nothing behind when its stream fails (the
 * object store's `put` removes its temporary file). What `read` itself throws is not retried.
 */
export async function readBody<T>(
  request: () => Promise<AsyncIterable<Uint8Array> | undefined>,
  read: (body: AsyncIterable<Uint8Array> | undefined) => Promise<T>,
  url: string,
): Promise<T> {
  for (let attempt = 1; ; attempt++) {
    const body = await request();
    let dropped: { error: unknown } | undefined;
    const watched = body && {
      async *[Symbol.asyncIterator]() {
        try {
          yield* body;
        } catch (error) {
          dropped = { error };
          throw error;
        }
      },
    };
    try {
      return await read(watched);
    } catch (error) {
      if (!dropped) throw error;
      if (attempt >= DOWNLOAD_ATTEMPTS) throw requestFailed(dropped.error, url, 'Downloading');
    }
    await new Promise((resolve) => setTimeout(resolve, 100 * attempt));
  }
}

/** A put that only hashes what it is given: what the bucket holds, checked without storing it. */
export const hashOnly: Pick<ObjectStore, 'put'> = {
  async put(source) {
    const digester = createDigester();
    let sizeBytes = 0;
    const chunks =
      source instanceof Uint8Array
        ? [source]
        : (source as { stream: AsyncIterable<Uint8Array> }).stream;
    for await (const chunk of chunks) {
      digester.update(chunk);
      sizeBytes += chunk.length;
    }
    return { digest: digester.digest(), sizeBytes };
  },
};
