// A checkpoint, then a rollback, of many changed files (1,000 by default) in live processes whose
// sessions watch the workspace, this build beside another one's in the same run (after npm run
// build):
//   BENCH_COMPARE_DIST=/path/to/other/dist node bench/checkpoint-rollback.mjs [S|M|L] [N]
// Without BENCH_COMPARE_DIST, this build alone. Each round, as bench/workspace.mjs does: a line
// appended to N files, a checkpoint; a line appended to N others, a rollback to that checkpoint
// (so the checkpoint follows a rollback that wrote N files, as in a session). Each build watches
// a workspace of its own (the same files); the changes come 300 ms before the steps (outside the
// racy window), each timed step starts after an untimed `sync`, and rounds alternate which build
// goes first. Medians (and means) of 9 rounds (BENCH_ROUNDS), the median CPU time the process
// spent in each step (user and system, on every thread: on a VM whose wall times move by a fifth
// from run to run, a change of a few percent shows there first), and the median of what each
// checkpoint adds to the store's objects (bytes on disk, as `du -sb` counts them).
import { execFileSync } from 'node:child_process';
import { rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { builds, changeFiles, median, sleep, twoWorkspaces } from './builds.mjs';
import { describeFilesystem } from './filesystem.mjs';

const ROUNDS = Number(process.env.BENCH_ROUNDS ?? 9);
const size = process.argv[2] ?? 'M';
const changed = Number(process.argv[3] ?? 1000);
const names = Object.keys(builds);

const workspaces = [];
const sessions = [];
const times = Object.fromEntries(
  names.map((name) => [
    name,
    { checkpoint: [], rollback: [], checkpointCpu: [], rollbackCpu: [], growth: [] },
  ]),
);
const objectBytes = (index) =>
  Number(
    execFileSync('du', ['-sb', `${workspaces[index].workspace}/.rewind/objects`])
      .toString()
      .split('\t')[0],
  );
/** Times one step of each build, in `order`, each after a `sync`. */
async function eachBuild(order, step, kind) {
  for (const index of order) {
    execFileSync('sync');
    const before = kind === 'checkpoint' ? objectBytes(index) : 0;
    const start = performance.now();
    const cpu = process.cpuUsage();
    await step(sessions[index]);
    times[names[index]][kind].push(performance.now() - start);
    const { user, system } = process.cpuUsage(cpu);
    times[names[index]][`${kind}Cpu`].push((user + system) / 1000);
    if (kind === 'checkpoint') times[names[index]].growth.push(objectBytes(index) - before);
  }
}
try {
  workspaces.push(...(await twoWorkspaces(size, 'rewind-bench-cr-')));
  for (const [index, name] of names.entries()) {
    const session = await builds[name].openSession({
      workspace: workspaces[index].workspace,
      watch: true,
    });
    // Two snapshots while the watch starts (the first ones ask find), then its own.
    await session.checkpoint('start-a');
    await sleep(1500);
    await session.checkpoint('start-b');
    sessions.push(session);
  }
  for (let round = 0; round < ROUNDS; round++) {
    const order = round % 2 === 0 ? [...names.keys()] : [...names.keys()].reverse();
    changeFiles(workspaces, changed, round);
    await sleep(300);
    await eachBuild(order, (session) => session.checkpoint(`r${round}`), 'checkpoint');
    changeFiles(workspaces, changed, ROUNDS + round);
    await sleep(300);
    await eachBuild(order, (session) => session.rollback(`r${round}`), 'rollback');
  }
} finally {
  for (const session of sessions) await session.close();
  for (const { workspace } of workspaces) rmSync(workspace, { recursive: true, force: true });
}

console.log(`${describeFilesystem(process.env.BENCH_DIR ?? tmpdir())}\n`);
console.log(
  `| workspace | build | checkpoint of ${changed} files | its CPU time | rollback of ${changed} files | its CPU time | store growth per checkpoint |`,
);
console.log('| --- | --- | --- | --- | --- | --- | --- |');
const shown = (value) => value.toFixed(value < 100 ? 1 : 0);
// The mean beside the median: a merge of packs now and then moves it, not the median.
const mean = (values) => values.reduce((sum, value) => sum + value, 0) / values.length;
const ms = (values) => `${shown(median(values))} ms (mean ${shown(mean(values))})`;
for (const name of names) {
  const { checkpoint, rollback, checkpointCpu, rollbackCpu, growth } = times[name];
  const cpu = (values) => `${shown(median(values))} ms`;
  console.log(
    `| ${size} | ${name} | ${ms(checkpoint)} | ${cpu(checkpointCpu)} | ${ms(rollback)} | ${cpu(rollbackCpu)} | ${median(growth)} B |`,
  );
}
