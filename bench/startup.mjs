// What the `rewind` command costs as a process, beside `node -e 0` (Node's own start): the
// commands people and hooks run most, in a workspace whose session holds 50 entries. Each command
// runs 25 times, the commands taking turns, so that a slow moment of the machine falls on all of
// them; medians. `rewind` runs with its code cache (the usual case after the first run) and
// without it (REWIND_CODE_CACHE=0: the first run after an install or upgrade).
//   node bench/startup.mjs        (after npm run build)
import { spawnSync } from 'node:child_process';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';

const ROUNDS = 25;
const median = (values) => [...values].sort((a, b) => a - b)[Math.floor(values.length / 2)];

/** Median wall times in ms: `node -e 0`, then each command with and without the code cache. */
export function measureStartup(bin = resolve(import.meta.dirname, '..', 'bin', 'rewind.js')) {
  const workspace = mkdtempSync(join(process.env.BENCH_DIR ?? tmpdir(), 'rewind-bench-start-'));
  const cache = mkdtempSync(join(tmpdir(), 'rewind-bench-cache-'));
  const run = (args, env = {}) => {
    const start = process.hrtime.bigint();
    const result = spawnSync(process.execPath, args, {
      cwd: workspace,
      env: { ...process.env, XDG_CACHE_HOME: cache, ...env },
      encoding: 'utf8',
    });
    if (result.status !== 0) throw new Error(`${args.join(' ')} failed: ${result.stderr}`);
    return Number(process.hrtime.bigint() - start) / 1e6;
  };
  try {
    writeFileSync(join(workspace, 'a.txt'), 'a\n');
    run([bin, 'init']);
    for (let index = 0; index < 49; index++) run([bin, 'note', `note ${index}`]);
    const cases = [['node -e 0', ['-e', '0'], {}]];
    cases.push(['rewind --version', [bin, '--version'], {}]); // answered before any bundle loads
    for (const command of ['status', 'log']) {
      cases.push([`rewind ${command}`, [bin, command], {}]);
      cases.push([`rewind ${command}, no code cache`, [bin, command], { REWIND_CODE_CACHE: '0' }]);
    }
    const times = new Map(cases.map(([name]) => [name, []]));
    for (const [, args, env] of cases) run(args, env); // warm the disk cache and the code cache
    for (let round = 0; round < ROUNDS; round++) {
      for (const [name, args, env] of cases) times.get(name).push(run(args, env));
    }
    return [...times].map(([name, values]) => ({ name, ms: median(values) }));
  } finally {
    rmSync(workspace, { recursive: true, force: true });
    rmSync(cache, { recursive: true, force: true });
  }
}

/** The measurement as a Markdown table. */
export function formatStartup(rows) {
  const node = rows[0].ms;
  return [
    '| command | median | over `node -e 0` |',
    '| ------- | ------ | ---------------- |',
    ...rows.map(
      ({ name, ms }, index) =>
        `| ${name} | ${ms.toFixed(1)} ms | ${index === 0 ? '' : `+${(ms - node).toFixed(1)} ms`} |`,
    ),
  ].join('\n');
}

if (process.argv[1] === fileURLToPath(import.meta.url)) {
  console.log(formatStartup(measureStartup()));
}
