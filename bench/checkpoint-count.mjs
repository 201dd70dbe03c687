// Whether checkpoint and rollback slow with the number of checkpoints a session holds: in a live
// process, a checkpoint after one changed file and a rollback of one file, measured when the
// session holds 10 checkpoints and again when it holds 1,000 (medians of 15 each).
//   node bench/checkpoint-count.mjs        (after npm run build)
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

/** The measurement as a Markdown table. */
export function formatCheckpointCount({ atTen, atThousand }) {
  const ratio = (a, b) => `${(a / b).toFixed(2)}×`;
  return [
    '| checkpoints held | checkpoint, 1 changed | rollback, 1 changed |',
    '| ---------------- | --------------------- | ------------------- |',
    `| 10 | ${atTen.checkpoint.toFixed(1)} ms | ${atTen.rollback.toFixed(1)} ms |`,
    `| 1,000 | ${atThousand.checkpoint.toFixed(1)} ms (${ratio(atThousand.checkpoint, atTen.checkpoint)}) | ${atThousand.rollback.toFixed(1)} ms (${ratio(atThousand.rollback, atTen.rollback)}) |`,
  ].join('\n');
}

if (process.argv[1] === fileURLToPath(import.meta.url)) {
  console.log(formatCheckpointCount(await measureCheckpointCount()));
}
