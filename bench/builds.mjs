// The builds a side-by-side benchmark runs: this one (../dist, after npm run build) and, with
// BENCH_COMPARE_DIST=/path/to/other/dist, that one too, each under its title; the median; and
// the workspaces and changes of the benchmarks of many changed files.
import { appendFileSync, mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { generateWorkspace } from './generate-workspace.mjs';

export const builds = { 'this build': await import('../dist/index.js') };
if (process.env.BENCH_COMPARE_DIST) {
  builds[process.env.BENCH_COMPARE_DIST] = await import(
    join(process.env.BENCH_COMPARE_DIST, 'index.js')
  );
}

export const median = (values) => [...values].sort((a, b) => a - b)[Math.floor(values.length / 2)];

export const SIZES = { S: 1_000, M: 10_000, L: 100_000 };

export const sleep = (ms) => new Promise((done) => setTimeout(done, ms));

/**
 * Two workspaces of `size` (S, M or L) under BENCH_DIR (else the system's temporary directory),
 * each with a store made by the first build: `{ workspace, files }`, `files` the text files.
 */
export async function twoWorkspaces(size, prefix) {
  const made = [];
  for (let index = 0; index < 2; index++) {
    const workspace = mkdtempSync(join(process.env.BENCH_DIR ?? tmpdir(), prefix));
    const files = generateWorkspace(workspace, SIZES[size]).filter(
      (path) => !path.endsWith('.bin'),
    );
    await Object.values(builds)[0].init({ workspace });
    made.push({ workspace, files });
  }
  return made;
}

/** Appends a line to `count` of each workspace's files (the same ones in both), for `round`. */
export function changeFiles(workspaces, count, round) {
  for (const { workspace, files } of workspaces) {
    for (let index = 0; index < count; index++) {
      const path = files[(round * 7919 + index * 104729) % files.length];
      appendFileSync(join(workspace, path), `// ${round}\n`);
    }
  }
}
