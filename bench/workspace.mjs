// Checkpoint and rollback, measured side by side with the alternatives in one run:
//   node bench/workspace.mjs            (sizes from BENCH_SIZES, default "S,M,L")
// For each workspace size and each number of changed files (1, 10, 1000), it times:
//   rewind    Session.checkpoint / Session.rollback in a resident process (how agents use it),
//             and the `rewind checkpoint` command as a whole process
//   watching  the same in a resident process whose session watches the workspace
//             (`openSession({ watch: true })`: inotifywait says what changed, no find)
//   git       a shadow repository, run the way Gemini CLI's GitService runs it: one persistent
//             repository and index, `git add -A && git commit`; restore with
//             `git restore --source HEAD . && git clean -fdq`, which writes only what differs
//   cp -a     a full copy of the tree; restore by moving the tree aside and copying it back
// Each approach works on its own copy of the workspace, changed the same way before each step, so
// that none pays for what another did to the files (a `cp -a` restore rewrites every file, which
// would make git re-hash the whole tree).
//   find      `find WS -printf '%s %T@\n'`: the stat walk, the floor for any approach that looks
//             at every file
// and reports medians, ratios to the stat walk, and store growth per checkpoint; first checkpoints
// (git's first commit, a first `cp -a`) too: each into a fresh store, 5 rounds (3 at L), the
// approaches in turn. Each timed step starts after a `sync`, so that none pays for writing out
// what another step left dirty. The resident process's code is warmed first, untimed (see
// warmUp).
import { execFileSync } from 'node:child_process';
import {
  appendFileSync,
  mkdirSync,
  mkdtempSync,
  openSync,
  renameSync,
  rmSync,
  writeFileSync,
} from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { init, openSession } from '../dist/index.js';
import { describeFilesystem } from './filesystem.mjs';
import { generateWorkspace, random } from './generate-workspace.mjs';
import { startSpawnTimer } from './spawn-timer.mjs';

const SIZES = { S: 1_000, M: 10_000, L: 100_000 };
const CHANGES = [1, 10, 1000];
const selected = (process.env.BENCH_SIZES ?? 'S,M,L').split(',');
const root = fileURLToPath(new URL('..', import.meta.url));
const base = mkdtempSync(join(process.env.BENCH_DIR ?? tmpdir(), 'rewind-bench-ws-'));
const trash = join(base, 'trash');
mkdirSync(trash);

const ms = (start) => Number(process.hrtime.bigint() - start) / 1e6;
const median = (values) => {
  const sorted = [...values].sort((a, b) => a - b);
  return sorted[Math.floor(sorted.length / 2)];
};
/**
 * Times `fn`, after a `sync` (not timed): git and `cp -a` make nothing durable, and what they
 * (or the edits before a step) leave dirty would otherwise be written out by whichever step
 * syncs next, a Rewind step, and charged to it.
 */
async function timed(fn) {
  execFileSync('sync');
  const start = process.hrtime.bigint();
  await fn();
  return ms(start);
}
const sh = (command, cwd) =>
  execFileSync('sh', ['-c', command], { cwd, stdio: ['ignore', 'ignore', 'inherit'] });
const duBytes = (path) => Number(execFileSync('du', ['-sb', path]).toString().split('\t')[0]);
const devNull = openSync('/dev/null', 'w');
let trashCount = 0;
const moveToTrash = (path) => renameSync(path, join(trash, String(trashCount++)));
/** Deletes what was moved aside (untimed): at L, keeping it all to the end took over 40 GB. */
const emptyTrash = () => {
  rmSync(trash, { recursive: true, force: true });
  mkdirSync(trash);
};

/** Appends a line to each of `chosen` (paths relative to `root`). */
function appendChange(root, chosen, round) {
  for (const file of chosen) appendFileSync(join(root, file), `// change ${round}\n`);
}

/** Appends a line to `count` text files of the workspace at `root`, chosen by `next`. */
function modify(root, files, count, next, round) {
  const text = files.filter((file) => !file.endsWith('.bin'));
  const chosen = new Set();
  while (chosen.size < Math.min(count, text.length))
    chosen.add(text[Math.floor(next() * text.length)]);
  appendChange(root, chosen, round);
  return [...chosen];
}

/**
 * Checkpoints and rolls back, untimed, in a small workspace of its own: V8 compiles the library's
 * hot paths as they run, which a resident process (an agent's runtime) has long done by the time
 * it checkpoints; without this, the first size measured (S) paid for it in its first rounds.
 */
async function warmUp() {
  const workspace = join(base, 'ws-warm-up');
  mkdirSync(workspace);
  const files = generateWorkspace(workspace, 300);
  const next = random(11);
  await init({ workspace });
  const walking = await openSession({ workspace });
  const watching = await openSession({ workspace, watch: true });
  for (let round = 0; round < 20; round++) {
    for (const [name, session] of [
      ['walking', walking],
      ['watching', watching],
    ]) {
      modify(workspace, files, [1, 10, 100][round % 3], next, round);
      await session.checkpoint(`${name}-${round}`);
      modify(workspace, files, [1, 10, 100][round % 3], next, round);
      await session.rollback('latest');
    }
  }
  await walking.close();
  await watching.close();
  moveToTrash(workspace);
}

const results = [];
const spawnTimer = startSpawnTimer();
await warmUp();
for (const size of selected) {
  const fileCount = SIZES[size];
  const workspace = join(base, `ws-${size}`);
  mkdirSync(workspace);
  const files = generateWorkspace(workspace, fileCount);
  // The shadow repository and the copies work on workspaces of their own, the same files.
  const gitWorkspace = join(base, `ws-${size}-git`);
  const cpWorkspace = join(base, `ws-${size}-cp`);
  const watchWorkspace = join(base, `ws-${size}-watch`);
  sh(
    `cp -a ${workspace} ${gitWorkspace} && cp -a ${workspace} ${cpWorkspace} && cp -a ${workspace} ${watchWorkspace} && sync`,
  );
  const next = random(7);
  const repeats = size === 'L' ? 3 : 5;
  const git = (args) =>
    `git --git-dir=${join(base, `git-${size}`)} --work-tree=${gitWorkspace} ${args}`;
  const findArgs = [
    workspace,
    '-path',
    `${workspace}/.rewind`,
    '-prune',
    '-o',
    '-printf',
    '%s %T@\n',
  ];
  const copies = join(base, `copies-${size}`);
  mkdirSync(copies);
  const row = { size, fileCount, first: {}, byChanges: [] };
  console.error(`\n== ${size}: ${fileCount} files, ${(duBytes(workspace) / 1e6).toFixed(0)} MB`);

  // First checkpoints: a fresh store, shadow repository and copy each round, the three in turn
  // (the first to write after the files were generated may pay for the filesystem's first
  // allocations); medians. The last round's store is the one the rounds below work on.
  const firsts = { rewind: [], git: [], cp: [] };
  let session;
  const gitDirectory = join(base, `git-${size}`);
  const firstSteps = {
    rewind: async () => {
      await session?.close();
      rmSync(join(workspace, '.rewind'), { recursive: true, force: true });
      await init({ workspace });
      session = await openSession({ workspace });
      firsts.rewind.push(await timed(() => session.checkpoint('first')));
    },
    git: async () => {
      rmSync(gitDirectory, { recursive: true, force: true });
      sh(
        `${git('init -q')} && ${git('config gc.auto 0')} && ${git('config user.email b@b')} && ${git('config user.name b')}`,
      );
      writeFileSync(join(gitDirectory, 'info', 'exclude'), '.rewind\n');
      firsts.git.push(
        await timed(() => sh(`${git('add -A')} && ${git('commit -qm first --no-verify')}`)),
      );
    },
    cp: async () => {
      rmSync(join(copies, 'first'), { recursive: true, force: true });
      firsts.cp.push(
        await timed(() => sh(`mkdir ${copies}/first && cp -a ${cpWorkspace}/* ${copies}/first/`)),
      );
    },
  };
  const firstOrder = Object.keys(firstSteps);
  for (let index = 0; index < (size === 'L' ? 3 : 5); index++) {
    for (const step of index % 2 === 0 ? firstOrder : [...firstOrder].reverse()) {
      await firstSteps[step]();
    }
  }
  row.first.rewindMs = median(firsts.rewind);
  row.first.gitMs = median(firsts.git);
  row.first.cpMs = median(firsts.cp);
  // The watching session: its first checkpoint walks (and starts the watch again), the next
  // one asks find, and from the one after, the watcher says what changed.
  await init({ workspace: watchWorkspace });
  const watching = await openSession({ workspace: watchWorkspace, watch: true });
  await watching.checkpoint('first');
  for (const label of ['warm-1', 'warm-2']) {
    await new Promise((resolve) => setTimeout(resolve, 2000));
    await watching.checkpoint(label);
  }
  row.first.rewindStoreBytes = duBytes(join(workspace, '.rewind'));
  row.first.gitStoreBytes = duBytes(gitDirectory);
  console.error(
    `first checkpoint (medians; each round): rewind ${row.first.rewindMs.toFixed(0)} ms (${firsts.rewind.map((t) => t.toFixed(0)).join(', ')}), git ${row.first.gitMs.toFixed(0)} ms (${firsts.git.map((t) => t.toFixed(0)).join(', ')}), cp -a ${row.first.cpMs.toFixed(0)} ms (${firsts.cp.map((t) => t.toFixed(0)).join(', ')})`,
  );

  let round = 0;
  for (const changes of CHANGES) {
    const samples = {
      find: [],
      rewind: [],
      rewindCli: [],
      watching: [],
      git: [],
      cp: [],
      rewindRollback: [],
      watchingRollback: [],
      gitRollback: [],
      cpRollback: [],
    };
    const growth = { rewind: [], git: [], changedBytes: [] };
    for (let repeat = 0; repeat < repeats; repeat++) {
      samples.find.push(
        await timed(() =>
          execFileSync('find', findArgs, { stdio: ['ignore', devNull, 'inherit'] }),
        ),
      );

      // Each approach gets the same files changed, in its own workspace (appendChange).
      const changed = modify(workspace, files, changes, next, ++round);
      growth.changedBytes.push(changed.length * 1);
      let before = duBytes(join(workspace, '.rewind', 'objects'));
      samples.rewind.push(await timed(() => session.checkpoint(`r${round}`)));
      growth.rewind.push(duBytes(join(workspace, '.rewind', 'objects')) - before);

      modify(workspace, files, changes, next, ++round);
      // Started from a small process, as a shell starts it (see bench/spawn-timer.mjs).
      samples.rewindCli.push(
        await spawnTimer.run(
          process.execPath,
          [join(root, 'bin/rewind.cjs'), '-q', 'checkpoint', `c${round}`],
          { cwd: workspace, env: { REWIND_DAEMON: '0' } },
        ),
      );

      appendChange(watchWorkspace, changed, round);
      samples.watching.push(await timed(() => watching.checkpoint(`r${round}`)));

      appendChange(gitWorkspace, changed, round);
      before = duBytes(join(base, `git-${size}`, 'objects'));
      samples.git.push(
        await timed(() => sh(`${git('add -A')} && ${git(`commit -qm r${round} --no-verify`)}`)),
      );
      growth.git.push(duBytes(join(base, `git-${size}`, 'objects')) - before);

      appendChange(cpWorkspace, changed, round);
      const latestCopy = `${copies}/${round}`;
      samples.cp.push(
        await timed(() => sh(`mkdir ${latestCopy} && cp -a ${cpWorkspace}/* ${latestCopy}/`)),
      );

      // Rollback: break N files, then return to the latest checkpoint of each approach.
      const broken = modify(workspace, files, changes, next, ++round);
      samples.rewindRollback.push(await timed(() => session.rollback('latest')));
      appendChange(watchWorkspace, broken, round);
      samples.watchingRollback.push(await timed(() => watching.rollback('latest')));
      appendChange(gitWorkspace, broken, round);
      samples.gitRollback.push(
        await timed(() => sh(`${git('restore --source HEAD -- .')} && ${git('clean -fdq')}`)),
      );
      appendChange(cpWorkspace, broken, round);
      samples.cpRollback.push(
        await timed(() => {
          for (const entry of execFileSync('ls', ['-A', cpWorkspace])
            .toString()
            .split('\n')
            .filter(Boolean)) {
            moveToTrash(join(cpWorkspace, entry));
          }
          sh(`cp -a ${latestCopy}/* ${cpWorkspace}/`);
        }),
      );
      moveToTrash(latestCopy);
      // Files changed less than the racy window (100 ms) before a snapshot are looked at again by
      // the next one (Rewind's, and git's index alike); in a real session seconds pass between
      // tool calls.
      await new Promise((resolve) => setTimeout(resolve, 250));
    }
    emptyTrash();
    const m = Object.fromEntries(
      Object.entries(samples).map(([key, values]) => [key, median(values)]),
    );
    row.byChanges.push({
      changes,
      medians: m,
      growth: { rewind: median(growth.rewind), git: median(growth.git) },
    });
    console.error(
      `N=${changes}: find ${m.find.toFixed(0)} | checkpoint rewind ${m.rewind.toFixed(0)} (cli ${m.rewindCli.toFixed(0)}, watching ${m.watching.toFixed(0)}) git ${m.git.toFixed(0)} cp ${m.cp.toFixed(0)} | ` +
        `rollback rewind ${m.rewindRollback.toFixed(0)} (watching ${m.watchingRollback.toFixed(0)}) git ${m.gitRollback.toFixed(0)} cp ${m.cpRollback.toFixed(0)} | growth rewind ${median(growth.rewind)} B git ${median(growth.git)} B`,
    );
  }
  await session.close();
  await watching.close();
  results.push(row);
  moveToTrash(workspace);
  moveToTrash(watchWorkspace);
  moveToTrash(gitWorkspace);
  moveToTrash(cpWorkspace);
}
spawnTimer.close();

const fmt = (value) => (value >= 100 ? value.toFixed(0) : value.toFixed(1));
const ratio = (a, b) => `${(a / b).toFixed(2)}×`;
console.log(`${describeFilesystem(base)}\n`);
console.log('### First checkpoint\n');
console.log('| workspace | rewind | shadow git | cp -a | rewind store | git store |');
console.log('|---|---|---|---|---|---|');
for (const r of results) {
  console.log(
    `| ${r.size} (${r.fileCount} files) | ${fmt(r.first.rewindMs)} ms | ${fmt(r.first.gitMs)} ms | ${fmt(r.first.cpMs)} ms | ` +
      `${(r.first.rewindStoreBytes / 1e6).toFixed(0)} MB | ${(r.first.gitStoreBytes / 1e6).toFixed(0)} MB |`,
  );
}
console.log('\n### Checkpoint after N changed files (median ms; ratio to the stat walk)\n');
console.log(
  '| workspace | N | find (floor) | rewind | rewind, watching | rewind CLI process | shadow git | cp -a | rewind / git | watching / git |',
);
console.log('|---|---|---|---|---|---|---|---|---|---|');
for (const r of results) {
  for (const c of r.byChanges) {
    const m = c.medians;
    console.log(
      `| ${r.size} | ${c.changes} | ${fmt(m.find)} | ${fmt(m.rewind)} (${ratio(m.rewind, m.find)}) | ${fmt(m.watching)} (${ratio(m.watching, m.find)}) | ${fmt(m.rewindCli)} (${ratio(m.rewindCli, m.find)}) | ` +
        `${fmt(m.git)} (${ratio(m.git, m.find)}) | ${fmt(m.cp)} (${ratio(m.cp, m.find)}) | ${ratio(m.rewind, m.git)} | ${ratio(m.watching, m.git)} |`,
    );
  }
}
console.log('\n### Rollback with N changed files (median ms; ratio to the stat walk)\n');
console.log(
  '| workspace | N | find (floor) | rewind | rewind, watching | shadow git | cp -a back | rewind / git | watching / git |',
);
console.log('|---|---|---|---|---|---|---|---|---|');
for (const r of results) {
  for (const c of r.byChanges) {
    const m = c.medians;
    console.log(
      `| ${r.size} | ${c.changes} | ${fmt(m.find)} | ${fmt(m.rewindRollback)} (${ratio(m.rewindRollback, m.find)}) | ${fmt(m.watchingRollback)} (${ratio(m.watchingRollback, m.find)}) | ` +
        `${fmt(m.gitRollback)} (${ratio(m.gitRollback, m.find)}) | ${fmt(m.cpRollback)} (${ratio(m.cpRollback, m.find)}) | ${ratio(m.rewindRollback, m.gitRollback)} | ${ratio(m.watchingRollback, m.gitRollback)} |`,
    );
  }
}
console.log('\n### Store growth per checkpoint (median bytes on disk)\n');
console.log('| workspace | N | rewind objects | git objects (loose, no gc) |');
console.log('|---|---|---|---|');
for (const r of results) {
  for (const c of r.byChanges)
    console.log(`| ${r.size} | ${c.changes} | ${c.growth.rewind} | ${c.growth.git} |`);
}
writeFileSync(
  join(root, 'bench', 'last-workspace-run.json'),
  `${JSON.stringify(results, null, 2)}\n`,
);
rmSync(base, { recursive: true, force: true });
