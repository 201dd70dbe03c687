// What the `rewind` command costs as a process, beside `node -e 0` (Node's own start): the
// commands people and hooks run most, in a workspace whose store holds two sessions (as a store
// in use does: `status` lists them), the current one of 50 entries; `status` in one of 10,000
// files (M) checkpointed, whose store holds as many objects; and `log` and `status` in a store of
// 200 sessions (one started per task for weeks: `log` should not notice them). Each command runs
// 25 times, the commands taking turns, so that a slow moment of the machine falls on all of them;
// medians. `rewind` runs with its code cache (the usual case after the first run) and without it
// (REWIND_CODE_CACHE=0: the first run after an install or upgrade). When the environment sets
// NODE_EXTRA_CA_CERTS, which Node reads (the file, then every root certificate) as it starts,
// `node -e 0` also runs without it, to show what that costs every Node process here.
//   node bench/startup.mjs [OTHER_BIN...]   (after npm run build)
// Each OTHER_BIN (another build's bin, in a tree with its own dist/) runs the same commands in
// the same rounds, for a comparison in one run.
import { spawnSync } from 'node:child_process';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { generateWorkspace } from './generate-workspace.mjs';

const ROUNDS = 25;
const median = (values) => [...values].sort((a, b) => a - b)[Math.floor(values.length / 2)];

/**
 * Median wall times in ms: `node -e 0`, then each command with and without the code cache, by
 * `bin` and by each of `others` (named by their path).
 */
export function measureStartup(
  bin = resolve(import.meta.dirname, '..', 'bin', 'rewind.cjs'),
  others = [],
) {
  const workspace = mkdtempSync(join(process.env.BENCH_DIR ?? tmpdir(), 'rewind-bench-start-'));
  const large = mkdtempSync(join(process.env.BENCH_DIR ?? tmpdir(), 'rewind-bench-start-m-'));
  const many = mkdtempSync(join(process.env.BENCH_DIR ?? tmpdir(), 'rewind-bench-start-200-'));
  const cache = mkdtempSync(join(tmpdir(), 'rewind-bench-cache-'));
  const run = (args, env = {}, cwd = workspace) => {
    const start = process.hrtime.bigint();
    const result = spawnSync(process.execPath, args, {
      cwd,
      env: { ...process.env, XDG_CACHE_HOME: cache, REWIND_DAEMON: '0', ...env },
      encoding: 'utf8',
    });
    if (result.status !== 0) throw new Error(`${args.join(' ')} failed: ${result.stderr}`);
    return Number(process.hrtime.bigint() - start) / 1e6;
  };
  try {
    writeFileSync(join(workspace, 'a.txt'), 'a\n');
    run([bin, 'init']);
    run([bin, 'session', 'new']);
    for (let index = 0; index < 49; index++) run([bin, 'note', `note ${index}`]);
    generateWorkspace(large, 10_000);
    run([bin, 'init'], {}, large);
    run([bin, '-q', 'checkpoint', 'all'], {}, large);
    run([bin, 'init'], {}, many);
    for (let index = 1; index < 200; index++) run([bin, 'session', 'new'], {}, many);
    const cases = [['node -e 0', ['-e', '0'], {}]];
    if (process.env.NODE_EXTRA_CA_CERTS) {
      cases.push([
        'node -e 0, NODE_EXTRA_CA_CERTS unset',
        ['-e', '0'],
        { NODE_EXTRA_CA_CERTS: undefined },
      ]);
    }
    for (const [index, one] of [bin, ...others].entries()) {
      const by = index === 0 ? '' : ` (${one})`;
      cases.push([`rewind --version${by}`, [one, '--version'], {}]); // before any bundle loads
      for (const command of ['status', 'log']) {
        cases.push([`rewind ${command}${by}`, [one, command], {}]);
        const noCache = { REWIND_CODE_CACHE: '0' };
        cases.push([`rewind ${command}, no code cache${by}`, [one, command], noCache]);
      }
      cases.push([`rewind status, M (10,000 objects)${by}`, [one, 'status'], {}, large]);
      cases.push([`rewind log, 200 sessions${by}`, [one, 'log'], {}, many]);
      cases.push([`rewind status, 200 sessions${by}`, [one, 'status'], {}, many]);
    }
    const times = new Map(cases.map(([name]) => [name, []]));
    for (const [, args, env, cwd] of cases) run(args, env, cwd); // warm the disk and code caches
    for (let round = 0; round < ROUNDS; round++) {
      for (const [name, args, env, cwd] of cases) times.get(name).push(run(args, env, cwd));
    }
    return [...times].map(([name, values]) => ({ name, ms: median(values) }));
  } finally {
    rmSync(workspace, { recursive: true, force: true });
    rmSync(large, { recursive: true, force: true });
    rmSync(many, { recursive: true, force: true });
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
        `| ${name} | ${ms.toFixed(1)} ms | ${index === 0 ? '' : `${ms < node ? '' : '+'}${(ms - node).toFixed(1)} ms`} |`,
    ),
  ].join('\n');
}

if (process.argv[1] === fileURLToPath(import.meta.url)) {
  const others = process.argv.slice(2).map((path) => resolve(path));
  console.log(formatStartup(measureStartup(undefined, others)));
}
