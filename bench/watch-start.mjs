// The first checkpoint of a process that has just opened its session (`rewind mcp`, the daemon,
// an agent runtime), after one changed file, at S, M and L: opened watching, with this build
// and, with BENCH_COMPARE_DIST=/path/to/other/dist, that one; and opened without a watch (find),
// with this build. After npm run build:
//   BENCH_COMPARE_DIST=/path/to/other/dist node bench/watch-start.mjs [S|M|L]...
// One workspace per size, snapshotted once before. Each round opens a session of each kind in
// turn (the order rotating), waits as a runtime waits for its agent's first tool call (1.5 s, 4 s
// at L: the watch goes live meanwhile), appends a line to a file 300 ms before the checkpoint
// (outside the racy window), syncs, times the checkpoint, and closes the session. Medians of 5
// (BENCH_ROUNDS), and every round after the table.

import { execFileSync } from 'node:child_process';
import { appendFileSync, mkdtempSync, rmSync } from 'node:fs';
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
console.log('| workspace | session opened | first checkpoint, 1 changed (median) | ratio |');
console.log('| --- | --- | --- | --- |');
const rounds = [];
for (const size of process.argv.slice(2).length > 0 ? process.argv.slice(2) : ['S', 'M', 'L']) {
  const workspace = mkdtempSync(join(process.env.BENCH_DIR ?? tmpdir(), 'rewind-bench-start-'));
  try {
    const files = generateWorkspace(workspace, SIZES[size]).filter(
      (path) => !path.endsWith('.bin'),
    );
    const { init, openSession } = builds[names[0]];
    await init({ workspace });
    const first = await openSession({ workspace });
    await first.checkpoint('base');
    await first.close();
    const times = kinds.map(() => []);
    for (let round = 0; round < ROUNDS; round++) {
      for (let turn = 0; turn < kinds.length; turn++) {
        const index = (round + turn) % kinds.length;
        const { name, watch } = kinds[index];
        const session = await builds[name].openSession({ workspace, watch });
        try {
          await sleep(size === 'L' ? 4_000 : 1_500);
          const file = files[(round * 7919 + turn * 104729) % files.length];
          appendFileSync(join(workspace, file), `// ${round}\n`);
          await sleep(300);
          execFileSync('sync');
          const start = process.hrtime.bigint();
          await session.checkpoint(`c${round}-${turn}`);
          times[index].push(Number(process.hrtime.bigint() - start) / 1e6);
        } finally {
          await session.close();
        }
      }
    }
    const base = median(times[0]);
    for (const [index, { title }] of kinds.entries()) {
      const value = median(times[index]);
      rounds.push(
        `${size}, ${title}: ${times[index].map((time) => time.toFixed(1)).join(', ')} ms`,
      );
      console.log(
        `| ${size} | ${title} | ${value.toFixed(1)} ms | ${(value / base).toFixed(2)}× |`,
      );
    }
  } finally {
    rmSync(workspace, { recursive: true, force: true });
  }
}
console.log('');
for (const line of rounds) console.log(`- ${line}`);
