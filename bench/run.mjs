// Benchmarks (not tests): `npm run bench`. Every number is measured in this run, beside the
// alternative it is compared with, on the same disk, and reported as a ratio.
// Files go under BENCH_DIR (else the system's temporary directory); which filesystem that is
// matters (bench/filesystem.mjs), and each part says it.
import { execFileSync } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { open, readFile, rename } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { createObjectStore, init, Ledger } from '../dist/index.js';
import { resolveSession } from '../dist/ledger/index.js';
import {
  formatCheckpointCount,
  measureCheckpointCount,
  measureCheckpointCountCli,
} from './checkpoint-count.mjs';
import { describeFilesystem } from './filesystem.mjs';
import { formatLedgerGrowth, measureLedgerGrowth } from './ledger-growth.mjs';
import { formatStartup, measureStartup } from './startup.mjs';

const APPENDS = Number(process.env.BENCH_APPENDS ?? 2000);
const SMALL_COUNT = Number(process.env.BENCH_SMALL_COUNT ?? 2000);
const LARGE_BYTES = Number(process.env.BENCH_LARGE_MIB ?? 256) * 1024 * 1024;
const base = mkdtempSync(join(process.env.BENCH_DIR ?? tmpdir(), 'rewind-bench-'));
const filesystem = describeFilesystem(base);

const now = () => process.hrtime.bigint();
const ms = (start) => Number(now() - start) / 1e6;
const percentile = (values, p) =>
  [...values].sort((a, b) => a - b)[Math.min(values.length - 1, Math.floor(values.length * p))];
const time = (fn) => {
  const start = now();
  fn();
  return ms(start);
};
const rows = [];
const row = (what, value, unit, comparedWith, ratio) =>
  rows.push({ what, value, unit, comparedWith, ratio });

async function rawFdatasync() {
  const handle = await open(join(base, 'raw.jsonl'), 'a');
  const line = Buffer.from(
    `${JSON.stringify({ v: 1, seq: 0, kind: 'note-added', body: { text: 'x'.repeat(100) } })}\n`,
  );
  const latencies = [];
  const start = now();
  for (let index = 0; index < APPENDS; index++) {
    const one = now();
    await handle.write(line);
    await handle.datasync();
    latencies.push(ms(one));
  }
  const total = ms(start);
  await handle.close();
  return {
    perSecond: (APPENDS / total) * 1000,
    p50: percentile(latencies, 0.5),
    p99: percentile(latencies, 0.99),
  };
}

async function ledgerAppends(hashChain) {
  const workspace = join(base, `ledger-${hashChain}`);
  mkdirSync(workspace);
  const { session } = await init({ workspace, hashChain });
  const ledger = await Ledger.open(await resolveSession(join(workspace, '.rewind'), session.id));
  const latencies = [];
  const start = now();
  for (let index = 0; index < APPENDS; index++) {
    const one = now();
    await ledger.append('note-added', { text: 'x'.repeat(100) });
    latencies.push(ms(one));
  }
  const total = ms(start);
  await ledger.close();
  return {
    perSecond: (APPENDS / total) * 1000,
    p50: percentile(latencies, 0.5),
    p99: percentile(latencies, 0.99),
  };
}

async function putFiles(files) {
  const workspace = mkdtempSync(join(base, 'store-'));
  await init({ workspace });
  const store = createObjectStore(join(workspace, '.rewind'));
  const start = now();
  for (const file of files) await store.put({ file });
  return ms(start);
}

const raw = await rawFdatasync();
const plain = await ledgerAppends(false);
const chained = await ledgerAppends(true);
row(
  'raw write + fdatasync, 130 B lines',
  raw.perSecond.toFixed(0),
  `appends/s (p50 ${raw.p50.toFixed(3)} ms, p99 ${raw.p99.toFixed(3)} ms)`,
  '',
  '1.00',
);
row(
  'ledger append (lock, seq, fdatasync)',
  plain.perSecond.toFixed(0),
  `appends/s (p50 ${plain.p50.toFixed(3)} ms, p99 ${plain.p99.toFixed(3)} ms)`,
  'raw fdatasync',
  (plain.perSecond / raw.perSecond).toFixed(2),
);
row(
  'ledger append, hash-chained',
  chained.perSecond.toFixed(0),
  `appends/s (p50 ${chained.p50.toFixed(3)} ms, p99 ${chained.p99.toFixed(3)} ms)`,
  'raw fdatasync',
  (chained.perSecond / raw.perSecond).toFixed(2),
);

const smallDirectory = join(base, 'small');
mkdirSync(smallDirectory);
const smallFiles = Array.from({ length: SMALL_COUNT }, (_, index) => {
  const file = join(smallDirectory, `f${index}`);
  writeFileSync(file, randomBytes(4096));
  return file;
});
const smallPut = await putFiles(smallFiles);
// The durable floor: what any crash-safe write of the same files costs (temporary file, fsync,
// rename, fsync of the directory), with nothing else.
const atomicDirectory = join(base, 'atomic');
mkdirSync(atomicDirectory);
const smallAtomicStart = now();
for (const [index, file] of smallFiles.entries()) {
  const bytes = await readFile(file);
  const temporary = join(atomicDirectory, `.tmp-${index}`);
  const handle = await open(temporary, 'wx');
  await handle.writeFile(bytes);
  await handle.sync();
  await handle.close();
  await rename(temporary, join(atomicDirectory, `f${index}`));
  const directory = await open(atomicDirectory, 'r');
  await directory.sync();
  await directory.close();
}
const smallAtomic = ms(smallAtomicStart);
const smallSha = time(() =>
  execFileSync('sh', ['-c', `sha256sum ${smallDirectory}/* > /dev/null`]),
);
const smallCopy = time(() => execFileSync('cp', ['-r', smallDirectory, join(base, 'small-copy')]));
const smallCopySync = time(() => {
  execFileSync('cp', ['-r', smallDirectory, join(base, 'small-copy-sync')]);
  execFileSync('sync', ['-f', join(base, 'small-copy-sync')]);
});
const smallMiB = (SMALL_COUNT * 4096) / 1024 / 1024;
row(
  `put ${SMALL_COUNT} × 4 KiB objects (fsync each)`,
  ((SMALL_COUNT / smallPut) * 1000).toFixed(0),
  `objects/s (${((smallMiB / smallPut) * 1000).toFixed(1)} MiB/s, ${smallPut.toFixed(0)} ms)`,
  '',
  '1.00',
);
row(
  'durable floor: tmp, fsync, rename, fsync dir per file',
  ((SMALL_COUNT / smallAtomic) * 1000).toFixed(0),
  `files/s (${smallAtomic.toFixed(0)} ms)`,
  'put',
  (smallPut / smallAtomic).toFixed(2),
);
row(
  'sha256sum of the same files',
  ((SMALL_COUNT / smallSha) * 1000).toFixed(0),
  `files/s (${smallSha.toFixed(0)} ms)`,
  'put',
  (smallPut / smallSha).toFixed(2),
);
row(
  'cp -r of the same files (no fsync)',
  ((SMALL_COUNT / smallCopy) * 1000).toFixed(0),
  `files/s (${smallCopy.toFixed(0)} ms)`,
  'put',
  (smallPut / smallCopy).toFixed(2),
);
row(
  'cp -r + sync -f',
  ((SMALL_COUNT / smallCopySync) * 1000).toFixed(0),
  `files/s (${smallCopySync.toFixed(0)} ms)`,
  'put',
  (smallPut / smallCopySync).toFixed(2),
);

const largeFile = join(base, 'large.bin');
{
  const handle = await open(largeFile, 'w');
  const chunk = randomBytes(16 * 1024 * 1024);
  for (let written = 0; written < LARGE_BYTES; written += chunk.length) await handle.write(chunk);
  await handle.close();
}
const largeMiB = LARGE_BYTES / 1024 / 1024;
const largePut = await putFiles([largeFile]);
const largeSha = time(() => execFileSync('sha256sum', [largeFile], { stdio: 'ignore' }));
const largeCopy = time(() => execFileSync('cp', [largeFile, join(base, 'large-copy.bin')]));
const largeCopySync = time(() => {
  execFileSync('cp', [largeFile, join(base, 'large-copy-sync.bin')]);
  execFileSync('sync', ['-f', join(base, 'large-copy-sync.bin')]);
});
row(
  `put one ${largeMiB} MiB file as an object (kernel copy, hash, fsync)`,
  ((largeMiB / largePut) * 1000).toFixed(0),
  `MiB/s (${largePut.toFixed(0)} ms)`,
  '',
  '1.00',
);
row(
  'sha256sum of the same file',
  ((largeMiB / largeSha) * 1000).toFixed(0),
  `MiB/s (${largeSha.toFixed(0)} ms)`,
  'put',
  (largePut / largeSha).toFixed(2),
);
row(
  'cp of the same file (no fsync)',
  ((largeMiB / largeCopy) * 1000).toFixed(0),
  `MiB/s (${largeCopy.toFixed(0)} ms)`,
  'put',
  (largePut / largeCopy).toFixed(2),
);
row(
  'cp + sync -f',
  ((largeMiB / largeCopySync) * 1000).toFixed(0),
  `MiB/s (${largeCopySync.toFixed(0)} ms)`,
  'put',
  (largePut / largeCopySync).toFixed(2),
);

rmSync(base, { recursive: true, force: true });
console.log(`${filesystem}\n`);
console.log(
  '| measurement | value | unit | ratio: time of put ÷ time of this, or rate ÷ raw rate |',
);
console.log('|---|---|---|---|');
for (const r of rows)
  console.log(
    `| ${r.what} | ${r.value} | ${r.unit} | ${r.comparedWith ? `${r.ratio} (vs ${r.comparedWith})` : 'baseline'} |`,
  );

// What a long session costs per operation (bench/ledger-growth.mjs has the details).
const [growth] = await measureLedgerGrowth();
console.log();
console.log(formatLedgerGrowth(growth, 'live session'));

// Whether an operation slows with the number of checkpoints (bench/checkpoint-count.mjs).
console.log('\n### Checkpoints held\n');
const liveCount = await measureCheckpointCount();
console.log(formatCheckpointCount(liveCount, await measureCheckpointCountCli()));

// What the `rewind` command costs as a process (bench/startup.mjs).
console.log('\n### Start-up\n');
console.log(formatStartup(measureStartup()));

// The `rewind` command as a process, alone and sent to `rewind daemon` (bench/daemon.mjs; L too
// when run by itself).
console.log('\n### The daemon\n');
execFileSync(process.execPath, [fileURLToPath(new URL('./daemon.mjs', import.meta.url)), 'M'], {
  stdio: ['ignore', 'inherit', 'inherit'],
});

// The first checkpoint of a process that has just opened a watching session, beside one that
// asks find (bench/watch-start.mjs; S and L too when run by itself).
console.log('\n### The first checkpoint of a watching session\n');
execFileSync(
  process.execPath,
  [fileURLToPath(new URL('./watch-start.mjs', import.meta.url)), 'M'],
  {
    stdio: ['ignore', 'inherit', 'inherit'],
  },
);

// Checkpoints and rollbacks beside shadow git, `cp -a` and the `find` walk, at S, M and L
// (bench/workspace.mjs; BENCH_SIZES=S,M picks sizes): the longest part, 10 to 20 minutes for all
// three, and L needs about 40 GB free under BENCH_DIR.
console.log('\n### Checkpoints and rollback\n');
execFileSync(process.execPath, [fileURLToPath(new URL('./workspace.mjs', import.meta.url))], {
  stdio: ['ignore', 'inherit', 'inherit'],
});
