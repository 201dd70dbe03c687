// Isolated sessions: starting one (copy the workspace into a view and record it) on a host never
// snapshotted and on one snapshotted before, committing one changed file back, and a command
// that changes one file run in the view (`session.exec`) by a session that watches its view
// (`watch: true`, as `rewind mcp` opens it) and by one that does not (find looks, before and
// after the command), beside `cp -a` of the same tree, in one run:
//   node bench/isolated.mjs        (sizes from BENCH_SIZES, default "S,M"; after npm run build)
//   BENCH_COMPARE_DIST=/other/dist node bench/isolated.mjs   also measures another build
//                                  (say, an older commit's dist/) in the same run, turn by turn
import { execFileSync } from 'node:child_process';
import { appendFileSync, mkdirSync, mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { pathToFileURL } from 'node:url';
import { generateWorkspace } from './generate-workspace.mjs';

const SIZES = { S: 1_000, M: 10_000, L: 100_000 };
const selected = (process.env.BENCH_SIZES ?? 'S,M').split(',');
const base = mkdtempSync(join(process.env.BENCH_DIR ?? tmpdir(), 'rewind-bench-isolated-'));
const builds = [{ title: 'this build', dist: resolve(import.meta.dirname, '..', 'dist') }];
if (process.env.BENCH_COMPARE_DIST) {
  builds.push({
    title: `build in ${process.env.BENCH_COMPARE_DIST}`,
    dist: resolve(process.env.BENCH_COMPARE_DIST),
  });
}
for (const build of builds) build.api = await import(pathToFileURL(join(build.dist, 'index.js')));

const ms = (start) => Number(process.hrtime.bigint() - start) / 1e6;
async function timed(fn) {
  const start = process.hrtime.bigint();
  await fn();
  return ms(start);
}
const median = (values) => [...values].sort((a, b) => a - b)[Math.floor(values.length / 2)];

/**
 * One round for one build, on a fresh copy of the generated tree whose files are older than the
 * change window (as a project's files are): start a session on a host never snapshotted, commit
 * one changed file, then start a second session on the host the first one snapshotted, and run
 * commands in its view; then a third session, watching its view, runs the same commands.
 */
async function round({ api }, generated, file, name, size) {
  const workspace = join(base, name);
  execFileSync('cp', ['-a', generated, workspace]);
  await api.init({ workspace });
  await sleep(300);
  let session;
  const first = await timed(async () => {
    session = await api.startIsolatedSession({ workspace, makeCurrent: false });
  });
  appendFileSync(join(session.workspace, file), '// changed in the view\n');
  const commit = await timed(() => session.commit());
  await session.close();
  await sleep(300);
  let second;
  const again = await timed(async () => {
    second = await api.startIsolatedSession({ workspace, makeCurrent: false });
  });
  const found = await execs(second, file);
  await second.close();
  const watching = await api.startIsolatedSession({ workspace, makeCurrent: false, watch: true });
  // As a runtime waits for its agent's first tool call: the watch goes live and takes its base.
  await sleep(size === 'L' ? 4000 : 1500);
  const watched = await execs(watching, file);
  await watching.close();
  rmSync(workspace, { recursive: true, force: true });
  return { first, commit, again, found, watched };
}

/** The median of 5 commands run in the session's view, each appending a line to `file`. */
async function execs(session, file) {
  const times = [];
  for (let index = 0; index < 5; index++) {
    await sleep(150); // past the change window of the command before
    times.push(await timed(() => session.exec(['sh', '-c', `echo "// ${index}" >> '${file}'`])));
  }
  return median(times);
}

console.log(
  '| workspace | build | start, host never snapshotted | start, host snapshotted before | `cp -a` of the tree | first / cp | before / cp | commit 1 changed file | command in the view | the same, watching |',
);
console.log('| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |');
for (const size of selected) {
  const generated = join(base, `generated-${size}`);
  mkdirSync(generated);
  const files = generateWorkspace(generated, SIZES[size]);
  const file = files.find((path) => !path.endsWith('.bin'));
  const rounds = Number(process.env.BENCH_ROUNDS ?? (size === 'L' ? 1 : 3));
  const results = builds.map(() => ({ first: [], commit: [], again: [], found: [], watched: [] }));
  const copies = [];
  for (let index = 0; index < rounds; index++) {
    const target = join(base, `copy-${size}`);
    copies.push(await timed(() => execFileSync('cp', ['-a', generated, target])));
    rmSync(target, { recursive: true, force: true });
    for (const [at, build] of builds.entries()) {
      const result = await round(build, generated, file, `ws-${size}-${at}-${index}`, size);
      for (const key of Object.keys(result)) results[at][key].push(result[key]);
    }
  }
  const copy = median(copies);
  for (const [at, build] of builds.entries()) {
    const first = median(results[at].first);
    const again = median(results[at].again);
    console.log(
      `| ${size} (${SIZES[size]} files) | ${build.title} | ${first.toFixed(0)} ms | ${again.toFixed(0)} ms | ${copy.toFixed(0)} ms | ${(first / copy).toFixed(2)}× | ${(again / copy).toFixed(2)}× | ${median(results[at].commit).toFixed(0)} ms | ${median(results[at].found).toFixed(1)} ms | ${median(results[at].watched).toFixed(1)} ms |`,
    );
  }
  rmSync(generated, { recursive: true, force: true });
}
rmSync(base, { recursive: true, force: true });
