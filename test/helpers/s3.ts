import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import S3rver from 's3rver';

/** An S3-compatible server (s3rver) on a random loopback port, with one bucket. */
export interface S3Server {
  endpoint: string;
  bucket: string;
  /** Where s3rver keeps the objects, to damage one as a disk or a person would. */
  directory: string;
  /** The client configuration that reaches it with its credentials. */
  client: Record<string, unknown>;
  close(): Promise<void>;
}

export async function startS3Server(bucket = 'rewind-test'): Promise<S3Server> {
  const directory = await mkdtemp(join(tmpdir(), 'rewind-s3rver-'));
  const server = new S3rver({
    port: 0,
    address: '127.0.0.1',
    directory,
    silent: true,
    configureBuckets: [{ name: bucket }],
  });
  const { port } = await server.run();
  const endpoint = `http://127.0.0.1:${port}`;
  return {
    endpoint,
    bucket,
    directory,
    client: {
      endpoint,
      region: 'us-east-1',
      credentials: { accessKeyId: 'S3RVER', secretAccessKey: 'S3RVER' },
    },
    close: async () => {
      await server.close();
      await rm(directory, { recursive: true, force: true });
    },
  };
}
