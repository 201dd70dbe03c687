// Whether listing a session's checkpoints slows with how many it holds: `rewind checkpoints`,
// `rewind checkpoints --lines` with no line counts cached (every pair of checkpoints diffed), and
// `--lines` again (the counts cached in .rewind/cache/line-counts-v1.json), each as a process,
// measured when the session holds 10 checkpoints and again when it holds N (default 1,000; each
// checkpoint changes one file of 200 by a few lines). Medians of 5 rounds; the uncached `--lines`
// runs once at N (it reads every changed file of every checkpoint). Not part of `npm run bench`.
//   node bench/checkpoint-list.mjs [N]     (after npm run build)
import { spawnSync } from 'node:child_process';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';

const ROUNDS = 5;
const median = (values) => [...values].sort((a, b) => a - b)[Math.floor(values.length / 2)];

/** Median wall times in ms of the three listings, at 10 checkpoints and at `count`. */
export async function measureCheckpointList(
  count = 1000,
  root = resolve(import.meta.dirname, '..'),
) {
  const { init, openSession } = await import(join(root, 'dist', 'index.js'));
  const bin = join(root, 'bin', 'rewind.cjs');
  const workspace = mkdtempSync(join(process.env.BENCH_DIR ?? tmpdir(), 'rewind-bench-list-'));
  const cache = join(workspace, '.rewind', 'cache', 'line-counts-v1.json');
  const run = (args) => {
    const start = process.hrtime.bigint();
    const result = spawnSync(process.execPath, [bin, ...args], {
      cwd: workspace,
      env: { ...process.env, REWIND_DAEMON: '0' },
      encoding: 'utf8',
    });
    if (result.status !== 0) throw new Error(`rewind ${args.join(' ')} failed: ${result.stderr}`);
    return Number(process.hrtime.bigint() - start) / 1e6;
  };
  const lines = (round) =>
    Array.from(
      { length: 40 },
      (_, line) => `line ${line} of round ${round % 3 === line % 3 ? round : 0}`,
    ).join('\n');
  for (let index = 0; index < 200; index++) {
    writeFileSync(join(workspace, `f${index}.txt`), `${lines(0)}\n`);
  }
  await init({ workspace });
  let made = 0;
  const growTo = async (target) => {
    const session = await openSession({ workspace });
    try {
      while (made < target) {
        writeFileSync(join(workspace, `f${made % 200}.txt`), `${lines(made + 1)}\n`);
        await session.checkpoint(`c${made++}`);
      }
    } finally {
      await session.close();
    }
  };
  const measure = (uncachedRounds) => {
    const plain = [];
    const uncached = [];
    const cached = [];
    for (let round = 0; round < ROUNDS; round++) {
      plain.push(run(['checkpoints']));
      if (round < uncachedRounds) {
        rmSync(cache, { force: true });
        uncached.push(run(['checkpoints', '--lines']));
      }
      cached.push(run(['checkpoints', '--lines']));
    }
    return { plain: median(plain), uncached: median(uncached), cached: median(cached) };
  };
  try {
    await growTo(10);
    const atTen = measure(ROUNDS);
    await growTo(count);
    const atCount = measure(1);
    return { count, atTen, atCount };
  } finally {
    rmSync(workspace, { recursive: true, force: true });
  }
}

/** The measurement as a Markdown table. */
export function formatCheckpointList({ count, atTen, atCount }) {
  const ratio = (a, b) => `${(a / b).toFixed(2)}×`;
  const cell = (key) => `${atCount[key].toFixed(0)} ms (${ratio(atCount[key], atTen[key])})`;
  return [
    '| checkpoints held | checkpoints | checkpoints --lines, nothing cached | checkpoints --lines, cached |',
    '| ---------------- | ----------- | ----------------------------------- | --------------------------- |',
    `| 10 | ${atTen.plain.toFixed(0)} ms | ${atTen.uncached.toFixed(0)} ms | ${atTen.cached.toFixed(0)} ms |`,
    `| ${count.toLocaleString('en-US')} | ${cell('plain')} | ${cell('uncached')} | ${cell('cached')} |`,
  ].join('\n');
}

if (process.argv[1] === fileURLToPath(import.meta.url)) {
  const count = process.argv[2] === undefined ? 1000 : Number(process.argv[2]);
  if (!Number.isInteger(count) || count < 10) {
    console.error('usage: node bench/checkpoint-list.mjs [N]   (N: 10 or more checkpoints)');
    process.exit(2);
  }
  console.log(formatCheckpointList(await measureCheckpointList(count)));
}
