// A checkpoint after one changed file, in a live process, at M (10,000 files) and L (100,000),
// this build beside another one's in the same run and on the same workspace (after npm run build):
//   BENCH_COMPARE_DIST=/path/to/other/dist node bench/checkpoint-one.mjs [M|L]...
// Without BENCH_COMPARE_DIST, this build alone. Rounds alternate which build goes first; a file
// is changed 300 ms before each checkpoint (outside the racy window); medians of 12.
import { appendFileSync, mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { builds, median, SIZES } from './builds.mjs';
import { generateWorkspace } from './generate-workspace.mjs';

const ROUNDS = 12;
const names = Object.keys(builds);

console.log('| workspace | build | checkpoint, 1 changed (median) | ratio |');
console.log('| --- | --- | --- | --- |');
for (const size of process.argv.slice(2).length > 0 ? process.argv.slice(2) : ['M', 'L']) {
  const workspace = mkdtempSync(join(process.env.BENCH_DIR ?? tmpdir(), 'rewind-bench-one-'));
  try {
    const files = generateWorkspace(workspace, SIZES[size]).filter(
      (path) => !path.endsWith('.bin'),
    );
    await builds[names[0]].init({ workspace });
    const sessions = {};
    for (const name of names) sessions[name] = await builds[name].openSession({ workspace });
    await sessions[names[0]].checkpoint('base');
    const times = Object.fromEntries(names.map((name) => [name, []]));
    for (let round = 0; round < ROUNDS; round++) {
      const order = round % 2 === 0 ? names : [...names].reverse();
      for (const [index, name] of order.entries()) {
        appendFileSync(
          join(workspace, files[(round * 7919 + index * 104729) % files.length]),
          `// ${round}\n`,
        );
        await new Promise((resolve) => setTimeout(resolve, 300));
        const start = process.hrtime.bigint();
        await sessions[name].checkpoint(`c${round}-${index}`);
        times[name].push(Number(process.hrtime.bigint() - start) / 1e6);
      }
    }
    for (const name of names) await sessions[name].close();
    const base = median(times[names[0]]);
    for (const name of names) {
      const value = median(times[name]);
      console.log(`| ${size} | ${name} | ${value.toFixed(1)} ms | ${(value / base).toFixed(2)}× |`);
    }
  } finally {
    rmSync(workspace, { recursive: true, force: true });
  }
}
