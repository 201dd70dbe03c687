// A rollback of many changed files (1,000 by default), in a live process without the watcher,
// this build beside another one's in the same run (after npm run build):
//   BENCH_COMPARE_DIST=/path/to/other/dist node bench/rollback-many.mjs [S|M|L] [N]
// Without BENCH_COMPARE_DIST, this build alone. Before each round both workspaces are changed
// alike: a line appended to N files, 300 ms before (outside the racy window); each build's
// rollback starts after an untimed `sync`, rounds alternating which build goes first; medians of
// 9 rounds (BENCH_ROUNDS). It reports the whole rollback and, inside it, the time spent writing
// the files (from the rollback's progress: the first path done to the last); and, for scale, the
// same N files copied over their copies in a copy of the workspace (`copyFileSync`) and one
// `sync` after, in this process: what writing them durably costs at least.
import { execFileSync } from 'node:child_process';
import { copyFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { builds, changeFiles, median, sleep, twoWorkspaces } from './builds.mjs';
import { describeFilesystem } from './filesystem.mjs';

const ROUNDS = Number(process.env.BENCH_ROUNDS ?? 9);
const size = process.argv[2] ?? 'M';
const changed = Number(process.argv[3] ?? 1000);
const names = Object.keys(builds);

// Two workspaces, each opened by every build; the builds take turns on them (round r: build i
// rolls back workspace (r + i) % 2), since the same build measured a third faster on the
// workspace generated second than on the first.
const workspaces = [];
const times = Object.fromEntries(names.map((name) => [name, { total: [], writing: [] }]));
const copying = [];
/** Copies the `changed` files of `round` out of `from` over their copies in `to`, then syncs. */
function copyAndSync(from, to, files, round) {
  const paths = new Set();
  for (let index = 0; index < changed; index++) {
    paths.add(files[(round * 7919 + index * 104729) % files.length]);
  }
  execFileSync('sync');
  const start = performance.now();
  for (const path of paths) copyFileSync(join(from, path), join(to, path));
  execFileSync('sync');
  return performance.now() - start;
}
try {
  workspaces.push(...(await twoWorkspaces(size, 'rewind-bench-many-')));
  const first = workspaces[0].workspace;
  execFileSync('cp', ['-a', first, `${first}-copies`]);
  for (const [index, { workspace }] of workspaces.entries()) {
    workspaces[index].sessions = {};
    for (const name of names) {
      const session = await builds[name].openSession({ workspace });
      // The same session, opened by each build: a checkpoint of its own for each.
      await session.checkpoint(`base-${names.indexOf(name)}`);
      workspaces[index].sessions[name] = session;
    }
  }
  for (let round = 0; round < ROUNDS; round++) {
    changeFiles(workspaces, changed, round);
    await sleep(300);
    // Rounds alternate which build goes first, and each starts after a `sync` of its own.
    const order = round % 2 === 0 ? [...names.keys()] : [...names.keys()].reverse();
    for (const index of order) {
      const name = names[index];
      const session = workspaces[(round + index) % 2].sessions[name];
      execFileSync('sync');
      let firstPath;
      let lastPath;
      const start = performance.now();
      await session.rollback(`base-${index}`, {
        onProgress: () => {
          lastPath = performance.now();
          firstPath ??= lastPath;
        },
      });
      times[name].total.push(performance.now() - start);
      times[name].writing.push((lastPath ?? start) - (firstPath ?? start));
    }
    const { workspace, files } = workspaces[0];
    copying.push(copyAndSync(workspace, `${workspace}-copies`, files, round));
  }
} finally {
  for (const { workspace, sessions = {} } of workspaces) {
    for (const session of Object.values(sessions)) await session.close();
    rmSync(workspace, { recursive: true, force: true });
    rmSync(`${workspace}-copies`, { recursive: true, force: true });
  }
}

console.log(`${describeFilesystem(process.env.BENCH_DIR ?? tmpdir())}\n`);
console.log(`| workspace | build | rollback of ${changed} changed files | of which writing them |`);
console.log('| --- | --- | --- | --- |');
for (const name of names) {
  const { total, writing } = times[name];
  console.log(
    `| ${size} | ${name} | ${median(total).toFixed(0)} ms | ${median(writing).toFixed(0)} ms |`,
  );
}
console.log(
  `\nCopying the ${changed} files over copies of theirs and one sync: ${median(copying).toFixed(0)} ms.`,
);
