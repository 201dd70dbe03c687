// Whether checkpoint and rollback slow with the number of checkpoints a session holds: in a live
// process, a checkpoint after one changed file and a rollback of one file, measured when the
// session holds 10 checkpoints and again when it holds 1,000 (medians of 15 each); then the same
// as one-shot `rewind` commands (which parse the session's ledger as they start), in two
// workspaces holding 10 and 1,000 checkpoints, taking turns (medians of 21 each).
//   node bench/checkpoint-count.mjs        (after npm run build)
import { spawnSync } from 'node:child_process';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';

const ROUNDS = 15;
const median = (values) => [...values].sort((a, b) => a - b)[Math.floor(values.length / 2)];
const ms = (start) => Number(process.hrtime.bigint() - start) / 1e6;

/** Medians of checkpoint and rollback at 10 and at 1,000 checkpoints, in ms. */
export async function measureCheckpointCount(dist = resolve(import.meta.dirname, '..', 'dist')) {
  const { init, openSession } = await import(join(dist, 'index.js'));
  const workspace = mkdtempSync(join(process.env.BENCH_DIR ?? tmpdir(), 'rewind-bench-count-'));
  for (let index = 0; index < 200; index++) {
    writeFileSync(join(workspace, `f${index}.txt`), `file ${index}\n`);
  }
  await init({ workspace });
  const session = await openSession({ workspace });
  let count = 0;
  const growTo = async (target) => {
    while (count < target) {
      writeFileSync(join(workspace, 'grow.txt'), `${count}`);
      await session.checkpoint(`c${count++}`);
    }
  };
  const measure = async (tag) => {
    const checkpoint = [];
    const rollback = [];
    for (let round = 0; round < ROUNDS; round++) {
      writeFileSync(join(workspace, `f${round}.txt`), `changed ${tag} ${round}\n`);
      let start = process.hrtime.bigint();
      await session.checkpoint(`${tag}-${round}`);
      checkpoint.push(ms(start));
      count += 1;
      writeFileSync(join(workspace, `f${round}.txt`), `broken ${round}\n`);
      start = process.hrtime.bigint();
      await session.rollback('latest');
      rollback.push(ms(start));
    }
    return { checkpoint: median(checkpoint), rollback: median(rollback) };
  };
  try {
    await growTo(10);
    const atTen = await measure('at10');
    await growTo(1000);
    const atThousand = await measure('at1000');
    return { atTen, atThousand };
  } finally {
    await session.close();
    rmSync(workspace, { recursive: true, force: true });
  }
}

/** The same with `rewind checkpoint` and `rewind rollback latest` as processes, in ms. */
export async function measureCheckpointCountCli(root = resolve(import.meta.dirname, '..')) {
  const { init, openSession } = await import(join(root, 'dist', 'index.js'));
  const bin = join(root, 'bin', 'rewind.cjs');
  const workspaces = [];
  const rewind = (workspace, args) => {
    const start = process.hrtime.bigint();
    const result = spawnSync(process.execPath, [bin, ...args], {
      cwd: workspace,
      env: { ...process.env, REWIND_DAEMON: '0' },
      encoding: 'utf8',
    });
    if (result.status !== 0) throw new Error(`rewind ${args.join(' ')}: ${result.stderr}`);
    return ms(start);
  };
  try {
    for (const count of [10, 1000]) {
      const workspace = mkdtempSync(join(process.env.BENCH_DIR ?? tmpdir(), 'rewind-bench-cli-'));
      workspaces.push(workspace);
      for (let index = 0; index < 200; index++) {
        writeFileSync(join(workspace, `f${index}.txt`), `file ${index}\n`);
      }
      await init({ workspace });
      const session = await openSession({ workspace });
      for (let made = 0; made < count; made++) {
        writeFileSync(join(workspace, 'grow.txt'), `${made}`);
        await session.checkpoint(`c${made}`);
      }
      await session.close();
    }
    const times = workspaces.map(() => ({ checkpoint: [], rollback: [] }));
    for (let round = 0; round < 21; round++) {
      for (const [index, workspace] of workspaces.entries()) {
        writeFileSync(join(workspace, `f${round}.txt`), `changed ${round}\n`);
        times[index].checkpoint.push(rewind(workspace, ['checkpoint', `r${round}`]));
        writeFileSync(join(workspace, `f${round}.txt`), `broken ${round}\n`);
        times[index].rollback.push(rewind(workspace, ['rollback', 'latest']));
      }
    }
    const [atTen, atThousand] = times.map(({ checkpoint, rollback }) => ({
      checkpoint: median(checkpoint),
      rollback: median(rollback),
    }));
    return { atTen, atThousand };
  } finally {
    for (const workspace of workspaces) rmSync(workspace, { recursive: true, force: true });
  }
}

/** The measurements as a Markdown table (`cli`: as processes, when measured). */
export function formatCheckpointCount({ atTen, atThousand }, cli) {
  const ratio = (a, b) => `${(a / b).toFixed(2)}×`;
  const rows = (way, ten, thousand) => [
    `| 10${way} | ${ten.checkpoint.toFixed(1)} ms | ${ten.rollback.toFixed(1)} ms |`,
    `| 1,000${way} | ${thousand.checkpoint.toFixed(1)} ms (${ratio(thousand.checkpoint, ten.checkpoint)}) | ${thousand.rollback.toFixed(1)} ms (${ratio(thousand.rollback, ten.rollback)}) |`,
  ];
  return [
    '| checkpoints held | checkpoint, 1 changed | rollback, 1 changed |',
    '| ---------------- | --------------------- | ------------------- |',
    ...rows('', atTen, atThousand),
    ...(cli ? rows(', `rewind` as a process', cli.atTen, cli.atThousand) : []),
  ].join('\n');
}

if (process.argv[1] === fileURLToPath(import.meta.url)) {
  const live = await measureCheckpointCount();
  console.log(formatCheckpointCount(live, await measureCheckpointCountCli()));
}
