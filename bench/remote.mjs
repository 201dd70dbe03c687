// The remote backends beside the local ones, in one run (after npm run build):
//   node bench/remote.mjs
// - checkpoint and rollback of a repository-shaped workspace (1,000 files) with its objects in
//   .rewind/objects and in a bucket (s3rver on loopback);
// - objects per second into the bucket (a batch of small objects, as a first snapshot sends);
// - ledger appends per second: the file ledger, and PostgreSQL (Debian's, fsync on) with one
//   writer, with 8 sessions written at once, and with 4 writers on one session;
// - rewind push and rewind pull of the local workspace's session (1,000 files, 11 checkpoints),
//   whole and after 10 changed files, beside its first checkpoint straight into the bucket.
// s3rver is a single Node process writing files: what it measures is Rewind's side (requests,
// parallelism, verification), not what a real service sustains.
import { appendFileSync, mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { init, openSession, pullSession, pushSession } from '../dist/index.js';
import { Ledger, migratePostgres, PostgresLedger } from '../dist/ledger/index.js';
import { createObjectStore, createS3ObjectStore, initStore } from '../dist/store/index.js';
import { startPostgres, startS3Server } from '../scripts/servers.mjs';
import { generateWorkspace } from './generate-workspace.mjs';

const base = mkdtempSync(join(process.env.BENCH_DIR ?? tmpdir(), 'rewind-bench-remote-'));
const ms = (start) => Number(process.hrtime.bigint() - start) / 1e6;
const timed = async (fn) => {
  const start = process.hrtime.bigint();
  await fn();
  return ms(start);
};
const median = (values) => [...values].sort((a, b) => a - b)[Math.floor(values.length / 2)];

const s3 = await startS3Server('rewind-bench', { process: true });
const postgres = await startPostgres();
Object.assign(process.env, s3.environment);

try {
  // Checkpoint and rollback.
  const ROUNDS = 5;
  const rows = [];
  let localFiles = [];
  for (const [name, objects] of [
    ['local (.rewind/objects)', undefined],
    ['bucket (s3rver)', `s3://${s3.bucket}/bench`],
  ]) {
    const workspace = join(base, name.startsWith('local') ? 'local' : 'bucket');
    const files = generateWorkspace(workspace, 1_000).filter((path) => !path.endsWith('.bin'));
    if (!objects) localFiles = files;
    await init({ workspace, ...(objects && { objects }) });
    const session = await openSession({ workspace });
    const first = await timed(() => session.checkpoint('base'));
    const checkpoints = [];
    const rollbacks = [];
    for (let round = 0; round < ROUNDS; round++) {
      for (const file of files.slice(round * 10, round * 10 + 10)) {
        appendFileSync(join(workspace, file), `// round ${round}\n`);
      }
      await new Promise((resolve) => setTimeout(resolve, 250));
      checkpoints.push(await timed(() => session.checkpoint(`c${round}`)));
      rollbacks.push(await timed(() => session.rollback('base')));
    }
    await session.close();
    rows.push({ name, first, checkpoint: median(checkpoints), rollback: median(rollbacks) });
  }
  console.log(
    '| objects in | first checkpoint (1,000 files) | checkpoint, 10 changed | rollback, 10 files |',
  );
  console.log('| --- | --- | --- | --- |');
  for (const row of rows) {
    const [local] = rows;
    const ratio = (key) => (row === local ? '' : ` (${(row[key] / local[key]).toFixed(2)}×)`);
    console.log(
      `| ${row.name} | ${row.first.toFixed(0)} ms${ratio('first')} | ${row.checkpoint.toFixed(1)} ms${ratio('checkpoint')} | ${row.rollback.toFixed(1)} ms${ratio('rollback')} |`,
    );
  }

  // Push and pull of the local workspace's session.
  {
    const workspace = join(base, 'local');
    const backends = { ledger: postgres.url, objects: `s3://${s3.bucket}/bench-shared` };
    const changeAndCheckpoint = async (label) => {
      const session = await openSession({ workspace });
      for (const path of localFiles.slice(500, 510)) {
        appendFileSync(join(workspace, path), `// ${label}\n`);
      }
      await new Promise((resolve) => setTimeout(resolve, 250));
      await session.checkpoint(label);
      await session.close();
    };
    const elsewhere = join(base, 'pulled');
    let pushed;
    let pulled;
    const firstPush = await timed(async () => {
      pushed = await pushSession({ workspace, ...backends });
    });
    const firstPull = await timed(async () => {
      pulled = await pullSession({ workspace: elsewhere, session: pushed.session, ...backends });
    });
    await changeAndCheckpoint('more');
    let again;
    const nextPush = await timed(async () => {
      again = await pushSession({ workspace, ...backends });
    });
    const nextPull = await timed(() =>
      pullSession({ workspace: elsewhere, session: pushed.session, ...backends }),
    );
    const [, bucketRow] = rows;
    console.log(
      '\n| copy of the session (1,000 files) | objects | time | vs the first checkpoint into the bucket |',
    );
    console.log('| --- | --- | --- | --- |');
    console.log(
      `| push, whole | ${pushed.objects.objects} | ${firstPush.toFixed(0)} ms | ${(firstPush / bucketRow.first).toFixed(2)}× |`,
    );
    console.log(
      `| pull into an empty directory | ${pulled.objects.objects} | ${firstPull.toFixed(0)} ms | ${(firstPull / bucketRow.first).toFixed(2)}× |`,
    );
    console.log(
      `| push after 10 changed files | ${again.objects.objects} | ${nextPush.toFixed(0)} ms | |`,
    );
    console.log(`| pull of that | ${again.objects.objects} | ${nextPull.toFixed(0)} ms | |`);
  }

  // Objects per second into the bucket.
  const OBJECTS = 2_000;
  const bucketStore = createS3ObjectStore({
    bucket: s3.bucket,
    prefix: 'bench-objects',
    cache: createObjectStore((await initStore(join(base, 'cache'))).directory),
  });
  const putMs = await timed(async () => {
    const batch = bucketStore.batch();
    for (let index = 0; index < OBJECTS; index++) {
      await batch.put(Buffer.from(`object ${index} ${'x'.repeat(4000)}\n`));
    }
    await batch.commit();
  });
  console.log(
    `\n${OBJECTS} objects of 4 kB into the bucket in one batch: ${putMs.toFixed(0)} ms, ${((OBJECTS / putMs) * 1000).toFixed(0)} objects/s`,
  );

  // Ledger appends per second.
  const APPENDS = 500;
  const fileStore = (await initStore(join(base, 'ledger'))).directory;
  const fileLedger = await Ledger.create(fileStore);
  const fileMs = await timed(async () => {
    for (let index = 0; index < APPENDS; index++) await fileLedger.append('note-added', { index });
  });
  await fileLedger.close();
  await migratePostgres(postgres.url);
  const one = await PostgresLedger.create(postgres.url, 'bench');
  const oneMs = await timed(async () => {
    for (let index = 0; index < APPENDS; index++) await one.append('note-added', { index });
  });
  await one.close();
  const sessions = await Promise.all(
    Array.from({ length: 8 }, () => PostgresLedger.create(postgres.url, 'bench')),
  );
  const manyMs = await timed(() =>
    Promise.all(
      sessions.map(async (ledger) => {
        for (let index = 0; index < APPENDS / 8; index++)
          await ledger.append('note-added', { index });
      }),
    ),
  );
  for (const ledger of sessions) await ledger.close();
  const shared = await PostgresLedger.create(postgres.url, 'bench');
  const writers = await Promise.all(
    Array.from({ length: 4 }, () => PostgresLedger.open(postgres.url, 'bench', shared.session.id)),
  );
  const contendedMs = await timed(() =>
    Promise.all(
      writers.map(async (ledger) => {
        for (let index = 0; index < APPENDS / 4; index++)
          await ledger.append('note-added', { index });
      }),
    ),
  );
  for (const ledger of [shared, ...writers]) await ledger.close();
  const rate = (count, elapsed) => ((count / elapsed) * 1000).toFixed(0);
  console.log('\n| ledger | appends/s |');
  console.log('| --- | --- |');
  console.log(`| file (fdatasync per append) | ${rate(APPENDS, fileMs)} |`);
  console.log(`| PostgreSQL, one writer | ${rate(APPENDS, oneMs)} |`);
  console.log(`| PostgreSQL, 8 sessions at once | ${rate(APPENDS, manyMs)} |`);
  console.log(`| PostgreSQL, 4 writers on one session | ${rate(APPENDS, contendedMs)} |`);
} finally {
  await s3.close();
  await postgres.stop();
  rmSync(base, { recursive: true, force: true });
}
