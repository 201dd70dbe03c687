// The `rewind checkpoint` command after one changed file, run as a process as hooks and scripts
// run it: alone (it walks the workspace with find), and sent to `rewind daemon` (its session
// watches the workspace), beside the same checkpoint in a live process (a library user's, which
// walks with find too), at M (10,000 files) and L (100,000), in one run on one workspace:
//   node bench/daemon.mjs [M|L]...
// Turns rotate which goes first; a file is changed 300 ms before each checkpoint (outside the
// racy window), and the disk is synced, untimed, before it; medians of 15 (9 at L). The processes
// are started from a small process (bench/spawn-timer.mjs), as a shell or a hook runner starts
// them, not from this one, which holds a session of the workspace.
import { spawn, spawnSync } from 'node:child_process';
import { appendFileSync, mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { init, openSession } from '../dist/index.js';
import { generateWorkspace } from './generate-workspace.mjs';
import { startSpawnTimer } from './spawn-timer.mjs';

const SIZES = { M: 10_000, L: 100_000 };
const BIN = fileURLToPath(new URL('../bin/rewind.cjs', import.meta.url));
const median = (values) => [...values].sort((a, b) => a - b)[Math.floor(values.length / 2)];

/** Runs `rewind -q checkpoint LABEL` as a process, from a small one; the time it took, in ms. */
const timer = startSpawnTimer();
const cliCheckpoint = (workspace, label, env) =>
  timer.run(process.execPath, [BIN, '-q', 'checkpoint', label], { cwd: workspace, env });

async function startDaemon(workspace) {
  const child = spawn(process.execPath, [BIN, 'daemon'], {
    cwd: workspace,
    stdio: ['ignore', 'ignore', 'pipe'],
  });
  let log = '';
  child.stderr.on('data', (chunk) => {
    log += chunk;
  });
  while (!log.includes('serving')) {
    if (child.exitCode !== null) throw new Error(log);
    await new Promise((resolve) => setTimeout(resolve, 50));
  }
  // What the daemon took for each (its own log: `checkpoint exit 0 (12 ms)`).
  const took = () => [...log.matchAll(/checkpoint exit 0 \((\d+) ms\)/g)].map((m) => Number(m[1]));
  return { child, took };
}

console.log(
  '| workspace | live process (find) | `rewind checkpoint` alone (find) | `rewind checkpoint`, daemon (in the daemon) | daemon / live process | alone / live process |',
);
console.log('| --- | --- | --- | --- | --- | --- |');
for (const size of process.argv.slice(2).length > 0 ? process.argv.slice(2) : ['M', 'L']) {
  const workspace = mkdtempSync(join(process.env.BENCH_DIR ?? tmpdir(), 'rewind-bench-daemon-'));
  const rounds = size === 'L' ? 9 : 15;
  try {
    const files = generateWorkspace(workspace, SIZES[size]).filter(
      (path) => !path.endsWith('.bin'),
    );
    await init({ workspace });
    const live = await openSession({ workspace });
    await live.checkpoint('base');
    const daemon = await startDaemon(workspace);
    // Its session's first two snapshots ask find while the watch starts.
    for (const label of ['warm-1', 'warm-2', 'warm-3']) {
      await new Promise((resolve) => setTimeout(resolve, 2000));
      await cliCheckpoint(workspace, label, {});
    }
    const approaches = {
      live: (label) => timedLive(live, label),
      alone: (label) => cliCheckpoint(workspace, label, { REWIND_DAEMON: '0' }),
      daemon: (label) => cliCheckpoint(workspace, label, {}),
    };
    const names = Object.keys(approaches);
    const times = Object.fromEntries(names.map((name) => [name, []]));
    let change = 0;
    for (let round = 0; round < rounds; round++) {
      const order = names.map((_, index) => names[(index + round) % names.length]);
      for (const name of order) {
        appendFileSync(join(workspace, files[(change++ * 7919) % files.length]), `// ${change}\n`);
        await new Promise((resolve) => setTimeout(resolve, 300));
        spawnSync('sync');
        times[name].push(await approaches[name](`${name}-${round}`));
      }
    }
    const took = daemon.took();
    const served = took.length;
    daemon.child.kill('SIGTERM');
    await live.close();
    // warm-1..3 and every daemon round: the daemon served them all, none fell back.
    if (served !== rounds + 3) throw new Error(`the daemon served ${served} of ${rounds + 3}`);
    const m = Object.fromEntries(names.map((name) => [name, median(times[name])]));
    console.log(
      `| ${size} | ${m.live.toFixed(1)} ms | ${m.alone.toFixed(1)} ms | ${m.daemon.toFixed(1)} ms (${median(took.slice(3))} ms) | ${(m.daemon / m.live).toFixed(2)}× | ${(m.alone / m.live).toFixed(2)}× |`,
    );
  } finally {
    rmSync(workspace, { recursive: true, force: true });
  }
}

timer.close();

async function timedLive(session, label) {
  const start = process.hrtime.bigint();
  await session.checkpoint(label);
  return Number(process.hrtime.bigint() - start) / 1e6;
}
