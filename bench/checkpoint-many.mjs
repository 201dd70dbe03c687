// A checkpoint of many changed files (1,000 by default) in a live process whose session watches
// the workspace, this build beside another one's in the same run (after npm run build):
//   BENCH_COMPARE_DIST=/path/to/other/dist node bench/checkpoint-many.mjs [S|M|L] [N]
// Without BENCH_COMPARE_DIST, this build alone. A watching session sees every change in its
// workspace, so each build has a workspace of its own: two workspaces, and halfway through the
// builds swap them (sessions closed and opened again), since the same build measured a third
// faster on the workspace generated second than on the first (bench/rollback-many.mjs). Before
// each round both workspaces are changed alike: a line appended to N files, 300 ms before (outside
// the racy window), and an untimed `sync` before each build's checkpoint; medians of 10 rounds
// (BENCH_ROUNDS), rounds alternating which build goes first.
import { execFileSync } from 'node:child_process';
import { rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { builds, changeFiles, median, sleep, twoWorkspaces } from './builds.mjs';
import { describeFilesystem } from './filesystem.mjs';

const ROUNDS = Number(process.env.BENCH_ROUNDS ?? 10);
const size = process.argv[2] ?? 'M';
const changed = Number(process.argv[3] ?? 1000);
const names = Object.keys(builds);

const workspaces = [];
const times = Object.fromEntries(names.map((name) => [name, []]));
let sessions = [];
/** Opens each build's watching session on its workspace: build i on workspace (i + half) % 2. */
async function openSessions(half) {
  for (const session of sessions) await session.close();
  sessions = [];
  for (const [index, name] of names.entries()) {
    const { workspace } = workspaces[(index + half) % workspaces.length];
    const session = await builds[name].openSession({ workspace, watch: true });
    // Two snapshots while the watch starts (the first ones ask find), then its own.
    await session.checkpoint(`start-${half}-a`);
    await sleep(1500);
    await session.checkpoint(`start-${half}-b`);
    sessions.push(session);
  }
}
try {
  workspaces.push(...(await twoWorkspaces(size, 'rewind-bench-cmany-')));
  for (let round = 0; round < ROUNDS; round++) {
    if (round === 0 || round === Math.floor(ROUNDS / 2)) await openSessions(round === 0 ? 0 : 1);
    changeFiles(workspaces, changed, round);
    await sleep(300);
    const order = round % 2 === 0 ? [...names.keys()] : [...names.keys()].reverse();
    for (const index of order) {
      // Before each build's step: what the other one's left dirty is not this one's to write.
      execFileSync('sync');
      const start = performance.now();
      await sessions[index].checkpoint(`r${round}`);
      times[names[index]].push(performance.now() - start);
    }
  }
} finally {
  for (const session of sessions) await session.close();
  for (const { workspace } of workspaces) rmSync(workspace, { recursive: true, force: true });
}

console.log(`${describeFilesystem(process.env.BENCH_DIR ?? tmpdir())}\n`);
console.log(`| workspace | build | checkpoint of ${changed} changed files, watching |`);
console.log('| --- | --- | --- |');
for (const name of names) {
  console.log(`| ${size} | ${name} | ${median(times[name]).toFixed(0)} ms |`);
}
