// The S3 object store against a real S3-compatible server (s3rver, started here).
import { randomBytes } from 'node:crypto';
import { readdir, readFile, writeFile } from 'node:fs/promises';
import {
  type AddressInfo,
  connect,
  createServer as createNetServer,
  type Server as NetServer,
} from 'node:net';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { digestBytes } from '../../src/lib/index.js';
import { createObjectStore, initStore } from '../../src/store/index.js';
import {
  createS3ObjectStore,
  MULTIPART_PART_BYTES,
  objectKeyOf,
  parseS3Url,
} from '../../src/store/s3-objects.js';
import { type S3Server, startS3Server } from '../helpers/s3.js';
import { makeTempDirectory } from '../helpers/temp.js';

let server: S3Server;

beforeAll(async () => {
  server = await startS3Server();
}, 30_000);
afterAll(async () => {
  await server?.close();
});

/** A store on the server under `prefix`, with a fresh local cache. */
async function storeAt(prefix: string, client = server.client) {
  const { directory } = await initStore(await makeTempDirectory());
  return createS3ObjectStore({
    bucket: server.bucket,
    prefix,
    cache: createObjectStore(directory),
    client,
  });
}

/** Every file s3rver keeps under a directory, for the one that holds a key's bytes. */
async function filesUnder(directory: string): Promise<string[]> {
  const files: string[] = [];
  for (const entry of await readdir(directory, { withFileTypes: true, recursive: true })) {
    if (entry.isFile()) files.push(join(entry.parentPath, entry.name));
  }
  return files;
}

/**
 * A proxy to `endpoint` on a free loopback port that drops a connection (both sides) at the first
 * chunk, from the client or from the server, that `cutsAt` says to, given a fresh one per
 * connection.
 */
async function cuttingProxy(
  endpoint: string,
  cutsAt: () => (chunk: Buffer, from: 'client' | 'server') => boolean,
): Promise<NetServer> {
  const target = new URL(endpoint);
  const proxy = createNetServer((client) => {
    const upstream = connect(Number(target.port), target.hostname);
    const isCut = cutsAt();
    const cut = () => {
      client.destroy();
      upstream.destroy();
    };
    client.on('data', (chunk: Buffer) => {
      if (isCut(chunk, 'client')) cut();
      else upstream.write(chunk);
    });
    upstream.on('data', (chunk: Buffer) => {
      if (isCut(chunk, 'server')) cut();
      else client.write(chunk);
    });
    for (const socket of [client, upstream]) socket.on('error', () => {});
    client.on('close', () => upstream.destroy());
    upstream.on('close', () => client.destroy());
  });
  await new Promise<void>((resolve) => proxy.listen(0, '127.0.0.1', resolve));
  return proxy;
}

describe('the S3 object store', () => {
  it('parses s3:// locations and refuses anything else, saying what to give', () => {
    expect(parseS3Url('s3://bucket-1/team/agents/')).toEqual({
      bucket: 'bucket-1',
      prefix: 'team/agents',
    });
    expect(parseS3Url('s3://bucket-1')).toEqual({ bucket: 'bucket-1', prefix: '' });
    for (const bad of ['http://bucket/x', 's3://', 's3://UPPER/x', 'bucket/x']) {
      expect(() => parseS3Url(bad)).toThrow(/s3:\/\/BUCKET/);
    }
  });

  it('stores content under its digest and reads it back, verified, from another machine', async () => {
    const writer = await storeAt('roundtrip');
    const content = Buffer.from('hello from one machine\n');
    const info = await writer.put(content);
    expect(info).toEqual({ digest: digestBytes(content), sizeBytes: content.length });
    // Idempotent: the same content again is the same object.
    expect(await writer.put(content)).toEqual(info);
    // Another machine: an empty cache, the same bucket.
    const reader = await storeAt('roundtrip');
    expect(await reader.has(info.digest)).toBe(true);
    expect(await reader.stat(info.digest)).toEqual(info);
    expect((await reader.get(info.digest)).equals(content)).toBe(true);
    expect(await reader.verify(info.digest)).toEqual(info);
    const missing = digestBytes('never stored');
    expect(await reader.has(missing)).toBe(false);
    await expect(reader.get(missing)).rejects.toMatchObject({
      code: 'OBJECT_NOT_FOUND',
      data: {
        url: `s3://${server.bucket}/${objectKeyOf({ bucket: server.bucket, prefix: 'roundtrip' }, missing)}`,
      },
    });
  });

  it('uploads a batch in parallel, lists it, and removes objects', async () => {
    const store = await storeAt('batch');
    const batch = store.batch();
    const contents = Array.from({ length: 40 }, (_, index) => Buffer.from(`object ${index}\n`));
    const infos = await Promise.all(contents.map((content) => batch.put(content)));
    await batch.commit();
    const listed = [];
    for await (const object of store.list()) listed.push(object);
    expect(listed.map((object) => object.digest).sort()).toEqual(
      infos.map((info) => info.digest).sort(),
    );
    expect(listed[0]?.file).toMatch(
      /^s3:\/\/rewind-test\/batch\/objects\/[0-9a-f]{2}\/[0-9a-f]{62}$/,
    );
    expect(listed.every((object) => object.modifiedAtMs > Date.now() - 60_000)).toBe(true);
    await store.remove(infos.slice(0, 10).map((info) => info.digest));
    let left = 0;
    for await (const _ of store.list()) left += 1;
    expect(left).toBe(30);
    expect(await (await storeAt('batch')).has(infos[0]?.digest as never)).toBe(false);
  });

  it('uploads a large object in parts and reads it back whole', async () => {
    const store = await storeAt('large');
    const file = join(await makeTempDirectory(), 'big.bin');
    const content = randomBytes(MULTIPART_PART_BYTES * 2 + 12_345);
    await writeFile(file, content);
    const info = await store.put({ file });
    expect(info).toEqual({ digest: digestBytes(content), sizeBytes: content.length });
    const reader = await storeAt('large');
    const chunks: Buffer[] = [];
    for await (const chunk of reader.read(info.digest)) chunks.push(chunk);
    expect(Buffer.concat(chunks).equals(content)).toBe(true);
  }, 60_000);

  it('reads a large object only a few parts ahead of a network that does not keep up', async () => {
    // A proxy that holds the parts until released: a network at a standstill for them.
    let isReleased = false;
    const waiting: (() => void)[] = [];
    const target = new URL(server.endpoint);
    const proxy = createNetServer((client) => {
      const upstream = connect(Number(target.port), target.hostname);
      let isHeld = false;
      client.on('data', (chunk: Buffer) => {
        isHeld ||= /[?&]partNumber=\d/.test(chunk.subarray(0, 1000).toString('latin1'));
        if (isReleased || !isHeld) upstream.write(chunk);
        else waiting.push(() => upstream.write(chunk));
      });
      upstream.on('data', (chunk) => client.write(chunk));
      for (const socket of [client, upstream]) socket.on('error', () => {});
      client.on('close', () => upstream.destroy());
      upstream.on('close', () => client.destroy());
    });
    await new Promise<void>((resolve) => proxy.listen(0, '127.0.0.1', resolve));
    try {
      const { directory } = await initStore(await makeTempDirectory());
      const cache = createObjectStore(directory);
      let read = 0;
      const store = createS3ObjectStore({
        bucket: server.bucket,
        prefix: 'held-parts',
        cache: {
          ...cache,
          async *read(digest) {
            for await (const chunk of cache.read(digest)) {
              read += chunk.length;
              yield chunk;
            }
          },
        },
        client: {
          ...server.client,
          endpoint: `http://127.0.0.1:${(proxy.address() as AddressInfo).port}`,
        },
      });
      const file = join(await makeTempDirectory(), 'big.bin');
      const content = randomBytes(MULTIPART_PART_BYTES * 12 + 1);
      await writeFile(file, content);
      const put = store.put({ file });
      // Until the reading stops: it waits on the parts sent, which wait on the network.
      for (let last = -1; read === 0 || read !== last; ) {
        last = read;
        await new Promise((resolve) => setTimeout(resolve, 500));
      }
      expect(read).toBeGreaterThan(0);
      expect(read).toBeLessThanOrEqual(MULTIPART_PART_BYTES * 6);
      isReleased = true;
      for (const send of waiting.splice(0)) send();
      expect(await put).toEqual({ digest: digestBytes(content), sizeBytes: content.length });
      const chunks: Buffer[] = [];
      for await (const chunk of (await storeAt('held-parts')).read(digestBytes(content))) {
        chunks.push(chunk);
      }
      expect(Buffer.concat(chunks).equals(content)).toBe(true);
    } finally {
      proxy.close();
    }
  }, 120_000);

  it('fails a multipart upload whose parts are refused with one clean error, and aborts it', async () => {
    // A proxy that drops every connection carrying a part; everything else goes through.
    const proxy = await cuttingProxy(
      server.endpoint,
      () => (chunk) => /[?&]partNumber=\d/.test(chunk.subarray(0, 1000).toString('latin1')),
    );
    const unhandled: unknown[] = [];
    const onUnhandled = (reason: unknown) => unhandled.push(reason);
    process.on('unhandledRejection', onUnhandled);
    try {
      const { directory } = await initStore(await makeTempDirectory());
      const cache = createObjectStore(directory);
      const store = createS3ObjectStore({
        bucket: server.bucket,
        prefix: 'refused-parts',
        // A slow disk: the parts fail while the object is still being read.
        cache: {
          ...cache,
          async *read(digest) {
            for await (const chunk of cache.read(digest)) {
              await new Promise((resolve) => setTimeout(resolve, 40));
              yield chunk;
            }
          },
        },
        client: {
          ...server.client,
          endpoint: `http://127.0.0.1:${(proxy.address() as AddressInfo).port}`,
        },
      });
      const file = join(await makeTempDirectory(), 'big.bin');
      await writeFile(file, randomBytes(MULTIPART_PART_BYTES * 4 + 1));
      await expect(store.put({ file })).rejects.toMatchObject({ code: 'IO_FAILED' });
      await new Promise((resolve) => setTimeout(resolve, 200));
      expect(unhandled).toEqual([]);
      expect(await (await storeAt('refused-parts')).listAbandoned(0)).toEqual([]);
    } finally {
      process.off('unhandledRejection', onUnhandled);
      proxy.close();
    }
  }, 60_000);

  it('names an object the bucket holds damaged, and never hands its bytes out', async () => {
    const store = await storeAt('damaged');
    const content = Buffer.from('the original content, long enough to find\n');
    const info = await store.put(content);
    const files = await filesUnder(join(server.directory, server.bucket, 'damaged'));
    const holder = (
      await Promise.all(
        files.map(async (path) => ((await readFile(path)).equals(content) ? path : undefined)),
      )
    ).find(Boolean) as string;
    expect(holder).toBeDefined();
    await writeFile(holder, Buffer.from('the original content, long enough to fine\n'));
    const reader = await storeAt('damaged');
    await expect(reader.get(info.digest)).rejects.toMatchObject({
      code: 'OBJECT_CORRUPT',
      message: expect.stringContaining(`s3://${server.bucket}/damaged/objects/`),
    });
    await expect(reader.verify(info.digest)).rejects.toMatchObject({ code: 'OBJECT_CORRUPT' });
  });

  it('retries an upload whose connection dropped midway: the object in the bucket is whole', async () => {
    // A proxy that cuts the first connection carrying a body, after part of it went through.
    let cut = 0;
    const proxy = await cuttingProxy(server.endpoint, () => {
      let forwarded = 0;
      return (chunk, from) => {
        if (from === 'server') return false;
        forwarded += chunk.length;
        if (cut > 0 || forwarded <= 20_000) return false;
        cut += 1;
        return true;
      };
    });
    try {
      const port = (proxy.address() as AddressInfo).port;
      const store = await storeAt('dropped', {
        ...server.client,
        endpoint: `http://127.0.0.1:${port}`,
      });
      const content = randomBytes(100_000);
      const info = await store.put(content);
      expect(cut).toBe(1);
      const reader = await storeAt('dropped');
      expect((await reader.get(info.digest)).equals(content)).toBe(true);
    } finally {
      proxy.close();
    }
  });

  it('downloads again an object whose connection dropped midway through its body', async () => {
    const content = randomBytes(300_000);
    const { digest } = await (await storeAt('dropped-download')).put(content);
    // A proxy that cuts connections at the second chunk of a response, once its headers and part
    // of its body went through: the first `cuts` times.
    const proxied = async (cuts: number) => {
      let cut = 0;
      const proxy = await cuttingProxy(server.endpoint, () => {
        let chunks = 0;
        return (_chunk, from) => {
          if (from === 'client') return false;
          chunks += 1;
          if (cut >= cuts || chunks < 2) return false;
          cut += 1;
          return true;
        };
      });
      const port = (proxy.address() as AddressInfo).port;
      const { directory } = await initStore(await makeTempDirectory());
      const cache = createObjectStore(directory);
      const store = createS3ObjectStore({
        bucket: server.bucket,
        prefix: 'dropped-download',
        cache,
        client: { ...server.client, endpoint: `http://127.0.0.1:${port}` },
      });
      return { store, cache, directory, proxy, cuts: () => cut };
    };
    const once = await proxied(1);
    try {
      expect((await once.store.get(digest)).equals(content)).toBe(true);
      expect(once.cuts()).toBe(1);
    } finally {
      once.proxy.close();
    }
    // A connection that drops every time: a clear error naming the object, nothing cached.
    const always = await proxied(Number.POSITIVE_INFINITY);
    try {
      const error = await always.store.get(digest).catch((caught: unknown) => caught);
      expect(error).toMatchObject({
        code: 'IO_FAILED',
        message: expect.stringMatching(
          /^Downloading s3:\/\/.+ failed \(.*aborted.*\)\. The storage cannot be reached/,
        ),
      });
      expect(always.cuts()).toBe(3);
      expect(await always.cache.has(digest)).toBe(false);
      expect(await filesUnder(join(always.directory, 'objects'))).toEqual([]);
    } finally {
      always.proxy.close();
    }
  });

  it('goes on after the server restarts between uploads', async () => {
    const own = await startS3Server('rewind-restart', { process: true });
    try {
      const store = async () => {
        const { directory } = await initStore(await makeTempDirectory());
        return createS3ObjectStore({
          bucket: own.bucket,
          prefix: 'p',
          cache: createObjectStore(directory),
          client: own.client,
        });
      };
      const writer = await store();
      const before = await writer.put(Buffer.from('before the restart\n'));
      await own.restart();
      const after = await writer.put(Buffer.from('after the restart\n'));
      const reader = await store();
      expect((await reader.get(before.digest)).toString()).toBe('before the restart\n');
      expect((await reader.get(after.digest)).toString()).toBe('after the restart\n');
    } finally {
      await own.close();
    }
  }, 30_000);

  it('says a bucket that does not exist does not exist, rather than that an object is missing', async () => {
    const { directory } = await initStore(await makeTempDirectory());
    const store = createS3ObjectStore({
      bucket: 'no-such-bucket',
      prefix: 'x',
      cache: createObjectStore(directory),
      client: server.client,
    });
    const noBucket = {
      code: 'IO_FAILED',
      message: expect.stringContaining('bucket s3://no-such-bucket does not exist'),
    };
    await expect(store.put(Buffer.from('x'))).rejects.toMatchObject(noBucket);
    await expect(store.get(digestBytes('not cached'))).rejects.toMatchObject(noBucket);
    // A HEAD's 404 has no body to say which is missing: the bucket is looked at before an
    // object is said to be missing.
    await expect(store.has(digestBytes('not cached'))).rejects.toMatchObject(noBucket);
    await expect(store.stat(digestBytes('not cached'))).rejects.toMatchObject(noBucket);
  });

  it('names the cause of a connection that fails: the address refused', async () => {
    const closed = createNetServer();
    await new Promise<void>((resolve) => closed.listen(0, '127.0.0.1', resolve));
    const port = (closed.address() as AddressInfo).port;
    await new Promise((resolve) => closed.close(resolve));
    const store = await storeAt('unreachable', {
      ...server.client,
      endpoint: `http://127.0.0.1:${port}`,
      maxAttempts: 1,
    });
    await expect(store.put(Buffer.from('x'))).rejects.toMatchObject({
      code: 'IO_FAILED',
      message: expect.stringMatching(
        new RegExp(
          `failed \\(connect ECONNREFUSED 127\\.0\\.0\\.1:${port}\\)\\. The storage cannot be reached`,
        ),
      ),
    });
  });

  it('lists more than 1,000 objects, page after page, from a server in a process of its own', async () => {
    const own = await startS3Server('rewind-many', { process: true });
    try {
      const { directory } = await initStore(await makeTempDirectory());
      const store = createS3ObjectStore({
        bucket: own.bucket,
        prefix: 'many',
        cache: createObjectStore(directory),
        client: own.client,
      });
      const batch = store.batch();
      for (let index = 0; index < 1_050; index++) await batch.put(Buffer.from(`object ${index}\n`));
      await batch.commit();
      expect((await store.usage()).count).toBe(1_050);
    } finally {
      await own.close();
    }
  }, 60_000);

  it('refuses bad credentials with a clear error, and the put does not resolve', async () => {
    const store = await storeAt('refused', {
      ...server.client,
      credentials: { accessKeyId: 'WRONG', secretAccessKey: 'WRONG' },
    });
    await expect(store.put(Buffer.from('x'))).rejects.toMatchObject({
      code: 'IO_FAILED',
      message: expect.stringContaining('refused the credentials'),
    });
    const reader = await storeAt('refused');
    expect(await reader.has(digestBytes('x'))).toBe(false);
  });
});
