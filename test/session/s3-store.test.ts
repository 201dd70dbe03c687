// A workspace whose store keeps its objects in an S3-compatible bucket (s3rver, started here).
import { readdir, readFile, rm, writeFile } from 'node:fs/promises';
import { type AddressInfo, createServer as createNetServer } from 'node:net';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { digestBytes } from '../../src/lib/index.js';
import { gc, init, openSession, status, verify } from '../../src/session/index.js';
import { createObjectStore, createS3ObjectStore, initStore } from '../../src/store/index.js';
import { ROOT, runNode } from '../helpers/processes.js';
import { type S3Server, startS3Server } from '../helpers/s3.js';
import { makeTempDirectory } from '../helpers/temp.js';
import { lay } from '../helpers/workspace.js';

let server: S3Server;
const saved = { ...process.env };

beforeAll(async () => {
  server = await startS3Server();
  // The SDK's standard way: an endpoint, a region and credentials from the environment.
  Object.assign(process.env, server.environment);
}, 30_000);
afterAll(async () => {
  process.env = saved;
  await server?.close();
});

/** Empties the store's local objects directory: what is read now must come from the bucket. */
async function dropLocalObjects(workspace: string): Promise<void> {
  const objects = join(workspace, '.rewind', 'objects');
  for (const name of await readdir(objects)) await rm(join(objects, name), { recursive: true });
}

describe('a store whose objects are in a bucket', () => {
  it('checkpoints into the bucket and rolls back from it, with the local cache gone', async () => {
    const workspace = await makeTempDirectory();
    await lay(workspace, { 'src/app.ts': 'export const a = 1;\n', 'README.md': 'hello\n' });
    const objects = `s3://${server.bucket}/fleet/agent-1`;
    await init({ workspace, objects });
    expect(JSON.parse(await readFile(join(workspace, '.rewind', 'config.json'), 'utf8'))).toEqual({
      objects,
    });
    const session = await openSession({ workspace });
    await session.checkpoint('one');
    await writeFile(join(workspace, 'src/app.ts'), 'export const a = 2;\n');
    await writeFile(join(workspace, 'NEW.md'), 'new\n');
    await session.checkpoint('two');
    await session.close();
    const { objects: inBucket } = await status({ workspace });
    expect(inBucket.count).toBeGreaterThanOrEqual(6);

    await dropLocalObjects(workspace);
    const again = await openSession({ workspace });
    await again.rollback('one');
    await again.close();
    expect(await readFile(join(workspace, 'src/app.ts'), 'utf8')).toBe('export const a = 1;\n');
    await expect(readFile(join(workspace, 'NEW.md'), 'utf8')).rejects.toMatchObject({
      code: 'ENOENT',
    });
    expect((await verify({ workspace })).problems).toEqual([]);

    // gc collects only the local cache: other workspaces may refer to what the bucket holds.
    // An object no ledger here refers to (another workspace's, say) stays in the bucket.
    const other = createS3ObjectStore({
      bucket: server.bucket,
      prefix: 'fleet/agent-1',
      cache: createObjectStore((await initStore(await makeTempDirectory())).directory),
    });
    const foreign = await other.put(Buffer.from('written by another workspace\n'));
    const before = (await status({ workspace })).objects.count;
    const collected = await gc({ workspace, graceMs: 0 });
    expect(collected.warnings.join('\n')).toContain('nothing was removed from it');
    expect((await status({ workspace })).objects.count).toBe(before);
    const fresh = createS3ObjectStore({
      bucket: server.bucket,
      prefix: 'fleet/agent-1',
      cache: createObjectStore((await initStore(await makeTempDirectory())).directory),
    });
    expect(await fresh.has(foreign.digest)).toBe(true);
  });

  it('verify keeps a sound cached copy of an object damaged in the bucket and uploads it again', async () => {
    const workspace = await makeTempDirectory();
    const content = 'precious content v1\n';
    await lay(workspace, { 'p.txt': content });
    await init({ workspace, objects: `s3://${server.bucket}/verify-repair` });
    const session = await openSession({ workspace });
    await session.checkpoint('c1');
    await writeFile(join(workspace, 'p.txt'), 'other\n');
    await session.checkpoint('c2');
    await session.close();
    const hex = digestBytes(content).slice('sha256:'.length);
    const file = join(
      server.directory,
      server.bucket,
      'verify-repair/objects',
      hex.slice(0, 2),
      `${hex.slice(2)}._S3rver_object`,
    );
    const damaged = Buffer.from('garbage\n');
    await writeFile(file, damaged);

    const report = await verify({ workspace });
    expect(report.problems).toEqual([]);
    expect(report.warnings.join('\n')).toMatch(
      /held other bytes.*uploaded again from the local cache/,
    );
    expect((await readFile(file)).equals(damaged)).toBe(false);
    const again = await openSession({ workspace });
    await again.rollback('c1');
    await again.close();
    expect(await readFile(join(workspace, 'p.txt'), 'utf8')).toBe(content);

    // Without a sound copy anywhere, verify names the damage without sending the user to itself.
    await writeFile(file, damaged);
    await dropLocalObjects(workspace);
    const lost = await verify({ workspace });
    expect(lost.problems.map((problem) => problem.type)).toContain('object-corrupt');
    for (const problem of lost.problems) expect(problem.message).not.toContain('rewind verify');
  });

  it('is refused by `rewind init --objects` when the bucket does not exist, with nothing created', async () => {
    const workspace = await makeTempDirectory();
    await expect(init({ workspace, objects: 's3://no-such-bucket/p' })).rejects.toMatchObject({
      code: 'INVALID_ARGUMENT',
      message: expect.stringContaining('The bucket s3://no-such-bucket does not exist'),
    });
    await expect(readFile(join(workspace, '.rewind', 'config.json'))).rejects.toMatchObject({
      code: 'ENOENT',
    });
  });

  it('tells its status while the bucket cannot be reached: the sessions, and what the cache holds', async () => {
    const workspace = await makeTempDirectory();
    await lay(workspace, { 'a.txt': 'a\n', 'b.txt': 'b\n' });
    await init({ workspace, objects: `s3://${server.bucket}/down` });
    const session = await openSession({ workspace });
    await session.checkpoint('one');
    await session.close();
    const reachable = await status({ workspace });
    expect(reachable.objects.bucketError).toBeUndefined();

    // Nothing listens where the storage was.
    const closed = createNetServer();
    await new Promise<void>((resolve) => closed.listen(0, '127.0.0.1', resolve));
    const port = (closed.address() as AddressInfo).port;
    await new Promise((resolve) => closed.close(resolve));
    const down = { ...process.env, AWS_ENDPOINT_URL_S3: `http://127.0.0.1:${port}` };
    const endpoint = process.env.AWS_ENDPOINT_URL_S3;
    process.env.AWS_ENDPOINT_URL_S3 = down.AWS_ENDPOINT_URL_S3;
    try {
      const report = await status({ workspace });
      expect(report.sessions.map((listed) => listed.id)).toEqual([session.id]);
      expect(report.currentSession).toBe(session.id);
      // What the local cache holds: every object the checkpoint wrote went through it.
      expect(report.objects.count).toBe(
        (await createObjectStore(join(workspace, '.rewind')).usage()).count,
      );
      expect(report.objects.count).toBeGreaterThan(0);
      expect(report.objects.bucketError).toMatch(/ECONNREFUSED.*The storage cannot be reached/);
    } finally {
      process.env.AWS_ENDPOINT_URL_S3 = endpoint;
    }
    const bin = join(ROOT, 'bin', 'rewind.cjs');
    const shown = await runNode([bin, 'status'], { cwd: workspace, env: down });
    expect(shown.stderr).toBe('');
    expect(shown.code).toBe(0);
    expect(shown.stdout).toContain(session.id);
    expect(shown.stdout).toMatch(
      new RegExp(
        `objects?, .* in the local cache; the bucket cannot be counted now\\. Listing s3://${server.bucket}/down/objects/ failed \\(connect ECONNREFUSED`,
      ),
    );
  });

  it('is set by `rewind init --objects`, and never moved by a later init', async () => {
    const workspace = await makeTempDirectory();
    const bin = join(ROOT, 'bin', 'rewind.cjs');
    const objects = `s3://${server.bucket}/cli`;
    const made = await runNode([bin, 'init', '--objects', objects], { cwd: workspace });
    expect(made.code).toBe(0);
    expect(JSON.parse(await readFile(join(workspace, '.rewind', 'config.json'), 'utf8'))).toEqual({
      objects,
    });
    await writeFile(join(workspace, 'a.txt'), 'a\n');
    expect((await runNode([bin, 'checkpoint', 'first'], { cwd: workspace })).code).toBe(0);
    const moved = await runNode([bin, 'init', '--objects', `s3://${server.bucket}/elsewhere`], {
      cwd: workspace,
    });
    expect(moved.code).toBe(1);
    expect(moved.stderr).toContain('cannot move them');
    const bad = await runNode([bin, 'init', '--objects', 'http://bucket/x'], {
      cwd: await makeTempDirectory(),
    });
    expect(bad.code).not.toBe(0);
    expect(bad.stderr).toContain('s3://BUCKET');
  });
});
