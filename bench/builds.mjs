// The builds a side-by-side benchmark runs: this one (../dist, after npm run build) and, with
// BENCH_COMPARE_DIST=/path/to/other/dist, that one too, each under its title; and the median.
import { join } from 'node:path';

export const builds = { 'this build': await import('../dist/index.js') };
if (process.env.BENCH_COMPARE_DIST) {
  builds[process.env.BENCH_COMPARE_DIST] = await import(
    join(process.env.BENCH_COMPARE_DIST, 'index.js')
  );
}

export const median = (values) => [...values].sort((a, b) => a - b)[Math.floor(values.length / 2)];
