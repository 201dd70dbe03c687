// Isolated sessions: starting one (copy the workspace into a view and record it) and committing
// one changed file back, beside `cp -a` of the same tree, in one run:
//   node bench/isolated.mjs        (sizes from BENCH_SIZES, default "S,M"; after npm run build)
import { execFileSync } from 'node:child_process';
import { appendFileSync, mkdirSync, mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { init, startIsolatedSession } from '../dist/index.js';
import { generateWorkspace } from './generate-workspace.mjs';

const SIZES = { S: 1_000, M: 10_000, L: 100_000 };
const selected = (process.env.BENCH_SIZES ?? 'S,M').split(',');
const base = mkdtempSync(join(process.env.BENCH_DIR ?? tmpdir(), 'rewind-bench-isolated-'));
const ms = (start) => Number(process.hrtime.bigint() - start) / 1e6;
async function timed(fn) {
  const start = process.hrtime.bigint();
  await fn();
  return ms(start);
}

console.log(
  '| workspace | start an isolated session | `cp -a` of the tree | ratio | commit 1 changed file |',
);
console.log(
  '| --------- | ------------------------- | ------------------- | ----- | --------------------- |',
);
for (const size of selected) {
  const workspace = join(base, `ws-${size}`);
  mkdirSync(workspace);
  const files = generateWorkspace(workspace, SIZES[size]);
  await init({ workspace });
  const copy = await timed(() => execFileSync('cp', ['-a', workspace, join(base, `copy-${size}`)]));
  let session;
  const start = await timed(async () => {
    session = await startIsolatedSession({ workspace, makeCurrent: false });
  });
  const file = files.find((path) => !path.endsWith('.bin'));
  appendFileSync(join(session.workspace, file), '// changed in the view\n');
  const commit = await timed(() => session.commit());
  await session.close();
  console.log(
    `| ${size} (${SIZES[size]} files) | ${start.toFixed(0)} ms | ${copy.toFixed(0)} ms | ${(start / copy).toFixed(2)}× | ${commit.toFixed(0)} ms |`,
  );
}
rmSync(base, { recursive: true, force: true });
