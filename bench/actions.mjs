// Per-action overhead of journaled actions, measured side by side with the plain operation:
//   node bench/actions.mjs            (sizes from BENCH_SIZES, default "S,L")
// In repository-shaped workspaces of 1,000 (S) and 100,000 (L) files:
//   write   Session.write of a 4 KiB file  vs  fs.writeFile + fsync of the same bytes (+ rename,
//           as an atomic write does) in the same workspace
//   exec    Session.exec of `true` and of a command that edits one file  vs  spawning the same
//           command (child_process.spawnSync); and the same exec in a session that watches the
//           workspace (openSession({ watch: true }): its two snapshots take what changed from
//           inotify instead of a find)
// Reports medians and ratios. Run after `npm run build`.
import { spawnSync } from 'node:child_process';
import {
  closeSync,
  fsyncSync,
  mkdirSync,
  mkdtempSync,
  openSync,
  renameSync,
  writeSync,
} from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { init, openSession } from '../dist/index.js';
import { generateWorkspace } from './generate-workspace.mjs';

const SIZES = { S: 1_000, M: 10_000, L: 100_000 };
const selected = (process.env.BENCH_SIZES ?? 'S,L').split(',');
const base = mkdtempSync(join(process.env.BENCH_DIR ?? tmpdir(), 'rewind-bench-actions-'));
const REPEATS = Number(process.env.BENCH_REPEATS ?? 30);

const ms = (start) => Number(process.hrtime.bigint() - start) / 1e6;
const median = (values) => [...values].sort((a, b) => a - b)[Math.floor(values.length / 2)];
async function sample(fn) {
  const values = [];
  for (let index = 0; index < REPEATS; index++) {
    const start = process.hrtime.bigint();
    await fn(index);
    values.push(ms(start));
  }
  return median(values);
}

const content = Buffer.alloc(4096, 'x');
function plainDurableWrite(path) {
  const temporary = `${path}.tmp`;
  const descriptor = openSync(temporary, 'w');
  writeSync(descriptor, content);
  fsyncSync(descriptor);
  closeSync(descriptor);
  renameSync(temporary, path);
  const directory = openSync(join(path, '..'), 'r');
  fsyncSync(directory);
  closeSync(directory);
}

const rows = [];
for (const size of selected) {
  const workspace = join(base, `ws-${size}`);
  mkdirSync(workspace);
  generateWorkspace(workspace, SIZES[size]);
  mkdirSync(join(workspace, 'bench-out'));
  await init({ workspace });
  const session = await openSession({ workspace });
  await session.checkpoint('base'); // the first snapshot, so exec's snapshots are incremental
  console.error(`== ${size}: ${SIZES[size]} files`);

  const plainWrite = await sample((index) =>
    plainDurableWrite(join(workspace, 'bench-out', `plain-${index}.txt`)),
  );
  const rewindWrite = await sample((index) =>
    session.write(`bench-out/journaled-${index}.txt`, content),
  );
  const plainTrue = await sample(() => spawnSync('true', { cwd: workspace }));
  const rewindTrue = await sample(() => session.exec(['true']));
  const edit = ['sh', '-c', 'echo change >> bench-out/edited.txt'];
  const plainEdit = await sample(() => spawnSync(edit[0], edit.slice(1), { cwd: workspace }));
  const rewindEdit = await sample(() => session.exec(edit));
  await session.close();
  // The watching session: its first snapshots ask find (the watch is not set up, then the tree
  // they update came before it); after a pause the watcher answers.
  const watching = await openSession({ workspace, watch: true });
  for (let warm = 0; warm < 3; warm++) {
    await new Promise((resolve) => setTimeout(resolve, 1500));
    await watching.checkpoint(`warm-${warm}`);
  }
  const watchingTrue = await sample(() => watching.exec(['true']));
  const watchingEdit = await sample(() => watching.exec(edit));
  await watching.close();
  const row = {
    size,
    files: SIZES[size],
    plainWrite,
    rewindWrite,
    plainTrue,
    rewindTrue,
    plainEdit,
    rewindEdit,
    watchingTrue,
    watchingEdit,
  };
  rows.push(row);
  console.error(JSON.stringify(row));
}

const fmt = (value) => (value >= 100 ? value.toFixed(0) : value.toFixed(2));
console.log(
  '| workspace | journaled write | writeFile + fsync + rename | ratio | exec `true` | exec `true`, watching | spawn `true` | ratio (watching) | exec editing a file | the same, watching | spawn, same | ratio (watching) |',
);
console.log('|---|---|---|---|---|---|---|---|---|---|---|---|');
for (const row of rows) {
  console.log(
    `| ${row.size} (${row.files} files) | ${fmt(row.rewindWrite)} ms | ${fmt(row.plainWrite)} ms | ${(row.rewindWrite / row.plainWrite).toFixed(2)}× | ` +
      `${fmt(row.rewindTrue)} ms | ${fmt(row.watchingTrue)} ms | ${fmt(row.plainTrue)} ms | ${(row.rewindTrue / row.plainTrue).toFixed(1)}× (${(row.watchingTrue / row.plainTrue).toFixed(1)}×) | ` +
      `${fmt(row.rewindEdit)} ms | ${fmt(row.watchingEdit)} ms | ${fmt(row.plainEdit)} ms | ${(row.rewindEdit / row.plainEdit).toFixed(1)}× (${(row.watchingEdit / row.plainEdit).toFixed(1)}×) |`,
  );
}
spawnSync('rm', ['-rf', base]);
