// Per-command overhead of the sandbox backends, side by side with a plain spawn of the same
// command, in one run:   node bench/sandbox.mjs   (after npm run build)
// Medians of BENCH_REPEATS (default 50) runs of `true` and of `sh -c 'echo x > f; cat f'`.
import { spawnSync } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { createSandbox, probeBwrap } from '../dist/sandbox/index.js';

const REPEATS = Number(process.env.BENCH_REPEATS ?? 50);
const workspace = mkdtempSync(join(tmpdir(), 'rewind-bench-sandbox-'));
const median = (values) => [...values].sort((a, b) => a - b)[Math.floor(values.length / 2)];
async function sample(fn) {
  const values = [];
  for (let index = 0; index < REPEATS; index++) {
    const start = process.hrtime.bigint();
    await fn();
    values.push(Number(process.hrtime.bigint() - start) / 1e6);
  }
  return median(values);
}

const commands = { true: ['true'], 'write and read a file': ['sh', '-c', 'echo x > f; cat f'] };
const none = createSandbox({ backend: 'none', workspace });
const bwrap = probeBwrap().works ? createSandbox({ backend: 'bwrap', workspace }) : undefined;
console.log('| command | spawnSync | sandbox none | ratio | sandbox bwrap | ratio |');
console.log('| ------- | --------- | ------------ | ----- | ------------- | ----- |');
for (const [name, argv] of Object.entries(commands)) {
  const plain = await sample(() => spawnSync(argv[0], argv.slice(1), { cwd: workspace }));
  const viaNone = await sample(() => none.run(argv));
  const viaBwrap = bwrap ? await sample(() => bwrap.run(argv)) : Number.NaN;
  console.log(
    `| ${name} | ${plain.toFixed(2)} ms | ${viaNone.toFixed(2)} ms | ${(viaNone / plain).toFixed(2)}× | ` +
      `${bwrap ? `${viaBwrap.toFixed(2)} ms | ${(viaBwrap / plain).toFixed(2)}×` : 'unavailable | '} |`,
  );
}
rmSync(workspace, { recursive: true, force: true });
