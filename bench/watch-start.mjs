// The first checkpoint of a process that has just opened its session (`rewind mcp`, the daemon,
// an agent runtime), and its checkpoint after a directory of the workspace moved (which makes a
// watch start again), after one changed file, at S, M and L: opened watching, with this build
// and, with BENCH_COMPARE_DIST=/path/to/other/dist, that one; and opened without a watch (find),
// with this build. After npm run build:
//   BENCH_COMPARE_DIST=/path/to/other/dist node bench/watch-start.mjs [S|M|L]...
// One workspace per size, snapshotted once before. Each round opens a session of each kind in
// turn (the order rotating), waits as a runtime waits for its agent's first tool call (1.5 s, 4 s
// at L: the watch goes live meanwhile), appends a line to a file 300 ms before the checkpoint
// (outside the racy window), syncs and times the checkpoint; then moves a directory of the
// workspace, waits again, and times a checkpoint after one changed file the same way. Medians of
// 5 (BENCH_ROUNDS), and every round after the table.
import { execFileSync } from 'node:child_process';
import { appendFileSync, mkdirSync, mkdtempSync, renameSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { builds, median, SIZES, sleep } from './builds.mjs';
import { describeFilesystem } from './filesystem.mjs';
import { generateWorkspace } from './generate-workspace.mjs';

const ROUNDS = Number(process.env.BENCH_ROUNDS ?? 5);
const names = Object.keys(builds);
const kinds = [
  ...names.map((name) => ({ title: `${name}, watching`, name, watch: true })),
  { title: `${names[0]}, not watching (find)`, name: names[0], watch: false },
];

console.log(describeFilesystem(process.env.BENCH_DIR ?? tmpdir()));
console.log('');
console.log(
  '| workspace | session opened | first checkpoint, 1 changed (median) | ratio | after a directory moved | ratio |',
);
console.log('| --- | --- | --- | --- | --- | --- |');
const rounds = [];
for (const size of process.argv.slice(2).length > 0 ? process.argv.slice(2) : ['S', 'M', 'L']) {
  const workspace = mkdtempSync(join(process.env.BENCH_DIR ?? tmpdir(), 'rewind-bench-start-'));
  try {
    const files = generateWorkspace(workspace, SIZES[size]).filter(
      (path) => !path.endsWith('.bin'),
    );
    // The directory that moves: scratch-0 and scratch-1 in turn.
    mkdirSync(join(workspace, 'scratch-0'));
    writeFileSync(join(workspace, 'scratch-0/notes.md'), 'notes\n');
    let moves = 0;
    const { init, openSession } = builds[names[0]];
    await init({ workspace });
    const first = await openSession({ workspace });
    await first.checkpoint('base');
    await first.close();
    const times = kinds.map(() => ({ first: [], moved: [] }));
    /** Appends a line to a file, waits past the racy window, syncs, and times a checkpoint. */
    const timed = async (session, file, label) => {
      appendFileSync(join(workspace, file), `// ${label}\n`);
      await sleep(300);
      execFileSync('sync');
      const start = process.hrtime.bigint();
      await session.checkpoint(label);
      return Number(process.hrtime.bigint() - start) / 1e6;
    };
    for (let round = 0; round < ROUNDS; round++) {
      for (let turn = 0; turn < kinds.length; turn++) {
        const index = (round + turn) % kinds.length;
        const { name, watch } = kinds[index];
        const session = await builds[name].openSession({ workspace, watch });
        try {
          const pause = size === 'L' ? 4_000 : 1_500;
          await sleep(pause);
          const file = files[(round * 7919 + turn * 104729) % files.length];
          times[index].first.push(await timed(session, file, `c${round}-${turn}`));
          renameSync(
            join(workspace, `scratch-${moves % 2}`),
            join(workspace, `scratch-${++moves % 2}`),
          );
          await sleep(pause);
          times[index].moved.push(await timed(session, file, `m${round}-${turn}`));
        } finally {
          await session.close();
        }
      }
    }
    const base = { first: median(times[0].first), moved: median(times[0].moved) };
    const shown = (values) => values.map((time) => time.toFixed(1)).join(', ');
    for (const [index, { title }] of kinds.entries()) {
      const { first, moved } = times[index];
      rounds.push(`${size}, ${title}: first ${shown(first)} ms; after a move ${shown(moved)} ms`);
      const cells = [median(first), median(moved)].map(
        (value, place) =>
          `${value.toFixed(1)} ms | ${(value / base[place === 0 ? 'first' : 'moved']).toFixed(2)}×`,
      );
      console.log(`| ${size} | ${title} | ${cells.join(' | ')} |`);
    }
  } finally {
    rmSync(workspace, { recursive: true, force: true });
  }
}
console.log('');
for (const line of rounds) console.log(`- ${line}`);
