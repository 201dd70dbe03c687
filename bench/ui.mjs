// The web UI's page weight and time to first render, in Debian's chromium (playwright-core), over
// a session of N entries (default 500: writes, commands, a checkpoint every 20 actions):
//   node bench/ui.mjs        (after npm run build; REWIND_CHROMIUM names another browser)
import { readFileSync } from 'node:fs';
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { gzipSync } from 'node:zlib';
import { chromium } from 'playwright-core';
import { init, openSession } from '../dist/index.js';
import { startUi } from '../dist/ui/server.js';

const ENTRIES = Number(process.env.BENCH_UI_ENTRIES ?? 500);
const ROUNDS = Number(process.env.BENCH_ROUNDS ?? 15);
const assets = join(import.meta.dirname, '..', 'dist', 'ui-assets');

const workspace = await mkdtemp(join(tmpdir(), 'rewind-bench-ui-'));
await writeFile(join(workspace, 'a.txt'), 'start\n');
await init({ workspace });
const session = await openSession({ workspace });
let actions = 0;
// Each write is two entries (intent, completion); a checkpoint one.
while (1 + actions * 2 + Math.floor(actions / 20) < ENTRIES) {
  await session.write(`src/file${actions % 50}.ts`, `export const n = ${actions};\n`);
  actions += 1;
  if (actions % 20 === 0) await session.checkpoint(`c${actions}`);
}
await session.close();

const ui = await startUi({ workspace, assets });
const browser = await chromium.launch({
  executablePath: process.env.REWIND_CHROMIUM ?? '/usr/bin/chromium',
  args: ['--no-sandbox'],
});
const times = [];
for (let round = 0; round < ROUNDS; round++) {
  const context = await browser.newContext();
  const page = await context.newPage();
  const start = performance.now();
  await page.goto(ui.url);
  await page.locator('.timeline li').last().waitFor();
  times.push(performance.now() - start);
  await context.close();
}
await browser.close();
await ui.close();
await rm(workspace, { recursive: true, force: true });

times.sort((a, b) => a - b);
const median = times[Math.floor(times.length / 2)];
console.log(`| file | bytes | gzip |`);
console.log(`| --- | --- | --- |`);
let total = 0;
let totalGzip = 0;
for (const file of ['index.html', 'app.js', 'app.css']) {
  const bytes = readFileSync(join(assets, file));
  const gzip = gzipSync(bytes).length;
  total += bytes.length;
  totalGzip += gzip;
  console.log(`| ${file} | ${bytes.length} | ${gzip} |`);
}
console.log(`| all | ${total} | ${totalGzip} |`);
console.log(
  `\nTime to first render of the timeline (${actions} actions, ${ENTRIES}-odd entries; address with the token → redirect → page → script → sessions and log): median ${median.toFixed(0)} ms, fastest ${times[0].toFixed(0)} ms, slowest ${times.at(-1).toFixed(0)} ms over ${ROUNDS} fresh browser contexts`,
);
