// What a long session costs: a journaled write, a checkpoint and an undo in a session whose ledger
// already holds 100, 1,000 and 10,000 entries, in a live process (a library user or `rewind mcp`
// keeps its session open). Reported as medians and as the ratio to the 100-entry figure: an
// operation that re-read the whole ledger would grow with it.
//   node bench/ledger-growth.mjs                 (after `npm run build`; run by `npm run bench`)
//   BENCH_COMPARE_DIST=/other/dist node ...      also measures another build in the same run
//                                                (say, an older commit's dist/) beside this one
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { pathToFileURL } from 'node:url';

const SIZES = (process.env.BENCH_LEDGER_SIZES ?? '100,1000,10000').split(',').map(Number);
const REPEATS = Number(process.env.BENCH_REPEATS ?? 51);
const WARM_UP_ROUNDS = 5;
const ms = (start) => Number(process.hrtime.bigint() - start) / 1e6;
const median = (values) => [...values].sort((a, b) => a - b)[Math.floor(values.length / 2)];

/** Grows a session to `entries` ledger entries the way an agent does: writes, a checkpoint now and then. */
async function grow(session, entries) {
  let count = (await session.actions()).length * 2 + 2;
  for (let index = 0; count < entries; index++) {
    if (index % 100 === 99) {
      await session.checkpoint(`grown-${index}`);
      count += 1;
    } else {
      await session.write(`src/file-${index % 50}.txt`, `version ${index}\n`);
      count += 2;
    }
  }
}

/** A session grown to `entries` entries in a fresh workspace, with a warm store. */
async function prepare(api, base, entries) {
  const workspace = mkdtempSync(join(base, `ws-${entries}-`));
  await api.init({ workspace });
  // A store in use has every fan-out directory of objects/ already: without this, a small
  // session would pay for creating them, and the comparison would measure that, not the ledger.
  const store = api.createObjectStore(join(workspace, '.rewind'));
  for (let index = 0; index < 2048; index++) await store.put(Buffer.from(`warm ${index}`));
  const session = await api.openSession({ workspace });
  await grow(session, entries);
  return { entries, session, write: [], checkpoint: [], undo: [] };
}

/** One round on a subject: a write, a checkpoint, and the undo of that write, each timed. */
async function round(subject, index) {
  const { session } = subject;
  let start = process.hrtime.bigint();
  const written = await session.write(`bench/new-${index}.txt`, `new ${index}\n`);
  const write = ms(start);
  start = process.hrtime.bigint();
  await session.checkpoint(`bench-${index + 1000}`);
  const checkpoint = ms(start);
  start = process.hrtime.bigint();
  await session.undo(written.id);
  const undo = ms(start);
  // The first rounds warm up the code and the caches; only the rest are counted.
  if (index < 0) return;
  subject.write.push(write);
  subject.checkpoint.push(checkpoint);
  subject.undo.push(undo);
}

/**
 * Measures builds (`dist` directories) at every size. Rounds go over every build and size in
 * turn, so a slow moment of the disk falls on all of them alike. Returns rows per build.
 */
export async function measureLedgerGrowth(dists = [resolve(import.meta.dirname, '..', 'dist')]) {
  const base = mkdtempSync(join(process.env.BENCH_DIR ?? tmpdir(), 'rewind-bench-growth-'));
  try {
    const subjects = [];
    for (const dist of dists) {
      const api = await import(pathToFileURL(join(dist, 'index.js')).href);
      for (const entries of SIZES) {
        console.error(`ledger growth: preparing ${entries} entries with ${dist}`);
        subjects.push({ dist, ...(await prepare(api, base, entries)) });
      }
    }
    for (let index = -WARM_UP_ROUNDS; index < REPEATS; index++) {
      for (const subject of subjects) await round(subject, index);
    }
    for (const subject of subjects) await subject.session.close();
    return dists.map((dist) =>
      subjects
        .filter((subject) => subject.dist === dist)
        .map((subject) => ({
          entries: subject.entries,
          write: median(subject.write),
          checkpoint: median(subject.checkpoint),
          undo: median(subject.undo),
        })),
    );
  } finally {
    rmSync(base, { recursive: true, force: true });
  }
}

/** A markdown table of one build's rows, each figure with its ratio to the smallest ledger's. */
export function formatLedgerGrowth(rows, title) {
  const first = rows[0];
  const cell = (row, key) => `${row[key].toFixed(2)} ms (${(row[key] / first[key]).toFixed(2)}×)`;
  return [
    `| ${title}: entries in the ledger | journaled write | checkpoint | undo |`,
    '|---|---|---|---|',
    ...rows.map(
      (row) =>
        `| ${row.entries.toLocaleString('en')} | ${cell(row, 'write')} | ${cell(row, 'checkpoint')} | ${cell(row, 'undo')} |`,
    ),
  ].join('\n');
}

if (import.meta.url === pathToFileURL(process.argv[1]).href) {
  const titles = ['this build'];
  const dists = [resolve(import.meta.dirname, '..', 'dist')];
  if (process.env.BENCH_COMPARE_DIST) {
    titles.push(`build in ${process.env.BENCH_COMPARE_DIST}`);
    dists.push(resolve(process.env.BENCH_COMPARE_DIST));
  }
  const results = await measureLedgerGrowth(dists);
  for (const [index, rows] of results.entries()) {
    console.log(formatLedgerGrowth(rows, titles[index]));
    console.log();
  }
}
